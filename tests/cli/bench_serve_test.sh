#!/usr/bin/env bash
# `folio bench serve` as a user runs it: against a live `folio serve` on a free loopback port,
# with the model name asked from /v1/models, a concurrency cap, ignore_eos and --json; then
# against no server at all, which must be reported (exit 1), never a crash.
#   bash tests/cli/bench_serve_test.sh build/folio
set -u
folio="$1"
tmp="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
passed=0
failed=0
check() {  # name, condition command...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name"; fi
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
json_field() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

port=$(free_port)
"$folio" serve --port "$port" -t 2 -q 2>"$tmp/serve.err" &
server_pid=$!
for _ in $(seq 1 150); do
  if python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null; then break; fi
  sleep 0.2
done

"$folio" bench serve --base-url "http://127.0.0.1:$port" --dataset fixed --input-len 24 --output-len 8 \
  --num-prompts 6 --max-concurrency 2 --ignore-eos --goodput e2el:600000 --json "$tmp/run.json" >"$tmp/out" 2>"$tmp/err"
code=$?
check "bench serve succeeds" [ "$code" -eq 0 ]
check "the report counts every request" grep -q "^Successful requests: *6$" "$tmp/out"
check "the model name came from /v1/models" grep -q "^Model: *SmolLM2-135M-Instruct.Q4_1$" "$tmp/out"
check "the json has every request" [ "$(json_field "$tmp/run.json" "len(d['requests'])")" = "6" ]
check "ignore_eos gives the asked output tokens" [ "$(json_field "$tmp/run.json" "d['total_output_tokens']")" = "48" ]
check "output counts come from usage" [ "$(json_field "$tmp/run.json" "d['output_token_counts']['usage']")" = "6" ]
check "the server saw the asked prompt lengths" \
  [ "$(json_field "$tmp/run.json" "sorted(set(r['prompt_tokens'] for r in d['requests']))")" = "[24]" ]
check "the concurrency cap holds" [ "$(json_field "$tmp/run.json" "d['peak_in_flight'] <= 2")" = "True" ]
check "goodput is reported" [ "$(json_field "$tmp/run.json" "d['request_goodput'] > 0")" = "True" ]

"$folio" bench serve --base-url "http://127.0.0.1:$port" --endpoint /v1/chat/completions --dataset fixed \
  --input-len 16 --output-len 4 --num-prompts 2 --request-rate 50 --seed 3 --ignore-eos >"$tmp/out" 2>"$tmp/err"
check "chat completions are measured" grep -q "^Successful requests: *2$" "$tmp/out"

kill "$server_pid"; wait "$server_pid" 2>/dev/null; server_pid=""
"$folio" bench serve --base-url "http://127.0.0.1:$port" --model x --num-prompts 3 --num-warmups 0 >"$tmp/out" 2>"$tmp/err"
code=$?
check "no server: exit 1, not a crash" [ "$code" -eq 1 ]
check "no server: every request counted as failed" grep -q "^Failed requests: *3$" "$tmp/out"
check "no server: the reason is given" grep -q "3 x connect: " "$tmp/out"
"$folio" bench serve --base-url "http://127.0.0.1:$port" --num-prompts 3 >"$tmp/out" 2>"$tmp/err"
code=$?
check "no server to ask the model: a message and exit 1" [ "$code" -eq 1 ]
check "no server to ask the model: says so" grep -q "is the server running there" "$tmp/err"
"$folio" bench serve --request-rate -1 >"$tmp/out" 2>"$tmp/err"
code=$?
check "a bad rate is refused" [ "$code" -eq 2 ]

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
