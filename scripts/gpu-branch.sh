#!/usr/bin/env bash
# The device `run` call sends the checkout's tracked files, and verlc's own fixtures (tests/fixtures, about 200 MiB)
# do not fit its 64 MiB. This script moves the checkout to a temporary branch that keeps only the fixtures the GPU
# steps of scripts/gpu-check.sh load (a deleted file does not travel), and back:
#   scripts/gpu-branch.sh start   from a clean tree: branch gpu-run, the other fixtures removed in one commit
#   scripts/gpu-branch.sh end     back to the branch it started from, gpu-run deleted (commit fixes there first,
#                                 or cherry-pick them: `git cherry-pick <hash>` on the original branch)
# Then `VC_GPU_MODELS="$(scripts/gpu-branch.sh models)" scripts/gpu-prepare.sh` carries the shared models they load.
set -eu
cd "$(dirname "$0")/.."
# verlc's own fixtures the GPU steps load: test_lora's (and the PEFT files under lora/), test_reward_model's
KEEP_MODELS="gpt2 gpt_oss qwen3_5_text qwen3_next"
KEEP_DIRS="README.md lora models rm veomni"
# the shared models test_lora, test_route and test_head_gather load, and a few more for `verlc check --device cuda`
SHARED_MODELS="qwen3 phi internlm2 qwen1 deepseek_v2 deepseek_v3 qwen3_moe qwen2_moe mixtral llama llama_tied gemma2
 phi3 baichuan2 chatglm3 gemma qwen2 mistral glm qwen3_bf16 llama31_rope"
case ${1:-} in
start)
    [ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "gpu-branch: commit or stash first" >&2; exit 1; }
    from=$(git rev-parse --abbrev-ref HEAD)
    [ "$from" != gpu-run ] || { echo "gpu-branch: already on gpu-run" >&2; exit 1; }
    git checkout -q -b gpu-run
    echo "$from" >"$(git rev-parse --git-dir)/gpu-branch-from"
    for d in tests/fixtures/*; do
        case " $KEEP_DIRS " in *" $(basename "$d") "*) continue ;; esac
        git rm -r -q "$d"
    done
    for d in tests/fixtures/models/*/; do
        case " $KEEP_MODELS " in *" $(basename "$d") "*) continue ;; esac
        git rm -r -q "$d"
        rm -rf "$d" # ignored files left behind would make it look like a fixture there
    done
    git commit -q -m "gpu run: fixtures trimmed to the carry budget (temporary branch, scripts/gpu-branch.sh)"
    echo "gpu-branch: on gpu-run (from $from); now scripts/gpu-prepare.sh with VC_GPU_MODELS=\"\$(scripts/gpu-branch.sh models)\""
    ;;
end)
    f="$(git rev-parse --git-dir)/gpu-branch-from"
    [ "$(git rev-parse --abbrev-ref HEAD)" = gpu-run ] || { echo "gpu-branch: not on gpu-run" >&2; exit 1; }
    [ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "gpu-branch: commit or stash first" >&2; exit 1; }
    from=$(cat "$f" 2>/dev/null || echo main)
    git checkout -q "$from"
    echo "gpu-branch: back on $from; commits made on gpu-run after the trim (cherry-pick them here):"
    git log --oneline "$from"..gpu-run | sed '$d'
    git branch -q -D gpu-run
    rm -f "$f"
    ;;
models) echo $SHARED_MODELS ;;
*)
    echo "usage: scripts/gpu-branch.sh start|end|models" >&2
    exit 2
    ;;
esac
