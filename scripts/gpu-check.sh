#!/usr/bin/env bash
# verlc GPU check: builds with the CUDA backend (-DVC_CUDA=ON, sm_90 SASS + PTX) and runs the GPU tests
# (every op of the CUDA table against the CPU backend, memory entries, bf16 GEMMs, paged attention,
# AdamW, sums of squares, error path), then, when build-gpu/verlc was built, `verlc check --device cuda`
# over the fixture models and short `verlc bench ... --device cuda` runs on the Qwen2.5-0.5B shape,
# then the attention/op tests once more under compute-sanitizer memcheck with the time left.
# Writes one summary file: $OUT/gpu-check.txt when $OUT is set, else ./gpu-check.txt. Exit status 0
# when every step passed. Every step's timeout is cut to the time left of one budget, so the whole
# script ends within VC_GPU_BUDGET seconds (default 330, so a rerun fits in a session's 15 device minutes).
# Dependencies: when pkg-config or the Debian -dev packages (OpenBLAS, Oniguruma, utf8proc, cJSON,
# libyaml) are missing and .gpu/debs exists (scripts/gpu-prepare.sh fills it on a machine with apt),
# the .deb files are unpacked with `dpkg -x` (or ar + tar) into .gpu/root, never into /, and the build
# uses that prefix (pkg-config files rewritten to it, LIBRARY_PATH/CPATH, rpath, LD_LIBRARY_PATH).
# VC_GPU_DEPS=system|carried forces one source (default auto). VERLC_SHARED defaults to ../shared,
# else .gpu/shared. The summary starts with the OS, glibc, compilers and where each dependency came
# from. VC_GPU_DRY_RUN=1 stops after the configure step (to try the script on a machine with no GPU).
#   usage: scripts/gpu-check.sh            (from the repository root)
set -u
cd "$(dirname "$0")/.." || exit 1
OUTDIR=${OUT:-.}
mkdir -p "$OUTDIR"
SUM="$OUTDIR/gpu-check.txt"
LOG="$OUTDIR/gpu-check-build.log"
BUILD=${VC_GPU_BUILD:-build-gpu}
JOBS=$(nproc 2>/dev/null || echo 8)
export PATH="$PATH:/usr/local/cuda/bin"
fail=0
t0=$(date +%s)
BUDGET=${VC_GPU_BUDGET:-330}
left() { echo $((BUDGET - ($(date +%s) - t0))); }
: >"$SUM"
say() { echo "$@" | tee -a "$SUM"; }
step() { # name, timeout seconds (cut to the budget left), command...
    local name=$1 lim=$2
    shift 2
    local s=$(date +%s) rest=$(($(left) - 5))
    [ $lim -gt $rest ] && lim=$rest
    if [ $lim -lt 5 ]; then
        say "== $name: skipped (budget of $BUDGET s spent)"
        fail=1
        return 124
    fi
    say "== $name"
    timeout "$lim" "$@" >"$OUTDIR/.step.log" 2>&1
    local rc=$?
    cat "$OUTDIR/.step.log" >>"$SUM"
    tail -n 5 "$OUTDIR/.step.log"
    say "-- $name: rc=$rc ($(($(date +%s) - s)) s)$([ $rc = 124 ] && echo ' TIMEOUT')"
    [ $rc = 0 ] || fail=1
    rm -f "$OUTDIR/.step.log"
    return $rc
}

# ---- dependencies: the system's, or the .deb files carried in .gpu/debs unpacked into .gpu/root ----
DEPS_CMAKE=""
DEPS_REPORT=""
ARCH_DIR=x86_64-linux-gnu
sys_has() { # dependency name: 0 when the system provides it
    case $1 in
    pkg-config) command -v pkg-config >/dev/null ;;
    openblas)
        local i l
        i=$(ls /usr/include/cblas.h /usr/include/{,$ARCH_DIR/}{openblas-pthread,openblas}/cblas.h /usr/local/include/cblas.h 2>/dev/null | head -n 1)
        l=$(ls /usr/lib/$ARCH_DIR/libopenblas.so /usr/lib/$ARCH_DIR/openblas-pthread/libopenblas.so \
            /usr/lib64/libopenblas.so /usr/lib/libopenblas.so /usr/local/lib/libopenblas.so 2>/dev/null | head -n 1)
        [ -n "$i" ] && [ -n "$l" ] ;;
    *) command -v pkg-config >/dev/null && pkg-config --exists "$1" ;;
    esac
}
deb_unpack() { # deb file, destination folder
    if command -v dpkg-deb >/dev/null; then
        dpkg-deb -x "$1" "$2"
    else # ar + tar: data.tar.{xz,zst,gz}
        local t f=$1
        case $f in /*) ;; *) f=$(pwd)/$f ;; esac
        t=$(mktemp -d) && (cd "$t" && ar x "$f") || return 1
        case $(ls "$t"/data.tar.*) in
        *.zst) zstd -dc "$t"/data.tar.zst | tar -x -C "$2" ;;
        *) tar -xf "$t"/data.tar.* -C "$2" ;;
        esac
        local rc=$?
        rm -rf "$t"
        return $rc
    fi
}
deps_setup() {
    local d sys="" miss="" mode=${VC_GPU_DEPS:-auto}
    for d in pkg-config openblas libcjson oniguruma libutf8proc yaml-0.1; do
        if sys_has "$d"; then sys="$sys $d"; else miss="$miss $d"; fi
    done
    DEPS_REPORT="dependencies on the system:${sys:- none}; missing:${miss:- none}"
    if [ "$mode" = system ] || { [ "$mode" = auto ] && [ -z "$miss" ]; }; then
        DEPS_REPORT="$DEPS_REPORT; building against the system's"
        return 0
    fi
    if ! ls .gpu/debs/*.deb >/dev/null 2>&1; then
        DEPS_REPORT="$DEPS_REPORT; no .gpu/debs carried (run scripts/gpu-prepare.sh and carry .gpu/debs)"
        return 1
    fi
    local R L
    R=$(pwd)/.gpu/root
    L=$R/usr/lib/$ARCH_DIR
    if [ ! -f "$R/.unpacked" ]; then
        rm -rf "$R" && mkdir -p "$R"
        for d in .gpu/debs/*.deb; do
            deb_unpack "$d" "$R" || { DEPS_REPORT="$DEPS_REPORT; unpacking $d FAILED"; return 1; }
        done
        # the Debian .pc files name /usr: point them at the prefix
        for d in "$L"/pkgconfig/*.pc "$L"/openblas-pthread/pkgconfig/*.pc "$R"/usr/share/pkgconfig/*.pc; do
            [ -f "$d" ] && sed -i "s|^\([A-Za-z_]*\)=/usr|\1=$R/usr|" "$d"
        done
        touch "$R/.unpacked"
    fi
    export LD_LIBRARY_PATH="$L:$L/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LIBRARY_PATH="$L:$L/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export CPATH="$R/usr/include:$R/usr/include/$ARCH_DIR${CPATH:+:$CPATH}"
    export LDFLAGS="-Wl,--disable-new-dtags,-rpath,$L:$L/openblas-pthread${LDFLAGS:+ $LDFLAGS}"
    export PKG_CONFIG_LIBDIR="$L/pkgconfig:$R/usr/share/pkgconfig"
    unset PKG_CONFIG_PATH
    export CMAKE_PREFIX_PATH="$R/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    local pc=$R/usr/bin/pkgconf
    "$pc" --version >/dev/null 2>&1 || pc=$(command -v pkg-config || echo "$pc")
    DEPS_CMAKE="-DPKG_CONFIG_EXECUTABLE=$pc -DOPENBLAS_INCLUDE=$R/usr/include/$ARCH_DIR/openblas-pthread"
    DEPS_CMAKE="$DEPS_CMAKE -DOPENBLAS_LIB=$L/openblas-pthread/libopenblas.so"
    DEPS_REPORT="$DEPS_REPORT; building against the carried debs in .gpu/root ($(ls .gpu/debs/*.deb | wc -l)"
    DEPS_REPORT="$DEPS_REPORT packages: pkg-config, OpenBLAS, cJSON, Oniguruma, utf8proc, libyaml; pkg-config binary $pc)"
}

say "verlc gpu-check $(date -u '+%Y-%m-%d %H:%M:%S UTC') commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
say "machine: $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}"), kernel $(uname -r), $(nproc) cores"
say "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>/dev/null | head -n 1)"
say "nvcc: $(nvcc --version 2>/dev/null | grep -i release || echo 'not found')"
say "cc: $(cc --version 2>/dev/null | head -n 1 || echo 'not found'); $(cmake --version 2>/dev/null | head -n 1 || echo 'cmake not found')"
say "dpkg: $(command -v dpkg || echo no), pkg-config: $(command -v pkg-config || echo no), ar: $(command -v ar || echo no)"
deps_setup
say "$DEPS_REPORT"
if [ -z "${VERLC_SHARED:-}" ]; then
    VERLC_SHARED=$(pwd)/../shared
    [ ! -d "$VERLC_SHARED/fixtures" ] && [ -d .gpu/shared ] && VERLC_SHARED=$(pwd)/.gpu/shared
fi
export VERLC_SHARED
say "VERLC_SHARED=$VERLC_SHARED ($(ls -d "$VERLC_SHARED"/fixtures/models/*/ 2>/dev/null | wc -l) fixture models)"
step "nvidia-smi" 30 nvidia-smi
step "nvcc" 10 nvcc --version
# Prebuilt test programs (e.g. carried from a CPU machine's build/tests) are used when the
# configure or build here fails, say for missing Debian packages (scripts/deps.sh installs them).
PREBUILT=${VC_GPU_PREBUILT:-build/tests}
TESTS="$BUILD/tests"
CUDA_TESTS=""
for f in tests/cuda/test_*.c; do CUDA_TESTS="$CUDA_TESTS cuda_$(basename "$f" .c)"; done
built=0
configured=0
# shellcheck disable=SC2086
step "configure" 120 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DVC_CUDA=ON $DEPS_CMAKE && configured=1
if [ "${VC_GPU_DRY_RUN:-0}" = 1 ]; then
    grep -E "^(OPENBLAS_|PKG_CONFIG_EXECUTABLE|CJSON_INCLUDE|pkgcfg_lib_)" "$BUILD/CMakeCache.txt" 2>/dev/null >>"$SUM"
    say "RESULT: DRY RUN (configure $([ $configured = 1 ] && echo ok || echo FAILED); build and GPU steps skipped)"
    exit $((1 - configured))
fi
if [ $configured = 1 ]; then
    say "== build (log: $LOG)"
    s=$(date +%s)
    # shellcheck disable=SC2086
    timeout 270 cmake --build "$BUILD" -j"$JOBS" --target verlc_bin $CUDA_TESTS >"$LOG" 2>&1
    rc=$?
    grep -E "error|warning:" "$LOG" | head -n 40 >>"$SUM"
    say "-- build: rc=$rc ($(($(date +%s) - s)) s)"
    if [ $rc = 0 ]; then built=1; else tail -n 40 "$LOG" >>"$SUM"; fail=1; fi
fi
if [ $built = 0 ]; then
    if [ -x "$PREBUILT/cuda_test_cuda_ops" ] && [ -x "$PREBUILT/cuda_test_cuda_table" ] &&
        [ -x "$PREBUILT/cuda_test_cuda_attn" ]; then
        say "== build failed here: running the prebuilt tests in $PREBUILT"
        TESTS=$PREBUILT
    else
        say "RESULT: FAIL (configure/build; no prebuilt tests in $PREBUILT)"
        exit 1
    fi
fi
step "test_cuda_ops" 100 "$TESTS/cuda_test_cuda_ops"
step "test_cuda_table" 60 "$TESTS/cuda_test_cuda_table"
step "test_cuda_copy" 40 "$TESTS/cuda_test_cuda_copy"
step "test_cuda_attn" 100 "$TESTS/cuda_test_cuda_attn"
step "test_cuda_attn_bf16" 60 "$TESTS/cuda_test_cuda_attn_bf16"
[ -x "$TESTS/cuda_test_cuda_sample" ] && step "test_cuda_sample" 40 "$TESTS/cuda_test_cuda_sample"
step "test_cuda_attn (VERLC_CUDA_SYNC=1)" 60 env VERLC_CUDA_SYNC=1 "$TESTS/cuda_test_cuda_attn"
# The CLI on the GPU: fixture check and the benches.
BIN="$BUILD/verlc"
# The issue's benchmarks (bf16): Qwen2.5-0.5B and 1.5B shapes, training 16 x 512, log-probs 16 x 1024,
# generate batch 256 x (128 + 256). PyTorch on the same H200: 72,171 / 38,843 train tokens/s,
# 246,363 / 121,355 log-prob tokens/s, HF generate 3,858 / 3,905 tokens/s.
bench_model() { # config name
    local CFG="$VERLC_SHARED/configs/$1.json" P="--device cuda --precision bf16"
    if [ ! -f "$CFG" ]; then
        say "== verlc bench on $1: skipped (no $CFG)"
        return
    fi
    # shellcheck disable=SC2086
    step "bench train $1 bf16 (16 x 512)" 60 "$BIN" bench train --config "$CFG" --tokens 8192 --seqs 16 --iters 3 $P
    # shellcheck disable=SC2086
    step "bench logprob $1 bf16 (16 x 1024)" 45 "$BIN" bench logprob --config "$CFG" --tokens 16384 --seq-len 1024 \
        --reps 3 $P
    # shellcheck disable=SC2086
    step "bench generate $1 bf16 (batch 256, 128 + 256)" 60 "$BIN" bench generate --config "$CFG" --batch 256 \
        --prompt 128 --new 256 $P
}
if [ $built = 1 ] && [ -x "$BIN" ]; then
    MODELS=$(ls -d "$VERLC_SHARED"/fixtures/models/*/ 2>/dev/null)
    [ -z "$MODELS" ] && say "== verlc check --device cuda: skipped (no fixtures under $VERLC_SHARED/fixtures/models)"
    # shellcheck disable=SC2086
    [ -n "$MODELS" ] && step "verlc check --device cuda (fixture models, f32)" 60 "$BIN" check --device cuda $MODELS
    bench_model qwen2.5-0.5b
    # shellcheck disable=SC2086
    [ -n "$MODELS" ] && step "verlc check --device cuda --precision bf16" 60 "$BIN" check --device cuda \
        --precision bf16 $MODELS
    bench_model qwen2.5-1.5b
else
    say "== verlc CLI on the GPU: skipped (no $BIN built here)"
fi
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$CS" ] && [ "$(left)" -gt 60 ]; then
    step "memcheck test_cuda_attn" $(($(left) / 2)) "$CS" --tool memcheck --error-exitcode 9 "$TESTS/cuda_test_cuda_attn"
    [ "$(left)" -gt 40 ] && step "memcheck test_cuda_table" $(($(left) / 2)) "$CS" --tool memcheck \
        --error-exitcode 9 "$TESTS/cuda_test_cuda_table"
    [ "$(left)" -gt 30 ] && step "memcheck test_cuda_ops (no fault test)" "$(left)" env VC_CUDA_TEST_NO_FAULT=1 \
        "$CS" --tool memcheck --error-exitcode 9 "$TESTS/cuda_test_cuda_ops"
else
    say "== memcheck skipped (compute-sanitizer ${CS:-not found}, $(left) s left)"
fi
say "== failures"
grep -E "FAIL|CHECK failed|: rc=[1-9]" "$SUM" | grep -v "^RESULT" | head -n 40 | tee -a "$SUM.tmp" >/dev/null
cat "$SUM.tmp" >>"$SUM" 2>/dev/null
rm -f "$SUM.tmp"
say "total $(($(date +%s) - t0)) s"
if [ $fail = 0 ]; then say "RESULT: PASS"; else say "RESULT: FAIL"; fi
exit $fail
