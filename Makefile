# The two commands the README opens with:
#   make run   - install what is missing, fetch the default model, build, generate text
#   make test  - the same set-up, then every test (Release, then ASan+UBSan)
JOBS ?= $(shell nproc)
PROMPT ?= Write a haiku about paged memory.
BUILD := build
BUILD_SAN := build-sanitize

.PHONY: run test setup build build-sanitize test-release test-sanitize fuzz clean

setup:
	@bash scripts/setup-deps
	@bash scripts/fetch-model

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-sanitize: setup
	cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLIO_SANITIZE=ON >/dev/null
	cmake --build $(BUILD_SAN) -j $(JOBS) --target folio_tests

run: build
	$(BUILD)/folio run --chat -p "$(PROMPT)" -n 128 --temp 0

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-sanitize: build-sanitize
	# The slow perplexity test (13k tokens through the model) is left to the Release run.
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(BUILD_SAN)/folio_tests --gtest_filter='-*Slow*' --gtest_brief=1

test: test-release test-sanitize

fuzz: setup
	bash scripts/fuzz-gguf 600

clean:
	rm -rf $(BUILD) $(BUILD_SAN) build-fuzz
