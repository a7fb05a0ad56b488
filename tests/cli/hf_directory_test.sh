#!/usr/bin/env bash
# `folio run | perplexity | bench -m DIR` on Hugging Face directories (scripts/hf_test_models.py
# builds them), the same text as from the GGUF with the same weights, and every broken
# directory answered with a message naming the problem and exit code 1, never a crash.
set -u
folio="$1"
src="$(cd "$(dirname "$0")/../.." && pwd)"
hf="${FOLIO_MODELS_DIR:-$HOME/.cache/folio/models}/hf"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

check() {  # name, condition command...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name"; cat "$tmp/err" 2>/dev/null | tail -3; fi
}
exit_code() { "$@" >"$tmp/out" 2>"$tmp/err"; echo $?; }
said() { grep -q -- "$1" "$tmp/err"; }

if [ ! -f "$hf/smollm2-bf16-sharded/model.safetensors.index.json" ]; then
  echo "missing $hf: run scripts/hf_test_models.py (make test does)"; exit 1
fi

# --- working directories -------------------------------------------------------------------
code=$(exit_code "$folio" run -m "$hf/smollm2-bf16" -p "The capital of France is" -n 8 --temp 0 -q)
check "run on a bfloat16 directory succeeds" [ "$code" -eq 0 ]
check "it knows Paris" grep -q "Paris" "$tmp/out"
cp "$tmp/out" "$tmp/dir.txt"
code=$(exit_code "$folio" run -m "$hf/smollm2-bf16.gguf" -p "The capital of France is" -n 8 --temp 0 -q)
check "the same weights as a GGUF give the same text" cmp -s "$tmp/out" "$tmp/dir.txt"
code=$(exit_code "$folio" run -m "$hf/smollm2-bf16-sharded" -p "The capital of France is" -n 8 --temp 0 -q)
check "sharded directory gives the same text" cmp -s "$tmp/out" "$tmp/dir.txt"
code=$(exit_code "$folio" run -m "$hf/smollm2-bf16/" --chat -p "What is 2+2?" -n 12 --temp 0 -q)
check "chat through the directory's chat_template.jinja succeeds" [ "$code" -eq 0 ]
printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..40} > "$tmp/text.txt"
code=$(exit_code "$folio" perplexity -m "$hf/smollm2-bf16" -f "$tmp/text.txt" -c 128)
check "perplexity on a directory succeeds" [ "$code" -eq 0 ]
check "perplexity prints its figure" grep -qi "perplexity" "$tmp/out" "$tmp/err"
code=$(exit_code "$folio" bench -m "$hf/smollm2-bf16" -p 16 -n 4 -r 1)
check "bench on a directory succeeds" [ "$code" -eq 0 ]

# folio serve on a directory: the chat template, the eos ids and the served name come from it.
port=$((20000 + RANDOM % 20000))
"$folio" serve -m "$hf/smollm2-bf16" --host 127.0.0.1 --port "$port" > "$tmp/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.2; done
curl -s "http://127.0.0.1:$port/v1/models" > "$tmp/models.json"
check "serve names the model after its directory" grep -q '"smollm2-bf16"' "$tmp/models.json"
curl -s "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":24,"temperature":0}' \
  > "$tmp/chat.json"
check "chat completion through the directory's template" grep -q '"finish_reason"' "$tmp/chat.json"
check "it answers Paris" grep -q "Paris" "$tmp/chat.json"
kill "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null

# --- broken directories ----------------------------------------------------------------------
# A copy of the sharded directory whose shards are links (nothing large is copied).
broken() {
  local d="$tmp/$1"
  rm -rf "$d"; mkdir -p "$d"
  for f in "$hf/smollm2-bf16-sharded"/*; do
    case "$f" in *.safetensors) ln -s "$f" "$d/";; *) cp "$f" "$d/";; esac
  done
  echo "$d"
}
edit_json() {  # file, python expression over j
  python3 - "$1" "$2" <<'EOF'
import json, sys
path, expr = sys.argv[1], sys.argv[2]
j = json.load(open(path, encoding="utf-8"))
exec(expr)
json.dump(j, open(path, "w", encoding="utf-8"), ensure_ascii=False)
EOF
}
fails_with() {  # name, expected message, dir
  local name="$1" message="$2" dir="$3"
  code=$(exit_code "$folio" run -m "$dir" -p hi -n 1 -q)
  check "$name: exit code 1" [ "$code" -eq 1 ]
  check "$name: says '$message'" said "$message"
}

d=$(broken truncated)
rm "$d/model-00003-of-00003.safetensors"
head -c 50000000 "$hf/smollm2-bf16-sharded/model-00003-of-00003.safetensors" > "$d/model-00003-of-00003.safetensors"
fails_with "truncated shard" "model-00003-of-00003.safetensors" "$d"
check "truncated shard: names a tensor and where" said "tensor .model.layers.*at byte"

d=$(broken missing)
rm "$d/model-00002-of-00003.safetensors"
fails_with "missing shard" "a shard the index names is missing" "$d"

d=$(broken unlisted)
edit_json "$d/model.safetensors.index.json" 'j["weight_map"]["model.layers.99.mlp.up_proj.weight"] = "model-00001-of-00003.safetensors"'
fails_with "index naming a tensor no shard has" "model.layers.99.mlp.up_proj.weight" "$d"

d=$(broken shape)
edit_json "$d/config.json" 'j["intermediate_size"] = 1600'
fails_with "tensor with the wrong shape for config.json" "config.json implies" "$d"

d=$(broken merge)
edit_json "$d/tokenizer.json" 'j["model"]["merges"].insert(5, ["Ġzz", "qqq"])'
fails_with "tokenizer.json with a dangling merge" "merge 6" "$d"
check "dangling merge: names the missing text" said "qqq"

d=$(broken arch)
edit_json "$d/config.json" 'j["architectures"] = ["GPTNeoXForCausalLM"]'
fails_with "config.json with an unknown architecture" "GPTNeoXForCausalLM" "$d"

d=$(broken rope)
edit_json "$d/config.json" 'j["rope_parameters"] = {"rope_type": "longrope", "rope_theta": 10000.0, "factor": 2.0}'
fails_with "config.json with an unknown rope_type" "longrope" "$d"

d=$(broken notokenizer)
rm "$d/tokenizer.json"
fails_with "directory without tokenizer.json" "no tokenizer.json" "$d"

d=$(broken badjson)
printf '{"architectures": ["LlamaForCausalLM"], ' > "$d/config.json"
fails_with "config.json that is not JSON" "config.json" "$d"

mkdir -p "$tmp/empty"
fails_with "folder without config.json" "without a config.json" "$tmp/empty"

echo "hf_directory: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
