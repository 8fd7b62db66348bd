/* vc_model_head_gather (the student's head for distillation's forward_kl_topk, a chunk of positions at a
 * time) against the whole-logits path (vc_model_logits, the temperature, vc_op_logsoftmax_gather): the same
 * log-probs and top-k ids, the same gradients of the head's weights and of a decoder layer's (through the hidden
 * states), for chunks of 1, 5 and the default rows; on heads that are tied, biased, soft-capped and
 * row-normalised; on cpu and the sim device (VC_HEAD_DEVICE=cuda: the CUDA backend). Bad ids and K are
 * refused. */
#include "tensor/backend.h"
#include "verlc/device.h"
#include "verlc/model.h"
#include "verlc/ops.h"
#include "model_test_util.h"
#include "vc_test.h"

#define R 18
#define K 4
#define TEMP 0.7f

typedef struct {
    float y[R * K];
    int32_t top[R * K];
    float *gw, *gl; /* gradients of the head's weight and of a layer-0 parameter */
} result;

/* parameter indices: the head's weight (the embedding when tied) and a decoder layer-0 matrix */
static void pick_params(vc_model *m, int *head, int *lay) {
    const vc_model_config *c = vc_model_cfg(m);
    *head = *lay = -1;
    for (int i = 0; i < vc_model_n_params(m); i++) {
        vc_tensor *t = vc_model_param(m, i, NULL, NULL);
        int l = vc_model_param_layer(m, i);
        if (l < 0 && t->n == c->vocab * c->hidden && t->grad) *head = i; /* the last: lm_head after the embedding */
        if (l == 0 && *lay < 0 && t->ndim == 2 && t->grad) *lay = i;
    }
}

/* chunk < 0: the whole-logits reference */
static void pass(vc_model *m, vc_graph *g, const int32_t *ids, const float *wk, int64_t chunk, int head, int lay,
                 result *r) {
    vc_model_zero_grad(m);
    vc_graph_reset(g);
    vc_graph_set_grad(g, 1);
    vc_batch b = { 2, CU, IDS };
    vc_tensor *h = vc_model_forward(m, g, &b, NULL), *y = NULL;
    if (chunk < 0) {
        vc_tensor *z = h ? vc_op_scale(g, vc_model_logits(m, g, h), 1.0f / TEMP) : NULL;
        y = z ? vc_op_logsoftmax_gather(g, z, ids, K, r->top) : NULL;
    } else
        y = vc_model_head_gather(m, g, h, ids, K, TEMP, chunk, r->top);
    CHECK_MSG(y != NULL, "head gather (chunk %lld) failed", (long long)chunk);
    if (!y) return;
    CHECK_OK(vc_tensor_read(y, r->y));
    CHECK_OK(vc_graph_backward(g, vc_op_dot_const(g, y, wk), 1.0f));
    CHECK_OK(vc_model_param_read(m, head, 1, r->gw));
    CHECK_OK(vc_model_param_read(m, lay, 1, r->gl));
}

static double rel_diff(const float *a, const float *b, int64_t n) {
    double d = 0, s = 1e-12;
    for (int64_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i])), s = fmax(s, fabs((double)b[i]));
    return d / s;
}

static void run(const char *fixture) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/models/%s", vc_test_shared(), fixture);
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    CHECK_OK(vc_model_enable_grad(m));
    const vc_model_config *c = vc_model_cfg(m);
    int head, lay;
    pick_params(m, &head, &lay);
    CHECK_MSG(head >= 0 && lay >= 0, "%s: no head or layer-0 parameter", fixture);
    if (head < 0 || lay < 0) return vc_model_free(m);
    int64_t nh = vc_model_param(m, head, NULL, NULL)->n, nl = vc_model_param(m, lay, NULL, NULL)->n;
    int32_t ids[R * K];
    float wk[R * K];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < R * K; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((s >> 33) % (uint64_t)c->vocab);
        wk[i] = (float)((double)(s >> 11) / 9007199254740992.0) - 0.5f;
    }
    vc_graph *g = vc_graph_new();
    result ref, got;
    ref.gw = malloc(4 * (size_t)nh), ref.gl = malloc(4 * (size_t)nl);
    got.gw = malloc(4 * (size_t)nh), got.gl = malloc(4 * (size_t)nl);
    pass(m, g, ids, wk, -1, head, lay, &ref);
    static const int64_t CHUNKS[] = { 1, 5, 0 };
    for (int k = 0; k < 3; k++) {
        pass(m, g, ids, wk, CHUNKS[k], head, lay, &got);
        double dy = rel_diff(got.y, ref.y, R * K), dw = rel_diff(got.gw, ref.gw, nh), dl = rel_diff(got.gl, ref.gl, nl);
        CHECK_MSG(dy < 1e-6 && dw < 1e-5 && dl < 1e-5 && !memcmp(got.top, ref.top, sizeof got.top),
                  "%s chunk %lld: log-probs %g, head gradient %g, layer-0 gradient %g apart; top-k ids %s", fixture,
                  (long long)CHUNKS[k], dy, dw, dl, memcmp(got.top, ref.top, sizeof got.top) ? "differ" : "equal");
        if (k == 0) printf("%-10s chunks of 1 row vs whole logits: log-probs %.2g, head grad %.2g, layer-0 grad %.2g\n",
                           fixture, dy, dw, dl);
    }
    /* bad input: an id beyond the vocabulary, K 0 */
    vc_graph_reset(g);
    vc_batch b = { 2, CU, IDS };
    vc_tensor *h = vc_model_forward(m, g, &b, NULL);
    ids[7] = (int32_t)c->vocab;
    CHECK(vc_model_head_gather(m, g, h, ids, K, 1.0f, 0, NULL) == NULL && vc_graph_status(g) == VC_ERR_ARG);
    vc_graph_reset(g);
    h = vc_model_forward(m, g, &b, NULL);
    CHECK(vc_model_head_gather(m, g, h, ids, 0, 1.0f, 0, NULL) == NULL && vc_graph_status(g) == VC_ERR_SHAPE);
    free(ref.gw), free(ref.gl), free(got.gw), free(got.gl);
    vc_graph_free(g);
    vc_model_free(m);
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    run("qwen3");
    run("llama_tied"); /* the head is the embedding */
    run("phi");        /* a biased head */
    run("gemma2");     /* soft-capped logits */
    run("baichuan2");  /* NormHead */
    CHECK(vc_backend_sim() != NULL);
    const char *dev = getenv("VC_HEAD_DEVICE");
    CHECK_OK(vc_device_select(dev && *dev ? dev : "sim", "test"));
    run("qwen3");
    run("gemma2");
    CHECK_OK(vc_device_select("cpu", "test"));
    return vc_test_done();
}
