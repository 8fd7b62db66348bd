/* Checkpoint -> Hugging Face directory: the base model's layout with the trained weights. */
#include "verlc/train.h"
#include <stdlib.h>
#include <string.h>

static vc_status load_base(const char *ckpt, const vc_train_state *s, vc_model **m) {
    char *cfg = s->model_dir[0] ? vc_path_join(s->model_dir, "config.json") : NULL;
    vc_status st;
    if (cfg && vc_file_exists(cfg)) {
        st = vc_model_load(s->model_dir, m);
        free(cfg);
        return st ? vc_fail_ctx(st, "base model %s", s->model_dir) : VC_OK;
    }
    free(cfg);
    /* the base directory is gone: rebuild the structure from the config saved with the checkpoint */
    char *saved = vc_path_join(ckpt, "model_config.json");
    if (!saved) return VC_ERR_NOMEM;
    if (!vc_file_exists(saved))
        st = vc_fail(VC_ERR_MISSING, "%s: base model dir '%s' is gone and the checkpoint has no model_config.json",
                     ckpt, s->model_dir);
    else
        st = vc_model_init_random(saved, 0, m);
    free(saved);
    return st;
}

static vc_status copy_tokenizer(const char *from, const char *dir) {
    static const char *FILES[] = { "tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                                   "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json" };
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        char *src = vc_path_join(from, FILES[i]), *dst = vc_path_join(dir, FILES[i]), *buf = NULL;
        size_t n = 0;
        vc_status st = src && dst ? VC_OK : VC_ERR_NOMEM;
        if (!st && vc_file_exists(src) && !vc_file_exists(dst)) {
            st = vc_read_file(src, &buf, &n);
            if (!st) st = vc_write_file_atomic(dst, buf, n);
        }
        free(src);
        free(dst);
        free(buf);
        if (st) return st;
    }
    return VC_OK;
}

vc_status vc_train_export(const char *ckpt_or_run, const char *out_dir, int dtype) {
    char *ckpt = NULL;
    vc_train_state s;
    vc_model *m = NULL;
    memset(&s, 0, sizeof s);
    vc_status st = vc_train_ckpt_resolve(ckpt_or_run, &ckpt);
    if (!st) st = vc_train_ckpt_read_state(ckpt, &s);
    if (!st) st = load_base(ckpt, &s, &m);
    if (!st) st = vc_train_ckpt_load_weights(ckpt, m);
    if (st) goto out;
    vc_dtype dt = (vc_dtype)dtype;
    if (dtype < 0) {
        dt = vc_model_cfg(m)->dtype;
        if (dt != VC_BF16 && dt != VC_F16) dt = VC_F32;
    }
    st = vc_model_save_hf(m, out_dir, dt);
    if (!st && s.tokenizer_dir[0]) st = copy_tokenizer(s.tokenizer_dir, out_dir);
out:
    vc_model_free(m);
    vc_train_state_clear(&s);
    free(ckpt);
    return st;
}
