# Thin driver over CMake: `make` builds build/verlc, `make test` runs the test suite,
# `make asan` builds and tests with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ (host code
# only: the CUDA backend is compiled and linked by the Release build; nothing runs on a GPU in CI).
JOBS ?= $(shell nproc)
# tests: one more than the cores (tests that wait on a server, a timeout or their subprocesses leave a core idle:
# on 2 cores, the release tests took 142 s at -j3 where -j2 took 156 s, the sanitizer tests 179 s, 2026-12-08)
TEST_JOBS ?= $(shell echo $$(($$(nproc) + 1)))
MAKEFLAGS += --no-print-directory
.PHONY: all deps test asan emu clean
# a new build folder uses Ninja where installed (it schedules the CUDA, library and test compiles together; a folder
# keeps the generator it was made with); the Release build compiles C through ccache where installed (the emulator's
# build, scripts/emu-check.sh, then takes the same C objects from it)
ninja = $$(test -f $(1)/CMakeCache.txt || ! command -v ninja >/dev/null 2>&1 || echo -G Ninja)
ccache = $$(command -v ccache >/dev/null 2>&1 && echo -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# (ccache's depend mode: a miss costs no extra preprocessor run; a hit needs the same command line, which the
# library's C files have in both builds)
export CCACHE_DEPEND = true

all: deps
	@cmake -S . -B build $(call ninja,build) $(ccache) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j$(JOBS)

deps:
	@bash scripts/deps.sh

test: all
	@cd build && ctest --output-on-failure -j$(TEST_JOBS)

asan: deps
	@cmake -S . -B build-asan $(call ninja,build-asan) -DCMAKE_BUILD_TYPE=Debug -DVC_SANITIZE=ON -DVC_CUDA=OFF >/dev/null
	@cmake --build build-asan -j$(JOBS)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 VERLC_SANITIZE=1 ctest --output-on-failure -j$(TEST_JOBS)

# the CUDA backend's kernels and host code on the CPU emulator of CUDA (tools/cudaemu), no GPU needed
emu: deps
	@bash scripts/emu-check.sh quick

clean:
	rm -rf build build-asan build-emu build-emu-asan
