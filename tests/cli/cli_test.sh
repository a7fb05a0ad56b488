#!/usr/bin/env bash
# The folio binary as a user meets it: generation, determinism, chat, perplexity, bench, and
# bad input (arguments, missing and corrupt model files) answered with a message and a
# non-zero exit, never a crash (exit codes >= 128 are signals).
set -u
folio="$1"
src="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

check() {  # name, condition command...
  local name="$1"; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name"; fi
}
exit_code() { "$@" >"$tmp/out" 2>"$tmp/err"; echo $?; }
files_differ() { ! cmp -s "$1" "$2"; }
is_clean_failure() { local code="$1"; [ "$code" -ne 0 ] && [ "$code" -lt 128 ]; }

code=$(exit_code "$folio"); check "no subcommand fails cleanly" is_clean_failure "$code"
code=$(exit_code "$folio" run); check "run without a prompt fails cleanly" is_clean_failure "$code"
check "run without a prompt says what is missing" grep -q -- "--prompt (or --file) is required" "$tmp/err"
code=$(exit_code "$folio" run -p hi --temp -1); check "negative temperature is refused" is_clean_failure "$code"
code=$(exit_code "$folio" run -p hi --top-p 2); check "top-p above 1 is refused" is_clean_failure "$code"
code=$(exit_code "$folio" run -p hi -n abc); check "non-numeric -n is refused" is_clean_failure "$code"
code=$(exit_code "$folio" run -p hi --kv-cache-memory 12X); check "bad --kv-cache-memory is refused" is_clean_failure "$code"
check "bad --kv-cache-memory is explained" grep -q "not a memory size" "$tmp/err"
code=$(exit_code "$folio" run -p hi --preemption swap); check "swap preemption without swap space is refused" is_clean_failure "$code"
code=$(exit_code "$folio" run -p hi --quantization int3); check "unknown --quantization is refused" is_clean_failure "$code"
code=$(exit_code "$folio" run -p hi -n 2 --quantization fp8 --device cpu)
check "fp8 weights on the CPU fail cleanly" is_clean_failure "$code"
check "fp8 weights on the CPU say where they run" grep -q -- "use it with --device cuda" "$tmp/err"
code=$(exit_code "$folio" run -f "$tmp/none.txt"); check "missing prompt file fails cleanly" is_clean_failure "$code"
code=$(exit_code "$folio" run -p hi -m "$tmp/none.gguf"); check "missing model fails cleanly" is_clean_failure "$code"
check "missing model is named" grep -q "does not exist" "$tmp/err"

code=$(exit_code "$folio" run -p hi -n 2 --tensor-parallel-size 2 --device cuda)
check "tensor parallelism on cuda fails cleanly" is_clean_failure "$code"
code=$(exit_code "$folio" run -p hi -n 2 --tensor-parallel-devices 0,0 --tensor-parallel-size 2)
check "GPU placement of ranks on the CPU fails cleanly" is_clean_failure "$code"
check "GPU placement of ranks on the CPU is explained" grep -q -- "use it with --device cuda" "$tmp/err"
code=$(exit_code "$folio" run -p hi -n 2 --device cuda --tensor-parallel-size 3 --tensor-parallel-devices 0,0)
check "fewer GPUs named than ranks fail cleanly" is_clean_failure "$code"
code=$(exit_code "$folio" run -p hi -n 2 --tensor-parallel-size 10)
check "more ranks than the heads allow fail cleanly" is_clean_failure "$code"
check "more ranks than the heads allow are explained" grep -q "no query head" "$tmp/err"
code=$(exit_code "$folio" run -p "The capital of France is" -n 8 --temp 0 --tensor-parallel-size 3)
check "tensor-parallel generation over 3 CPU ranks succeeds" [ "$code" -eq 0 ]
check "tensor-parallel generation knows Paris" grep -q "Paris" "$tmp/out"

model="${FOLIO_MODELS_DIR:-$HOME/.cache/folio/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
head -c 100000 "$model" > "$tmp/truncated.gguf"
code=$(exit_code "$folio" run -p hi -m "$tmp/truncated.gguf"); check "truncated model fails cleanly" is_clean_failure "$code"
check "truncated model error names an offset" grep -q "offset" "$tmp/err"
printf 'GGUF\x03\x00\x00\x00garbage' > "$tmp/garbage.gguf"
code=$(exit_code "$folio" run -p hi -m "$tmp/garbage.gguf"); check "garbage model fails cleanly" is_clean_failure "$code"

code=$(exit_code "$folio" run -p "The capital of France is" -n 8 --temp 0 -q)
check "greedy generation succeeds" [ "$code" -eq 0 ]
check "greedy generation knows Paris" grep -q "Paris" "$tmp/out"
"$folio" run -p "Once upon a time" -n 32 --temp 1.2 --top-k 0 --top-p 1 --min-p 0 --seed 7 -q > "$tmp/a" 2>/dev/null
"$folio" run -p "Once upon a time" -n 32 --temp 1.2 --top-k 0 --top-p 1 --min-p 0 --seed 7 -q > "$tmp/b" 2>/dev/null
"$folio" run -p "Once upon a time" -n 32 --temp 1.2 --top-k 0 --top-p 1 --min-p 0 --seed 8 -q > "$tmp/c" 2>/dev/null
check "same seed, same text" cmp -s "$tmp/a" "$tmp/b"
check "another seed, other text" files_differ "$tmp/a" "$tmp/c"
code=$(exit_code "$folio" run --chat -p "What is 2+2?" -n 16 --temp 0)
check "chat generation succeeds" [ "$code" -eq 0 ]
check "chat prints timings" grep -q "generation:.*tok/s" "$tmp/err"
check "chat answers" grep -q "4" "$tmp/out"

code=$(exit_code "$folio" run -p "The capital of France is" -p "Once upon a time" -n 8 --temp 0 --kv-cache-memory 64M --block-size 8)
check "two prompts run as a batch" [ "$code" -eq 0 ]
check "the first prompt's answer is labelled" grep -q "^\[0\] .*Paris" "$tmp/out"
check "the second prompt's answer is labelled" grep -q "^\[1\] " "$tmp/out"
check "a batch prints its summary" grep -q "requests: 2 .*output: .* tok/s .*mean TTFT" "$tmp/err"
printf 'The capital of France is\n\nOnce upon a time\n' > "$tmp/prompts.txt"
code=$(exit_code "$folio" run -f "$tmp/prompts.txt" -n 8 --temp 0 -q)
check "a prompt file runs" [ "$code" -eq 0 ]
check "a prompt file gives one answer per non-empty line" [ "$(grep -c '^\[[0-9]\] ' "$tmp/out")" -eq 2 ]
check "a batch answers like a single run" grep -q "^\[0\] .*Paris" "$tmp/out"
code=$(exit_code "$folio" run --chat -p "What is 2+2?" -p "Say hi." -n 16 --temp 0 -q)
check "chat works for every prompt" [ "$code" -eq 0 ]
check "chat batch answers" grep -q "^\[0\] .*4" "$tmp/out"

code=$(exit_code "$folio" perplexity -f "$src/tests/data/perplexity.txt" --ctx 128 --chunks 2)
check "perplexity succeeds" [ "$code" -eq 0 ]
check "perplexity is printed" grep -q "^perplexity: " "$tmp/out"
code=$(exit_code "$folio" perplexity -f "$tmp/none.txt"); check "perplexity of a missing file fails cleanly" is_clean_failure "$code"
# --device host: no model, the engine's and server's own cost (folio bench host / serve).
code=$(exit_code "$folio" run --device host -p "Hello" -n 8)
check "generation with no model behind it succeeds" [ "$code" -eq 0 ]
check "it reports its 8 tokens" grep -q "generation: 8 tokens" "$tmp/err"
code=$(exit_code "$folio" perplexity --device host -f "$src/tests/data/perplexity.txt")
check "perplexity with no model fails cleanly" is_clean_failure "$code"
check "perplexity with no model says why" grep -q "runs no model" "$tmp/err"
code=$(exit_code "$folio" bench host --seqs 32 -p 64 -n 16)
check "bench host succeeds" [ "$code" -eq 0 ]
check "bench host reports decode steps" grep -q "full decode steps" "$tmp/out"
code=$(exit_code "$folio" bench -p 16 -n 4 -r 1 --json)
check "bench succeeds" [ "$code" -eq 0 ]
check "bench reports pp and tg" grep -q '"tg4"' "$tmp/out"
# A budget below the prefix makes the first request take two steps, so that the others,
# admitted after its first chunk, find that chunk's blocks cached.
code=$(exit_code "$folio" bench verify --batch 1,2 --max-k 2 --steps 2 -d 24 --json)
check "bench verify succeeds" [ "$code" -eq 0 ]
check "bench verify reports every batch and k" [ "$(grep -c '"step_ms"' "$tmp/out")" -eq 6 ]
check "bench verify's plain decode is its own yardstick" grep -q '"vs_decode": 1.0$' "$tmp/out"

code=$(exit_code "$folio" bench batch --num-requests 4 --scale 0.05 --num-questions 4 --prefix-tokens 96 \
  --question-output-tokens 4 --max-num-batched-tokens 64 --corpus "$src/tests/data/perplexity.txt" --json)
check "bench batch succeeds" [ "$code" -eq 0 ]
check "bench batch reports four rows" [ "$(grep -c '"output_tps_median"' "$tmp/out")" -eq 4 ]
check "bench batch hits the shared prefix" grep -q '"serving":"batched, prefix cache on".*"prefix_cache_hit_rate":0\.[1-9]' "$tmp/out"

code=$(exit_code "$folio" run -p "The capital of France is" -n 6 --beam-width 3 -q)
check "beam search succeeds" [ "$code" -eq 0 ]
check "beam search prints every beam" [ "$(grep -c '^\[0\.[0-2]\]' "$tmp/out")" -eq 3 ]
code=$(exit_code "$folio" run -p "Once upon a time" -n 6 --num-samples 3 --temp 1 --seed 3 -q)
check "parallel sampling succeeds" [ "$code" -eq 0 ]
check "parallel sampling prints every sample" [ "$(grep -c '^\[0\.[0-2]\]' "$tmp/out")" -eq 3 ]
code=$(exit_code "$folio" run -p hi --beam-width 0); check "beam width 0 is refused" is_clean_failure "$code"

# folio quantize (issue 13): bad input fails cleanly and leaves no file; the default model
# decoded to F16 re-encodes to Q8_0 and Q4_K_M that run and keep their perplexity.
code=$(exit_code "$folio" quantize "$model" "$tmp/requant.gguf" --type q8_0)
check "quantizing a quantized file fails cleanly" is_clean_failure "$code"
check "quantizing a quantized file says why" grep -q "is already" "$tmp/err"
check "a refused quantization leaves no file" [ ! -e "$tmp/requant.gguf" ] && [ ! -e "$tmp/requant.gguf.partial" ]
code=$(exit_code "$folio" quantize "$model" "$tmp/x.gguf" --type q3_xs)
check "unknown quantization type is refused" is_clean_failure "$code"
check "unknown quantization type names the known ones" grep -q "known: .*q4_k_m" "$tmp/err"
code=$(exit_code "$folio" quantize "$model" "$tmp/no/such/dir/x.gguf" --type f16)
check "unwritable quantize output fails cleanly" is_clean_failure "$code"
check "unwritable quantize output leaves nothing" [ ! -e "$tmp/no" ]
code=$(exit_code "$folio" quantize "$tmp" "$tmp/x.gguf" --type q8_0); check "directory input is refused" is_clean_failure "$code"
code=$(exit_code "$folio" quantize "$model" "$tmp/f16.gguf" --type f16)
check "decoding to F16 succeeds" [ "$code" -eq 0 ]
check "quantize shows progress per tensor" grep -q "^\[272/272\] " "$tmp/err"
for t in q8_0 q4_k_m; do
  code=$(exit_code "$folio" quantize "$tmp/f16.gguf" "$tmp/$t.gguf" --type $t -q)
  check "quantize --type $t succeeds" [ "$code" -eq 0 ]
done
check "q4_k_m is under half of f16" [ "$(stat -c %s "$tmp/q4_k_m.gguf")" -lt "$(( $(stat -c %s "$tmp/f16.gguf") / 2 ))" ]
code=$(exit_code "$folio" run -m "$tmp/q8_0.gguf" -p "The capital of France is" -n 8 --temp 0 -q)
check "the Q8_0 file knows Paris" grep -q "Paris" "$tmp/out"
code=$(exit_code "$folio" quantize "$tmp/f16.gguf" "$tmp/imat.gguf" --type q4_k_m --imatrix-text "$src/tests/data/plain_chat_template.jinja")
check "a calibration text too short fails cleanly" is_clean_failure "$code"
check "a calibration text too short says so" grep -q "fewer than --imatrix-tokens 4096" "$tmp/err"
check "a refused importance matrix leaves no file" [ ! -e "$tmp/imat.gguf" ] && [ ! -e "$tmp/imat.gguf.partial" ]
code=$(exit_code "$folio" quantize "$tmp/f16.gguf" "$tmp/imat.gguf" --type q4_0 --imatrix-text "$src/tests/data/perplexity.txt" --imatrix-tokens 1024)
check "quantize with an importance matrix succeeds" [ "$code" -eq 0 ]
check "the importance matrix shows its chunks" grep -q "importance matrix: chunk 2/2" "$tmp/err"
ppl() { "$folio" perplexity -m "$1" -f "$src/tests/data/perplexity.txt" -c 512 --chunks 3 2>/dev/null | sed -n 's/^perplexity: \([0-9.]*\) .*/\1/p'; }
p16=$(ppl "$tmp/f16.gguf"); p8=$(ppl "$tmp/q8_0.gguf"); p4=$(ppl "$tmp/q4_k_m.gguf")
echo "quantize: perplexity f16 $p16, q8_0 $p8, q4_k_m $p4 (3 chunks of 512)"
check "Q8_0 perplexity within 1% of F16" awk -v a="$p8" -v b="$p16" 'BEGIN { exit !(b > 0 && a < b * 1.01) }'
check "Q4_K_M perplexity within 6% of F16" awk -v a="$p4" -v b="$p16" 'BEGIN { exit !(b > 0 && a < b * 1.06) }'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
