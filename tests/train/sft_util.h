/* Helpers of the `verlc sft` CLI tests (test_sft_cli.c, test_sft_device.c): a command runner whose
 * format names the binary, temp folder and shared folder by position, and the common start: the temp
 * folder and a tiny random Qwen3 (vocabulary covering the Qwen3 tokenizer's 151669 ids) at TMP/model.
 * Static functions: each test program includes this header once. */
#ifndef VC_SFT_UTIL_H
#define VC_SFT_UTIL_H
#include "cli_util.h"

static char TMP[256];
static const char *BIN;

/* runs fmt with %1$s = verlc, %2$s = TMP, %3$s = the shared folder, %4$s = extra (NULL: "") */
static inline int sh(const char *fmt, const char *extra) {
    return cli_sh(fmt, BIN, TMP, vc_test_shared(), extra ? extra : "");
}

/* BIN, TMP = /tmp/verlc_<tag>_<pid>, created; TMP/model: 1 layer, hidden 16, seed 3 */
static inline void sft_start(const char *tag) {
    BIN = cli_bin();
    cli_tmpdir(TMP, sizeof TMP, tag);
    char cfg[512];
    snprintf(cfg, sizeof cfg, "mkdir -p %s", TMP);
    CHECK(system(cfg) == 0);
    snprintf(cfg, sizeof cfg, "%s/tiny.json", TMP);
    const char *json = "{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", \"vocab_size\": 151680, "
                       "\"hidden_size\": 16, \"intermediate_size\": 32, \"num_hidden_layers\": 1, "
                       "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 8, "
                       "\"max_position_embeddings\": 256, \"rms_norm_eps\": 1e-6, \"rope_theta\": 10000.0, "
                       "\"tie_word_embeddings\": true, \"eos_token_id\": 151645, \"torch_dtype\": \"float32\"}";
    CHECK_OK(vc_write_file_atomic(cfg, json, strlen(json)));
    CHECK(sh("%1$s init --config %2$s/tiny.json --out %2$s/model --seed 3 > /dev/null%4$s", NULL) == 0);
}
#endif
