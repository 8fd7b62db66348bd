#!/usr/bin/env bash
# Fuzzing campaign (outside CI): builds libverlc with clang's libFuzzer coverage, AddressSanitizer and UBSan in
# build-fuzz/, links every harness tests/*/fuzz_*.c against it and runs each for SECONDS (default 60), one job at a
# time, continuing past findings. Findings land in build-fuzz/findings/NAME/ (crash-*, timeout-*, oom-*, leak-*),
# each a reproducer: build-fuzz/fuzz_NAME FILE. Exit status 1 when any harness found something.
#   scripts/fuzz.sh [SECONDS] [NAME...]     (NAME: reward, dataset, chat, jinja, config, lora, overrides, safetensors,
#                                           image, vlproc, vidproc, video, tok, parquet, torch_bin; a harness with a NAME.dict beside it
#                                           runs with that dictionary)
# Run from the repository root; the shared fixtures are read from $VERLC_SHARED (default ../shared).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=60
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then SECS=$1; shift; fi
B=build-fuzz
export VERLC_SHARED=${VERLC_SHARED:-../shared}
command -v clang >/dev/null || { echo "fuzz.sh: clang is needed (apt-get install clang)" >&2; exit 2; }

if [[ ! -f $B/build.ninja ]]; then
    mkdir -p $B
    CC=clang cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Debug -DVC_CUDA=OFF -DVC_CURL=OFF \
        -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -O1 -g" >$B/cmake.log 2>&1 ||
        { echo "fuzz.sh: cmake failed, see $B/cmake.log" >&2; exit 2; }
fi
ninja -C $B verlc >/dev/null
# the program's link line gives the libraries libverlc.a needs
LIBS=$(ninja -C $B -t commands verlc | tail -1 | sed 's/.* -o verlc //; s/&&.*//; s/libverlc\.a/'"$B"'\/libverlc.a/')

# seeds per harness: a folder (files as they are) or, with a leading byte, fixture files
seed() { # name dir
    local n=$1 d=$2
    mkdir -p "$d"
    case $n in
    reward) cp tests/rl/fuzz_reward_seeds/* "$d" ;;
    dataset) cp tests/rl/fuzz_dataset_seeds/* "$d" ;;
    chat) cp tests/tokenizer/fuzz_chat_seeds/* "$d" ;;
    jinja) cp tests/tokenizer/fuzz_jinja_seeds/* "$d" ;;
    overrides) cp tests/config/fuzz_overrides_seeds/* "$d" ;;
    lora) cp tests/model/fuzz_lora_seeds/* "$d" ;;
    video) cp tests/fixtures/vision/video/*.mp4 tests/fixtures/vision/video/*.avi tests/fixtures/vision/video/*.webm "$d" ;;
    tok) cp tests/tokenizer/corpus/* "$d" ;;
    config) for f in tests/fixtures/models/*/config.json "$VERLC_SHARED"/fixtures/models/*/config.json; do
        if [[ -f $f ]]; then cp "$f" "$d/$(basename "$(dirname "$f")")"; fi; done ;;
    parquet) cp tests/fixtures/parquet/*.parquet tests/fixtures/vision/dataset/rows_hf*.parquet "$d" ;;
    torch_bin) cp $(find tests/fixtures/torch_bin -name "*.bin") "$d"
        for f in tests/fixtures/verl_ckpt/*/model_world_size_*_rank_0.pt; do cp "$f" "$d/verl_$(basename "$(dirname "$f")").pt"; done ;;
    safetensors) find tests/fixtures -name "*.safetensors" -size -64k | head -20 | while read -r f; do
        cp "$f" "$d/$(echo "$f" | tr / _)"; done ;;
    vlproc) find tests/fixtures "$VERLC_SHARED"/fixtures -name preprocessor_config.json | while read -r f; do
        { printf '\x25\x31\x83'; cat "$f"; } >"$d/$(echo "$f" | tr / _)"; done ;;
    vidproc) find tests/fixtures "$VERLC_SHARED"/fixtures -name "*preprocessor_config.json" | while read -r f; do
        { printf '\x2f\x1b\x81\x05\x21\x00\x40\x03\x05\x30\x50\x03'; cat "$f"; } >"$d/$(echo "$f" | tr / _)"; done ;;
    image) for f in tests/fixtures/vision/images/*; do
        if [[ $(stat -c %s "$f") -lt 20000 ]]; then { printf '\0'; cat "$f"; } >"$d/$(basename "$f")"; fi; done ;;
    esac
}

found=0
ALL="reward dataset chat jinja config lora overrides safetensors image vlproc vidproc video tok parquet torch_bin"
for n in ${*:-$ALL}; do
    src=$(ls tests/*/fuzz_"$n".c 2>/dev/null | head -1)
    [[ -n $src ]] || { echo "fuzz.sh: no harness tests/*/fuzz_$n.c" >&2; exit 2; }
    clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc "$src" $LIBS -lpthread -o $B/fuzz_"$n"
    corpus=$B/corpus/$n out=$B/findings/$n
    [[ -d $corpus ]] || seed "$n" "$corpus"
    mkdir -p "$out"
    before=$(ls "$out" | wc -l)
    dict=${src%.c}.dict
    [[ -f $dict ]] && dictarg=(-dict="$dict") || dictarg=()
    $B/fuzz_"$n" "${dictarg[@]}" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=4096 -max_len=16384 -fork=1 -ignore_crashes=1 \
        -ignore_timeouts=1 -ignore_ooms=1 -artifact_prefix="$out/" "$corpus" >$B/fuzz_"$n".log 2>&1 || true
    runs=$(grep -o '^#[0-9]*' $B/fuzz_"$n".log | tail -1 | tr -d '#')
    new=$(($(ls "$out" | wc -l) - before))
    echo "fuzz $n: ${runs:-0} inputs in ${SECS} s, $new new finding(s) in $out (log $B/fuzz_$n.log)"
    [[ $new -eq 0 ]] || found=1
done
exit $found
