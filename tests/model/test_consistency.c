/* Models of other shapes than the fixtures (random weights from configs written here): packed vs
 * one-at-a-time log-probs, KV-cache decoding vs full recompute, finite-difference gradients, thread
 * count and gradient checkpointing leave every bit unchanged; on the cpu device and on the sim device
 * (backend memory behind poisoned pointers: results are only read through vc_tensor_read and the
 * model's host read-back), where every figure must equal the cpu one bit for bit. */
#include "tensor/backend.h"
#include "verlc/device.h"
#include "verlc/model.h"
#include "verlc/ops.h"
#include "verlc/pool.h"
#include "model_test_util.h"
#include "vc_test.h"
#include <unistd.h>

/* one element of parameter i (backend memory): read, or set and return the old value */
static float param_elem(vc_model *m, int i, int64_t j, int grad, const float *set) {
    vc_tensor *t = vc_model_param(m, i, NULL, NULL);
    float *w = malloc((size_t)t->n * 4), v = NAN;
    if (w && !vc_model_param_read(m, i, grad, w)) {
        v = w[j];
        if (set) {
            w[j] = *set;
            CHECK_OK(vc_model_param_write(m, i, w));
        }
    }
    free(w);
    return v;
}

static int argmax_last(vc_model *m, vc_graph *g, vc_tensor *h) {
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(m)), T = h->n / H;
    vc_tensor *hl = vc_tensor_wrap(g, h->data + (T - 1) * H, 2, (int64_t[]){ 1, H });
    vc_tensor *z = vc_model_logits(m, g, hl);
    float zh[256];
    if (!z || z->n > 256 || vc_tensor_read(z, zh)) return -1;
    int best = 0;
    for (int64_t v = 1; v < z->n; v++)
        if (zh[v] > zh[best]) best = (int)v;
    return best;
}

/* the figures of one config, compared across devices */
typedef struct {
    float packed[18], ref[18];
    int greedy[6];
} figures;

static void check_model(vc_model *m, int k, figures *fig) {
    const vc_model_config *c = vc_model_cfg(m);
    vc_graph *g = vc_graph_new();
    float packed[18], single[18];
    /* packed vs one sequence at a time */
    loss_of(m, g, packed, 0);
    double e = 0;
    for (int s = 0; s < 2; s++) {
        int64_t cu[2] = { 0, CU[s + 1] - CU[s] };
        int32_t tgt[18];
        for (int64_t t = 0; t < cu[1]; t++) tgt[t] = t + 1 < cu[1] ? IDS[CU[s] + t + 1] : -1;
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        vc_batch b = { 1, cu, IDS + CU[s] };
        vc_tensor *h = vc_model_forward(m, g, &b, NULL), *lp;
        float one[18];
        CHECK_OK(vc_model_logprobs(m, g, h, tgt, &lp, NULL));
        CHECK_OK(vc_tensor_read(lp, one));
        for (int64_t t = 0; t < cu[1]; t++) single[CU[s] + t] = one[t];
    }
    for (int t = 0; t < 18; t++) e = fmax(e, fabs(packed[t] - single[t]));
    CHECK_MSG(e < 1e-5, "config %d (%s): packed vs single log-probs differ by %g", k, c->model_type, e);
    /* KV-cache greedy vs full recompute */
    vc_kv_cache *kc;
    CHECK_OK(vc_kv_cache_new(m, 1, 32, &kc));
    int32_t seq[32];
    memcpy(seq, IDS, 5 * 4);
    int n = 5, ok = 1;
    int64_t cu[2] = { 0, 5 };
    const int32_t *feed = seq;
    for (int step = 0; step < 6; step++) {
        vc_graph_reset(g);
        vc_batch b = { 1, cu, feed };
        int cached = argmax_last(m, g, vc_model_forward(m, g, &b, kc));
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        int64_t full_cu[2] = { 0, n };
        vc_batch fb = { 1, full_cu, seq };
        int full = argmax_last(m, g, vc_model_forward(m, g, &fb, NULL));
        ok &= cached == full && full >= 0;
        fig->greedy[step] = full;
        seq[n++] = full;
        feed = seq + n - 1;
        cu[1] = 1;
    }
    vc_kv_cache_free(kc);
    CHECK_MSG(ok, "config %d (%s): KV-cache decoding differs from recompute", k, c->model_type);
    /* gradients: finite differences on a few elements of each parameter */
    CHECK_OK(vc_model_enable_grad(m));
    loss_of(m, g, NULL, 1);
    double worst = 0;
    for (int i = 0; i < vc_model_n_params(m); i++) {
        const char *name;
        vc_tensor *t = vc_model_param(m, i, &name, NULL);
        for (int r = 0; r < 2 && t->grad; r++) {
            int64_t j = (int64_t)((i * 7919 + r * 104729) % t->n);
            float keep = param_elem(m, i, j, 0, NULL), an = param_elem(m, i, j, 1, NULL), h = 2e-3f;
            float x = keep + h;
            param_elem(m, i, j, 0, &x);
            float up = loss_of(m, g, NULL, 0);
            x = keep - h;
            param_elem(m, i, j, 0, &x);
            float dn = loss_of(m, g, NULL, 0);
            param_elem(m, i, j, 0, &keep);
            double fd = (up - dn) / (2 * h), err = fabs(fd - an) / (fabs(fd) + fabs(an) + 2e-2);
            if (err > worst) worst = err;
            if (err > 0.05) fprintf(stderr, "  %s %s[%lld]: fd %g analytic %g\n", c->model_type, name, (long long)j, fd, an);
        }
    }
    CHECK_MSG(worst < 0.05, "config %d (%s): worst FD gradient error %g", k, c->model_type, worst);
    /* gradient checkpointing and thread count give the same bits */
    float ref[18], other[18];
    vc_model_zero_grad(m);
    loss_of(m, g, ref, 1);
    int nparams = vc_model_n_params(m);
    float **g0 = calloc((size_t)nparams, sizeof *g0);
    for (int i = 0; i < nparams; i++) {
        vc_tensor *t = vc_model_param(m, i, NULL, NULL);
        g0[i] = calloc((size_t)t->n, 4);
        if (t->grad) CHECK_OK(vc_model_param_read(m, i, 1, g0[i]));
    }
    float *gi = NULL;
    for (int mode = 0; mode < 2; mode++) {
        vc_model_zero_grad(m);
        if (mode == 0) vc_model_set_checkpointing(m, 1);
        else vc_set_threads(1);
        loss_of(m, g, other, 1);
        vc_model_set_checkpointing(m, 0);
        vc_set_threads(2);
        int same = !memcmp(ref, other, sizeof ref);
        for (int i = 0; i < nparams; i++) {
            vc_tensor *t = vc_model_param(m, i, NULL, NULL);
            if (!t->grad) continue;
            free(gi);
            gi = malloc((size_t)t->n * 4);
            same &= gi && !vc_model_param_read(m, i, 1, gi) && !memcmp(g0[i], gi, (size_t)t->n * 4);
        }
        CHECK_MSG(same, "config %d (%s): %s changed log-probs or gradients", k, c->model_type,
                  mode ? "1 thread instead of 2" : "gradient checkpointing");
    }
    memcpy(fig->packed, packed, sizeof packed);
    memcpy(fig->ref, ref, sizeof ref);
    free(gi);
    for (int i = 0; i < nparams; i++) free(g0[i]);
    free(g0);
    vc_graph_free(g);
}

#define N_CONFIGS N_RANDOM_CONFIGS

int main(void) {
    static const char *DEVICES[] = { "cpu", "sim" };
    static figures fig[2][N_CONFIGS];
    vc_set_threads(2);
    CHECK(vc_backend_sim() != NULL); /* a strong reference links the sim backend in */
    for (int d = 0; d < 2; d++) {
        CHECK_OK(vc_device_select(DEVICES[d], "test"));
        for (int k = 0; k < N_CONFIGS; k++) {
            vc_model *m = random_model(RANDOM_CONFIGS[k], k);
            if (!m) continue;
            check_model(m, k, &fig[d][k]);
            printf("%-4s %-12s %lld params ok\n", DEVICES[d], vc_model_cfg(m)->model_type,
                   (long long)vc_model_param_count(m));
            vc_model_free(m);
            if (d == 1)
                CHECK_MSG(!memcmp(&fig[0][k], &fig[1][k], sizeof(figures)),
                          "config %d: log-probs or greedy tokens differ between the cpu and sim devices", k);
        }
    }
    CHECK_OK(vc_device_select("cpu", "test"));
    return vc_test_done();
}
