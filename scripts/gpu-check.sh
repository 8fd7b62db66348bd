#!/usr/bin/env bash
# verlc GPU check: builds with the CUDA backend (-DVC_CUDA=ON, sm_90 SASS + PTX) and runs the GPU tests
# (every op of the CUDA table against the CPU backend, memory entries, bf16 GEMMs, paged attention,
# AdamW, sums of squares, error path), then, when build-gpu/verlc was built, `verlc check --device cuda`
# over the fixture models and short `verlc bench ... --device cuda` runs on the Qwen2.5-0.5B shape,
# then an end-to-end GRPO step (`verlc train`, verl's GSM8K quickstart keys, random Qwen2.5-0.5B with
# the Qwen3 tokenizer, bf16, batch 64 x 4 rollouts, 256 + 256 tokens; perf/throughput and perf/mfu/actor
# go into the summary), the NCCL runs (tests/dist/test_dist under mpirun -np 1, and `verlc sft` for 2
# steps with VERLC_DIST=nccl on cuda) when the build found MPI and NCCL, then the bf16 check, the 1.5B
# benches and the attention/op tests once more under compute-sanitizer memcheck with the time left.
# Open MPI: the system's, else the debs carried in .gpu/debs/mpi unpacked into .gpu/mpiroot
# (relocated with OPAL_PREFIX and friends). VC_GPU_ONLY=e2e runs only the GRPO/NCCL part with an
# existing $VC_GPU_BUILD/verlc (VC_GPU_E2E_DEVICE=cpu VC_GPU_E2E_MODEL=tiny: a 2-layer model derived
# from qwen2.5-0.5b.json and a small batch: how the command lines are tried on a CPU machine).
# Writes one summary file: $OUT/gpu-check.txt when $OUT is set, else ./gpu-check.txt. Exit status 0
# when every step passed. Every step's timeout is cut to the time left of one budget, so the whole
# script ends within VC_GPU_BUDGET seconds (default 420: with a machine start, about 9 of a session's 15
# device minutes; a short VC_GPU_BUDGET rerun still fits).
# Dependencies: when pkg-config or the Debian -dev packages (OpenBLAS, Oniguruma, utf8proc, cJSON,
# libyaml, snappy, zstd, zlib, lz4, brotli) are missing and .gpu/debs exists (scripts/gpu-prepare.sh fills it on a machine with apt),
# the .deb files are unpacked with `dpkg -x` (or ar + tar) into .gpu/root, never into /, and the build
# uses that prefix (pkg-config files rewritten to it, LIBRARY_PATH/CPATH, rpath, LD_LIBRARY_PATH).
# VC_GPU_SKIP="*check* GRPO*": the steps whose names match these patterns are skipped (a rerun of what failed).
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
BUDGET=${VC_GPU_BUDGET:-420}
left() { echo $((BUDGET - ($(date +%s) - t0))); }
: >"$SUM"
say() { echo "$@" | tee -a "$SUM"; }
step() { # name, timeout seconds (cut to the budget left), command...
    local name=$1 lim=$2 pat pats
    shift 2
    read -r -a pats <<<"${VC_GPU_SKIP:-}" # (no pathname expansion of the patterns)
    for pat in "${pats[@]}"; do # shellcheck disable=SC2254
        case $name in $pat)
            say "== $name: skipped (VC_GPU_SKIP)"
            return 0 ;;
        esac
    done
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
    for d in pkg-config openblas libcjson oniguruma libutf8proc yaml-0.1 snappy libzstd zlib liblz4 libbrotlidec libpng libjpeg; do
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
    DEPS_REPORT="$DEPS_REPORT packages: pkg-config, OpenBLAS, cJSON, Oniguruma, utf8proc, libyaml, snappy, zstd, zlib, lz4, brotli, libpng, libjpeg; pkg-config binary $pc)"
}

# ---- Open MPI (NCCL's bootstrap): the system's, or .gpu/debs/mpi unpacked into .gpu/mpiroot ----
MPI_REPORT=""
mpi_setup() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
    local h
    h=$(ls /usr/include/mpi.h /usr/include/$ARCH_DIR/mpi.h /usr/lib/$ARCH_DIR/openmpi/include/mpi.h \
        /usr/local/include/mpi.h /usr/include/$ARCH_DIR/*/mpi.h 2>/dev/null | head -n 1)
    if command -v mpirun >/dev/null && [ -n "$h" ] && [ "${VC_GPU_MPI:-auto}" != carried ]; then
        MPI_REPORT="MPI: the system's ($(command -v mpirun), $h)"
        return 0
    fi
    if ! ls .gpu/debs/mpi/*.deb >/dev/null 2>&1; then
        MPI_REPORT="MPI: none (no mpirun + mpi.h here, no .gpu/debs/mpi carried): no NCCL communicator"
        return 1
    fi
    local M L d
    M=$(pwd)/.gpu/mpiroot
    L=$M/usr/lib/$ARCH_DIR
    if [ ! -f "$M/.unpacked" ]; then
        rm -rf "$M" && mkdir -p "$M/bin"
        for d in .gpu/debs/mpi/*.deb; do
            deb_unpack "$d" "$M" || { MPI_REPORT="MPI: unpacking $d FAILED"; return 1; }
        done
        for d in mpirun mpiexec mpicc; do ln -sf "$M/usr/bin/$d.openmpi" "$M/bin/$d"; done
        touch "$M/.unpacked"
    fi
    # Debian's Open MPI names /usr and /etc/openmpi: relocated by OPAL_PREFIX and friends; PMIx's
    # plugins by its component path (its own defaults stay /usr/lib/.../pmix2, absent there)
    export OPAL_PREFIX=$M/usr OPAL_EXEC_PREFIX=$M/usr OPAL_BINDIR=$M/usr/bin OPAL_LIBEXECDIR=$M/usr/libexec
    export OPAL_SYSCONFDIR=$M/etc/openmpi OPAL_DATAROOTDIR=$M/usr/share OPAL_DATADIR=$M/usr/share
    export OPAL_PKGDATADIR=$M/usr/share/openmpi OPAL_LIBDIR=$L/openmpi/lib OPAL_PKGLIBDIR=$L/openmpi/lib/openmpi3
    export OPAL_INCLUDEDIR=$L/openmpi/include OPAL_PKGINCLUDEDIR=$L/openmpi/include/openmpi
    export PMIX_MCA_mca_base_component_path=$L/pmix2/lib/pmix HWLOC_PLUGINS_PATH=$L/hwloc
    export PATH="$M/bin:$PATH" LD_LIBRARY_PATH="$L:$L/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    DEPS_CMAKE="$DEPS_CMAKE -DMPI_C_COMPILER=$M/usr/bin/mpicc.openmpi"
    MPI_REPORT="MPI: the carried Open MPI debs in .gpu/mpiroot ($(ls .gpu/debs/mpi/*.deb | wc -l) packages)"
}

say "verlc gpu-check $(date -u '+%Y-%m-%d %H:%M:%S UTC') commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
say "machine: $(. /etc/os-release 2>/dev/null && echo "${PRETTY_NAME:-?}"), kernel $(uname -r), $(nproc) cores"
say "glibc: $(getconf GNU_LIBC_VERSION 2>/dev/null || ldd --version 2>/dev/null | head -n 1)"
say "nvcc: $(nvcc --version 2>/dev/null | grep -i release || echo 'not found')"
say "cc: $(cc --version 2>/dev/null | head -n 1 || echo 'not found'); $(cmake --version 2>/dev/null | head -n 1 || echo 'cmake not found')"
say "dpkg: $(command -v dpkg || echo no), pkg-config: $(command -v pkg-config || echo no), ar: $(command -v ar || echo no)"
deps_setup
say "$DEPS_REPORT"
mpi_setup
say "$MPI_REPORT; mpirun: $(mpirun --version 2>/dev/null | head -n 1 || echo none)"
# NCCL: the CUDA toolkit's, else the one PyTorch's wheels bring (nvidia-nccl-cu13: libnccl.so.2 only, no libnccl.so)
nccl_setup() {
    local inc lib d
    for inc in /usr/local/cuda/include /usr/include /usr/local/include; do [ -f $inc/nccl.h ] && return 0; done
    d=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.dirname(n.__file__) if n.__file__ else list(n.__path__)[0])' 2>/dev/null)
    [ -n "$d" ] && [ -f "$d/include/nccl.h" ] || { say "NCCL: no nccl.h found (no NCCL communicator)"; return 1; }
    lib=$(ls "$d"/lib/libnccl.so* 2>/dev/null | head -n 1)
    [ -n "$lib" ] || { say "NCCL: $d has no lib/libnccl.so*"; return 1; }
    DEPS_CMAKE="$DEPS_CMAKE -DNCCL_INCLUDE=$d/include -DNCCL_LIB=$lib"
    export LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "NCCL: PyTorch's ($d)"
}
nccl_setup
if [ -z "${VERLC_SHARED:-}" ]; then
    VERLC_SHARED=$(pwd)/../shared
    [ ! -d "$VERLC_SHARED/fixtures" ] && [ -d .gpu/shared ] && VERLC_SHARED=$(pwd)/.gpu/shared
fi
export VERLC_SHARED
# the Qwen3 tokenizer travels gzipped (gpu-prepare.sh): test_cuda_train reads the folder as it is
TQ=$VERLC_SHARED/fixtures/tokenizers/qwen3
[ ! -f "$TQ/tokenizer.json" ] && [ -f "$TQ/tokenizer.json.gz" ] && gunzip -c "$TQ/tokenizer.json.gz" >"$TQ/tokenizer.json"
say "VERLC_SHARED=$VERLC_SHARED ($(ls -d "$VERLC_SHARED"/fixtures/models/*/ 2>/dev/null | wc -l) fixture models)"
# ---- end to end: one or two GRPO steps, and the NCCL runs (issues 7 and 8) ----
W=${VC_GPU_WORK:-/tmp/vc_gpu_e2e}
E2E_DEV=${VC_GPU_E2E_DEVICE:-cuda}
E2E_MODEL=${VC_GPU_E2E_MODEL:-qwen2.5-0.5b} # or tiny
EB=${VC_GPU_E2E_BATCH:-64} EN=${VC_GPU_E2E_N:-4} EP=${VC_GPU_E2E_PROMPT:-256} ER=${VC_GPU_E2E_RESPONSE:-256}
EM=${VC_GPU_E2E_MICRO:-16} EL=${VC_GPU_E2E_LOGPROB_MICRO:-32} ES=${VC_GPU_E2E_STEPS:-2}
tiny_config() { # source config, destination: 2 layers, hidden 64, 4 heads (2 KV heads), vocabulary kept
    sed -e 's/"hidden_size": [0-9]*/"hidden_size": 64/' -e 's/"intermediate_size": [0-9]*/"intermediate_size": 128/' \
        -e 's/"num_hidden_layers": [0-9]*/"num_hidden_layers": 2/' -e 's/"max_window_layers": [0-9]*/"max_window_layers": 2/' \
        -e 's/"num_attention_heads": [0-9]*/"num_attention_heads": 4/' \
        -e 's/"num_key_value_heads": [0-9]*/"num_key_value_heads": 2/' "$1" >"$2"
}
tok_copy() { # destination folder: the Qwen3 tokenizer (gzipped when carried by gpu-prepare.sh)
    local T=$VERLC_SHARED/fixtures/tokenizers/qwen3
    cp "$T/tokenizer_config.json" "$1/" || return 1
    if [ -f "$T/tokenizer.json" ]; then cp "$T/tokenizer.json" "$1/"; else gunzip -c "$T/tokenizer.json.gz" >"$1/tokenizer.json"; fi
}
model_make() { # config name or tiny, destination: random weights (bf16 file) + tokenizer
    local cfg=$VERLC_SHARED/configs/qwen2.5-0.5b.json
    [ "$1" = tiny ] || cfg=$VERLC_SHARED/configs/$1.json
    if [ "$1" = tiny ]; then tiny_config "$cfg" "$W/tiny.json" && cfg=$W/tiny.json; fi
    "$BIN" init --config "$cfg" --out "$2" --seed 7 --dtype bf16 && tok_copy "$2"
}
e2e_setup() {
    rm -rf "$W" && mkdir -p "$W" && model_make "$E2E_MODEL" "$W/model" &&
        "$BIN" data gsm8k --input "$VERLC_SHARED/data/gsm8k" --out "$W/data" && ls -l "$W/model" "$W/data"
}
grpo_run() { # run folder: verl's GSM8K GRPO quickstart keys (tests/rl/test_trainer_e2e.c), bf16
    "$BIN" train algorithm.adv_estimator=grpo data.train_files="$W/data/train.jsonl" \
        data.val_files="$W/data/test.jsonl" data.train_batch_size="$EB" data.max_prompt_length="$EP" \
        data.max_response_length="$ER" data.filter_overlong_prompts=true data.truncation=error \
        actor_rollout_ref.model.path="$W/model" actor_rollout_ref.actor.optim.lr=1e-6 \
        actor_rollout_ref.actor.ppo_mini_batch_size="$EB" actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="$EM" \
        actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001 \
        actor_rollout_ref.actor.kl_loss_type=low_var_kl actor_rollout_ref.actor.entropy_coeff=0 \
        actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16 \
        actor_rollout_ref.rollout.n="$EN" actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu="$EL" \
        actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu="$EL" algorithm.use_kl_in_reward=False \
        trainer.device="$E2E_DEV" "trainer.logger=['console']" trainer.project_name=verl_grpo_example_gsm8k \
        trainer.n_gpus_per_node=1 trainer.total_training_steps="$ES" trainer.val_before_train=False \
        trainer.default_local_dir="$1"
}
metric() { # metrics.jsonl line, name: the value
    echo "$1" | grep -o "\"$2\": *[-0-9.eE+naif]*" | head -n 1 | sed 's/.*: *//'
}
grpo_e2e() {
    local d=$VERLC_SHARED/fixtures/tokenizers/qwen3
    if [ ! -f "$VERLC_SHARED/data/gsm8k/train.jsonl" ] || { [ ! -f "$d/tokenizer.json" ] && [ ! -f "$d/tokenizer.json.gz" ]; }; then
        say "== GRPO step: skipped (no data/gsm8k or Qwen3 tokenizer under $VERLC_SHARED: run scripts/gpu-prepare.sh)"
        fail=1
        return
    fi
    step "GRPO setup: verlc init $E2E_MODEL + tokenizer, verlc data gsm8k" 60 bash -c e2e_setup || return
    step "GRPO $ES steps, $E2E_MODEL, $E2E_DEV bf16, batch $EB x n=$EN, prompt $EP + response $ER" 90 bash -c 'grpo_run "$W/run"'
    local line
    [ -f "$W/run/metrics.jsonl" ] || { say "GRPO: no $W/run/metrics.jsonl"; return; }
    while read -r line; do
        say "GRPO step $(metric "$line" step): perf/throughput $(metric "$line" perf/throughput) tokens/s/GPU," \
            "perf/mfu/actor $(metric "$line" perf/mfu/actor), perf/total_num_tokens $(metric "$line" perf/total_num_tokens)," \
            "timing_s/step $(metric "$line" timing_s/step) (gen $(metric "$line" timing_s/gen)," \
            "update_actor $(metric "$line" timing_s/update_actor)), response_length/mean $(metric "$line" response_length/mean)"
    done < <(grep '"perf/throughput"' "$W/run/metrics.jsonl")
}
nccl_sft() { # 2 steps of verlc sft on a tiny model with the NCCL communicator (rank 0 of 1)
    mkdir -p "$W" && rm -rf "$W/sft" "$W/sft_model" && model_make tiny "$W/sft_model" &&
        VERLC_DIST=${VC_GPU_SFT_DIST:-nccl} mpirun --allow-run-as-root --oversubscribe -np 1 -x VERLC_DIST \
            "$BIN" sft --model "$W/sft_model" --train "$VERLC_SHARED/data/gsm8k/train.jsonl" \
            --prompt-key question --response-key answer --out "$W/sft" data.train_batch_size=8 \
            data.micro_batch_size_per_gpu=4 data.max_length=256 data.truncation=right \
            trainer.total_training_steps=2 trainer.device="$E2E_DEV" \
            model.fsdp_config.mixed_precision.param_dtype=bf16
}
nccl_dist1() { # test_dist's MPI child on 1 rank: passes when its NCCL device allreduce ran
    local log=$W/dist1.log rc
    mkdir -p "$W"
    VC_DIST_TEST_MODE=collectives mpirun --allow-run-as-root --oversubscribe -np 1 -x VC_DIST_TEST_MODE \
        "$TESTS/dist_test_dist" >"$log" 2>&1
    rc=$?
    cat "$log"
    [ $rc = 0 ] && grep -q "nccl: device allreduce ran on 1 ranks" "$log"
}
nccl_runs() {
    if [ "${VC_GPU_ONLY:-}" != e2e ] && ! grep -q "communicators: .*NCCL ON" "$SUM"; then
        say "== NCCL runs: skipped (the configure step found no MPI + NCCL: $(grep -o 'communicators: .*' "$SUM" | head -n 1))"
        fail=1
        return
    fi
    step "test_dist under mpirun -np 1: NCCL device allreduce on the GPU" 40 bash -c nccl_dist1 &&
        say "NCCL: device allreduce ran (1 rank)"
    step "verlc sft 2 steps, VERLC_DIST=${VC_GPU_SFT_DIST:-nccl}, $E2E_DEV (mpirun -np 1)" 60 bash -c nccl_sft
    step "test_dist (whole program: single, then mpirun -np 2 and 4 on one GPU)" 60 "$TESTS/dist_test_dist"
}
e2e_all() {
    export W E2E_DEV E2E_MODEL EB EN EP ER EM EL ES BIN TESTS VERLC_SHARED
    export -f tiny_config tok_copy model_make e2e_setup grpo_run nccl_sft nccl_dist1
    grpo_e2e
    nccl_runs
}
finish() {
    # the figures to record, gathered from the steps' output (bench lines, ratios to PyTorch, MFU, GRPO perf)
    say "== figures"
    grep -E "^== bench|^== profile|tokens/s|rows/s|x PyTorch|x HF generate|MFU|perf/throughput|perf/mfu|CUDA graphs|cuda profile:|^  [a-z].* [0-9.]+%$|models passed" \
        "$SUM" | grep -v "^== figures" | head -n 80 >"$SUM.fig" 2>/dev/null
    cat "$SUM.fig" >>"$SUM" 2>/dev/null
    rm -f "$SUM.fig"
    # the A/B benches against their defaults, one line each (scripts/gpu-ab.py)
    python3 scripts/gpu-ab.py "$SUM" >"$SUM.ab" 2>&1 && cat "$SUM.ab" >>"$SUM"
    rm -f "$SUM.ab"
    say "== failures"
    grep -E "FAIL|CHECK failed|: rc=[1-9]" "$SUM" | grep -v "^RESULT" | head -n 40 | tee -a "$SUM.tmp" >/dev/null
    cat "$SUM.tmp" >>"$SUM" 2>/dev/null
    rm -f "$SUM.tmp"
    say "total $(($(date +%s) - t0)) s"
    if [ $fail = 0 ]; then say "RESULT: PASS"; else say "RESULT: FAIL"; fi
    exit $fail
}
if [ "${VC_GPU_ONLY:-}" = e2e ]; then # the GRPO/NCCL part alone, with an existing build
    BIN="$BUILD/verlc"
    TESTS="$BUILD/tests"
    e2e_all
    finish
fi
step "nvidia-smi" 30 nvidia-smi
step "nvcc" 10 nvcc --version
# Prebuilt test programs (e.g. carried from a CPU machine's build/tests) are used when the
# configure or build here fails, say for missing Debian packages (scripts/deps.sh installs them).
PREBUILT=${VC_GPU_PREBUILT:-build/tests}
TESTS="$BUILD/tests"
# verlc, the CUDA test programs, LoRA (dense and routed-expert adapters), router replay, the chunked head, shared prompt
# states, reward models' score head, test_dist (scripts/gpu-programs.sh)
TARGETS=$(scripts/gpu-programs.sh targets)
built=0
configured=0
# The programs built on the CPU machine (scripts/gpu-prebuild.sh, carried in .gpu/prebuilt) when they were built from
# these sources and every library they need is found here: no build (116 and 156 s of the 2026-12-04 lease's calls).
# VC_GPU_USE_PREBUILT=0 builds anyway.
prebuilt_use() { # folder to unpack them into; 0 when they are there and load
    local P=.gpu/prebuilt want have miss
    if [ "${VC_GPU_USE_PREBUILT:-1}" != 1 ] || [ ! -f $P/programs.tar.xz ] || [ ! -f $P/SOURCES ]; then
        say "== prebuilt programs: none (.gpu/prebuilt not carried, or VC_GPU_USE_PREBUILT=0): building"
        return 1
    fi
    want=$(cat $P/SOURCES)
    have=$(scripts/gpu-programs.sh digest)
    if [ "$want" != "$have" ]; then
        say "== prebuilt programs: built from other sources ($want; these are $have): building"
        return 1
    fi
    rm -rf "$1" && mkdir -p "$1" && xz -dc $P/programs.tar.xz | tar -x -C "$1" || {
        say "== prebuilt programs: unpacking $P/programs.tar.xz failed: building"
        return 1
    }
    [ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/usr/local/cuda/lib64"
    miss=$(ldd "$1"/verlc "$1"/libverlc.so "$1"/tests/* 2>&1 | grep "not found" | awk '{print $1}' | sort -u | tr '\n' ' ')
    if [ -n "$miss" ]; then
        say "== prebuilt programs: libraries not found here: $miss- building"
        return 1
    fi
    say "== prebuilt programs (scripts/gpu-prebuild.sh, sources $want): unpacked into $1, no build here"
    [ -f $P/CONFIG ] && say "$(cat $P/CONFIG)" # their configure's lines (the communicators it found: the NCCL runs)
}
if prebuilt_use "${BUILD}-prebuilt" && [ "${VC_GPU_DRY_RUN:-0}" != 1 ]; then # (a dry run still tries the configure)
    BUILD="${BUILD}-prebuilt"
    TESTS="$BUILD/tests"
    built=1
fi
# Ninja where the machine has it (a new build folder only: CMake keeps a folder's generator): Make builds libverlc's
# C files only after every .cu file (a target's objects wait for the targets it takes objects from), Ninja both at
# once; the 2026-12-04 builds (Make) took 116 and 156 s
GEN=""
if [ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then GEN="-G Ninja"; fi
# shellcheck disable=SC2086
if [ $built = 0 ]; then
    # shellcheck disable=SC2086
    step "configure" 120 cmake -S . -B "$BUILD" $GEN -DCMAKE_BUILD_TYPE=Release -DVC_CUDA=ON $DEPS_CMAKE && configured=1
fi
if [ "${VC_GPU_DRY_RUN:-0}" = 1 ]; then
    grep -E "^(OPENBLAS_|PKG_CONFIG_EXECUTABLE|CJSON_INCLUDE|pkgcfg_lib_|MPI_C_COMPILER|MPI_C_HEADER_DIR|MPI_mpi_LIBRARY|NCCL_)" "$BUILD/CMakeCache.txt" 2>/dev/null >>"$SUM"
    say "RESULT: DRY RUN (configure $([ $configured = 1 ] && echo ok || echo FAILED); build and GPU steps skipped)"
    exit $((1 - configured))
fi
if [ $configured = 1 ] && [ $built = 0 ]; then
    say "== build (log: $LOG)"
    s=$(date +%s)
    # shellcheck disable=SC2086
    timeout 270 cmake --build "$BUILD" -j"$JOBS" --target $TARGETS >"$LOG" 2>&1
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
step "test_cuda_table (VERLC_CUDA_PAGED=dims: the other paged attention kernel)" 60 env VERLC_CUDA_PAGED=dims \
    "$TESTS/cuda_test_cuda_table"
step "test_cuda_copy" 40 "$TESTS/cuda_test_cuda_copy"
step "test_cuda_attn" 100 "$TESTS/cuda_test_cuda_attn"
step "test_cuda_attn_bf16" 60 "$TESTS/cuda_test_cuda_attn_bf16"
[ -x "$TESTS/cuda_test_cuda_sample" ] && step "test_cuda_sample" 40 "$TESTS/cuda_test_cuda_sample"
step "test_cuda_attn (VERLC_CUDA_SYNC=1)" 60 env VERLC_CUDA_SYNC=1 "$TESTS/cuda_test_cuda_attn"
# GRPO, PPO and SFT on cuda against cpu, and 2-rank NCCL sft against MPI (both ranks on the one GPU)
[ -x "$TESTS/cuda_test_cuda_train" ] && step "test_cuda_train" 45 env VERLC_BIN="$BUILD/verlc" "$TESTS/cuda_test_cuda_train"
[ -x "$TESTS/cuda_test_cuda_graph" ] && step "test_cuda_graph" 30 "$TESTS/cuda_test_cuda_graph"
[ -x "$TESTS/model_test_lora" ] && step "test_lora on cuda (adapters, experts' too, merge, checkpointing, PEFT files)" 30 \
    env VC_LORA_DEVICE=cuda "$TESTS/model_test_lora"
[ -x "$TESTS/model_test_route" ] && step "test_route on cuda (router replay: record, replay, gradients)" 20 \
    env VC_ROUTE_DEVICE=cuda "$TESTS/model_test_route"
[ -x "$TESTS/model_test_head_gather" ] && step "test_head_gather on cuda (distillation's chunked student head)" 20 \
    env VC_HEAD_DEVICE=cuda "$TESTS/model_test_head_gather"
# (its fixtures, verlc's own linear-mixer models, travel only when the carry budget allows: see gpu-prepare.sh)
[ -x "$TESTS/model_test_share" ] && [ -d tests/fixtures/models/jamba ] && step "test_share on cuda (Gated DeltaNet's and Mamba 2's shared prompt states)" 20 \
    env VC_SHARE_DEVICE=cuda VC_SHARE_ALL=1 "$TESTS/model_test_share"
[ -x "$TESTS/rl_test_reward_model" ] && step "test_reward_model on cuda (score head vs transformers)" 30 \
    env VC_RM_DEVICE=cuda "$TESTS/rl_test_reward_model"
[ -x "$TESTS/train_test_mtp" ] && step "test_mtp on cuda (MTP training of five layouts and two depths against PyTorch, f32)" 20 \
    env VC_MTP_DEVICE=cuda "$TESTS/train_test_mtp"
[ -x "$TESTS/infer_test_spec" ] && step "test_spec on cuda (drafting with the MTP layer vs without; row counts change cuBLAS's kernels, so a mismatch here is a finding, not a failure of drafting)" 20 \
    env VC_SPEC_DEVICE=cuda "$TESTS/infer_test_spec"
# The CLI on the GPU: fixture check and the benches.
BIN="$BUILD/verlc"
# The issue's benchmarks (bf16): Qwen2.5-0.5B and 1.5B shapes, training 16 x 512, log-probs 16 x 1024,
# generate batch 256 x (128 + 256). PyTorch on the same H200: 72,171 / 38,843 train tokens/s,
# 246,363 / 121,355 log-prob tokens/s, HF generate 3,858 / 3,905 tokens/s.
# On another card than issue 7's H200 (or with VC_GPU_PEER=1; VC_GPU_PEER=0 never), PyTorch + transformers measure the
# three figures here first (scripts/peer_torch.py, issue 7's settings), when the machine's python has them
# (VC_GPU_PYTHON, default python3): the benches then compare with those, not with another card's. VC_GPU_PEER_ARGS:
# more arguments for it (trying the step on a CPU machine: "--device cpu --batch 1 --seq 16 ...").
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
peer_wanted() {
    case "${VC_GPU_PEER:-auto}" in
        1) return 0 ;; 0) return 1 ;;
    esac
    case "$GPU_NAME" in *H200*) return 1 ;; esac
    "${VC_GPU_PYTHON:-python3}" -c "import torch, transformers" 2>/dev/null
}
bench_model() { # config name, PyTorch's train, log-prob and HF generate tokens/s on the H200
    local CFG="$VERLC_SHARED/configs/$1.json" P="--device cuda --precision bf16"
    local PEER="PyTorch 2.11 + transformers 5.17 on an H200 (issue 7)" ENV="$OUTDIR/.peer-$1.env"
    if [ ! -f "$CFG" ]; then
        say "== verlc bench on $1: skipped (no $CFG)"
        return
    fi
    rm -f "$ENV"
    if peer_wanted && step "peer: PyTorch + transformers on this ${GPU_NAME:-GPU}, $1 (train 16 x 512, logprob 16 x 1024, generate 256 x (128 + 256))" \
        150 "${VC_GPU_PYTHON:-python3}" scripts/peer_torch.py --config "$CFG" --out "$ENV" ${VC_GPU_PEER_ARGS:-}; then
        local TRAIN LOGPROB GENERATE
        # shellcheck disable=SC1090
        . "$ENV" && set -- "$1" "${TRAIN:-$2}" "${LOGPROB:-$3}" "${GENERATE:-$4}"
    fi
    # shellcheck disable=SC2086
    step "bench train $1 bf16 (16 x 512)" 60 "$BIN" bench train --config "$CFG" --tokens 8192 --seqs 16 --iters 3 $P \
        --peer "$2" --peer-name "$PEER"
    # shellcheck disable=SC2086
    step "bench logprob $1 bf16 (16 x 1024)" 45 "$BIN" bench logprob --config "$CFG" --tokens 16384 --seq-len 1024 \
        --reps 3 $P --peer "$3" --peer-name "$PEER"
    # shellcheck disable=SC2086
    step "bench generate $1 bf16 (batch 256, 128 + 256)" 60 "$BIN" bench generate --config "$CFG" --batch 256 \
        --prompt 128 --new 256 $P --peer "$4" --peer-name "HF generate, $PEER"
}
# Mixture of experts (routing, grouping and the grouped expert GEMMs on the GPU, decode steps as graphs): the
# Qwen3-30B-A3B shape cut to 4 layers (the whole model's f32 weights do not fit one GPU), when time is left.
bench_moe() {
    local CFG="$VERLC_SHARED/configs/qwen3-30b-a3b.json" CUT="$OUTDIR/.qwen3-30b-a3b-4l.json"
    local P="--device cuda --precision bf16"
    [ -f "$CFG" ] && [ "$(left)" -gt 150 ] || return 0
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 4; json.dump(c, open(sys.argv[2], "w"))' \
        "$CFG" "$CUT" || return 0
    # shellcheck disable=SC2086
    step "bench train qwen3-30b-a3b shape, 4 layers, bf16 (16 x 512)" 60 "$BIN" bench train --config "$CUT" \
        --tokens 8192 --seqs 16 --iters 3 $P
    # shellcheck disable=SC2086
    step "bench generate qwen3-30b-a3b shape, 4 layers, bf16 (batch 256, 128 + 128)" 60 "$BIN" bench generate \
        --config "$CUT" --batch 256 --prompt 128 --new 128 $P
    # the grouped expert GEMMs alone (the whole model's experts' shapes), mma.sync beside WMMA
    step "bench gemm qwen3-30b-a3b experts bf16 (tokens 256, 8192; forward and backward)" 40 "$BIN" bench gemm \
        --config "$CFG" --rows 256,8192 --moe --backward --iters 3 $P
    # the grouped expert GEMMs' WMMA kernel (64 x 64 tiles, no asynchronous copies) beside the default mma.sync one
    # shellcheck disable=SC2086
    [ "$(left)" -gt 120 ] && step "bench train qwen3-30b-a3b shape, 4 layers, bf16 (16 x 512), VERLC_CUDA_MOE_MMA=0" 60 \
        env VERLC_CUDA_MOE_MMA=0 "$BIN" bench train --config "$CUT" --tokens 8192 --seqs 16 --iters 3 $P
    # shellcheck disable=SC2086
    [ "$(left)" -gt 100 ] && step "bench generate qwen3-30b-a3b shape, 4 layers, bf16 (batch 256, 128 + 128), VERLC_CUDA_MOE_MMA=0" \
        60 env VERLC_CUDA_MOE_MMA=0 "$BIN" bench generate --config "$CUT" --batch 256 --prompt 128 --new 128 $P
    # verl's QAT (NVFP4 w4a16) on the device: 4 x (4 + 3 x 128) modules quantized and restored, timed beside the step
    # shellcheck disable=SC2086
    [ "$(left)" -gt 90 ] && step "bench train qwen3-30b-a3b shape, 4 layers, bf16 (16 x 512), --qat" 60 "$BIN" bench train \
        --config "$CUT" --tokens 8192 --seqs 16 --iters 2 --qat $P
    rm -f "$CUT"
}
# A Qwen3.5-shaped Gated DeltaNet hybrid (18 linear-attention layers, 6 gated attention; the recurrence token by
# token, decode steps as CUDA graphs with the states' tables uploaded per step): no Qwen3.5 config is among the
# shared ones, so the shape is written here from its published figures
bench_hybrid() {
    local CFG="$OUTDIR/.qwen3.5-shaped.json" P="--device cuda --precision bf16"
    [ "$(left)" -gt 100 ] || return 0
    python3 - "$CFG" <<'PY' || return 0
import json, sys
t = ["linear_attention"] * 3 + ["full_attention"]
json.dump({"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": 1024,
           "intermediate_size": 3584, "num_hidden_layers": 24, "num_attention_heads": 8, "num_key_value_heads": 2,
           "head_dim": 256, "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "layer_types": t * 6, "vocab_size": 248320,
           "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "hidden_act": "silu", "bos_token_id": 1,
           "eos_token_id": 2, "torch_dtype": "bfloat16",
           "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25}},
          open(sys.argv[1], "w"))
PY
    # shellcheck disable=SC2086
    step "bench generate qwen3.5-shaped hybrid bf16 (batch 256, 128 + 128, graphs)" 60 "$BIN" bench generate \
        --config "$CFG" --batch 256 --prompt 128 --new 128 $P
    # its full-attention layers' heads of 256 on the tensor-core paged kernel (since 2026-12-05, untimed) against the
    # f32 one with the lanes over keys
    # shellcheck disable=SC2086
    step "bench generate qwen3.5-shaped hybrid bf16 (batch 256, 128 + 128, graphs), VERLC_CUDA_PAGED_MMA=0" 60 \
        env VERLC_CUDA_PAGED_MMA=0 "$BIN" bench generate --config "$CFG" --batch 256 --prompt 128 --new 128 $P
    # where its decode step goes (7% of its roofline on 2026-12-04; the recurrence's state copies since batched)
    # shellcheck disable=SC2086
    step "profile: bench generate qwen3.5-shaped hybrid bf16 decode steps only (batch 256, 128 + 16, graphs off, ops queued ahead)" \
        40 env VERLC_CUDA_PROFILE=ahead VERLC_CUDA_PROFILE_DECODE=1 VERLC_CUDA_GRAPHS=0 "$BIN" bench generate \
        --config "$CFG" --batch 256 --prompt 128 --new 16 $P
    # shellcheck disable=SC2086
    step "bench train qwen3.5-shaped hybrid bf16 (16 x 512)" 60 "$BIN" bench train --config "$CFG" --tokens 8192 \
        --seqs 16 --iters 3 $P
    # the recurrence op alone, in chunks of 64 rows (cuda_gdn_chunk.cu) and token by token: 8 rows of 4,096 at
    # Qwen3.5's 16 heads of 128 x 128, forward keeping states and backward
    step "bench gdn on cuda, chunked (8 x 4096 rows, 16 heads of 128 x 128)" 40 "$BIN" bench gdn --tokens 32768 \
        --seqs 8 --iters 2 --device cuda
    step "bench gdn on cuda, chunked (1 x 4096 rows)" 30 "$BIN" bench gdn --tokens 4096 --iters 2 --device cuda
    step "bench gdn on cuda, recurrence (8 x 4096 rows)" 40 env VERLC_GDN_RECURRENCE=1 "$BIN" bench gdn \
        --tokens 32768 --seqs 8 --iters 2 --device cuda
    step "bench gdn --kda on cuda, chunked (8 x 4096 rows: Kimi's decay per key channel)" 40 "$BIN" bench gdn --kda \
        --tokens 32768 --seqs 8 --iters 2 --device cuda
    # the chunked form's products on the CUDA cores (its kernels' products before 2026-12-05: 3.7 / 4.3 TFLOP/s nominal
    # forward / backward on 2026-12-04) against the default 3xTF32 tensor-core tiles (written without a GPU)
    step "bench gdn on cuda, chunked (8 x 4096 rows, 16 heads of 128 x 128), VERLC_CUDA_GDN_TC=0" 40 env VERLC_CUDA_GDN_TC=0 "$BIN" bench gdn \
        --tokens 32768 --seqs 8 --iters 2 --device cuda
    # shellcheck disable=SC2086
    step "bench train qwen3.5-shaped hybrid bf16 (16 x 512), VERLC_CUDA_GDN_TC=0" 60 env VERLC_CUDA_GDN_TC=0 "$BIN" \
        bench train --config "$CFG" --tokens 8192 --seqs 16 --iters 3 $P
    rm -f "$CFG"
}
# A/B benches on the 0.5B shape ($CFG05): bench train (16 x 512) or logprob (16 x 1024) with the settings given
ab_train() { # NAME=VALUE...
    [ -f "$CFG05" ] || return 0
    step "bench train qwen2.5-0.5b bf16 (16 x 512), $*" 60 env "$@" "$BIN" bench train --config "$CFG05" \
        --tokens 8192 --seqs 16 --iters 3 --device cuda --precision bf16
}
ab_logprob() { # NAME=VALUE...
    [ -f "$CFG05" ] || return 0
    step "bench logprob qwen2.5-0.5b bf16 (16 x 1024), $*" 45 env "$@" "$BIN" bench logprob --config "$CFG05" \
        --tokens 16384 --seq-len 1024 --reps 3 --device cuda --precision bf16
}
# Where the GPU time goes (VERLC_CUDA_PROFILE=1: time per op, and how busy the GPU was between host
# waits: a low figure means the host, not the GPU, is the limit), short runs on the 0.5B shape.
profile_model() { # config name
    local CFG="$VERLC_SHARED/configs/$1.json" P="--device cuda --precision bf16"
    [ -f "$CFG" ] || return 0
    # shellcheck disable=SC2086
    step "profile: bench train $1 bf16 (16 x 512, 2 iterations)" 40 env VERLC_CUDA_PROFILE=1 "$BIN" bench train \
        --config "$CFG" --tokens 8192 --seqs 16 --iters 2 $P
    # shellcheck disable=SC2086
    # shellcheck disable=SC2086
    step "profile: bench logprob $1 bf16 (16 x 1024)" 40 env VERLC_CUDA_PROFILE=1 "$BIN" bench logprob \
        --config "$CFG" --tokens 16384 --seq-len 1024 --reps 2 $P
    # graphs off here, so the profile shows each op of a decode step (with graphs: one "graph launch")
    step "profile: bench generate $1 bf16 (batch 256, 128 + 32, graphs off)" 40 env VERLC_CUDA_PROFILE=1 \
        VERLC_CUDA_GRAPHS=0 "$BIN" bench generate --config "$CFG" --batch 256 --prompt 128 --new 32 $P
    # the decode steps alone (the profile forgets each step that read prompts), each op queued behind a spin so that
    # its interval is its GPU time, not the host's launch gaps (graphs off, the host is slower than the GPU)
    step "profile: bench generate $1 bf16 decode steps only (batch 256, 128 + 32, graphs off, ops queued ahead)" 40 \
        env VERLC_CUDA_PROFILE=ahead VERLC_CUDA_PROFILE_DECODE=1 VERLC_CUDA_GRAPHS=0 "$BIN" bench generate --config "$CFG" \
        --batch 256 --prompt 128 --new 32 $P
}
# Nsight Compute, where the machine has it: each launch of one training step, of a prefill and two decode steps, and the
# log-prob pass's attention and LM head kernels, on the 0.5B shape cut to 2 layers (its whole vocabulary): one line a
# launch (duration, SM and memory throughput against their peaks, occupancy, registers, cycles a warp waits an issued
# instruction; scripts/ncu-table.py) in the summary, ncu's own pages with its advice in ncu-*.txt beside it
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1 || true)
ncu_one() { # tag, launches, filter (or ""), command...
    local tag=$1 count=$2 filter=$3 rep="$OUTDIR/.ncu-$1" rc
    shift 3
    # shellcheck disable=SC2086
    "$NCU" --target-processes all $filter -c "$count" --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats -f -o "$rep" "$@" >"$rep.log" 2>&1
    rc=$?
    grep -E "==(PROF|ERROR|WARNING)==" "$rep.log" | tail -n 5
    [ -f "$rep.ncu-rep" ] || { tail -n 20 "$rep.log"; return $((rc ? rc : 1)); }
    "$NCU" -i "$rep.ncu-rep" --page details >"$OUTDIR/ncu-$tag.txt" 2>&1
    "$NCU" -i "$rep.ncu-rep" --csv --page details | python3 scripts/ncu-table.py --top 30
    rm -f "$rep.ncu-rep" "$rep.log"
    return $rc
}
export -f ncu_one
export NCU OUTDIR
ncu_kernels() {
    local CUT="$OUTDIR/.qwen2.5-0.5b-2l.json" P="--device cuda --precision bf16"
    if [ -z "$NCU" ] || [ ! -f "$CFG05" ] || [ "$(left)" -lt 120 ]; then
        say "== ncu: skipped (Nsight Compute ${NCU:-not found}, $(left) s left)"
        return 0
    fi
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 2; json.dump(c, open(sys.argv[2], "w"))' \
        "$CFG05" "$CUT" || return 0
    # shellcheck disable=SC2086
    # (small batches: a kernel's replays save and restore the memory it may write, and the LM head's logits kept for
    # its backward would be GBs: not kept here)
    step "ncu: a training step, qwen2.5-0.5b shape cut to 2 layers (4 x 512), every kernel" 100 \
        env VERLC_CUDA_HEAD_KEEP=0 bash -c 'ncu_one train 110 "" "$@"' _ "$BIN" bench train --config "$CUT" \
        --tokens 2048 --seqs 4 --iters 1 $P
    # shellcheck disable=SC2086
    [ "$(left)" -gt 90 ] && step "ncu: prefill and decode, same shape (batch 256, 128 + 3, graphs off), every kernel" 60 \
        env VERLC_CUDA_GRAPHS=0 bash -c 'ncu_one generate 80 "" "$@"' _ "$BIN" bench generate --config "$CUT" \
        --batch 256 --prompt 128 --new 3 $P
    # shellcheck disable=SC2086
    [ "$(left)" -gt 60 ] && step "ncu: log-probs' attention and LM head kernels, same shape (4 x 1024)" 40 bash -c \
        'ncu_one logprob 8 "-k regex:attn|head" "$@"' _ "$BIN" bench logprob --config "$CUT" --tokens 4096 \
        --seq-len 1024 --reps 1 $P
    # the chunked Gated DeltaNet's kernels (forward: prep, state pass, outputs; backward alike), Qwen3.5's heads
    [ "$(left)" -gt 60 ] && step "ncu: the chunked Gated DeltaNet's kernels (2 x 4096 rows, 16 heads of 128 x 128)" 40 \
        bash -c 'ncu_one gdn 12 "-k regex:k_ck" "$@"' _ "$BIN" bench gdn --tokens 8192 --seqs 2 --iters 1 --device cuda
    rm -f "$CUT"
}
if [ $built = 1 ] && [ -x "$BIN" ]; then
    MODELS=$(for m in "$VERLC_SHARED"/fixtures/models/*/ tests/fixtures/models/*/; do [ -f "$m/config.json" ] && echo "$m"; done)
    [ -z "$MODELS" ] && say "== verlc check --device cuda: skipped (no fixtures under $VERLC_SHARED/fixtures/models)"
    # shellcheck disable=SC2086
    [ -n "$MODELS" ] && step "verlc check --device cuda (fixture models, f32)" 60 "$BIN" check --device cuda $MODELS
    bench_model qwen2.5-0.5b 72171 246363 3858
    # A/B: prefill on the paged kernel, and the held operands off (`operand hold` took 16-18% of the GPU time then, several
    # times its bytes' worth: is rounding each GEMM's operand itself cheaper?)
    CFG05="$VERLC_SHARED/configs/qwen2.5-0.5b.json"
    # every GEMM of a layer and the LM head at decode, training and log-prob row counts, and the bf16 rounding's cost
    [ -f "$CFG05" ] && step "bench gemm qwen2.5-0.5b bf16 (rows 256, 8192, 16384; forward and backward)" 60 \
        "$BIN" bench gemm --config "$CFG05" --rows 256,8192,16384 --backward --device cuda --precision bf16
    # q, k and v as three GEMMs and the ropes (the default: one GEMM and one split / bias / rope pass at decode rows)
    [ -f "$CFG05" ] && step "bench generate qwen2.5-0.5b bf16 (batch 256, 128 + 256), VERLC_QKV_FUSED=0" 60 \
        env VERLC_QKV_FUSED=0 "$BIN" bench generate --config "$CFG05" --batch 256 --prompt 128 --new 256 \
        --device cuda --precision bf16
    # decode rows on the f32 paged kernel (lanes over keys) instead of the tensor-core one
    [ -f "$CFG05" ] && step "bench generate qwen2.5-0.5b bf16 (batch 256, 128 + 256), VERLC_CUDA_PAGED_MMA=0" \
        60 env VERLC_CUDA_PAGED_MMA=0 "$BIN" bench generate --config "$CFG05" --batch 256 --prompt 128 \
        --new 256 --device cuda --precision bf16
    # prefill chunks on the paged kernel (a block per query row) instead of the flash kernels on gathered keys
    [ -f "$CFG05" ] && step "bench generate qwen2.5-0.5b bf16 (batch 256, 128 + 256), VERLC_CUDA_PAGED_PREFILL=paged" \
        60 env VERLC_CUDA_PAGED_PREFILL=paged "$BIN" bench generate --config "$CFG05" --batch 256 --prompt 128 \
        --new 256 --device cuda --precision bf16
    # a rollout's tail (written without a GPU): 8 rows decoding over 2,048 + 512 keys, each row's keys in chunks of 512
    # spread over blocks (default) against each row's keys in one block a key/value head (16 blocks in all)
    [ -f "$CFG05" ] && step "bench generate qwen2.5-0.5b bf16 (batch 8, 2048 + 512)" 60 "$BIN" bench generate \
        --config "$CFG05" --batch 8 --prompt 2048 --new 512 --device cuda --precision bf16
    [ -f "$CFG05" ] && step "bench generate qwen2.5-0.5b bf16 (batch 8, 2048 + 512), VERLC_CUDA_PAGED_SPLIT=0" 60 \
        env VERLC_CUDA_PAGED_SPLIT=0 "$BIN" bench generate --config "$CFG05" --batch 8 --prompt 2048 --new 512 \
        --device cuda --precision bf16
    # the register-tiled (mma.sync) flash attention against the WMMA kernels it replaced (written without a GPU)
    ab_logprob VERLC_CUDA_ATTN_MMA=0
    ab_train VERLC_CUDA_ATTN_MMA=0
    # 2026-12-05 (written without a GPU): dK/dV with a GQA group's heads split over blocks, and the gated MLP's
    # backward into its held bf16 copy, each against its A/B (the default figures are bench train's above)
    ab_train VERLC_CUDA_ATTN_SPLIT=1
    # dQ at heads of 64 with two m-tiles a warp (2026-12-05, untimed: 255 registers, 2 blocks an SM against 3)
    ab_train VERLC_CUDA_ATTN_DQ_M2=0
    ab_train VERLC_CUDA_ACT_HELD=0
    # the LM head's logits kept from its forward for its backward (default; 5 GB at 8,192 rows) against forming them
    # again by a GEMM there (a quarter of the head's work, 9% of the 0.5B step's flops)
    ab_train VERLC_CUDA_HEAD_KEEP=0
    # q, k and v as three GEMMs and ropes in training and log-probs (the default since 2026-12-05: one GEMM and one pass,
    # with a tape too; its backward 2 GEMMs a layer instead of 6)
    ab_train VERLC_QKV_FUSED=0
    ab_logprob VERLC_QKV_FUSED=0
    # gate and up in bf16 (the GEMM writes bf16, the activation reads it: half the bytes of the widest activation;
    # autocast's numerics, off by default until these say it wins)
    ab_logprob VERLC_GATE_UP_BF16=1
    ab_train VERLC_GATE_UP_BF16=1
    # and the LM head's logits in bf16 too (VERLC_HEAD_BF16=1, autocast's: half the bytes of every logit slice)
    ab_logprob VERLC_GATE_UP_BF16=1 VERLC_HEAD_BF16=1
    ab_train VERLC_GATE_UP_BF16=1 VERLC_HEAD_BF16=1
    ab_logprob VERLC_CUDA_HOLD=0
    ab_train VERLC_CUDA_HOLD=0
    # the LM head in slices of 512 and 1,024 vocabulary rows (32 and 64 MiB of f32 logits at 16 x 1,024 rows, which the
    # H200's L2 may hold from the slice's GEMM to its fold) instead of 256 MiB ones (4,096 rows); not the same bits (the
    # slices' sums merge at other boundaries)
    ab_logprob VERLC_CUDA_HEAD_SLICE=512
    ab_logprob VERLC_CUDA_HEAD_SLICE=1024
    # the gated MLP without a tape in blocks of rows (gate/up, activation, down a block at a time: the block's [R, 2I]
    # values may stay in L2 between the GEMM that writes them and the activation that reads them; 637 MiB a layer
    # written and read back at 16 x 1,024 rows otherwise)
    ab_logprob VERLC_MLP_ROWS=512
    ab_logprob VERLC_MLP_ROWS=1024
    # log-probs in passes of 4 x 1,024 rows (a micro-batch of verl's log_prob_micro_batch_size_per_gpu 4): each pass's
    # activations a quarter of the 16 x 1,024 pass's (15 MiB a hidden-state tensor: within the L2's 50 MiB), the weights
    # read 4 times as often; its tokens/s against the 16 x 1,024 pass's
    [ -f "$CFG05" ] && step "bench logprob qwen2.5-0.5b bf16 (4 x 1024)" 45 "$BIN" bench logprob --config "$CFG05" \
        --tokens 4096 --seq-len 1024 --reps 3 --device cuda --precision bf16
    e2e_all
    profile_model qwen2.5-0.5b
    ncu_kernels
    # shellcheck disable=SC2086
    [ -n "$MODELS" ] && step "verlc check --device cuda --precision bf16" 60 "$BIN" check --device cuda \
        --precision bf16 $MODELS
    # shellcheck disable=SC2086
    # (the dense seed families: a different rounding moves MoE routing ties; see emu-check.sh)
    DENSE=$(for n in llama mistral qwen2 qwen3 baichuan2 chatglm3 internlm2 phi3 gemma gemma2; do
        [ -d "$VERLC_SHARED/fixtures/models/$n" ] && echo "$VERLC_SHARED/fixtures/models/$n"; done)
    # shellcheck disable=SC2086
    [ -n "$DENSE" ] && step "verlc check --device cuda --precision bf16, VERLC_GATE_UP_BF16=1 VERLC_HEAD_BF16=1" 60 \
        env VERLC_GATE_UP_BF16=1 VERLC_HEAD_BF16=1 "$BIN" check --device cuda --precision bf16 $DENSE
    bench_model qwen2.5-1.5b 38843 121355 3905
    bench_moe
    bench_hybrid
    # bf16 KV pages against float pages (the same bits, twice the KV bytes per decode step): the A/B figure
    CFG05="$VERLC_SHARED/configs/qwen2.5-0.5b.json"
    [ -f "$CFG05" ] && [ "$(left)" -gt 90 ] && step "bench generate qwen2.5-0.5b bf16, float KV pages (VERLC_KV_BF16=0)" \
        60 env VERLC_KV_BF16=0 "$BIN" bench generate --config "$CFG05" --batch 256 --prompt 128 --new 256 \
        --device cuda --precision bf16
    # speculative decoding with an MTP layer (MiMo's layout on the 0.5B shape, random: few drafts kept, so this is what
    # drafting costs a step: two rows a sequence, eager steps, the MTP layer and its LM head)
    MIMO05="$OUTDIR/.mimo-0.5b.json"
    [ -f "$CFG05" ] && [ "$(left)" -gt 90 ] && python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c.update(model_type="mimo", architectures=["MiMoForCausalLM"], num_nextn_predict_layers=1); json.dump(c, open(sys.argv[2], "w"))' "$CFG05" "$MIMO05" && \
        step "bench generate mimo-shaped 0.5b bf16 --speculative (batch 64, 128 + 128)" 60 "$BIN" bench generate \
        --config "$MIMO05" --batch 64 --prompt 128 --new 128 --speculative --device cuda --precision bf16
    # the A/B of a drafted step's rows on the paged kernel (the default below 16 rows a sequence) against the flash
    # kernels on each sequence's gathered keys (every sequence of 2 rows or more, as before 2026-12-07)
    [ -f "$MIMO05" ] && [ "$(left)" -gt 80 ] && step "bench generate mimo-shaped 0.5b bf16 --speculative, VERLC_CUDA_PAGED_FLASH_ROWS=2" \
        60 env VERLC_CUDA_PAGED_FLASH_ROWS=2 "$BIN" bench generate --config "$MIMO05" --batch 64 --prompt 128 --new 128 \
        --speculative --device cuda --precision bf16
    # Muon's optimizer step (Megatron-core's defaults: bf16 Newton-Schulz) beside the training step, timed apart
    [ -f "$CFG05" ] && [ "$(left)" -gt 80 ] && step "bench train qwen2.5-0.5b bf16 with Muon (16 x 512)" 45 \
        "$BIN" bench train --config "$CFG05" --tokens 8192 --seqs 16 --iters 2 --optimizer muon --device cuda \
        --precision bf16
else
    say "== verlc CLI on the GPU: skipped (no $BIN built here)"
fi
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$CS" ] && [ "$(left)" -gt 60 ]; then
    step "memcheck test_cuda_attn" $(($(left) / 2)) "$CS" --tool memcheck --report-api-errors no --error-exitcode 9 "$TESTS/cuda_test_cuda_attn"
    [ "$(left)" -gt 40 ] && step "memcheck test_cuda_table" $(($(left) / 2)) "$CS" --tool memcheck \
        --report-api-errors no --error-exitcode 9 "$TESTS/cuda_test_cuda_table"
    [ "$(left)" -gt 30 ] && step "memcheck test_cuda_ops (no fault test)" "$(left)" env VC_CUDA_TEST_NO_FAULT=1 \
        "$CS" --tool memcheck --report-api-errors no --error-exitcode 9 "$TESTS/cuda_test_cuda_ops"
else
    say "== memcheck skipped (compute-sanitizer ${CS:-not found}, $(left) s left)"
fi
finish
