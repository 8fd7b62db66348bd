/* verl's QAT settings (QATEngineConfig: actor_rollout_ref.actor.fsdp_config.qat.*, the SFT trainer's engine.qat.*)
 * onto a model (vc_model_qat): mode w4a16, group_size, ignore_patterns; quantization_config_path, the JSON verl hands
 * vLLM for its NVFP4 weights, read and checked where given (verlc's rollout computes with the training's quantized
 * weights and needs nothing from it). */
#include "verlc/config.h"
#include "verlc/json.h"
#include "verlc/model.h"
#include "verlc/train.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static vc_status check_quant_config(const char *path, const char *key) {
    cJSON *j = NULL;
    vc_status st = vc_json_load_file(path, &j);
    if (st) return vc_fail_ctx(st, "%s", key);
    const char *qm = NULL;
    st = vc_json_req_str(j, "quant_method", &qm, path);
    if (!st && strcmp(qm, "compressed-tensors") && strcmp(qm, "modelopt"))
        st = vc_fail(VC_ERR_UNSUPPORTED, "%s: quant_method \"%s\": verl's QAT hands vLLM compressed-tensors or modelopt "
                     "NVFP4 weights", path, qm);
    cJSON_Delete(j);
    return st;
}

vc_status vc_qat_setup(vc_model *m, const vc_qat_opts *o, const char *prefix, int zero3, int say) {
    if (!o->enable) return VC_OK;
    const char *mode = o->mode ? o->mode : "w4a16";
    if (!strcasecmp(mode, "w4a4"))
        return vc_fail(VC_ERR_UNSUPPORTED, "%smode=w4a4 (activations quantized too; verl marks it experimental and not "
                       "recommended) is not built: use w4a16", prefix);
    if (strcasecmp(mode, "w4a16")) return vc_fail(VC_ERR_ARG, "%smode=%s: w4a16 (or verl's w4a4)", prefix, mode);
    if (zero3) return vc_fail(VC_ERR_UNSUPPORTED, "%senable with ZeRO-3 (weights sharded over ranks) is not built", prefix);
    char key[200];
    snprintf(key, sizeof key, "%squantization_config_path", prefix);
    vc_status st = o->quant_config && *o->quant_config ? check_quant_config(o->quant_config, key) : VC_OK;
    if (st) return st;
    vc_qat_spec s = { (int)o->group_size, (const char *const *)o->ignore, o->n_ignore };
    if (o->group_size < 1 || o->group_size > 256)
        return vc_fail(VC_ERR_ARG, "%sgroup_size=%lld: 1 to 256 (NVFP4's is 16)", prefix, (long long)o->group_size);
    if ((st = vc_model_qat(m, &s))) return vc_fail_ctx(st, "%senable", prefix);
    if (say)
        vc_info("qat: %d linear modules fake-quantized to NVFP4 (w4a16, groups of %lld), the others as they are",
                vc_model_qat_modules(m), (long long)o->group_size);
    return VC_OK;
}

void vc_qat_opts_free(vc_qat_opts *o) {
    for (int i = 0; i < o->n_ignore; i++) free(o->ignore[i]);
    free(o->ignore);
    o->ignore = NULL;
    o->n_ignore = 0;
}

vc_status vc_qat_opts_read(const vc_config *cfg, const char *prefix, vc_qat_opts *o) {
    memset(o, 0, sizeof *o);
    o->group_size = 16;
    char k[200];
#define KEY(name) (snprintf(k, sizeof k, "%s%s", prefix, name), k)
    vc_status st = vc_config_get_bool_or(cfg, KEY("enable"), 0, &o->enable);
    if (!st) st = vc_config_get_str_or(cfg, KEY("mode"), "w4a16", &o->mode);
    if (!st) st = vc_config_get_int_or(cfg, KEY("group_size"), 16, &o->group_size);
    if (!st) st = vc_config_get_str_or(cfg, KEY("quantization_config_path"), NULL, &o->quant_config);
    size_t n = 0;
    int have = !st && vc_config_has(cfg, KEY("ignore_patterns"));
    if (have) st = vc_config_list_len(cfg, k, &n);
    else if (!st) n = 3; /* verl's default */
    o->ignore = st ? NULL : calloc(n ? n : 1, sizeof *o->ignore);
    if (!st && !o->ignore) st = vc_fail(VC_ERR_NOMEM, "%s", k);
    static const char *const DEF[] = { "lm_head", "embed_tokens", "re:.*mlp.gate$" };
    for (size_t i = 0; !st && i < n; i++) {
        const char *v = DEF[i < 3 ? i : 0];
        if (have) st = vc_config_list_str(cfg, KEY("ignore_patterns"), i, &v);
        if (!st && !(o->ignore[o->n_ignore++] = strdup(v ? v : ""))) st = vc_fail(VC_ERR_NOMEM, "%s", k);
    }
#undef KEY
    if (st) vc_qat_opts_free(o);
    return st;
}
