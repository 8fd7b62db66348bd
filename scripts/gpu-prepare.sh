#!/usr/bin/env bash
# verlc GPU run preparation: run HERE (a Debian machine with apt) before a device `run` call.
# The GPU machine has no network and perhaps none of the Debian -dev packages verlc builds against,
# and the ../shared folder beside the checkout does not travel. This script fills the ignored folder
# .gpu/ in the repository root with what scripts/gpu-check.sh needs there:
#   .gpu/debs/    the .deb files (apt-get download, nothing installed) of the build and runtime
#                 packages: OpenBLAS (pthread flavour, its libgfortran5/libquadmath0 runtime),
#                 Oniguruma, utf8proc, cJSON, libyaml and pkgconf; gpu-check.sh unpacks them with
#                 `dpkg -x` into .gpu/root (never into /) when the machine lacks the dependencies.
#   .gpu/shared/  configs/ and fixtures/models/ copied from ../shared (or $VERLC_SHARED). The models
#                 are chosen to fit the carry budget: first the smallest model of every model_type
#                 (architecture family), then the others smallest first while the total stays under
#                 VC_GPU_CARRY_MB (default 52 MiB, of the 64 MiB a call may carry, repository included).
# Prints the sizes, the models left out, and the exact `carry` list for the device `run` call.
#   usage: scripts/gpu-prepare.sh          (from anywhere; VC_GPU_CARRY_MB, VERLC_SHARED optional)
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)
G="$ROOT/.gpu"
SHARED=${VERLC_SHARED:-$ROOT/../shared}
CAP_MB=${VC_GPU_CARRY_MB:-52}
PKGS="libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread libgfortran5 libquadmath0
 libonig-dev libonig5 libutf8proc-dev libutf8proc2 libcjson-dev libcjson1 libyaml-dev libyaml-0-2
 pkgconf pkgconf-bin libpkgconf3 pkg-config"

[ -d "$SHARED/fixtures/models" ] || { echo "gpu-prepare: no fixtures under $SHARED (set VERLC_SHARED)" >&2; exit 1; }
grep -qs '^/\.gpu/' .gitignore || git check-ignore -q .gpu/x ||
    { echo "gpu-prepare: .gpu/ is not ignored by git (add /.gpu/ to .gitignore)" >&2; exit 1; }
mkdir -p "$G"

# ---- (a) the .deb files -------------------------------------------------------------------------
rm -rf "$G/debs" "$G/root" && mkdir -p "$G/debs" # .gpu/root: a stale unpack by gpu-check.sh
# shellcheck disable=SC2086
if ! (cd "$G/debs" && apt-get download -q $PKGS >/dev/null 2>"$G/apt.log"); then
    # no usable package lists: a private apt state folder (no root needed)
    echo "gpu-prepare: apt-get download failed ($(tail -n 1 "$G/apt.log")); updating private lists" >&2
    st=$(mktemp -d)
    mkdir -p "$st/lists/partial" "$st/cache/archives/partial"
    o="-oDir::State::Lists=$st/lists -oDir::Cache=$st/cache -oDebug::NoLocking=1"
    # shellcheck disable=SC2086
    apt-get $o update -q >/dev/null && (cd "$G/debs" && apt-get $o download -q $PKGS >/dev/null)
    rm -rf "$st"
fi
rm -f "$G/apt.log"
# every direct dependency is either carried or part of any glibc system (libc6, libgcc-s1, gcc-*-base)
for d in "$G"/debs/*.deb; do
    dpkg-deb -f "$d" Depends | tr ',|' '\n\n' | sed 's/(.*)//; s/:any//; s/ //g' | grep -v '^$'
done | sort -u | while read -r dep; do
    case " $(echo $PKGS) " in *" $dep "*) continue ;; esac
    case $dep in libc6 | libgcc-s1 | gcc-*-base | libopenblas-openmp-dev | libopenblas-serial-dev | \
        libopenblas0-openmp | libopenblas0-serial) continue ;; esac
    echo "gpu-prepare: note: dependency $dep is not carried" >&2
done

# ---- (b) the fixtures and configs ---------------------------------------------------------------
rm -rf "$G/shared" && mkdir -p "$G/shared/fixtures/models"
cp -r "$SHARED/configs" "$G/shared/configs"
kib() { du -sk "$@" | awk '{s += $1} END {print s + 0}'; }
repo_k=$(git ls-files -co --exclude-standard -z | du -ck --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
used=$((repo_k + $(kib "$G/debs" "$G/shared")))
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
nmod=$(ls "$G/shared/fixtures/models" | wc -l)
echo "gpu-prepare: .gpu/debs   $(kib "$G/debs") KiB, $ndeb packages: $(cd "$G/debs" && ls | sed 's/_.*//' | tr '\n' ' ')"
echo "gpu-prepare: .gpu/shared $(kib "$G/shared") KiB: configs + $nmod fixture models"
[ -n "$left_out" ] && echo "gpu-prepare: models left out to stay under $CAP_MB MiB:$left_out"
echo "gpu-prepare: repository (tracked + untracked, not ignored) $repo_k KiB"
echo "gpu-prepare: total to travel $((repo_k + $(kib "$G/debs" "$G/shared"))) KiB (limit 65536 KiB)"
echo 'gpu-prepare: carry [".gpu/debs", ".gpu/shared"]   command: bash scripts/gpu-check.sh   timeout_s: 500'
