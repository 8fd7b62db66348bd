/* Helpers of the RL tests that run `verlc train` (test_trainer_e2e.c, test_rl_device.c, rl_dp_util.h):
 * the binary, shared folder and temp folder, and the common setup: GSM8K rows converted by `verlc data
 * gsm8k` and a tiny random Qwen3 with the real Qwen3 tokenizer's vocabulary at <dir>/model. Static
 * functions: each test program includes this header once. */
#ifndef VC_RL_CLI_UTIL_H
#define VC_RL_CLI_UTIL_H
#include "cli_util.h"
#include "verlc/safetensors.h"
#include "verlc/tokenizer.h"

#include "vl_cfg.h" /* RL_CLI_QWEN2_VL_CFG */

static char dir[256], bin[512], shared[512];

/* bin, shared and dir = /tmp/verlc_<tag>_<pid> */
static inline void rl_cli_start(const char *tag) {
    snprintf(bin, sizeof bin, "%s", cli_bin());
    snprintf(shared, sizeof shared, "%s", vc_test_shared());
    cli_tmpdir(dir, sizeof dir, tag);
}

/* 1 when tensor `name` holds the same bytes in both checkpoints (files or folders), 0 when not, -1 when either lacks it */
static inline int cli_same_tensor(const char *a, const char *b, const char *name) {
    vc_checkpoint *x = NULL, *y = NULL;
    int same = -1;
    if (!vc_ckpt_open(a, &x) && !vc_ckpt_open(b, &y)) {
        const vc_st_tensor *s = vc_ckpt_find(x, name), *t = vc_ckpt_find(y, name);
        if (s && t && s->nbytes == t->nbytes) same = !memcmp(s->data, t->data, s->nbytes);
    }
    vc_ckpt_close(x);
    vc_ckpt_close(y);
    return same;
}

/* the Qwen3 tokenizer's vocabulary size (the fixture's, or Qwen3's when it cannot be read) */
static inline int rl_cli_vocab(void) {
    char tdir[600];
    snprintf(tdir, sizeof tdir, "%s/fixtures/tokenizers/qwen3", shared);
    vc_tokenizer *tok = NULL;
    CHECK_OK(vc_tokenizer_load(tdir, &tok));
    int vocab = tok ? vc_tokenizer_vocab_size(tok) : 151669;
    vc_tokenizer_free(tok);
    return vocab;
}

/* <dir>/<sub>: `verlc init` of the config.json text cfg (seed 7) with the Qwen3 tokenizer files */
static inline void rl_cli_init_model(const char *sub, const char *cfg) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s_config.json", dir, sub);
    CHECK_OK(vc_write_file_atomic(path, cfg, strlen(cfg)));
    CHECK(cli_sh("%s init --config %s --out %s/%s --seed 7 > /dev/null && cp %s/fixtures/tokenizers/qwen3/tokenizer.json "
                 "%s/fixtures/tokenizers/qwen3/tokenizer_config.json %s/%s/", bin, path, dir, sub, shared, shared, dir,
                 sub) == 0);
}

/* <dir>/<sub>: an image-text family's model from config template tmpl (%d: the vocabulary) with the Qwen3 tokenizer,
 * its image tokens <|image_pad|>, <|vision_start|>, <|vision_end|> renamed pad, start, end, and the processor and chat
 * template of tests/fixtures/vision/<fix> */
static inline void rl_cli_vl_model(const char *sub, const char *tmpl, const char *fix, const char *pad, const char *start,
                                   const char *end) {
    char cfg[4096];
    CHECK(cli_sh("mkdir -p %s/%s", dir, sub) == 0);
    snprintf(cfg, sizeof cfg, tmpl, rl_cli_vocab());
    rl_cli_init_model(sub, cfg);
    CHECK(cli_sh("cp tests/fixtures/vision/%s/chat_template.jinja tests/fixtures/vision/%s/preprocessor_config.json "
                 "%s/%s/ && { ! test -f tests/fixtures/vision/%s/processor_config.json || cp "
                 "tests/fixtures/vision/%s/processor_config.json %s/%s/; } && sed -i 's#<|image_pad|>#%s#g; s#<|vision_start|>#%s#g; s#<|vision_end|>#%s#g' "
                 "%s/%s/tokenizer.json %s/%s/tokenizer_config.json", fix, fix, dir, sub, fix, fix, dir, sub, pad, start, end,
                 dir, sub, dir, sub) == 0);
}

/* <dir>/data from the shared GSM8K rows; <dir>/model: a Qwen3 of the given sizes (2 query heads, 1 KV
 * head, tied embeddings, seed 7) with the Qwen3 tokenizer files */
static inline void rl_cli_setup(int hidden, int layers, int head_dim, int inter) {
    CHECK(cli_sh("mkdir -p %s/model", dir) == 0);
    CHECK(cli_sh("%s data gsm8k --input %s/data/gsm8k --out %s/data > %s/data.log 2>&1", bin, shared, dir, dir) == 0);
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"Qwen3ForCausalLM\"],\"model_type\":\"qwen3\",\"vocab_size\":%d,\"hidden_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":%d,"
             "\"intermediate_size\":%d,\"max_position_embeddings\":1024,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000,"
             "\"hidden_act\":\"silu\",\"tie_word_embeddings\":true,\"bos_token_id\":151643,\"eos_token_id\":151645,"
             "\"torch_dtype\":\"float32\"}", rl_cli_vocab(), hidden, layers, head_dim, inter);
    rl_cli_init_model("model", cfg);
}
/* `verlc train` on one device for the device-comparison tests (test_rl_device.c, tests/cuda/
 * test_cuda_train.c): 8 GSM8K rows, batch 2 x n=2, 4 response tokens, entropy bonus, then `extra`; the run
 * goes to <dir>/<name>_<device>, its log to <dir>/<name>_<device>.log */
static inline void rl_cli_train_on(const char *name, const char *extra, const char *device) {
    static const char *common =
        "data.train_files=%s/data/train.jsonl data.val_files=%s/data/test.jsonl data.train_max_samples=8 "
        "data.val_max_samples=2 data.train_batch_size=2 data.max_prompt_length=256 data.max_response_length=4 "
        "data.filter_overlong_prompts=true actor_rollout_ref.model.path=%s/model actor_rollout_ref.actor.optim.lr=1e-3 "
        "actor_rollout_ref.actor.ppo_mini_batch_size=2 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
        "actor_rollout_ref.actor.entropy_coeff=0.01 actor_rollout_ref.rollout.n=2 "
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 trainer.logger=['console'] "
        "trainer.n_gpus_per_node=1 trainer.val_before_train=False trainer.test_freq=-1 ";
    char keys[2048];
    snprintf(keys, sizeof keys, common, dir, dir, dir);
    CHECK_MSG(cli_sh("%s train %s %s trainer.device=%s trainer.default_local_dir=%s/%s_%s > %s/%s_%s.log 2>&1", bin, keys,
                     extra, device, dir, name, device, dir, name, device) == 0,
              "%s on %s failed; see %s/%s_%s.log", name, device, dir, name, device);
}

/* the metrics file (what 0) or exported weights (what 1) of rl_cli_train_on(name, ..., device) */
static inline void rl_cli_out(char *buf, size_t n, const char *name, const char *device, int what) {
    snprintf(buf, n, "%s/%s_%s/%s", dir, name, device, what ? "hf_model/model.safetensors" : "metrics.jsonl");
}
#endif
