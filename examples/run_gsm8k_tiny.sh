#!/bin/sh
# GSM8K GRPO end to end on a tiny random model with the Qwen3 tokenizer (what tests/rl/test_trainer_e2e.c
# runs, CI-sized): conversion, training with validation, checkpoint, export. Run from the repository root.
set -e
OUT=${OUT:-/tmp/verlc_gsm8k_tiny}
SHARED=${SHARED:-../shared}
mkdir -p "$OUT/model"
build/verlc data gsm8k --input "$SHARED/data/gsm8k" --out "$OUT/data"
cat > "$OUT/config.json" <<JSON
{"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","vocab_size":151669,"hidden_size":32,
 "num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":16,"intermediate_size":64,
 "max_position_embeddings":1024,"rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":true,
 "bos_token_id":151643,"eos_token_id":151645}
JSON
build/verlc init --config "$OUT/config.json" --out "$OUT/model"
cp "$SHARED/fixtures/tokenizers/qwen3/tokenizer.json" "$SHARED/fixtures/tokenizers/qwen3/tokenizer_config.json" "$OUT/model/"
build/verlc train --config examples/gsm8k_grpo.yaml \
    actor_rollout_ref.model.path="$OUT/model" data.train_files="$OUT/data/train.jsonl" data.val_files="$OUT/data/test.jsonl" \
    data.train_max_samples=64 data.val_max_samples=16 data.train_batch_size=4 data.max_response_length=32 \
    actor_rollout_ref.actor.ppo_mini_batch_size=4 actor_rollout_ref.rollout.n=4 actor_rollout_ref.actor.optim.lr=1e-3 \
    trainer.total_training_steps=4 trainer.test_freq=2 trainer.save_freq=2 trainer.default_local_dir="$OUT/run" "$@"
build/verlc report "$OUT/run"
