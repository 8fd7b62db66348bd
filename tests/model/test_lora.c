/* LoRA adapters on fixture models: a fresh adapter (B = 0) leaves log-probs bit-identical; with B set the
 * adapted forward equals the forward of the merged weights W + alpha/r B A; switching the adapters off
 * gives the base model; gradients reach A and B (finite differences) and not the frozen base weights;
 * the PEFT-format save / load round trip; bad target names and ranks are refused. On cpu and on the sim
 * device (no host access to backend memory). */
#include "tensor/backend.h"
#include "verlc/device.h"
#include "verlc/json.h"
#include "verlc/model.h"
#include "verlc/ops.h"
#include "verlc/rng.h"
#include "verlc/safetensors.h"
#include "model_test_util.h"
#include "vc_test.h"
#include <sys/stat.h>
#include <unistd.h>

static double max_diff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

struct lp_ctx { vc_graph *g; float *out; };
static vc_status merged_logp(vc_model *m, void *p) {
    struct lp_ctx *c = p;
    return isnan(loss_of(m, c->g, c->out, 0)) ? VC_ERR_INTERNAL : VC_OK;
}

/* a fixture model's folder: the shared set's, else verlc's own (tests/fixtures/models) */
static void fixture_dir(const char *name, char *dir, size_t cap) {
    char root[256];
    for (int i = 0; vc_test_model_root(i, root, sizeof root); i++) {
        snprintf(dir, cap, "%s/%s", root, name);
        if (vc_file_exists(dir)) return;
    }
}

static void run_p(const char *fixture, const char *targets, const char *params) {
    char dir[512];
    fixture_dir(fixture, dir, sizeof dir);
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    vc_graph *g = vc_graph_new();
    float base[18], with[18], merged[18], off[18];
    loss_of(m, g, base, 0);
    vc_lora_spec sp = { 4, 8.0, targets, params, NULL, 7 };
    CHECK_OK(vc_model_lora_attach(m, &sp));
    vc_tensor *const *p = NULL;
    int n = vc_model_lora_params(m, &p);
    CHECK(n > 0 && n % 2 == 0);
    loss_of(m, g, with, 0);
    CHECK_MSG(max_diff(base, with, 18) == 0, "%s: a fresh adapter changed log-probs by %g", fixture,
              max_diff(base, with, 18));
    /* B drawn: the adapted model equals the merged one, and differs from the base */
    for (int i = 1; i < n; i += 2) {
        float *w = malloc((size_t)p[i]->n * 4);
        for (int64_t j = 0; w && j < p[i]->n; j++) w[j] = 0.3f * vc_rng_normal(3, (uint64_t)i, (uint64_t)j, 0);
        if (w) CHECK_OK(vc_tensor_write(p[i], w));
        free(w);
    }
    loss_of(m, g, with, 0);
    struct lp_ctx c = { g, merged };
    CHECK_OK(vc_model_lora_merged(m, merged_logp, &c));
    double dm = max_diff(with, merged, 18), db = max_diff(with, base, 18);
    printf("%s (%s%s%s): %d adapter tensors; |adapted - merged| %.2g, |adapted - base| %.3g\n", fixture, targets,
           params ? "; parameters " : "", params ? params : "", n, dm, db);
    CHECK_MSG(dm < 2e-5 && db > 1e-2, "%s: adapted vs merged %g, vs base %g", fixture, dm, db);
    int was = vc_model_lora_enable(m, 0);
    loss_of(m, g, off, 0);
    vc_model_lora_enable(m, was);
    CHECK_MSG(was == 1 && max_diff(off, base, 18) == 0, "%s: adapters off is not the base model", fixture);
    /* merging restored the base weights exactly: the adapted model is unchanged */
    float again[18];
    loss_of(m, g, again, 0);
    CHECK(max_diff(again, with, 18) == 0);
    /* gradients: A and B by finite differences; the base weights have none */
    CHECK_OK(vc_model_enable_grad(m));
    loss_of(m, g, NULL, 1);
    for (int i = 0; i < vc_model_n_params(m); i++) CHECK(vc_model_param(m, i, NULL, NULL)->grad == NULL);
    double worst = 0;
    for (int i = 0; i < n; i += 3) {
        int64_t j = (int64_t)((i * 7919) % p[i]->n);
        float keep = tensor_elem(p[i], j, 0, NULL), an = tensor_elem(p[i], j, 1, NULL), h = 2e-3f, x = keep + h;
        tensor_elem(p[i], j, 0, &x);
        float up = loss_of(m, g, NULL, 0);
        x = keep - h;
        tensor_elem(p[i], j, 0, &x);
        float dn = loss_of(m, g, NULL, 0);
        tensor_elem(p[i], j, 0, &keep);
        double fd = (up - dn) / (2 * h), err = fabs(fd - an) / (fabs(fd) + fabs(an) + 2e-2);
        worst = fmax(worst, err);
    }
    CHECK_MSG(worst < 0.05, "%s: worst LoRA FD gradient error %g", fixture, worst);
    /* gradient checkpointing (layers recomputed in backward) gives the adapters the same gradients */
    double gd = 0, gmax = 0;
    for (int i = 0; i < n; i++) {
        float *g0 = malloc((size_t)p[i]->n * 4), *g1 = malloc((size_t)p[i]->n * 4);
        if (!g0 || !g1) break;
        for (int ck = 0; ck < 2; ck++) {
            vc_model_zero_grad(m);
            vc_model_set_checkpointing(m, ck);
            loss_of(m, g, NULL, 1);
            CHECK_OK(vc_tensor_read_grad(p[i], ck ? g1 : g0));
        }
        vc_model_set_checkpointing(m, 0);
        for (int64_t j = 0; j < p[i]->n; j++) gd = fmax(gd, fabs((double)g0[j] - g1[j])), gmax = fmax(gmax, fabs(g0[j]));
        free(g0);
        free(g1);
    }
    CHECK_MSG(gmax > 0 && gd <= 1e-6 * gmax, "%s: adapter gradients with checkpointing differ by %g (max %g)", fixture,
              gd, gmax);
    /* PEFT-format round trip into a fresh adapter */
    char out[256];
    snprintf(out, sizeof out, "/tmp/verlc_lora_%d_%s", (int)getpid(), fixture);
    mkdir(out, 0755);
    CHECK_OK(vc_model_lora_save(m, out));
    vc_model *m2 = NULL;
    CHECK_OK(vc_model_load(dir, &m2));
    if (m2) {
        vc_lora_spec s2 = sp;
        s2.seed = 99;
        CHECK_OK(vc_model_lora_attach(m2, &s2));
        CHECK_OK(vc_model_lora_load(m2, out));
        float back[18];
        loss_of(m2, g, back, 0);
        CHECK_MSG(max_diff(back, with, 18) == 0, "%s: reloaded adapter differs by %g", fixture, max_diff(back, with, 18));
        vc_model_free(m2);
    }
    CHECK_OK(vc_model_load(dir, &m2));
    if (m2) { /* another rank: the shapes say so */
        vc_lora_spec s2 = sp;
        s2.rank = 2;
        CHECK_OK(vc_model_lora_attach(m2, &s2));
        vc_status ls = vc_model_lora_load(m2, out);
        /* a matrix's adapter of the wrong shape; the experts' are looked for by shape (missing) */
        CHECK_MSG(ls == VC_ERR_SHAPE || ls == VC_ERR_MISSING, "%s: rank 2 from rank 4: %s", fixture, vc_status_name(ls));
        vc_model_free(m2);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", out);
    CHECK(system(cmd) == 0);
    vc_graph_free(g);
    vc_model_free(m);
}

static void run(const char *fixture, const char *targets) { run_p(fixture, targets, NULL); }

/* targets and PEFT names in the architecture's own module names: Phi-2's fc1/dense, InternLM2's w1/w3 and
 * its fused wqkv, Qwen's c_proj (two modules of that name) */
static void test_arch_names(void) {
    static const struct { const char *fixture, *targets, *present, *absent; int per_layer; } CASES[] = {
        { "phi", "fc1,dense", "model.layers.1.mlp.fc1", "mlp.up_proj", 2 },
        { "internlm2", "w1,w3,wqkv", "model.layers.0.feed_forward.w3", "mlp.gate_proj", 5 },
        { "qwen1", "c_proj", "transformer.h.1.attn.c_proj", "o_proj", 2 },
        { "deepseek_v2", "kv_a_proj_with_mqa,gate_proj", "model.layers.1.mlp.shared_experts.gate_proj", "experts.0", 2 },
        { "gpt2", "c_proj", "transformer.h.1.mlp.c_proj", "o_proj", 2 }, /* Conv1D modules: attention's and the MLP's */
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char dir[512], out[256], name[300], *path = NULL;
        snprintf(dir, sizeof dir, "%s/fixtures/models/%s", vc_test_shared(), CASES[i].fixture);
        if (!vc_file_exists(dir)) snprintf(dir, sizeof dir, "tests/fixtures/models/%s", CASES[i].fixture); /* verlc's own */
        vc_model *m = NULL;
        CHECK_OK(vc_model_load(dir, &m));
        if (!m) continue;
        CHECK_OK(vc_model_lora_init(m, 2, 4.0, CASES[i].targets, 1));
        vc_tensor *const *p = NULL;
        int n = vc_model_lora_params(m, &p), layers = (int)vc_model_cfg(m)->n_layer;
        CHECK_MSG(n == 2 * CASES[i].per_layer * layers, "%s [%s]: %d adapter tensors", CASES[i].fixture,
                  CASES[i].targets, n);
        snprintf(out, sizeof out, "/tmp/verlc_lora_names_%d", (int)getpid());
        mkdir(out, 0755);
        CHECK_OK(vc_model_lora_save(m, out));
        path = vc_path_join(out, "adapter_model.safetensors");
        vc_checkpoint *ck = NULL;
        CHECK_OK(vc_ckpt_open(path, &ck));
        snprintf(name, sizeof name, "base_model.model.%s.lora_A.weight", CASES[i].present);
        CHECK_MSG(ck && vc_ckpt_find(ck, name), "%s: no %s", CASES[i].fixture, name);
        for (int k = 0; ck && k < vc_ckpt_count(ck); k++)
            CHECK_MSG(!strstr(vc_ckpt_at(ck, k)->name, CASES[i].absent),
                      "%s: %s", CASES[i].fixture, vc_ckpt_at(ck, k)->name);
        vc_ckpt_close(ck);
        free(path);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", out);
        CHECK(system(cmd) == 0);
        vc_model_free(m);
    }
    /* exclude_modules over the architecture's module paths */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/models/phi", vc_test_shared());
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (m) {
        CHECK_OK(vc_model_lora_init_ex(m, 2, 4.0, "all-linear", ".*\\.fc1", 1));
        vc_tensor *const *p = NULL;
        int n = vc_model_lora_params(m, &p);
        CHECK_MSG(n == 2 * 5 * (int)vc_model_cfg(m)->n_layer, "phi all-linear without fc1: %d tensors", n); /* q k v dense fc2 */
        vc_model_free(m);
    }
}

/* adapters of fused projections in PEFT's form on the checkpoint's own module (Phi-3's qkv_proj and
 * gate_up_proj, Qwen's c_attn, Baichuan's W_pack, ChatGLM's query_key_value and dense_h_to_4h): stacked A,
 * block-diagonal B, rank_pattern / alpha_pattern; read back exactly; a rank-r fused adapter with one A
 * (as PEFT trains it) gives each part that A and its rows of B (the first adapter: layer 0's fused q/k/v) */
static void test_fused(void) {
    static const struct { const char *fixture, *fused; int parts; } CASES[] = {
        { "phi3", "model.layers.0.self_attn.qkv_proj", 3 }, { "qwen1", "transformer.h.0.attn.c_attn", 3 },
        { "baichuan2", "model.layers.0.self_attn.W_pack", 3 },
        { "chatglm3", "transformer.encoder.layers.0.self_attention.query_key_value", 3 },
        { "internlm2", "model.layers.0.attention.wqkv", 3 }, /* rows per key/value group: round trip only */
        /* Qwen3.5's q_proj (per head: q, output gate), Qwen3-Next's in_proj_qkvz / in_proj_ba (per q/k head) */
        { "qwen3_5_text", "model.layers.3.self_attn.q_proj", 2 },
        { "qwen3_next", "model.layers.0.linear_attn.in_proj_qkvz", 2 },
        { "qwen3_next", "model.layers.0.linear_attn.in_proj_ba", 2 },
        { "gpt2", "transformer.h.0.attn.c_attn", 3 }, /* Conv1D: PEFT's fan_in_fan_out */
    };
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        char dir[512], out[256], name[300];
        snprintf(dir, sizeof dir, "%s/fixtures/models/%s", vc_test_shared(), CASES[c].fixture);
        if (!vc_file_exists(dir)) snprintf(dir, sizeof dir, "tests/fixtures/models/%s", CASES[c].fixture); /* verlc's own */
        snprintf(out, sizeof out, "/tmp/verlc_lora_fused_%d", (int)getpid());
        vc_model *m = NULL, *m2 = NULL;
        CHECK_OK(vc_model_load(dir, &m));
        CHECK_OK(vc_model_load(dir, &m2));
        if (!m || !m2) {
            vc_model_free(m);
            vc_model_free(m2);
            continue;
        }
        vc_graph *g = vc_graph_new();
        CHECK_OK(vc_model_lora_init(m, 2, 4.0, "all-linear", 1));
        vc_tensor *const *p = NULL, *const *p2 = NULL;
        int n = vc_model_lora_params(m, &p);
        for (int i = 1; i < n; i += 2) { /* B drawn */
            float *w = malloc((size_t)p[i]->n * 4);
            for (int64_t j = 0; w && j < p[i]->n; j++) w[j] = 0.3f * vc_rng_normal(5, (uint64_t)i, (uint64_t)j, 0);
            if (w) CHECK_OK(vc_tensor_write(p[i], w));
            free(w);
        }
        float want[18], got[18];
        loss_of(m, g, want, 0);
        mkdir(out, 0755);
        CHECK_OK(vc_model_lora_save(m, out));
        char *path = vc_path_join(out, "adapter_model.safetensors"), *cfg = vc_path_join(out, "adapter_config.json");
        vc_checkpoint *ck = NULL;
        CHECK_OK(vc_ckpt_open(path, &ck));
        snprintf(name, sizeof name, "base_model.model.%s.lora_A.weight", CASES[c].fused);
        const vc_st_tensor *t = ck ? vc_ckpt_find(ck, name) : NULL;
        CHECK_MSG(t && t->shape[0] == 2 * CASES[c].parts, "%s: %s %s", CASES[c].fixture, name, t ? "has another rank" : "missing");
        vc_ckpt_close(ck);
        cJSON *j = NULL;
        CHECK_OK(vc_json_load_file(cfg, &j));
        const char *last = strrchr(CASES[c].fused, '.') + 1;
        const cJSON *rp = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "rank_pattern"), last);
        const cJSON *ap = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "alpha_pattern"), last);
        CHECK_MSG(rp && rp->valueint == 2 * CASES[c].parts && ap && ap->valuedouble == 4.0 * CASES[c].parts,
                  "%s: rank_pattern / alpha_pattern of %s", CASES[c].fixture, last);
        const cJSON *fan = cJSON_GetObjectItem(j, "fan_in_fan_out");
        CHECK_MSG(fan && cJSON_IsTrue(fan) == !strcmp(CASES[c].fixture, "gpt2"), "%s: fan_in_fan_out", CASES[c].fixture);
        cJSON_Delete(j);
        /* read back through adapter_config.json: the same model */
        CHECK_OK(vc_model_lora_attach_from(m2, out));
        loss_of(m2, g, got, 0);
        CHECK_MSG(max_diff(want, got, 18) == 0, "%s: read back %g", CASES[c].fixture, max_diff(want, got, 18));
        /* rows group by group (wqkv, q_proj with its gate, in_proj_qkvz / _ba): the round trip only */
        if (strstr(CASES[c].fused, "wqkv") || strstr(CASES[c].fused, "q_proj") || strstr(CASES[c].fused, "in_proj"))
            goto done;
        /* a PEFT-trained fused adapter of rank 2: A shared by the parts */
        int n2 = vc_model_lora_params(m2, &p2), ia = -1;
        for (int i = 0; i + 1 < n2; i += 2)
            if (p2[i]->shape[0] == 2) { ia = i; break; }
        vc_st_writer *w = NULL;
        CHECK_OK(vc_st_writer_new(&w));
        int64_t in = p2[ia]->shape[1], rows = 0, sa[2] = { 2, in };
        for (int q = 0; q < CASES[c].parts; q++) rows += p2[ia + 1 + 2 * q]->shape[0];
        float *A = malloc(sizeof(float) * (size_t)(2 * in)), *B = malloc(sizeof(float) * (size_t)(rows * 2));
        for (int64_t e = 0; e < 2 * in; e++) A[e] = 0.01f * (float)(e % 7) - 0.03f;
        for (int64_t e = 0; e < rows * 2; e++) B[e] = 0.02f * (float)(e % 5) - 0.04f;
        int64_t sb[2] = { rows, 2 };
        snprintf(name, sizeof name, "base_model.model.%s.lora_A.weight", CASES[c].fused);
        CHECK_OK(vc_st_writer_add(w, name, VC_F32, 2, sa, A, 1));
        snprintf(name, sizeof name, "base_model.model.%s.lora_B.weight", CASES[c].fused);
        CHECK_OK(vc_st_writer_add(w, name, VC_F32, 2, sb, B, 1));
        /* the other adapters as saved */
        CHECK_OK(vc_ckpt_open(path, &ck));
        for (int k = 0; ck && k < vc_ckpt_count(ck); k++) {
            const vc_st_tensor *x = vc_ckpt_at(ck, k);
            if (strstr(x->name, CASES[c].fused)) continue;
            float *buf = malloc(x->nbytes);
            vc_st_tensor_to_f32(x, buf);
            CHECK_OK(vc_st_writer_add(w, x->name, VC_F32, x->ndim, x->shape, buf, 1));
            free(buf);
        }
        vc_ckpt_close(ck);
        CHECK_OK(vc_st_writer_write(w, path));
        vc_st_writer_free(w);
        CHECK_OK(vc_model_lora_load(m2, out));
        int same = 1;
        for (int q = 0, r0 = 0; q < CASES[c].parts; q++) {
            const vc_tensor *ta = p2[ia + 2 * q], *tb = p2[ia + 1 + 2 * q];
            float *ha = malloc(sizeof(float) * (size_t)ta->n), *hb = malloc(sizeof(float) * (size_t)tb->n);
            CHECK_OK(vc_tensor_read(ta, ha));
            CHECK_OK(vc_tensor_read(tb, hb));
            same &= !memcmp(ha, A, sizeof(float) * (size_t)ta->n) && !memcmp(hb, B + (int64_t)r0 * 2, sizeof(float) * (size_t)tb->n);
            r0 += (int)tb->shape[0];
            free(ha);
            free(hb);
        }
        CHECK_MSG(same, "%s: the parts of a rank-2 fused adapter are not its A and rows of B", CASES[c].fixture);
        free(A);
        free(B);
    done:
        free(path);
        free(cfg);
        remove_tree(out);
        vc_graph_free(g);
        vc_model_free(m);
        vc_model_free(m2);
    }
}

/* the adapter's tensor names and shapes of two adapter_model.safetensors files agree (count: tensors) */
static int same_names(const char *a, const char *b, int *count) {
    vc_checkpoint *x = NULL, *y = NULL;
    int same = !vc_ckpt_open(a, &x) && !vc_ckpt_open(b, &y) && vc_ckpt_count(x) == vc_ckpt_count(y);
    for (int i = 0; same && i < vc_ckpt_count(x); i++) {
        const vc_st_tensor *t = vc_ckpt_at(x, i), *u = vc_ckpt_find(y, t->name);
        same = u && u->ndim == t->ndim && u->shape[0] == t->shape[0] && u->shape[1] == t->shape[1];
        if (!same) fprintf(stderr, "%s: %s is not in %s with its shape\n", a, t->name, b);
    }
    *count = x ? vc_ckpt_count(x) : 0;
    vc_ckpt_close(x);
    vc_ckpt_close(y);
    return same;
}

/* bf16 matmuls (the MoE op's inputs and activations kept in bf16 for the grouped GEMMs, the adapters' rank-r
 * products from them): the adapted forward and the merged weights' agree to bf16 rounding */
static void bf16_experts(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/models/qwen3_moe", vc_test_shared());
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    vc_lora_spec sp = { 4, 8.0, "all-linear", NULL, NULL, 5, 0 };
    CHECK_OK(vc_model_lora_attach(m, &sp));
    vc_tensor *const *p = NULL;
    int n = vc_model_lora_params(m, &p);
    for (int i = 1; i < n; i += 2) {
        float *w = malloc((size_t)p[i]->n * 4);
        for (int64_t j = 0; w && j < p[i]->n; j++) w[j] = 0.3f * vc_rng_normal(4, (uint64_t)i, (uint64_t)j, 0);
        if (w) CHECK_OK(vc_tensor_write(p[i], w));
        free(w);
    }
    int was = vc_matmul_precision();
    vc_set_matmul_precision(VC_PREC_BF16);
    vc_graph *g = vc_graph_new();
    float with[18], merged[18];
    loss_of(m, g, with, 0);
    struct lp_ctx c = { g, merged };
    CHECK_OK(vc_model_lora_merged(m, merged_logp, &c));
    double d = max_diff(with, merged, 18);
    printf("qwen3_moe all-linear, bf16 matmuls: |adapted - merged| %.3g\n", d);
    CHECK_MSG(isfinite(d) && d < 0.1, "bf16: adapted vs merged differ by %g", d);
    vc_set_matmul_precision(was);
    vc_graph_free(g);
    vc_model_free(m);
}

/* bad expert adapters: a target_parameters name no tensor has, and an adapter of another model's experts,
 * each a one-line error naming what is wrong */
static void test_expert_errors(void) {
    char out[256], p[400], mdir[512];
    snprintf(out, sizeof out, "/tmp/verlc_lora_bad_%d", (int)getpid());
    mkdir(out, 0755);
    snprintf(mdir, sizeof mdir, "%s/fixtures/models/qwen3_moe", vc_test_shared());
    const char *cfg = "{\"r\": 4, \"lora_alpha\": 8, \"target_modules\": [], "
                      "\"target_parameters\": [\"mlp.experts.gate_up_proj\", \"mlp.experts.bogus\"]}";
    snprintf(p, sizeof p, "%s/adapter_config.json", out);
    CHECK_OK(vc_write_file_atomic(p, cfg, strlen(cfg)));
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(mdir, &m));
    vc_status st = vc_model_lora_attach_from(m, out);
    CHECK_MSG(st == VC_ERR_ARG && strstr(vc_last_error(), "mlp.experts.bogus"), "%s", vc_last_error());
    vc_model_free(m);
    /* Mixtral's adapter (its experts are [E, 2 x 128, 64]) on Qwen3-MoE (64-row experts): no such adapter */
    CHECK_OK(vc_model_load(mdir, &m));
    vc_lora_spec sp = { 4, 8.0, "[]", "mlp.experts.gate_up_proj", NULL, 1, 8 };
    CHECK_OK(vc_model_lora_attach(m, &sp));
    st = vc_model_lora_load(m, "tests/fixtures/lora/mixtral_all_linear");
    CHECK_MSG(st == VC_ERR_MISSING && strstr(vc_last_error(), "gate_up_proj") && strstr(vc_last_error(), "layer 0"),
              "%s", vc_last_error());
    vc_model_free(m);
    /* alpha_pattern that would change gate_up's scale: verlc has one alpha / r */
    cfg = "{\"r\": 4, \"lora_alpha\": 8, \"target_modules\": [], \"target_parameters\": [\"gate_up_proj\"], "
          "\"rank_pattern\": {\".*\\\\.gate_up_proj\": 8}, \"alpha_pattern\": {\".*\\\\.gate_up_proj\": 8}}";
    CHECK_OK(vc_write_file_atomic(p, cfg, strlen(cfg)));
    CHECK_OK(vc_model_load(mdir, &m));
    st = vc_model_lora_attach_from(m, out);
    CHECK_MSG(st == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "alpha_pattern"), "%s", vc_last_error());
    vc_model_free(m);
    remove_tree(out);
}

/* PEFT's adapters on routed experts (tools/fixtures/make_peft_expert_lora.py: target_parameters, nested
 * ParamWrappers, all-linear's gate_up_proj at rank 2 r through rank_pattern): verlc reads each and gives the
 * adapted model's logits; attached from the same target_modules it names and shapes its adapters as PEFT */
static void test_peft_experts(void) {
    static const char *CASES[] = { "qwen3_moe_experts", "mixtral_all_linear", "deepseek_v3_gate_up", "gpt_oss_experts",
                                   "gpt_oss_router" };
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        char dir[256], path[320], mdir[512];
        snprintf(dir, sizeof dir, "tests/fixtures/lora/%s", CASES[c]);
        snprintf(path, sizeof path, "%s/reference.json", dir);
        cJSON *ref = NULL;
        CHECK_OK(vc_json_load_file(path, &ref));
        const cJSON *model = cJSON_GetObjectItem(ref, "model"), *tg = cJSON_GetObjectItem(ref, "targets");
        const cJSON *lg = cJSON_GetObjectItem(ref, "logits");
        if (!cJSON_IsString(model) || !cJSON_IsString(tg) || !cJSON_IsArray(lg)) {
            CHECK_MSG(0, "%s: reference.json lacks model / targets / logits", dir);
            cJSON_Delete(ref);
            continue;
        }
        fixture_dir(model->valuestring, mdir, sizeof mdir);
        vc_model *m = NULL;
        CHECK_OK(vc_model_load(mdir, &m));
        CHECK_OK(vc_model_lora_attach_from(m, dir));
        vc_graph *g = vc_graph_new();
        vc_batch b = { 2, CU, IDS };
        vc_graph_set_grad(g, 0);
        vc_tensor *h = m ? vc_model_forward(m, g, &b, NULL) : NULL, *L = h ? vc_model_logits(m, g, h) : NULL;
        int64_t V = m ? vc_model_cfg(m)->vocab : 0;
        float *got = malloc(sizeof(float) * (size_t)(18 * (V ? V : 1)));
        double worst = 0, span = 0;
        if (L && got && !vc_tensor_read(L, got) && cJSON_GetArraySize(lg) == 18)
            for (int t = 0; t < 18; t++)
                for (int64_t v = 0; v < V; v++) {
                    double want = cJSON_GetArrayItem(cJSON_GetArrayItem(lg, t), (int)v)->valuedouble;
                    worst = fmax(worst, fabs(want - got[t * V + v]));
                    span = fmax(span, fabs(want));
                }
        else CHECK_MSG(0, "%s: no logits", dir);
        printf("PEFT %s: |verlc - PEFT| logits %.2g (largest %.3g)\n", CASES[c], worst, span);
        CHECK_MSG(worst < 2e-4 && span > 1, "%s: verlc's logits differ from PEFT's by %g", dir, worst);
        /* attached afresh from the same target_modules: PEFT's names and shapes */
        vc_model *m2 = NULL;
        CHECK_OK(vc_model_load(mdir, &m2));
        cJSON *cfg = NULL;
        snprintf(path, sizeof path, "%s/adapter_config.json", dir);
        CHECK_OK(vc_json_load_file(path, &cfg));
        const cJSON *tp = cJSON_GetObjectItem(cfg, "target_parameters"), *e;
        char params[256] = "";
        cJSON_ArrayForEach(e, tp) snprintf(params + strlen(params), sizeof params - strlen(params), "%s%s",
                                           *params ? "," : "", e->valuestring);
        int from_modules = !strcmp(tg->valuestring, "all-linear"); /* PEFT wrote the converted parameters */
        vc_lora_spec sp = { 4, 8.0, tg->valuestring, from_modules ? NULL : params, NULL, 3, 0 };
        char out[256];
        snprintf(out, sizeof out, "/tmp/verlc_peft_exp_%d", (int)getpid());
        mkdir(out, 0755);
        CHECK_OK(vc_model_lora_attach(m2, &sp));
        CHECK_OK(vc_model_lora_save(m2, out));
        char fa[320], fb[320];
        int n = 0;
        snprintf(fa, sizeof fa, "%s/adapter_model.safetensors", dir);
        snprintf(fb, sizeof fb, "%s/adapter_model.safetensors", out);
        CHECK_MSG(same_names(fa, fb, &n) && n > 0, "%s: verlc's adapter tensors are not PEFT's", dir);
        /* PEFT's adapter as verlc writes it, read back (rank_pattern and all): the same logits */
        vc_model_free(m2);
        m2 = NULL;
        CHECK_OK(vc_model_lora_save(m, out));
        CHECK_OK(vc_model_load(mdir, &m2));
        CHECK_OK(vc_model_lora_attach_from(m2, out));
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        h = m2 ? vc_model_forward(m2, g, &b, NULL) : NULL;
        L = h ? vc_model_logits(m2, g, h) : NULL;
        float *back = malloc(sizeof(float) * (size_t)(18 * (V ? V : 1)));
        CHECK(L && back && !vc_tensor_read(L, back) && max_diff(back, got, (int)(18 * V)) == 0);
        free(back);
        remove_tree(out);
        cJSON_Delete(cfg);
        free(got);
        vc_graph_free(g);
        vc_model_free(m);
        vc_model_free(m2);
        cJSON_Delete(ref);
    }
}

/* a shared (Megatron) expert adapter is written for every expert, so PEFT's per-expert adapters that differ
 * between experts do not load into one: the error names the file and the layer */
static void test_megatron_shared(void) {
    char mdir[512];
    snprintf(mdir, sizeof mdir, "%s/fixtures/models/qwen3_moe", vc_test_shared());
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(mdir, &m));
    vc_lora_spec sp = { 4, 8.0, "linear_fc1,linear_fc2", NULL, NULL, 1, 0 };
    CHECK_OK(vc_model_lora_attach(m, &sp));
    vc_tensor *const *p = NULL;
    int n = vc_model_lora_params(m, &p);
    CHECK_MSG(n == 8 && p[0]->ndim == 3 && p[0]->shape[0] == 1, "%d adapter tensors; the first [%lld, ...]", n,
              n ? (long long)p[0]->shape[0] : -1LL);
    vc_status st = vc_model_lora_load(m, "tests/fixtures/lora/qwen3_moe_experts");
    CHECK_MSG(st == VC_ERR_FORMAT && strstr(vc_last_error(), "differ between experts") &&
                  strstr(vc_last_error(), "qwen3_moe_experts"), "%s", vc_last_error());
    vc_model_free(m);
}

/* checkpoints under the hub's names that transformers 5 renames and splits on load (EXAONE's transformer.h.*,
 * Sarvam-M's query_key_value, MiniCPM5-MoE's q_proj, Lara-Mini's in_proj): adapters name transformers 5's modules, as
 * PEFT on transformers' model does (PEFT 0.21 merges them to verlc's merged export exactly, outside the dense MLPs
 * that it drops from MoE adapters), and read back to the same model */
static void test_model_names(void) {
    static const struct { const char *fixture, *module; } CASES[] = {
        { "exaone", "model.layers.1.self_attn.o_proj" }, { "sarvam_moe", "model.layers.0.self_attn.k_proj" },
        { "minicpm5_moe", "model.layers.0.self_attn.q_gate_proj" }, { "lara_mini", "model.layers.0.linear_attn.in_proj_z" },
    };
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
        char dir[512], out[256], name[300];
        fixture_dir(CASES[c].fixture, dir, sizeof dir);
        snprintf(out, sizeof out, "/tmp/verlc_lora_names_%d", (int)getpid());
        vc_model *m = NULL, *m2 = NULL;
        CHECK_OK(vc_model_load(dir, &m));
        CHECK_OK(vc_model_load(dir, &m2));
        vc_graph *g = vc_graph_new();
        vc_tensor *const *p = NULL;
        int n = m && m2 && vc_model_lora_init(m, 2, 4.0, "all-linear", 1) == VC_OK ? vc_model_lora_params(m, &p) : 0;
        for (int i = 1; i < n; i += 2) { /* B drawn */
            float *w = malloc((size_t)p[i]->n * 4);
            for (int64_t j = 0; w && j < p[i]->n; j++) w[j] = 0.3f * vc_rng_normal(5, (uint64_t)i, (uint64_t)j, 0);
            if (w) CHECK_OK(vc_tensor_write(p[i], w));
            free(w);
        }
        CHECK_MSG(n > 0, "%s: no adapters", CASES[c].fixture);
        if (n > 0) {
            float want[18], got[18];
            loss_of(m, g, want, 0);
            mkdir(out, 0755);
            CHECK_OK(vc_model_lora_save(m, out));
            char *path = vc_path_join(out, "adapter_model.safetensors");
            vc_checkpoint *ck = NULL;
            CHECK_OK(vc_ckpt_open(path, &ck));
            snprintf(name, sizeof name, "base_model.model.%s.lora_A.weight", CASES[c].module);
            CHECK_MSG(ck && vc_ckpt_find(ck, name), "%s: no adapter named %s", CASES[c].fixture, name);
            vc_ckpt_close(ck);
            free(path);
            CHECK_OK(vc_model_lora_attach_from(m2, out));
            loss_of(m2, g, got, 0);
            CHECK_MSG(max_diff(want, got, 18) == 0, "%s: read back %g", CASES[c].fixture, max_diff(want, got, 18));
            remove_tree(out);
        }
        vc_graph_free(g);
        vc_model_free(m);
        vc_model_free(m2);
    }
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    test_model_names();
    test_peft_experts();
    test_expert_errors();
    bf16_experts();
    test_arch_names();
    test_fused();
    run("phi", "fc1,dense");
    run("qwen3", "all-linear");
    run("gemma2", "q_proj,v_proj,down_proj");
    run("deepseek_v2", "all-linear"); /* MLA's q_a/q_b/kv_a/kv_b and o projections; MoE layers' shared experts */
    run("qwen2_moe", "all-linear");   /* the shared expert and its sigmoid gate (shared_expert_gate) */
    /* PEFT's target_parameters: adapters on every routed expert and on the router */
    run_p("qwen3_moe", "[]", "mlp.experts.gate_up_proj,mlp.experts.down_proj,mlp.gate.weight");
    run_p("mixtral", "q_proj", "experts.down_proj");
    run_p("deepseek_v3", "all-linear", "gate_up_proj,model.layers.1.mlp.gate.weight");
    run_p("gpt_oss", "q_proj,o_proj", "mlp.experts.gate_up_proj,mlp.experts.down_proj"); /* its own expert layout */
    run_p("gpt_oss", "[]", "mlp.router.weight"); /* its router: a weight beside a bias */
    { /* module names reach no expert of gpt-oss */
        char dir[512];
        fixture_dir("gpt_oss", dir, sizeof dir);
        vc_model *m = NULL;
        CHECK_OK(vc_model_load(dir, &m));
        vc_lora_spec sp2 = { 4, 8.0, "q_proj,gate_proj", NULL, NULL, 7, 0 };
        CHECK(m && vc_model_lora_attach(m, &sp2) == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "target_parameters"));
        vc_model_free(m);
    }
    /* Megatron-Bridge's names: linear_fc1 / linear_fc2 of a MoE layer are one adapter shared by its experts */
    run("qwen3_moe", "linear_qkv,linear_fc1,linear_fc2,router");
    test_megatron_shared();
    /* the sim device: backend memory behind pointers that fault on host access (VC_LORA_DEVICE=cuda runs
     * this part on the CUDA backend, e.g. the emulator's build) */
    CHECK(vc_backend_sim() != NULL);
    const char *dev = getenv("VC_LORA_DEVICE");
    CHECK_OK(vc_device_select(dev && *dev ? dev : "sim", "test"));
    run("qwen3", "all-linear");
    run("qwen3_moe", "all-linear"); /* the routed experts' adapters (gate_up of rank 8) and the router's */
    run("qwen3_moe", "linear_fc1,linear_fc2"); /* one adapter shared by a layer's experts */
    CHECK_OK(vc_device_select("cpu", "test"));
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/models/llama", vc_test_shared());
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (m) {
        CHECK(vc_model_lora_init(m, 4, 8.0, "q_proj,qkv", 1) == VC_ERR_ARG);
        CHECK(strstr(vc_last_error(), "qkv") != NULL);
        CHECK(vc_model_lora_init(m, 0, 8.0, NULL, 1) == VC_ERR_ARG);
        CHECK_OK(vc_model_lora_init(m, 2, 4.0, "k_proj", 1));
        CHECK(vc_model_lora_init(m, 2, 4.0, "k_proj", 1) == VC_ERR_ARG);
        vc_model_free(m);
    }
    /* exclude_modules (PEFT): a regular expression over module paths, matched as a whole */
    CHECK_OK(vc_model_load(dir, &m));
    if (m) {
        vc_tensor *const *p = NULL;
        CHECK(vc_model_lora_init_ex(m, 2, 4.0, NULL, "(", 1) == VC_ERR_ARG && strstr(vc_last_error(), "not a regular"));
        CHECK(vc_model_lora_init_ex(m, 2, 4.0, "q_proj", ".*", 1) == VC_ERR_ARG); /* nothing left */
        CHECK(strstr(vc_last_error(), "excluded") != NULL);
        CHECK(vc_model_lora_init_ex(m, 2, 4.0, "all-linear", "model\\.layers\\.0\\..*|.*\\.mlp\\.down_proj", 1) == VC_OK);
        int n = vc_model_lora_params(m, &p), L = (int)vc_model_cfg(m)->n_layer;
        CHECK_MSG(n == 2 * (L - 1) * 6, "%d adapter tensors over %d layers", n, L); /* layer 0 and down_proj out */
        vc_model_free(m);
    }
    return vc_test_done();
}
