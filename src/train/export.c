/* Checkpoint -> Hugging Face directory: the base model's layout with the trained weights. */
#include "verlc/safetensors.h"
#include "verlc/train.h"
#include <stdlib.h>
#include <string.h>

/* 1 when the checkpoint's weights hold trained multi-token-prediction rows (an SFT or RL run's model.mtp.enable_train) */
static int trained_mtp(const char *ckpt) {
    char *p = vc_path_join(ckpt, "model.safetensors");
    vc_checkpoint *ck = NULL;
    int mtp = 0;
    if (p && !vc_ckpt_open(p, &ck))
        for (int i = 0; i < vc_ckpt_count(ck) && !mtp; i++) mtp = strstr(vc_ckpt_at(ck, i)->name, ".mtp.proj") != NULL;
    vc_clear_error();
    vc_ckpt_close(ck);
    free(p);
    return mtp;
}

static vc_status load_base(const char *ckpt, const vc_train_state *s, vc_model **m) {
    char *cfg = s->model_dir[0] ? vc_path_join(s->model_dir, "config.json") : NULL;
    vc_status st;
    if (cfg && vc_file_exists(cfg)) {
        st = trained_mtp(ckpt) ? vc_model_load_mtp(s->model_dir, m) : vc_model_load(s->model_dir, m);
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
        st = vc_model_init_random_ex(saved, 0, trained_mtp(ckpt), m); /* (MTP rows as the run had them) */
    free(saved);
    return st;
}

vc_status vc_train_export(const char *ckpt_or_run, const char *out_dir, int dtype) {
    char *ckpt = NULL;
    vc_train_state s;
    vc_model *m = NULL;
    memset(&s, 0, sizeof s);
    vc_status st = vc_train_ckpt_resolve(ckpt_or_run, &ckpt);
    if (!st) st = vc_train_ckpt_read_state(ckpt, &s);
    if (!st) st = load_base(ckpt, &s, &m);
    char *ad = st ? NULL : vc_path_join(ckpt, "lora_adapter");
    if (!st && !ad) st = VC_ERR_NOMEM;
    if (!st && vc_file_exists(ad)) st = vc_model_lora_attach_from(m, ad); /* a LoRA run: merged on export */
    free(ad);
    if (!st) st = vc_train_ckpt_load_weights(ckpt, m);
    if (st) goto out;
    vc_dtype dt = (vc_dtype)dtype;
    if (dtype < 0) {
        dt = vc_model_cfg(m)->dtype;
        if (dt != VC_BF16 && dt != VC_F16) dt = VC_F32;
    }
    st = vc_model_save_hf_merged(m, out_dir, dt);
    if (!st && s.tokenizer_dir[0]) st = vc_model_copy_side_files(s.tokenizer_dir, out_dir, 0);
out:
    vc_model_free(m);
    vc_train_state_clear(&s);
    free(ckpt);
    return st;
}
