/* Muon's view of the parameters (verl's megatron optim.optimizer=muon): Megatron-core's get_megatron_muon_optimizer
 * gives Muon the 2-D weights other than the embeddings and the output layer (AdamW the rest), and orthogonalises
 * each of Megatron's modules whole: its fused linear_fc1 ([gate; up], per expert for the grouped experts), the Gated
 * DeltaNet's in_proj ([qkv; z; b; a]) and, with muon_split_qkv=false, linear_qkv ([q; k; v], with Qwen3-Next's and
 * Qwen3.5's output gate rows). With muon_split_qkv (Megatron-core 0.16 splits linear_qkv by [q, k, v] sizes per
 * query group, which does not fit the gated layout's rows) q, the gate, k and v are orthogonalised apart. */
#include "arch.h"
#include "model_internal.h"
#include <string.h>

/* the slots of matrices Muon updates */
static int matrix_slot(int s) {
    static const int SLOTS[] = {
        VC_W_Q, VC_W_K, VC_W_V, VC_W_O, VC_W_Q_A, VC_W_Q_BPROJ, VC_W_KV_A, VC_W_KV_B, VC_W_GATE, VC_W_UP, VC_W_DOWN,
        VC_W_ROUTER, VC_W_EXP_GATE, VC_W_EXP_UP, VC_W_EXP_DOWN, VC_W_SH_GATE, VC_W_SH_UP, VC_W_SH_DOWN,
        VC_W_SH_GATE_PROJ, VC_W_ATTN_GATE, VC_W_LIN_QKV, VC_W_LIN_Z, VC_W_LIN_B, VC_W_LIN_A, VC_W_LIN_OUT, VC_W_LIN_K,
        VC_W_LIN_V, VC_W_LIN_FA, VC_W_LIN_FB, VC_W_LIN_GA, VC_W_LIN_GB, VC_W_LIN_XPROJ, VC_W_LIN_DTPROJ, VC_W_LAT_IN,
        VC_W_LAT_OUT, VC_W_PLE_GATE, VC_W_PLE_PROJ, VC_W_PLE_MODEL_PROJ, VC_W_PROJ_IN, VC_W_PROJ_OUT,
    };
    for (size_t i = 0; i < sizeof SLOTS / sizeof *SLOTS; i++)
        if (SLOTS[i] == s) return 1;
    return 0;
}

/* the fused module a slot belongs to in Megatron's layer (0: its own) */
static int fused_kind(const vc_model_config *c, int s, int split_qkv) {
    if (s == VC_W_GATE || s == VC_W_UP) return 1;
    if (s == VC_W_SH_GATE || s == VC_W_SH_UP) return 2;
    if (s == VC_W_EXP_GATE || s == VC_W_EXP_UP) return 3;
    /* linear_qkv: q, k, v, and the output gate that Qwen3-Next's and Qwen3.5's q_proj carry (Megatron's
     * attention_output_gate rows of linear_qkv) */
    int gate = s == VC_W_ATTN_GATE && c->lin_kind == VC_LIN_GDN && c->attn_out_gate == 1;
    if (!split_qkv && c->kv_lora_rank <= 0 && (s == VC_W_Q || s == VC_W_K || s == VC_W_V || gate)) return 4;
    if (c->lin_kind == VC_LIN_GDN && (s == VC_W_LIN_QKV || s == VC_W_LIN_Z || s == VC_W_LIN_B || s == VC_W_LIN_A))
        return 5;
    return 0;
}

int vc_model_param_matrix(vc_model *m, int i, int split_qkv, int64_t *mats, int64_t *rows, int64_t *cols, int *fuse) {
    if (i < 0 || i >= m->n_params) return 0;
    const vc_param *p = &m->params[i];
    const vc_tensor *t = &p->t;
    *fuse = 0;
    if (p->slot == VC_SLOT_VISION) { /* the tower's linear weights; its embeddings (patch, position) stay AdamW's */
        if (t->ndim != 2 || strstr(p->name, "embed")) return 0;
    } else if (!matrix_slot(p->slot) || (t->ndim != 2 && !(t->ndim == 3 && p->slot >= VC_W_EXP_GATE &&
                                                            p->slot <= VC_W_EXP_DOWN))) {
        return 0;
    }
    *rows = t->shape[t->ndim - 2];
    *cols = t->shape[t->ndim - 1];
    *mats = t->ndim == 3 ? t->shape[0] : 1;
    int k = p->slot == VC_SLOT_VISION ? 0 : fused_kind(&m->cfg, p->slot, split_qkv);
    if (k) *fuse = (p->layer + 2) * 8 + k;
    return 1;
}
