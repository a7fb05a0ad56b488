# The commands the README opens with:
#   make run   - install what is missing, fetch the default model, build, generate text
#   make test  - the same set-up, then every test (Release, then ASan+UBSan)
#   make serve - the same set-up, then the OpenAI-compatible server with its chat page on PORT
JOBS ?= $(shell nproc)
PROMPT ?= Write a haiku about paged memory.
BUILD := build
BUILD_SAN := build-sanitize
# Python packages of the tests (Playwright, openai) live in this venv; ctest runs them with it.
TEST_VENV := $(BUILD)/test-venv
MODEL ?= $(or $(FOLIO_MODELS_DIR),$(HOME)/.cache/folio/models)/SmolLM2-135M-Instruct.Q4_1.gguf
PORT ?= 8080

.PHONY: run serve test setup test-inputs build build-sanitize test-release test-isa test-sanitize fuzz clean

setup:
	@echo "== make $@ starts $$(date -u +%T)"  # phase times in the CI log
	@bash scripts/setup-deps
	@bash scripts/fetch-model all
	@FOLIO_TEST_VENV=$(TEST_VENV) bash scripts/setup-test-venv >/dev/null

# The Hugging Face directories and tokenizer.json files the tests read (no torch; skipped when
# already built from the same script and goldens).
test-inputs: setup
	@echo "== make $@ starts $$(date -u +%T)"
	@$(TEST_VENV)/bin/python scripts/hf_test_models.py
	@$(TEST_VENV)/bin/python scripts/hf_quantized_test_models.py

build: setup
	@echo "== make $@ starts $$(date -u +%T)"
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DFOLIO_TEST_PYTHON=$(abspath $(TEST_VENV))/bin/python >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# The CUDA code is compiled (and its host logic tested) by the Release build; nothing of it runs
# without a GPU, so the sanitizer build leaves it out. -O1 and line tables only (-g1): half the
# compile time of -O2 -g on 2 cores (the largest phase of CI), still the optimisation level the
# sanitizers' docs advise and still file:line in every report.
build-sanitize: setup
	@echo "== make $@ starts $$(date -u +%T)"
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
	  -DFOLIO_SANITIZE=ON -DFOLIO_CUDA=OFF >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS) --target folio_tests

run: build
	$(BUILD)/folio run --chat -p "$(PROMPT)" -n 128 --temp 0

serve: build
	$(BUILD)/folio serve -m "$(MODEL)" --host 127.0.0.1 --port $(PORT)

test-release: build test-inputs
	@echo "== make $@ starts $$(date -u +%T)"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-sanitize: build-sanitize test-inputs
	@echo "== make $@ starts $$(date -u +%T)"
	# Tests named Slow (perplexity over 13k tokens, whole greedy generations against the float64
	# and llama.cpp references: numerics of the full model, 4x slower under ASan) are left to the
	# Release run; the sanitizers still see the model's forward pass through the other tests.
	# One shard per core: the tests are single-threaded under the sanitizers' weight.
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  bash scripts/run-gtest-shards $(JOBS) $(BUILD_SAN)/folio_tests --gtest_filter='-*Slow*' --gtest_brief=1

# The model goldens and engine tests again with the CPU kernels capped at AVX2 (issue 17): the
# release run above used the best path this machine has (AMX or AVX-512 where present).
test-isa: build test-inputs
	@echo "== make $@ starts $$(date -u +%T)"
	FOLIO_CPU_ISA=avx2 $(BUILD)/folio_tests --gtest_brief=1 \
	  --gtest_filter='LlamaGolden.*:Gemma3Golden.*:HfModelGolden*:*Engine*'

test: test-release test-isa test-sanitize
	@echo "== make test ends $$(date -u +%T)"

fuzz: setup
	bash scripts/fuzz gguf 600
	bash scripts/fuzz openai_request 600

clean:
	rm -rf $(BUILD) $(BUILD_SAN) build-fuzz
