#!/usr/bin/env bash
# What scripts/gpu-check.sh builds (or takes prebuilt from scripts/gpu-prebuild.sh), said in one place:
#   scripts/gpu-programs.sh targets   the CMake targets: verlc, the CUDA test programs, the other tests run on the GPU
#                                     (LoRA, router replay, the chunked head, shared prompt states, reward models, MTP
#                                     training) and
#                                     test_dist
#   scripts/gpu-programs.sh digest    a digest of the sources they are built from (the C, C++ and CUDA files and CMake
#                                     lists under src, tools, include and tests, fixtures left out): the same on the GPU
#                                     machine's copy of the checkout as here when nothing changed between
set -eu
cd "$(dirname "$0")/.."
case ${1:-} in
targets)
    t="verlc_bin dist_test_dist"
    for f in tests/cuda/test_*.c; do t="$t cuda_$(basename "$f" .c)"; done
    echo "$t model_test_lora model_test_route model_test_head_gather model_test_share rl_test_reward_model train_test_mtp infer_test_spec"
    ;;
digest)
    {
        echo CMakeLists.txt
        find src tools include tests -path tests/fixtures -prune -o -type f \( -name '*.c' -o -name '*.h' \
            -o -name '*.cu' -o -name '*.cpp' -o -name '*.inc' -o -name CMakeLists.txt \) -print
    } | LC_ALL=C sort | while read -r f; do printf '%s ' "$f"; sha1sum <"$f"; done | sha1sum | cut -c1-40
    ;;
*)
    echo "usage: scripts/gpu-programs.sh targets|digest" >&2
    exit 2
    ;;
esac
