#!/usr/bin/env bash
# verlc GPU run preparation: run HERE (a Debian machine with apt) before a device `run` call.
# The GPU machine has no network and perhaps none of the Debian -dev packages verlc builds against,
# and the ../shared folder beside the checkout does not travel. This script fills the ignored folder
# .gpu/ in the repository root with what scripts/gpu-check.sh needs there:
#   .gpu/debs/    the .deb files (apt-get download, nothing installed) of the build and runtime
#                 packages: OpenBLAS (pthread flavour, its libgfortran5/libquadmath0 runtime),
#                 Oniguruma, utf8proc, cJSON, libyaml, snappy, zstd, zlib, lz4, brotli, libpng, libjpeg and pkgconf
#                 (FFmpeg's many libraries do not fit: the build there refuses video inputs); gpu-check.sh unpacks them with
#                 `dpkg -x` into .gpu/root (never into /) when the machine lacks the dependencies.
#   .gpu/debs/mpi/ the Open MPI runtime + headers (openmpi-bin, libopenmpi-dev, libopenmpi3 and the
#                 libraries they load; no -dev dependencies, no hwloc plugins): NCCL's unique id travels
#                 over MPI, so the NCCL communicator is built only with MPI. gpu-check.sh unpacks them
#                 into .gpu/mpiroot only when the machine has no mpirun/mpi.h (VC_GPU_MPI=0: not fetched).
#   .gpu/shared/  configs/, the Qwen3 tokenizer (fixtures/tokenizers/qwen3: tokenizer.json gzipped,
#                 11 -> 2 MiB, and tokenizer_config.json; its ids fit Qwen2.5's 151936 vocabulary), the
#                 first VC_GPU_GSM8K_ROWS (400) train and 100 test rows of data/gsm8k (the GRPO step), and
#                 fixtures/models/ copied from ../shared (or $VERLC_SHARED). The models are chosen to
#                 fit the carry budget: first the smallest model of every model_type (architecture
#                 family), then the others smallest first while the total stays under VC_GPU_CARRY_MB
#                 (default 61 MiB of files' own sizes, of the 64 MiB a call may carry, repository included;
#                 58 until 2026-12-05, counted in disk blocks, before the prebuilt programs took 4-6 MiB).
#   .gpu/prebuilt/ the programs built here by scripts/gpu-prebuild.sh, which this script runs when they are missing or
#                 were built from other sources (VC_GPU_PREBUILD=0: it does not); their size counts in the budget.
# Prints the sizes, the models left out, and the exact `carry` list for the device `run` call.
# VC_GPU_MODELS="qwen3 phi ...": only these shared fixture models (when the repository's own fixtures leave
# little room).
#   usage: scripts/gpu-prepare.sh          (from anywhere; VC_GPU_CARRY_MB, VC_GPU_MODELS, VERLC_SHARED optional)
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
G="$ROOT/.gpu"
SHARED=${VERLC_SHARED:-$ROOT/../shared}
CAP_MB=${VC_GPU_CARRY_MB:-61}
GSM_ROWS=${VC_GPU_GSM8K_ROWS:-400}
PKGS="libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread libgfortran5 libquadmath0
 libonig-dev libonig5 libutf8proc-dev libutf8proc2 libcjson-dev libcjson1 libyaml-dev libyaml-0-2
 libsnappy-dev libsnappy1v5 libzstd-dev libzstd1 zlib1g-dev liblz4-dev liblz4-1 libbrotli-dev libbrotli1
 libpng-dev libpng16-16 libjpeg-dev libjpeg62-turbo-dev libjpeg62-turbo
 pkgconf pkgconf-bin libpkgconf3 pkg-config"
# Open MPI 4.1 (Debian 12): binaries, headers and wrappers, the library and what it loads. Left out:
# base-system libraries (libc6, libstdc++6, zlib1g, libudev1, libuuid1, libatomic1), the -dev packages
# libopenmpi-dev names (mpi.h needs none of them), hwloc plugins (X11, OpenCL) and ibverbs providers.
MPI_PKGS="openmpi-bin libopenmpi-dev libopenmpi3 openmpi-common libevent-core-2.1-7 libevent-pthreads-2.1-7
 libfabric1 libhwloc15 libibverbs1 libnl-3-200 libnl-route-3-200 libpmix2 libpsm-infinipath1 libpsm2-2
 libucx0 librdmacm1 libnuma1 libmunge2"

[ -d "$SHARED/fixtures/models" ] || { echo "gpu-prepare: no fixtures under $SHARED (set VERLC_SHARED)" >&2; exit 1; }
grep -qs '^/\.gpu/' .gitignore || git check-ignore -q .gpu/x ||
    { echo "gpu-prepare: .gpu/ is not ignored by git (add /.gpu/ to .gitignore)" >&2; exit 1; }
mkdir -p "$G"

# ---- (a) the .deb files -------------------------------------------------------------------------
rm -rf "$G/debs" "$G/root" && mkdir -p "$G/debs" # .gpu/root: a stale unpack by gpu-check.sh
apt_fetch() { # folder, packages...: apt-get download (a private apt state when the lists are unusable)
    local dir=$1
    shift
    mkdir -p "$dir"
    (cd "$dir" && apt-get download -q "$@" >/dev/null 2>"$G/apt.log") && return 0
    echo "gpu-prepare: apt-get download failed ($(tail -n 1 "$G/apt.log")); updating private lists" >&2
    local st o rc
    st=$(mktemp -d)
    mkdir -p "$st/lists/partial" "$st/cache/archives/partial"
    o="-oDir::State::Lists=$st/lists -oDir::Cache=$st/cache -oDebug::NoLocking=1"
    # shellcheck disable=SC2086
    apt-get $o update -q >/dev/null && (cd "$dir" && apt-get $o download -q "$@" >/dev/null)
    rc=$?
    rm -rf "$st"
    return $rc
}
# shellcheck disable=SC2086
apt_fetch "$G/debs" $PKGS
if [ "${VC_GPU_MPI:-1}" != 0 ]; then
    # shellcheck disable=SC2086
    apt_fetch "$G/debs/mpi" $MPI_PKGS || { echo "gpu-prepare: Open MPI debs not fetched: no NCCL run" >&2; rm -rf "$G/debs/mpi"; }
fi
rm -f "$G/apt.log"
# the static libraries of the -dev packages (libopenblas.a alone is megabytes) are never linked: repacked without
for d in "$G"/debs/*-dev_*.deb; do
    dpkg-deb -c "$d" | grep -q '\.a$' || continue
    x=$(mktemp -d)
    dpkg-deb -R "$d" "$x/p" && find "$x/p" -name '*.a' -delete && dpkg-deb -b "$x/p" "$d" >/dev/null ||
        echo "gpu-prepare: repacking $d without its static libraries failed (kept as it was)" >&2
    rm -rf "$x"
done
# every direct dependency is either carried or part of any glibc system (libc6, libgcc-s1, gcc-*-base)
for d in "$G"/debs/*.deb "$G"/debs/mpi/*.deb; do
    [ -f "$d" ] || continue
    dpkg-deb -f "$d" Depends | tr ',|' '\n\n' | sed 's/(.*)//; s/:any//; s/ //g' | grep -v '^$'
done | sort -u | while read -r dep; do
    case " $(echo $PKGS $MPI_PKGS) " in *" $dep "*) continue ;; esac
    case $dep in libc6 | libgcc-s1 | gcc-*-base | libopenblas-openmp-dev | libopenblas-serial-dev | \
        libopenblas0-openmp | libopenblas0-serial) continue ;; esac
    # Open MPI's: base system, or not needed to build and run one node (see MPI_PKGS)
    case $dep in libstdc++6 | zlib1g | libudev1 | libuuid1 | libatomic1 | adduser | ibverbs-providers | \
        libhwloc-plugins | openssh-client | ssh-client | gfortran-* | libibverbs-dev | libhwloc-dev | \
        libevent-dev | libpmix-dev | libjs-jquery | libjs-jquery-ui | zlib1g-dev) continue ;; esac
    echo "gpu-prepare: note: dependency $dep is not carried" >&2
done

# ---- (b) the fixtures and configs ---------------------------------------------------------------
rm -rf "$G/shared" && mkdir -p "$G/shared/fixtures/models"
cp -r "$SHARED/configs" "$G/shared/configs"
# the GRPO step's tokenizer and data (gpu-check.sh gunzips the tokenizer into the model folder)
T=fixtures/tokenizers/qwen3
if [ -f "$SHARED/$T/tokenizer.json" ]; then
    mkdir -p "$G/shared/$T"
    gzip -9c "$SHARED/$T/tokenizer.json" >"$G/shared/$T/tokenizer.json.gz"
    cp "$SHARED/$T/tokenizer_config.json" "$G/shared/$T/"
else
    echo "gpu-prepare: no $SHARED/$T/tokenizer.json: no GRPO step on the GPU" >&2
fi
if [ -f "$SHARED/data/gsm8k/train.jsonl" ]; then
    mkdir -p "$G/shared/data/gsm8k"
    head -n "$GSM_ROWS" "$SHARED/data/gsm8k/train.jsonl" >"$G/shared/data/gsm8k/train.jsonl"
    head -n 100 "$SHARED/data/gsm8k/test.jsonl" >"$G/shared/data/gsm8k/test.jsonl"
else
    echo "gpu-prepare: no $SHARED/data/gsm8k: no GRPO step on the GPU" >&2
fi
# sizes in KiB, the files' own (not their disk blocks: what travels)
kib() { du -sk --apparent-size "$@" | awk '{s += $1} END {print s + 0}'; }
repo_k=$(git ls-files -co --exclude-standard -z | du -ck --apparent-size --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
if [ "$repo_k" -gt $((CAP_MB * 1024 / 2)) ]; then # verlc's own fixtures alone are about 200 MiB
    echo "gpu-prepare: the checkout's tracked files are $((repo_k / 1024)) MiB of the $CAP_MB MiB a call may carry:" \
        "run scripts/gpu-branch.sh start first (a branch keeping only the fixtures the GPU steps load)," \
        "then this script with VC_GPU_MODELS=\"\$(scripts/gpu-branch.sh models)\"" >&2
fi
# the programs built here (scripts/gpu-prebuild.sh), made again when missing or of other sources (VC_GPU_PREBUILD=0: not)
if [ "${VC_GPU_PREBUILD:-1}" != 0 ] && command -v nvcc >/dev/null 2>&1 &&
    [ "$(cat "$G/prebuilt/SOURCES" 2>/dev/null)" != "$(scripts/gpu-programs.sh digest)" ]; then
    echo "gpu-prepare: building the GPU machine's programs here (scripts/gpu-prebuild.sh)"
    scripts/gpu-prebuild.sh >"$G/prebuild.log" 2>&1 || {
        echo "gpu-prepare: scripts/gpu-prebuild.sh failed (see .gpu/prebuild.log): the GPU machine will build" >&2
        rm -rf "$G/prebuilt"
    }
fi
PRE=""
[ -f "$G/prebuilt/programs.tar.xz" ] && PRE="$G/prebuilt"
# shellcheck disable=SC2086
used=$((repo_k + $(kib "$G/debs" "$G/shared" $PRE)))
cap=$((CAP_MB * 1024))
# model folders smallest first, each with its model_type
list=$(for m in "$SHARED"/fixtures/models/*/; do
    [ -f "$m/config.json" ] || continue
    t=$(sed -n 's/.*"model_type"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$m/config.json" | head -n 1)
    echo "$(kib "$m") $(basename "$m") ${t:-unknown}"
done | sort -n)
take() { # size name: copies the model when it fits the budget
    [ -d "$G/shared/fixtures/models/$2" ] && return 0
    [ $((used + $1)) -le $cap ] || return 1
    cp -r "$SHARED/fixtures/models/$2" "$G/shared/fixtures/models/$2"
    used=$((used + $1))
}
seen=" "
left_out=""
if [ -n "${VC_GPU_MODELS:-}" ]; then # the models named (e.g. those the GPU tests load), nothing else
    list=$(echo "$list" | while read -r k n t; do case " $VC_GPU_MODELS " in *" $n "*) echo "$k $n $t" ;; esac; done)
fi
while read -r k n t; do # pass 1: the smallest model of every family
    case $seen in *" $t "*) continue ;; esac
    seen="$seen$t "
    take "$k" "$n" || left_out="$left_out $n(${k}K,family $t)"
done <<<"$list"
while read -r k n t; do # pass 2: the other models, smallest first
    take "$k" "$n" || left_out="$left_out $n(${k}K)"
done <<<"$list"

# ---- (c) report -----------------------------------------------------------------------------------
ndeb=$(ls "$G"/debs/*.deb | wc -l)
nmpi=$(ls "$G"/debs/mpi/*.deb 2>/dev/null | wc -l)
nmod=$(ls "$G/shared/fixtures/models" | wc -l)
echo "gpu-prepare: .gpu/debs   $(kib "$G/debs") KiB, $ndeb packages: $(cd "$G/debs" && ls *.deb | sed 's/_.*//' | tr '\n' ' ')"
echo "gpu-prepare: .gpu/debs/mpi $(kib "$G/debs/mpi" 2>/dev/null || echo 0) KiB of those, $nmpi Open MPI packages"
echo "gpu-prepare: .gpu/shared $(kib "$G/shared") KiB: configs, tokenizer $(kib "$G/shared/fixtures/tokenizers" 2>/dev/null || echo 0) KiB, GSM8K subset $(kib "$G/shared/data" 2>/dev/null || echo 0) KiB, $nmod fixture models"
[ -n "$left_out" ] && echo "gpu-prepare: models left out to stay under $CAP_MB MiB:$left_out"
echo "gpu-prepare: repository (tracked + untracked, not ignored) $repo_k KiB"
if [ -n "$PRE" ]; then
    echo "gpu-prepare: .gpu/prebuilt $(kib "$PRE") KiB: the programs built here (sources $(cat "$PRE/SOURCES"))"
    [ "$(cat "$PRE/SOURCES")" = "$(scripts/gpu-programs.sh digest)" ] ||
        echo "gpu-prepare: .gpu/prebuilt is of other sources than the checkout's: rerun scripts/gpu-prebuild.sh" >&2
else
    echo "gpu-prepare: no .gpu/prebuilt (scripts/gpu-prebuild.sh): the GPU machine builds verlc (about 2 minutes a call)"
fi
# shellcheck disable=SC2086
echo "gpu-prepare: total to travel $((repo_k + $(kib "$G/debs" "$G/shared" $PRE))) KiB (limit 65536 KiB)"
if [ -n "$PRE" ]; then
    echo 'gpu-prepare: carry [".gpu/debs", ".gpu/shared", ".gpu/prebuilt"]   command: bash scripts/gpu-check.sh   timeout_s: 480'
else
    echo 'gpu-prepare: carry [".gpu/debs", ".gpu/shared"]   command: bash scripts/gpu-check.sh   timeout_s: 480'
fi
