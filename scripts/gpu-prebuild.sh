#!/usr/bin/env bash
# The GPU machine's programs, built here: scripts/gpu-check.sh spent 116 and 156 s of the 2026-12-04 lease's 15 device
# minutes compiling verlc (each `run` call starts a fresh machine, so each call compiled it again). This script builds
# the programs gpu-check.sh runs (verlc, the CUDA test programs, the other tests it runs on the GPU, test_dist) with the
# CUDA backend against a shared libverlc.so (VC_SHARED_LIB: the programs find it by a path relative to themselves), for
# any x86-64 CPU with AVX2 and FMA (VC_MARCH=x86-64-v3: -march=native here could use what the GPU host lacks), without
# FFmpeg and libcurl (the GPU machine has neither), with sm_90 SASS only (no PTX: the H200 runs the SASS; 2.6 MiB
# packed instead of 6.3), strips them and packs them into .gpu/prebuilt/programs.tar.xz with a digest of the sources
# they were built from (.gpu/prebuilt/SOURCES) and their configure's summary lines (.gpu/prebuilt/CONFIG). gpu-check.sh
# unpacks them when the digest of its checkout's sources is the same and every library they need is found there (ldd),
# and builds as before otherwise. Carry .gpu/prebuilt beside .gpu/debs and .gpu/shared. Same toolkit here as there
# (nvcc 13.0 on 2026-12-04). Run it after the last commit, before or after scripts/gpu-branch.sh start (the digest
# leaves the fixtures out), and before scripts/gpu-prepare.sh (which counts its size in the carry budget).
#   usage: scripts/gpu-prebuild.sh     (VC_GPU_PREBUILD_DIR: the build folder, default build-gpu-pre)
set -eu
cd "$(dirname "$0")/.."
B=${VC_GPU_PREBUILD_DIR:-build-gpu-pre}
OUTD=.gpu/prebuilt
mkdir -p .gpu
GEN=""
command -v ninja >/dev/null 2>&1 && [ ! -f "$B/CMakeCache.txt" ] && GEN="-G Ninja"
# shellcheck disable=SC2086
cmake -S . -B "$B" $GEN -DCMAKE_BUILD_TYPE=Release -DVC_CUDA=ON -DVC_SHARED_LIB=ON -DVC_FFMPEG=OFF -DVC_CURL=OFF \
    -DVC_MARCH=x86-64-v3 -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON >"$OUTD.configure.log" 2>&1 || { tail -n 20 "$OUTD.configure.log"; exit 1; }
T=$(scripts/gpu-programs.sh targets)
# shellcheck disable=SC2086
cmake --build "$B" -j"$(nproc)" --target $T
rm -rf "$OUTD" && mkdir -p "$OUTD/stage/tests"
cp "$B/verlc" "$B/libverlc.so" "$OUTD/stage/"
for t in $T; do
    [ "$t" = verlc_bin ] && continue
    cp "$B/tests/$t" "$OUTD/stage/tests/"
done
strip --strip-unneeded "$OUTD"/stage/verlc "$OUTD"/stage/libverlc.so "$OUTD"/stage/tests/*
(cd "$OUTD/stage" && tar -cf - verlc libverlc.so tests | xz -T0 -6 >../programs.tar.xz)
rm -rf "$OUTD/stage"
scripts/gpu-programs.sh digest >"$OUTD/SOURCES"
grep "^-- verlc" "$OUTD.configure.log" >"$OUTD/CONFIG" || true # (gpu-check.sh reads its communicators line)
echo "gpu-prebuild: $OUTD/programs.tar.xz ($(du -k "$OUTD/programs.tar.xz" | cut -f1) KiB)," \
    "sources $(cat "$OUTD/SOURCES")"
echo "gpu-prebuild: carry .gpu/prebuilt beside .gpu/debs and .gpu/shared"
