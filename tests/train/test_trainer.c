/* Trainer step: gradient accumulation over micro-batches (by count, by token budget) equals one big
 * batch for every loss_agg_mode; loss equals verl's agg_loss on the whole mini-batch; custom loss
 * callbacks; non-finite skip; clipping reports the pre-clip norm; memory plan. */
#include "verlc/ops.h"
#include "verlc/rng.h"
#include "verlc/train.h"
#include "train_test_util.h"
#include "vc_test.h"
#include "backend/cpu/cpu.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NSEQ 6
static int64_t CU[NSEQ + 1];
static int32_t IDS[256];
static float MASK[256];

static void make_batch(vc_minibatch *b) { random_minibatch(b, NSEQ, 5, 16, 7, CU, IDS, MASK); }

static vc_model *load(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/fixtures/models/qwen3", vc_test_shared());
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(path, &m));
    return m;
}

static float *grads_of(vc_trainer *t, const vc_minibatch *b, int micro, int64_t tokens, vc_agg_mode mode,
                       vc_token_loss_fn fn, double *loss) {
    size_t total = 0;
    for (int i = 0; i < t->n_params; i++) total += t->sizes[i];
    float *g = malloc(total * sizeof *g);
    t->cfg.micro_bs = micro;
    t->cfg.max_tokens = tokens;
    t->cfg.agg = mode;
    vc_step_stats st;
    vc_model_zero_grad(t->model);
    CHECK_OK(vc_trainer_accumulate(t, b, fn, NULL, &st));
    *loss = st.loss;
    size_t o = 0;
    for (int i = 0; i < t->n_params; i++) {
        memcpy(g + o, t->grads[i], t->sizes[i] * sizeof *g);
        o += t->sizes[i];
    }
    return g;
}

static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        s += (double)a[i] * a[i];
    }
    return sqrt(d / (s > 0 ? s : 1));
}

/* the loss through the callback interface: the same NLL, built from mb->weight */
static vc_status nll_cb(void *ctx, vc_graph *g, const vc_micro_batch *mb, vc_tensor *logp, vc_tensor *ent,
                        vc_tensor **loss) {
    (void)ctx; (void)ent;
    float *w = vc_graph_alloc(g, sizeof(float) * (size_t)mb->n_tokens, 0);
    if (!w) return VC_ERR_NOMEM;
    for (int64_t t = 0; t < mb->n_tokens; t++) {
        w[t] = -mb->weight[t];
        if (mb->target[t] >= 0 && mb->target[t] != mb->ids[t + 1]) return vc_fail(VC_ERR_INTERNAL, "target");
    }
    *loss = vc_op_dot_const(g, logp, w);
    return VC_OK;
}

static vc_status nan_cb(void *ctx, vc_graph *g, const vc_micro_batch *mb, vc_tensor *logp, vc_tensor *ent,
                        vc_tensor **loss) {
    vc_status st = nll_cb(ctx, g, mb, logp, ent, loss);
    if (!st && mb->index == mb->count - 1) *loss = vc_op_scale(g, *loss, NAN);
    return st;
}

/* verl's agg_loss over the whole mini-batch as a padded [B, T] matrix */
static double reference_loss(vc_trainer *t, const vc_minibatch *b, vc_agg_mode mode) {
    enum { TM = 32 };
    float lm[NSEQ * TM] = { 0 }, mk[NSEQ * TM] = { 0 };
    vc_graph *g = vc_graph_new();
    for (int s = 0; s < b->n_seq; s++) {
        int64_t L = b->cu_seqlens[s + 1] - b->cu_seqlens[s], cu[2] = { 0, L };
        int32_t tgt[TM];
        for (int64_t j = 0; j < L; j++) tgt[j] = j + 1 < L ? b->ids[b->cu_seqlens[s] + j + 1] : -1;
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        vc_batch bb = { 1, cu, b->ids + b->cu_seqlens[s] };
        vc_tensor *h = vc_model_forward(t->model, g, &bb, NULL), *lp;
        vc_model_logprobs(t->model, g, h, tgt, &lp, NULL);
        for (int64_t j = 0; j + 1 < L; j++) {
            lm[s * TM + j] = -lp->data[j];
            mk[s * TM + j] = b->mask[b->cu_seqlens[s] + j + 1];
        }
    }
    vc_graph_free(g);
    vc_loss_norm n;
    vc_train_loss_norm(b, 0, &n);
    vc_agg_norm an = { 1, 0, 0, n.loss_scale_factor };
    double loss;
    vc_agg_loss(lm, mk, NSEQ, TM, mode, &an, &loss, NULL);
    return loss;
}

static void test_accumulation(void) {
    vc_model *m = load();
    vc_trainer t;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    vc_minibatch b;
    make_batch(&b);
    size_t total = 0;
    for (int i = 0; i < t.n_params; i++) total += t.sizes[i];
    for (int mode = 0; mode < 4; mode++) {
        double l_big, l_cnt, l_tok, l_cb;
        float *big = grads_of(&t, &b, NSEQ, 0, (vc_agg_mode)mode, NULL, &l_big);
        float *cnt = grads_of(&t, &b, 2, 0, (vc_agg_mode)mode, NULL, &l_cnt);
        float *tok = grads_of(&t, &b, 1, 30, (vc_agg_mode)mode, NULL, &l_tok);
        float *cb = grads_of(&t, &b, 2, 0, (vc_agg_mode)mode, nll_cb, &l_cb);
        double rc = rel_diff(big, cnt, total), rt = rel_diff(big, tok, total);
        /* 1.05e-6 seen: the micro-batches' GEMMs have other row counts (OpenBLAS's AVX-512 kernels are not row
         * invariant); a wrong aggregation is off by a factor */
        CHECK_MSG(rc < 5e-6 && rt < 5e-6, "%s: grads by count %.3g, by tokens %.3g relative to one batch",
                  vc_agg_mode_name((vc_agg_mode)mode), rc, rt);
        CHECK_MSG(memcmp(cnt, cb, total * 4) == 0, "%s: callback NLL differs from built-in", vc_agg_mode_name((vc_agg_mode)mode));
        double ref = reference_loss(&t, &b, (vc_agg_mode)mode);
        CHECK_NEAR(l_big, ref, 1e-5 * fabs(ref));
        CHECK_NEAR(l_cnt, ref, 1e-5 * fabs(ref));
        CHECK_NEAR(l_tok, ref, 1e-5 * fabs(ref));
        free(big); free(cnt); free(tok); free(cb);
    }
    /* token budget partition respects the budget */
    vc_partition p;
    CHECK_OK(vc_train_micro_partition(&b, 1, 30, &p));
    for (size_t g = 0; g < p.n_groups; g++) {
        int64_t s = 0;
        for (size_t k = p.offsets[g]; k < p.offsets[g + 1]; k++) s += CU[p.items[k] + 1] - CU[p.items[k]];
        CHECK(s <= 30);
    }
    vc_partition_free(&p);
    vc_trainer_free(&t);
    vc_model_free(m);
}

static void test_step_skip_clip(void) {
    vc_model *m = load();
    vc_trainer t;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.micro_bs = 2;
    tc.grad_clip = 1e-3; /* always clips */
    tc.sched.base_lr = 1e-3;
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    vc_minibatch b;
    make_batch(&b);
    vc_step_stats st;
    size_t n0 = t.sizes[0];
    float *w0 = malloc(n0 * 4);
    memcpy(w0, t.opt.params[0].w, n0 * 4);
    /* NaN loss: no update, counted, the schedule still advances */
    CHECK_OK(vc_trainer_step(&t, &b, nan_cb, NULL, &st));
    CHECK(st.skipped == 1 && t.n_skipped == 1 && t.step == 1 && t.opt.step == 0);
    CHECK(memcmp(w0, t.opt.params[0].w, n0 * 4) == 0);
    /* an op's scratch memory failing during the step: the step fails with the fault, nothing is updated */
    vc_cpu_scratch_test(1);
    CHECK(vc_trainer_step(&t, &b, NULL, NULL, &st) == VC_ERR_NOMEM && strstr(vc_last_error(), "scratch memory"));
    CHECK(memcmp(w0, t.opt.params[0].w, n0 * 4) == 0 && t.step == 1 && t.opt.step == 0);
    vc_cpu_scratch_test(0);
    /* pre-clip norm reported; the AdamW step reads the gradients times clipping's factor (test_optim: the bits of
     * scaling them in place), their buffers keep what was accumulated */
    vc_step_stats acc;
    vc_model_zero_grad(m);
    CHECK_OK(vc_trainer_accumulate(&t, &b, NULL, NULL, &acc));
    double pre = vc_grad_norm((const float *const *)t.grads, t.sizes, (size_t)t.n_params);
    CHECK_OK(vc_trainer_step(&t, &b, NULL, NULL, &st));
    CHECK_NEAR(st.grad_norm, pre, 1e-9 * pre);
    double post = vc_grad_norm((const float *const *)t.grads, t.sizes, (size_t)t.n_params);
    CHECK_NEAR(post, pre, 1e-12 * pre);
    CHECK(pre > 1e-2 && t.opt.cfg.grad_scale == 0); /* it clipped (max 1e-3), and the factor was for that step only */
    CHECK(st.skipped == 0 && t.opt.step == 1 && t.step == 2);
    CHECK(memcmp(w0, t.opt.params[0].w, n0 * 4) != 0);
    CHECK(st.n_micro == 3 && st.n_tokens == CU[NSEQ]);
    /* memory plan: numbers filled, a tiny limit refuses with VC_ERR_NOMEM */
    vc_mem_plan plan;
    CHECK_OK(vc_trainer_plan(&t, 64, 0, NULL, &plan));
    CHECK(plan.weights > 0 && plan.grads == plan.optim / 2 && plan.activations > 0);
    /* a budget packed from short rows, one micro-batch as the updates pack them: the same tokens, so the same memory
     * up to the rows' metadata (attention keeps no [T x T] scores in the arena); the trial leaves the weights'
     * gradients zero either way (test_plan_covers_step: a real step of such rows fits the plan) */
    vc_mem_plan packed;
    CHECK_OK(vc_trainer_plan_ex(&t, 64, 16, 0, NULL, &packed));
    CHECK_MSG(fabs((double)packed.activations - (double)plan.activations) <= 0.01 * (double)plan.activations,
              "packed trial %zu vs one sequence %zu", packed.activations, plan.activations);
    /* a loss on the last 4 tokens of each row only (RL's responses): the head on those rows, gradients zero after */
    vc_mem_plan tail;
    CHECK_OK(vc_trainer_plan_rows(&t, 64, 16, 4, 0, NULL, &tail));
    CHECK(tail.activations > 0);
    CHECK(vc_grad_norm((const float *const *)t.grads, t.sizes, (size_t)t.n_params) == 0.0);
    CHECK(vc_trainer_plan(&t, 64, 1024, NULL, &plan) == VC_ERR_NOMEM);
    CHECK(strstr(vc_last_error(), "exceeds") != NULL);
    /* against the memory still available (VERLC_MEMORY_AVAILABLE stands for it): the weights, gradients and AdamW
     * state are allocated already, so only the activations must fit what is left */
    CHECK_OK(vc_trainer_plan(&t, 64, 0, NULL, &plan));
    char avail[32];
    snprintf(avail, sizeof avail, "%zu", plan.activations + 1024);
    setenv("VERLC_MEMORY_AVAILABLE", avail, 1);
    CHECK_MSG(vc_trainer_plan(&t, 64, 0, NULL, &plan) == VC_OK && plan.available == plan.activations + 1024 &&
                  plan.total > plan.available,
              "activations %zu fit %zu available (plan total %zu): %s", plan.activations, plan.available, plan.total,
              vc_last_error());
    snprintf(avail, sizeof avail, "%zu", plan.activations / 2);
    setenv("VERLC_MEMORY_AVAILABLE", avail, 1);
    CHECK(vc_trainer_plan(&t, 64, 0, NULL, &plan) == VC_ERR_NOMEM && strstr(vc_last_error(), "needs") &&
          strstr(vc_last_error(), "VERLC_MEMORY_AVAILABLE"));
    setenv("VERLC_MEMORY_AVAILABLE", "12X", 1);
    CHECK(vc_trainer_plan(&t, 64, 0, NULL, &plan) == VC_ERR_ARG && strstr(vc_last_error(), "VERLC_MEMORY_AVAILABLE"));
    unsetenv("VERLC_MEMORY_AVAILABLE");
    size_t bytes;
    CHECK_OK(vc_parse_bytes("1.5G", &bytes));
    CHECK(bytes == (size_t)(1.5 * 1073741824.0));
    CHECK_OK(vc_parse_bytes("512MiB", &bytes));
    CHECK(bytes == 512u << 20);
    CHECK(vc_parse_bytes("12X", &bytes) == VC_ERR_ARG);
    free(w0);
    vc_trainer_free(&t);
    vc_model_free(m);
}

/* a loss with zero gradient everywhere: AdamW's moments stay 0, so a step only applies weight decay */
static vc_status zero_cb(void *ctx, vc_graph *g, const vc_micro_batch *mb, vc_tensor *logp, vc_tensor *ent,
                         vc_tensor **loss) {
    vc_status st = nll_cb(ctx, g, mb, logp, ent, loss);
    if (!st) *loss = vc_op_scale(g, *loss, 0.0f);
    return st;
}

/* weight decay reaches every trained tensor (norm weights and biases too), as verl's optimizer over
 * module.parameters() does; decay_matrices_only keeps 1-D tensors as they are */
/* the plan's trial packs its rows into one micro-batch, as the updates do: a real step of the same rows (4 rows of
 * 16 tokens, micro_bs 4) needs no more activation memory than the plan measured (it once ran the rows one by one,
 * a quarter of the memory) */
static void test_plan_covers_step(void) {
    vc_model *m = load();
    vc_trainer t;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    tc.micro_bs = 4;
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    int64_t cu[5] = { 0, 16, 32, 48, 64 };
    int32_t ids[64];
    float tail[64];
    for (int i = 0; i < 64; i++) {
        ids[i] = (i * 37 + 11) % 100;
        tail[i] = i % 16 >= 12; /* the loss on each row's last 4 tokens, as vc_trainer_plan_rows' tail */
    }
    for (int k = 0; k < 2; k++) {
        vc_mem_plan plan;
        CHECK_OK(vc_trainer_plan_rows(&t, 64, 16, k ? 4 : 0, 0, NULL, &plan));
        vc_minibatch b = { 4, cu, ids, k ? tail : NULL };
        vc_step_stats st;
        vc_graph_clear_peak(t.g);
        CHECK_OK(vc_trainer_accumulate(&t, &b, NULL, NULL, &st));
        CHECK(st.n_micro == 1);
        size_t peak = vc_graph_peak_bytes(t.g);
        CHECK_MSG(peak <= plan.activations && peak >= plan.activations * 0.9,
                  "a 4 x 16-token micro-batch (loss tail %d) peaks at %zu bytes, the plan says %zu", k ? 4 : 0, peak,
                  plan.activations);
    }
    vc_trainer_free(&t);
    vc_model_free(m);
}

static void test_weight_decay(void) {
    for (int only = 0; only < 2; only++) {
        vc_model *m = load();
        vc_trainer t;
        vc_trainer_config tc;
        vc_trainer_config_default(&tc);
        tc.sched.base_lr = tc.adamw.lr = 0.1;
        tc.adamw.weight_decay = 0.5;
        tc.decay_matrices_only = only;
        CHECK_OK(vc_trainer_init(&t, m, &tc));
        vc_minibatch b;
        make_batch(&b);
        float **w0 = calloc((size_t)t.n_params, sizeof *w0);
        for (int i = 0; i < t.n_params; i++) {
            w0[i] = malloc(t.sizes[i] * 4);
            memcpy(w0[i], t.opt.params[i].w, t.sizes[i] * 4);
        }
        vc_step_stats st;
        CHECK_OK(vc_trainer_step(&t, &b, zero_cb, NULL, &st));
        int n1 = 0, bad = 0;
        for (int i = 0, j = 0; i < t.n_params; i++, j++) {
            vc_tensor *p = vc_model_param(m, j, NULL, NULL);
            while (!p->grad) p = vc_model_param(m, ++j, NULL, NULL); /* buffers are not trained */
            int vec = p->ndim == 1;
            float f = only && vec ? 1.0f : 1.0f - 0.1f * 0.5f;
            n1 += vec;
            for (size_t k = 0; k < t.sizes[i]; k++) bad += fabsf(t.opt.params[i].w[k] - w0[i][k] * f) > 1e-6f * fabsf(w0[i][k]);
            free(w0[i]);
        }
        CHECK_MSG(n1 > 0 && bad == 0, "decay_matrices_only=%d: %d weights off the decayed value (%d 1-D tensors)", only,
                  bad, n1);
        free(w0);
        vc_trainer_free(&t);
        vc_model_free(m);
    }
}

/* sequences [a, a + n) of b as a mini-batch of their own (cu rebased into `cu`) */
static vc_minibatch part(const vc_minibatch *b, int a, int n, int64_t *cu) {
    for (int i = 0; i <= n; i++) cu[i] = b->cu_seqlens[a + i] - b->cu_seqlens[a];
    const int64_t o = b->cu_seqlens[a];
    return (vc_minibatch){ n, cu, b->ids + o, b->mask + o };
}

/* micro_norm (verl b178a3cd's fsdp_sft_trainer): each micro-batch's own token mean over the micro-batch count, i.e. the
 * mean of the micro-batches' default gradients; per-sequence NLL adds up to the batch's */
static void test_micro_norm(void) {
    vc_model *m = load();
    vc_trainer t;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    vc_minibatch b, pa, pb;
    make_batch(&b);
    int64_t cu_a[NSEQ + 1], cu_b[NSEQ + 1];
    pa = part(&b, 0, 4, cu_a), pb = part(&b, 4, NSEQ - 4, cu_b);
    size_t total = 0;
    for (int i = 0; i < t.n_params; i++) total += t.sizes[i];
    double la, lb, lg, lm;
    float *ga = grads_of(&t, &pa, 4, 0, VC_AGG_TOKEN_MEAN, NULL, &la);
    float *gb = grads_of(&t, &pb, 4, 0, VC_AGG_TOKEN_MEAN, NULL, &lb);
    float *glob = grads_of(&t, &b, 4, 0, VC_AGG_TOKEN_MEAN, NULL, &lg);
    t.cfg.micro_norm = 1;
    float *mic = grads_of(&t, &b, 4, 0, VC_AGG_TOKEN_MEAN, NULL, &lm);
    t.cfg.micro_norm = 0;
    for (size_t k = 0; k < total; k++) ga[k] = 0.5f * (ga[k] + gb[k]);
    double r = rel_diff(ga, mic, total), rg = rel_diff(glob, mic, total);
    CHECK_MSG(r < 5e-6 && rg > 1e-3, "micro_norm: %.3g from the micro-batches' mean gradient, %.3g from the global one", r,
              rg);
    CHECK_NEAR(lm, 0.5 * (la + lb), 1e-6 * fabs(la + lb));
    double nll[NSEQ], tok[NSEQ], one[1], one_tok[1], sum, n_tok, s = 0, n = 0;
    CHECK_OK(vc_trainer_eval_seq_nll(&t, &b, nll, tok));
    CHECK_OK(vc_trainer_eval_nll(&t, &b, &sum, &n_tok));
    for (int i = 0; i < NSEQ; i++) s += nll[i], n += tok[i];
    CHECK_NEAR(s, sum, 1e-5 * sum);
    CHECK_NEAR(n, n_tok, 0);
    int64_t cu1[2];
    vc_minibatch p5 = part(&b, 5, 1, cu1);
    CHECK_OK(vc_trainer_eval_seq_nll(&t, &p5, one, one_tok));
    CHECK_MSG(fabs(one[0] - nll[5]) <= 1e-5 * nll[5] && one_tok[0] == tok[5] && tok[5] > 0,
              "sequence 5 alone: NLL %.9g over %g, in the batch %.9g over %g", one[0], one_tok[0], nll[5], tok[5]);
    free(ga), free(gb), free(glob), free(mic);
    vc_trainer_free(&t);
    vc_model_free(m);
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    test_accumulation();
    test_step_skip_clip();
    test_plan_covers_step();
    test_weight_decay();
    test_micro_norm();
    return vc_test_done();
}
