/* `verlc demo`: RL on a fresh machine with no download. A tiny llama-style model with a character-level
 * tokenizer (written as tokenizer.json) learns 2-digit addition ("37+45=" -> "82"): a short supervised
 * warm-up leaves it imperfect, then GRPO through the real trainer (vc_rl_trainer_*) raises its validation
 * accuracy. Writes RUN_DIR with the SFT model, datasets, metrics.jsonl and report.html. */
#include "demo_internal.h"
#include "verlc/ops.h"
#include "verlc/report.h"
#include "verlc/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char DEMO_CHARS[] = "0123456789+=";

static vc_status write_text(const char *dir, const char *name, const char *text) {
    char *p = vc_path_join(dir, name);
    vc_status st = p ? vc_write_file_atomic(p, text, strlen(text)) : VC_ERR_NOMEM;
    free(p);
    return st;
}

/* tokenizer.json: <pad>=0, <eos>=1, then one token per character; BPE without merges, Fuse decoder */
vc_status demo_write_tokenizer(const char *dir) {
    char vocab[1024], *v = vocab;
    v += sprintf(v, "{\"<pad>\":0,\"<eos>\":1");
    for (int i = 0; DEMO_CHARS[i]; i++) v += sprintf(v, ",\"%c\":%d", DEMO_CHARS[i], i + 2);
    sprintf(v, "}");
    char tok[4096];
    snprintf(tok, sizeof tok,
             "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":["
             "{\"id\":0,\"content\":\"<pad>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},"
             "{\"id\":1,\"content\":\"<eos>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true}],"
             "\"normalizer\":null,\"pre_tokenizer\":null,\"post_processor\":null,\"decoder\":{\"type\":\"Fuse\"},"
             "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
             "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":%s,\"merges\":[]}}",
             vocab);
    vc_status st = write_text(dir, "tokenizer.json", tok);
    if (!st)
        st = write_text(dir, "tokenizer_config.json",
                        "{\"eos_token\":\"<eos>\",\"pad_token\":\"<pad>\",\"model_max_length\":64,"
                        "\"chat_template\":\"{% for m in messages %}{{ m['content'] }}{% endfor %}\"}");
    return st;
}

vc_status demo_write_model_config(const char *path, int vocab) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"vocab_size\":%d,\"hidden_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":4,\"num_key_value_heads\":4,\"intermediate_size\":%d,"
             "\"max_position_embeddings\":64,\"rms_norm_eps\":1e-5,\"rope_theta\":10000,\"hidden_act\":\"silu\","
             "\"tie_word_embeddings\":true,\"eos_token_id\":1,\"pad_token_id\":0,\"torch_dtype\":\"float32\"}",
             vocab, DEMO_HIDDEN, DEMO_LAYERS, DEMO_INTER);
    return vc_write_file_atomic(path, cfg, strlen(cfg));
}

/* problem k of a split: a + b with a, b in [10, 99], keyed by (seed, split, k) */
void demo_problem(uint64_t seed, int split, int k, int *a, int *b) {
    *a = 10 + (int)vc_rng_below(90, seed, 0xADD, (uint64_t)split, (uint64_t)(2 * k));
    *b = 10 + (int)vc_rng_below(90, seed, 0xADD, (uint64_t)split, (uint64_t)(2 * k + 1));
}

vc_status demo_write_dataset(const char *path, uint64_t seed, int split, int n) {
    size_t cap = (size_t)n * 200 + 1;
    char *buf = vc_malloc(cap), *p = buf;
    if (!buf) return VC_ERR_NOMEM;
    for (int k = 0; k < n; k++) {
        int a, b;
        demo_problem(seed, split, k, &a, &b);
        p += sprintf(p,
                     "{\"data_source\":\"verlc/addition\",\"prompt\":[{\"role\":\"user\",\"content\":\"%d+%d=\"}],"
                     "\"ability\":\"math\",\"reward_model\":{\"style\":\"rule\",\"ground_truth\":\"%d\"},"
                     "\"extra_info\":{\"split\":\"%s\",\"index\":%d}}\n",
                     a, b, a + b, split ? "test" : "train", k);
    }
    vc_status st = vc_write_file_atomic(path, buf, (size_t)(p - buf));
    free(buf);
    return st;
}

/* token id of a demo character */
int demo_tok(char c) {
    const char *s = strchr(DEMO_CHARS, c);
    return s && c ? (int)(s - DEMO_CHARS) + 2 : 0;
}

int demo_encode(const char *text, int32_t *ids) {
    int n = 0;
    for (; *text; text++) ids[n++] = demo_tok(*text);
    return n;
}

void demo_decode(const int32_t *ids, int n, char *out) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 2 && ids[i] < 2 + (int)strlen(DEMO_CHARS)) out[k++] = DEMO_CHARS[ids[i] - 2];
    out[k] = 0;
}
