/* Muon's view of a model's parameters (vc_model_param_matrix), as Megatron-core's get_megatron_muon_optimizer splits
 * a Megatron model: Muon on the 2-D weights but the embeddings and the output layer, one matrix per fused Megatron
 * module (linear_fc1's gate and up, per expert for the routed experts; the Gated DeltaNet's in_proj; linear_qkv when
 * muon_split_qkv is off, never for MLA); AdamW on norms, biases, convolutions and the rest. On checkpoints of a
 * dense, a MoE, an MLA and a Gated DeltaNet family, and a vision tower. */
#include "verlc/model.h"
#include "vc_test.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct counts {
    int muon, adam, fused_groups, expert_mats, qkv_fused, lin_fused, tower, gate_fused;
    int bad; /* an embedding, head, norm or bias taken as a matrix, or a projection left out */
} counts;

static int ends(const char *s, const char *t) {
    size_t a = strlen(s), b = strlen(t);
    return a >= b && !strcmp(s + a - b, t);
}

static counts plan(const char *dir, int split_qkv) {
    counts c = { 0 };
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return c;
    int fuses[512], nf = 0;
    for (int i = 0; i < vc_model_n_params(m); i++) {
        const char *name = NULL;
        vc_tensor *t = vc_model_param(m, i, &name, NULL);
        int64_t mats = 0, rows = 0, cols = 0;
        int fuse = 0, on = vc_model_param_matrix(m, i, split_qkv, &mats, &rows, &cols, &fuse);
        int embed_or_head = !strcmp(name, "tok_embd") || !strcmp(name, "lm_head") || strstr(name, "embed");
        int small = strstr(name, "norm") || strstr(name, ".bias") || strstr(name, "conv");
        int proj = ends(name, ".q") || ends(name, ".k") || ends(name, ".v") || ends(name, ".o") ||
                   ends(name, ".gate") || ends(name, ".up") || ends(name, ".down");
        if (on) {
            c.muon++;
            int wrong = embed_or_head || small || t->ndim < 2 || mats * rows * cols != t->n;
            if (wrong) fprintf(stderr, "%s: %s taken as Muon's\n", dir, name);
            c.bad += wrong;
            c.tower += strchr(name, '.') && !strncmp(name, "model.visual", 12);
            if (t->ndim == 3) c.expert_mats += (int)mats;
            if (fuse) {
                int seen = 0;
                for (int k = 0; k < nf; k++) seen |= fuses[k] == fuse;
                if (!seen && nf < 512) fuses[nf++] = fuse;
                c.qkv_fused += ends(name, ".q") || ends(name, ".k") || ends(name, ".v");
                c.lin_fused += strstr(name, "linear.") != NULL;
                c.gate_fused += ends(name, ".attn_gate");
            }
        } else {
            c.adam++;
            if (proj && t->ndim >= 2) fprintf(stderr, "%s: %s left to AdamW\n", dir, name);
            c.bad += proj && t->ndim >= 2;
        }
    }
    c.fused_groups = nf;
    vc_model_free(m);
    return c;
}

int main(void) {
    const char *shared = getenv("VERLC_SHARED") ? getenv("VERLC_SHARED") : "../shared";
    char p[512];
    snprintf(p, sizeof p, "%s/fixtures/models/qwen3", shared);
    counts a = plan(p, 1), b = plan(p, 0);
    printf("qwen3: %d Muon, %d AdamW tensors, %d fused modules (%d with linear_qkv whole)\n", a.muon, a.adam,
           a.fused_groups, b.fused_groups);
    /* per layer: q, k, v, o, [gate; up], down are Muon's (gate and up one module); qkv one more module when whole */
    CHECK(a.bad == 0 && b.bad == 0 && a.muon > 0 && a.adam > 0 && a.qkv_fused == 0 && b.qkv_fused > 0 &&
          b.fused_groups == 2 * a.fused_groups && a.muon == b.muon);
    snprintf(p, sizeof p, "%s/fixtures/models/qwen3_moe", shared);
    counts moe = plan(p, 1);
    printf("qwen3_moe: %d Muon, %d AdamW tensors, %d expert matrices\n", moe.muon, moe.adam, moe.expert_mats);
    CHECK(moe.bad == 0 && moe.expert_mats > 0 && moe.fused_groups > 0);
    snprintf(p, sizeof p, "%s/fixtures/models/deepseek_v3", shared);
    counts mla = plan(p, 0); /* MLA's projections are never linear_qkv */
    CHECK(mla.bad == 0 && mla.qkv_fused == 0 && mla.muon > 0);
    counts gdn = plan("tests/fixtures/models/qwen3_5_text", 1);
    printf("qwen3_5_text: %d Muon, %d AdamW tensors, %d fused (in_proj parts: %d)\n", gdn.muon, gdn.adam,
           gdn.fused_groups, gdn.lin_fused);
    CHECK(gdn.bad == 0 && gdn.lin_fused >= 4 && gdn.gate_fused == 0);
    /* muon_split_qkv=false: Qwen3.5's linear_qkv whole, its output gate rows with q, k and v (one more fused module
     * per full-attention layer, the gate no group of its own) */
    counts gdn2 = plan("tests/fixtures/models/qwen3_5_text", 0);
    CHECK(gdn2.bad == 0 && gdn2.gate_fused > 0 && gdn2.qkv_fused >= 3 * gdn2.gate_fused && gdn2.muon == gdn.muon &&
          gdn2.fused_groups == gdn.fused_groups + gdn2.gate_fused);
    printf("qwen3_5_text, muon_split_qkv=false: %d fused modules (%d output gates inside linear_qkv)\n",
           gdn2.fused_groups, gdn2.gate_fused);
    counts vl = plan("tests/fixtures/models/qwen2_5_vl_image", 1);
    CHECK(vl.bad == 0 && vl.muon > a.muon / 2);
    return vc_test_done();
}
