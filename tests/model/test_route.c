/* Router replay (verl's actor.router_replay) on the MoE fixtures: a forward that records each MoE layer's
 * experts, replayed, gives the same log-probs bit for bit; other experts replayed change them; with the
 * routing fixed the loss is smooth in the router's weights, so its gradient matches finite differences;
 * a replayed expert outside the layer's is refused. On cpu and the sim device. */
#include "tensor/backend.h"
#include "verlc/device.h"
#include "verlc/model.h"
#include "verlc/ops.h"
#include "model_test_util.h"
#include "vc_test.h"

static double max_diff(const float *a, const float *b, int n) {
    double d = 0;
    for (int i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* the router weight of the last MoE layer (its name ends in "router") */
static vc_tensor *router_of(vc_model *m) {
    vc_tensor *r = NULL;
    for (int i = 0; i < vc_model_n_params(m); i++) {
        const char *name = NULL;
        vc_tensor *t = vc_model_param(m, i, &name, NULL);
        size_t n = strlen(name);
        if (n >= 6 && !strcmp(name + n - 6, "router")) r = t;
    }
    return r;
}

static void run(const char *fixture) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fixtures/models/%s", vc_test_shared(), fixture);
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    const vc_model_config *c = vc_model_cfg(m);
    size_t n = (size_t)c->n_layer * 18 * (size_t)c->top_k;
    int32_t *rec = malloc(n * 4), *other = malloc(n * 4);
    vc_graph *g = vc_graph_new();
    float base[18], a[18], b[18], o[18];
    for (size_t i = 0; i < n; i++) rec[i] = -7;
    loss_of_routed(m, g, NULL, 0, base, 0);
    loss_of_routed(m, g, rec, VC_ROUTE_RECORD, a, 0);
    int moe_layers = 0, recorded = 1;
    for (int l = 0; l < c->n_layer; l++) {
        moe_layers += c->is_moe[l];
        for (size_t i = 0; c->is_moe[l] && i < 18 * (size_t)c->top_k; i++) {
            int32_t e = rec[(size_t)l * 18 * c->top_k + i];
            recorded &= e >= 0 && e < c->n_expert;
        }
    }
    CHECK_MSG(moe_layers > 0 && recorded, "%s: %d MoE layers, recorded experts valid: %d", fixture, moe_layers, recorded);
    CHECK_MSG(max_diff(a, base, 18) == 0, "%s: recording changed the forward", fixture);
    loss_of_routed(m, g, rec, VC_ROUTE_REPLAY, b, 0);
    CHECK_MSG(max_diff(a, b, 18) == 0, "%s: replaying the recorded experts differs by %g", fixture, max_diff(a, b, 18));
    /* every token of every MoE layer routed to other experts (each shifted by one: still distinct) */
    for (size_t i = 0; i < n; i++) other[i] = (rec[i] + 1) % (int32_t)c->n_expert;
    loss_of_routed(m, g, other, VC_ROUTE_REPLAY, o, 0);
    double moved = max_diff(a, o, 18);
    CHECK_MSG(moved > 1e-4, "%s: other experts replayed moved the log-probs by %g only", fixture, moved);
    /* routing fixed: the router's gradient by finite differences */
    CHECK_OK(vc_model_enable_grad(m));
    vc_tensor *R = router_of(m);
    CHECK(R != NULL);
    double worst = 0;
    for (int k = 0; R && k < 4; k++) {
        vc_model_zero_grad(m);
        loss_of_routed(m, g, other, VC_ROUTE_REPLAY, NULL, 1);
        int64_t j = (k * 37 + 5) % R->n;
        float keep = tensor_elem(R, j, 0, NULL), an = tensor_elem(R, j, 1, NULL), h = 1e-2f, x = keep + h;
        tensor_elem(R, j, 0, &x);
        float up = loss_of_routed(m, g, other, VC_ROUTE_REPLAY, NULL, 0);
        x = keep - h;
        tensor_elem(R, j, 0, &x);
        float dn = loss_of_routed(m, g, other, VC_ROUTE_REPLAY, NULL, 0);
        tensor_elem(R, j, 0, &keep);
        double fd = (up - dn) / (2 * h);
        worst = fmax(worst, fabs(fd - an) / (fabs(fd) + fabs(an) + 1e-3));
    }
    printf("%s: %d MoE layers; replay of the recorded experts bitwise equal; other experts move log-probs by %.3g; "
           "router gradient vs finite differences %.2g\n", fixture, moe_layers, moved, worst);
    CHECK_MSG(worst < 0.05, "%s: router gradient under replay off by %g", fixture, worst);
    /* an expert outside the layer's: refused, naming the token */
    other[(size_t)(c->n_layer - 1) * 18 * c->top_k + 3] = (int32_t)c->n_expert;
    CHECK(isnan(loss_of_routed(m, g, other, VC_ROUTE_REPLAY, NULL, 0)));
    CHECK_MSG(strstr(vc_last_error(), "replayed expert") != NULL, "%s", vc_last_error());
    free(rec);
    free(other);
    vc_graph_free(g);
    vc_model_free(m);
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    run("qwen3_moe");
    run("mixtral");
    run("qwen2_moe");
    run("deepseek_v3"); /* sigmoid scores, the correction bias, groups */
    /* the sim device (VC_ROUTE_DEVICE=cuda: the CUDA backend, e.g. the emulator's build) */
    CHECK(vc_backend_sim() != NULL);
    const char *dev = getenv("VC_ROUTE_DEVICE");
    CHECK_OK(vc_device_select(dev && *dev ? dev : "sim", "test"));
    run("qwen3_moe");
    run("deepseek_v3");
    CHECK_OK(vc_device_select("cpu", "test"));
    return vc_test_done();
}
