/* `verlc check`: forward, per-token log-probs, entropy, loss, every gradient and greedy decoding
 * against transformers' outputs stored beside the checkpoint. */
#include "verlc/check.h"
#include "verlc/json.h"
#include "model_internal.h"
#include "verlc/ops.h"
#include "verlc/safetensors.h"
#include "verlc/vision.h"
#include "tensor/backend.h"
#include <math.h>
#include <string.h>

static const char *NAMES[VC_CHECK_COUNT] = { "logits", "logprobs", "entropy", "loss", "grads", "greedy", "packed" };
const char *vc_check_name(int i) { return i >= 0 && i < VC_CHECK_COUNT ? NAMES[i] : "?"; }

static vc_status read_ints(const vc_checkpoint *ck, const char *name, int32_t *out, int64_t *n, int64_t *shape) {
    const vc_st_tensor *t = vc_ckpt_find(ck, name);
    if (!t || (t->dtype != VC_I64 && t->dtype != VC_I32) || t->ndim != 2 || t->shape[0] * t->shape[1] > 64 * 64)
        return vc_fail(VC_ERR_FORMAT, "reference.safetensors: '%s' is missing or not a small 2-d integer tensor", name);
    *n = t->shape[0] * t->shape[1];
    shape[0] = t->shape[0];
    shape[1] = t->shape[1];
    for (int64_t i = 0; i < *n; i++)
        out[i] = t->dtype == VC_I64 ? (int32_t)((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    return VC_OK;
}

static float *ref_f32(const vc_checkpoint *ck, const char *name, int64_t *n) {
    const vc_st_tensor *t = vc_ckpt_find(ck, name);
    if (!t) return NULL;
    *n = vc_st_tensor_numel(t);
    float *b = vc_malloc((size_t)*n * 4);
    if (b) vc_st_tensor_to_f32(t, b);
    return b;
}

/* Tolerances per matmul precision. f32: what float32 reassociation gives. bf16 (GEMM inputs rounded to
 * bf16, f32 accumulation): every GEMM input carries a relative error up to 2^-9, compounded over the
 * layers, so the logits tolerance scales with the logits' size. The bf16 figures are about twice the
 * worst errors of a bf16-emulated CPU run over the 29 shared fixtures (logits 0.033 x max|ref logit|
 * (qwen3_moe), log-probs 0.065, entropy 0.046 (gemma), loss 1.5e-3 x |loss|, gradients 0.060 x
 * max|ref| (mixtral)). Packed vs one at a time: the GEMMs see other row counts, and an optimised GEMM (OpenBLAS's
 * AVX-512 kernels, cuBLAS) need not give a row the same bits in both; over the fixtures that is up to 5.9e-5 in
 * f32 (qwen3_next: the Gated DeltaNet recurrence carries it along) and 4.7e-2 in bf16 on the CUDA emulator (a
 * rounding that lands on the other side of a bf16 step, in an MoE: laguna 1.7e-2, glm4v_moe_image 4.7e-2), so 1e-4
 * and 6e-2 (a packing mistake is of order 1). */
typedef struct {
    double logits, logits_rel; /* max abs error <= logits + logits_rel * max|reference logit| */
    double logprobs, entropy, loss_rel, grads_rel, packed;
} check_tol;
static const check_tol TOL_F32 = { 1e-3, 0, 1e-3, 1e-3, 1e-4, 1e-3, 1e-4 };
static const check_tol TOL_BF16 = { 0, 6e-2, 1.5e-1, 1e-1, 5e-3, 1.5e-1, 6e-2 };

static const check_tol *tolerances(void) { return vc_matmul_precision() == VC_PREC_BF16 ? &TOL_BF16 : &TOL_F32; }

/* PyTorch's own bf16 autocast errors against the f32 reference (reference.json "bf16_torch", written by
 * tools/fixtures/make_fixture.py): a small random MoE model can flip expert choices in bf16, which no fixed
 * tolerance covers. With bf16 matmuls an item then passes within 1.5 x PyTorch's error too. */
typedef struct {
    double logits, logprobs, entropy, loss, grads; /* 0: not given */
} torch_bf16;

static void read_torch_bf16(const char *dir, torch_bf16 *tb) {
    memset(tb, 0, sizeof *tb);
    char *p = vc_path_join(dir, "reference.json");
    cJSON *j = NULL;
    if (p && vc_file_exists(p) && vc_json_load_file(p, &j) == VC_OK) {
        const cJSON *b = vc_json_member(j, "bf16_torch");
        const char *k[5] = { "logits", "logprobs", "entropy", "loss", "grads" };
        double *v[5] = { &tb->logits, &tb->logprobs, &tb->entropy, &tb->loss, &tb->grads };
        for (int i = 0; b && i < 5; i++) {
            const cJSON *x = vc_json_member(b, k[i]);
            if (cJSON_IsNumber(x) && x->valuedouble >= 0) *v[i] = x->valuedouble;
        }
    }
    cJSON_Delete(j);
    free(p);
}

/* the tolerance of an item with bf16 matmuls: its own, or 1.5 x PyTorch's bf16 error when larger */
static double with_torch(double tol, double torch_err) {
    return tolerances() == &TOL_BF16 && 1.5 * torch_err > tol ? 1.5 * torch_err : tol;
}

const char *vc_check_tolerances(void) {
    static char line[512];
    const check_tol *t = tolerances();
    char lg[64];
    if (t->logits_rel > 0) snprintf(lg, sizeof lg, "%.3g x max|ref logit|", t->logits_rel);
    else snprintf(lg, sizeof lg, "%.3g", t->logits);
    snprintf(line, sizeof line,
             "%s matmul: logits %s, logprobs %.3g, entropy %.3g (max abs), loss %.3g x |loss|, grads %.3g x "
             "max(max|ref| per tensor, 1e-3 x the largest), packed %.3g, greedy: %s",
             t == &TOL_BF16 ? "bf16" : "f32", lg, t->logprobs, t->entropy, t->loss_rel, t->grads_rel, t->packed,
             t == &TOL_BF16 ? "a flip only where the reference top-2 margin < 2 x the logits tolerance; or within 1.5 x "
             "PyTorch's own bf16 autocast error where the fixture's reference.json gives it (bf16_torch)" : "exact");
    return line;
}

/* backend tensor -> new host array (NULL and the message set on failure) */
static float *host_copy(const vc_tensor *t) {
    float *b = t ? vc_malloc((size_t)(t->n ? t->n : 1) * sizeof(float)) : NULL;
    if (b && vc_tensor_read(t, b)) {
        free(b);
        b = NULL;
    }
    return b;
}

static void item(vc_check_result *r, int k, double err, double tol, const char *detail) {
    vc_check_item *it = &r->item[k];
    it->ran = 1;
    it->max_abs_err = err;
    it->tol = tol;
    it->ok = err <= tol && !isnan(err);
    if (detail) snprintf(it->detail, sizeof it->detail, "%s", detail);
}

/* the reference batch packed (pad tokens are never computed), the reference's values on it and the model's */
typedef struct {
    int B, L;
    int64_t cu[65];
    int32_t packed[4096], target[4096]; /* target: each token's next, -1 at a row's end */
    float *rl, *rlp, *ren, *rloss;      /* the reference's logits, log-probs, entropies and loss */
    int64_t nl;
    float *hz, *hlp, *hen;              /* the model's logits, log-probs and entropies, host copies */
    vc_images im;                       /* image-text fixtures: pixel_values and image_grid_thw (im.n 0: none) */
    int32_t grid[3 * 64];
} fwd_check;

/* pixel_values [patches, row] and image_grid_thw [images, 3] (im->n 0 when the reference has none) */
static vc_status read_images(const vc_checkpoint *ck, const char *pix_name, const char *grid_name, int32_t *grid,
                             vc_images *im) {
    const vc_st_tensor *p = vc_ckpt_find(ck, pix_name);
    int64_t n, shape[2], np;
    memset(im, 0, sizeof *im);
    if (!p) return VC_OK;
    vc_status st = read_ints(ck, grid_name, grid, &n, shape);
    if (st) return st;
    if (p->ndim != 2 || shape[1] != 3) return vc_fail(VC_ERR_FORMAT, "reference.safetensors: '%s' is not [patches, "
                                                      "floats] or '%s' not [images, 3]", pix_name, grid_name);
    int64_t rows = 0;
    for (int64_t i = 0; i < shape[0]; i++) rows += (int64_t)grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
    if (rows != p->shape[0])
        return vc_fail(VC_ERR_FORMAT, "reference.safetensors: '%s' has %lld patches; '%s' gives %lld", pix_name,
                       (long long)p->shape[0], grid_name, (long long)rows);
    im->n = (int)shape[0];
    im->grid = grid;
    im->row = p->shape[1];
    im->pixels = ref_f32(ck, pix_name, &np);
    return im->pixels ? VC_OK : VC_ERR_NOMEM;
}

static vc_status read_batch(const vc_checkpoint *ck, fwd_check *f) {
    int32_t ids[4096], mask[4096];
    int64_t n, shape[2], n2, s2[2];
    vc_status st = read_ints(ck, "input_ids", ids, &n, shape);
    if (!st) st = read_ints(ck, "attention_mask", mask, &n2, s2);
    if (st) return st;
    int B = f->B = (int)shape[0], L = f->L = (int)shape[1];
    int64_t *cu = f->cu;
    if (B > 64) return vc_fail(VC_ERR_FORMAT, "reference batch too large");
    for (int b = 0; b < B; b++) {
        int len = 0;
        while (len < L && mask[b * L + len]) len++;
        for (int t = 0; t < len; t++) {
            f->packed[cu[b] + t] = ids[b * L + t];
            f->target[cu[b] + t] = t + 1 < len ? ids[b * L + t + 1] : -1;
        }
        cu[b + 1] = cu[b] + len;
    }
    return read_images(ck, "pixel_values", "image_grid_thw", f->grid, &f->im);
}

/* the forward's logits, log-probs (lp) and entropies, read back */
static vc_status forward_outputs(vc_model *m, vc_graph *g, const vc_batch *batch, fwd_check *f, vc_tensor **lp) {
    vc_status st = VC_OK;
    vc_tensor *h = vc_model_forward(m, g, batch, NULL);
    vc_tensor *z = h ? vc_model_logits(m, g, h) : NULL, *en = NULL;
    if (!z || (st = vc_model_logprobs(m, g, h, f->target, lp, &en)))
        return st ? st : vc_fail(VC_ERR_INTERNAL, "forward failed: %s", vc_last_error());
    if (!(f->hz = host_copy(z)) || !(f->hlp = host_copy(*lp)) || !(f->hen = host_copy(en)))
        return vc_fail(VC_ERR_INTERNAL, "reading results back: %s", vc_last_error());
    return VC_OK;
}

/* the largest errors of logits, log-probs and entropies against the reference's padded rows (L - 1 log-probs
 * and entropies a row); returns how many tokens have a target */
static int forward_errors(const fwd_check *f, int64_t V, double *el_out, double *elp_out, double *een_out) {
    int B = f->B, L = f->L;
    const int64_t *cu = f->cu;
    const float *hz = f->hz, *hlp = f->hlp, *hen = f->hen, *rl = f->rl, *rlp = f->rlp, *ren = f->ren;
    double el = 0, elp = 0, een = 0;
    int count = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < cu[b + 1] - cu[b]; t++) {
            int64_t row = cu[b] + t;
            for (int64_t v = 0; v < V; v++) el = fmax(el, fabs(hz[row * V + v] - rl[((int64_t)b * L + t) * V + v]));
            if (t < L - 1) een = fmax(een, fabs(hen[row] - ren[b * (L - 1) + t]));
            if (f->target[row] >= 0) {
                elp = fmax(elp, fabs(hlp[row] - rlp[b * (L - 1) + t]));
                count++;
            }
        }
    *el_out = el;
    *elp_out = elp;
    *een_out = een;
    return count;
}

/* the largest reference gradient of any tensor */
static double grad_max(const vc_checkpoint *ck) {
    double gmax = 0;
    for (int i = 0; i < vc_ckpt_count(ck); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ck, i);
        int64_t nr;
        float *ref = strncmp(t->name, "grad.", 5) ? NULL : ref_f32(ck, t->name, &nr);
        for (int64_t k = 0; ref && k < nr; k++) gmax = fmax(gmax, fabs(ref[k]));
        free(ref);
    }
    return gmax;
}

/* gradients: each within 1e-3 of that tensor's largest reference magnitude, or of 1e-3 of the model's largest
 * gradient where a tensor's is smaller (a gradient zero in exact arithmetic, such as a key bias's without rope,
 * where the softmax cancels it, is float noise in the reference) */
static void check_grads(vc_model *m, const vc_checkpoint *ck, const check_tol *tol, const torch_bf16 *tb,
                        vc_check_result *r) {
    double worst = 0, worst_rel = 0, gmax = grad_max(ck);
    char detail[160] = "";
    int n_grads = 0;
    for (int i = 0; i < vc_ckpt_count(ck); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ck, i);
        if (strncmp(t->name, "grad.", 5)) continue;
        float *mine = NULL;
        int64_t nm, nr;
        float *ref = ref_f32(ck, t->name, &nr);
        vc_status gs = vc_model_hf_grad(m, t->name + 5, &mine, &nm);
        if (gs || !ref || nm != nr) {
            snprintf(detail, sizeof detail, "%s: %s", t->name + 5, gs ? vc_last_error() : "size differs");
            worst_rel = INFINITY;
            free(mine);
            free(ref);
            continue;
        }
        double mx = 0, err = 0;
        for (int64_t k = 0; k < nr; k++) {
            mx = fmax(mx, fabs(ref[k]));
            err = fmax(err, fabs(mine[k] - ref[k]));
        }
        double scale = fmax(mx, 1e-3 * gmax), rel = err / (scale > 0 ? scale : 1);
        if (getenv("VERLC_CHECK_GRADS_VERBOSE")) /* each tensor's figures (which one sets the worst) */
            fprintf(stderr, "  grad %s: max |ref| %.3g, max err %.3g, rel %.3g\n", t->name + 5, mx, err, rel);
        if (rel > worst_rel) {
            worst_rel = rel;
            snprintf(detail, sizeof detail, "%s", t->name + 5);
        }
        worst = fmax(worst, err);
        n_grads++;
        free(mine);
        free(ref);
    }
    double gtol = with_torch(tol->grads_rel, tb->grads);
    item(r, VC_CHECK_GRADS, worst_rel, gtol, detail);
    r->item[VC_CHECK_GRADS].max_abs_err = isinf(worst_rel) ? INFINITY : worst;
    r->item[VC_CHECK_GRADS].ok = worst_rel <= gtol && n_grads > 0;
}

/* padded vs packed: the same sequences one at a time give the same log-probs (not for rope types
 * whose frequencies depend on the batch's longest sequence) */
static void check_packed(vc_model *m, vc_graph *g, const fwd_check *f, double tol, vc_check_result *r) {
    double ep = 0;
    float *hlp1 = NULL;
    int len_dependent = m->cfg.rope.type == VC_ROPE_DYNAMIC || m->cfg.rope.type == VC_ROPE_LONGROPE;
    for (int b = 0; b < f->B && !len_dependent; b++) {
        int64_t one[2] = { 0, f->cu[b + 1] - f->cu[b] };
        vc_batch sb = { 1, one, f->packed + f->cu[b] }, all = { f->B, f->cu, f->packed, .images = &f->im };
        vc_images im;
        if (f->im.n && vc_images_of_seq(m, &all, b, &im)) {
            ep = INFINITY;
            break;
        }
        if (f->im.n && im.n) sb.images = &im;
        vc_graph_reset(g);
        vc_graph_set_grad(g, 0);
        vc_tensor *h1 = vc_model_forward(m, g, &sb, NULL), *lp1 = NULL;
        free(hlp1);
        if (!h1 || vc_model_logprobs(m, g, h1, f->target + f->cu[b], &lp1, NULL) || !(hlp1 = host_copy(lp1))) {
            ep = INFINITY;
            break;
        }
        for (int64_t t = 0; t < one[1]; t++) ep = fmax(ep, fabs(hlp1[t] - f->hlp[f->cu[b] + t]));
    }
    if (!len_dependent) item(r, VC_CHECK_PACKED, ep, tol, NULL);
    free(hlp1);
}

/* logits, log-probs, entropy, loss and gradients on the reference batch, then packed vs one at a time */
static vc_status check_forward(vc_model *m, const vc_checkpoint *ck, const torch_bf16 *tb, vc_check_result *r) {
    fwd_check f = { .cu = { 0 } };
    vc_status st = read_batch(ck, &f);
    if (st) return st;
    vc_batch batch = { f.B, f.cu, f.packed, .images = f.im.n ? &f.im : NULL };
    int64_t T = f.cu[f.B], V = vc_cfg_out_vocab(&m->cfg), nlp = 0, nen = 0, nloss = 0;
    f.rl = ref_f32(ck, "logits", &f.nl);
    f.rlp = ref_f32(ck, "token_logprobs", &nlp);
    f.ren = ref_f32(ck, "token_entropy", &nen);
    f.rloss = ref_f32(ck, "loss", &nloss);
    float *w = vc_calloc((size_t)T, 4);
    const check_tol *tol = tolerances();
    vc_graph *g = vc_graph_new();
    st = f.rl && f.rlp && f.ren && f.rloss && w && g
             ? VC_OK
             : vc_fail(VC_ERR_FORMAT, "reference.safetensors lacks logits/token_logprobs/token_entropy/loss");
    if (st) goto out;
    vc_tensor *lp = NULL;
    if ((st = vc_model_enable_grad(m)) || (f.im.n && (st = vc_model_load_vision(m))) ||
        (st = forward_outputs(m, g, &batch, &f, &lp)))
        goto out;
    double el, elp, een;
    int count = forward_errors(&f, V, &el, &elp, &een);
    for (int64_t t = 0; t < T; t++) w[t] = f.target[t] >= 0 ? -1.0f / (float)count : 0.0f;
    vc_tensor *loss = vc_op_dot_const(g, lp, w);
    float lv = NAN;
    if (!loss || (st = vc_tensor_read(loss, &lv))) {
        st = st ? st : vc_fail(VC_ERR_INTERNAL, "loss failed: %s", vc_last_error());
        goto out;
    }
    double zmax = 0;
    for (int64_t k = 0; k < f.nl; k++) zmax = fmax(zmax, fabs(f.rl[k]));
    item(r, VC_CHECK_LOGITS, el, with_torch(tol->logits + tol->logits_rel * zmax, tb->logits), NULL);
    item(r, VC_CHECK_LOGPROBS, elp, with_torch(tol->logprobs, tb->logprobs), NULL);
    item(r, VC_CHECK_ENTROPY, een, with_torch(tol->entropy, tb->entropy), NULL);
    double lerr = fabs(lv - f.rloss[0]);
    item(r, VC_CHECK_LOSS, lerr, with_torch(tol->loss_rel * fabs(f.rloss[0]), tb->loss), NULL);
    if ((st = vc_graph_backward(g, loss, 1.0f))) goto out;
    check_grads(m, ck, tol, tb, r);
    check_packed(m, g, &f, tol->packed, r);
out:
    free(f.hz);
    free(f.hlp);
    free(f.hen);
    free((float *)f.im.pixels);
    vc_graph_free(g);
    free(f.rl); free(f.rlp); free(f.ren); free(f.rloss); free(w);
    return st;
}

/* greedy decoding with the KV cache; with `force` the next input is force[step] (teacher forcing) instead
 * of the token just chosen, so one near-tie flip does not derail the rest of the comparison */
static vc_status greedy(vc_model *m, const int32_t *prompt, int np, int n_new, const int32_t *force,
                        const vc_images *im, int32_t *out) {
    int64_t V = vc_cfg_out_vocab(&m->cfg);
    float *zh = vc_malloc((size_t)V * sizeof(float));
    vc_kv_cache *kc = NULL;
    vc_graph *g = vc_graph_new();
    vc_status st = g && zh ? vc_kv_cache_new(m, 1, np + n_new, &kc) : VC_ERR_NOMEM;
    if (st) goto out;
    vc_graph_set_grad(g, 0);
    int32_t cur[4096];
    memcpy(cur, prompt, (size_t)np * 4);
    int64_t cu[2] = { 0, np }, delta = 0;
    const int32_t *feed = cur;
    vc_batch first = { 1, cu, cur, .images = im };
    if (im && ((st = vc_model_load_vision(m)) || (st = vc_mrope_positions(m, &first, NULL, NULL, &delta)))) goto out;
    for (int step = 0; step < n_new; step++) {
        vc_graph_reset(g);
        vc_batch b = { 1, cu, feed, .images = step ? NULL : im, .mrope_delta = im && step ? &delta : NULL };
        vc_tensor *h = vc_model_forward(m, g, &b, kc);
        if (!h) { st = vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_ARG; goto out; }
        int64_t H = vc_cfg_out_hidden(&m->cfg), last = cu[1] - 1;
        vc_tensor *hl = vc_tensor_wrap(g, h->data + last * H, 2, (int64_t[]){ 1, H });
        vc_tensor *z = vc_model_logits(m, g, hl);
        if (!z) { st = vc_graph_status(g); goto out; }
        if ((st = vc_tensor_read(z, zh))) goto out;
        int best = 0;
        for (int64_t v = 1; v < V; v++)
            if (zh[v] > zh[best]) best = (int)v;
        out[step] = best;
        cur[np + step] = force ? force[step] : best;
        feed = cur + np + step;
        cu[1] = 1;
    }
out:
    free(zh);
    vc_kv_cache_free(kc);
    vc_graph_free(g);
    return st;
}

static vc_status check_greedy(vc_model *m, const vc_checkpoint *ck, vc_check_result *r) {
    int32_t prompt[4096], want[4096], got[4096];
    int64_t np, nw, sp[2], sw[2];
    if (!vc_ckpt_find(ck, "greedy_prompt")) return VC_OK; /* dynamic-rope fixtures carry none */
    vc_status st = read_ints(ck, "greedy_prompt", prompt, &np, sp);
    if (!st) st = read_ints(ck, "greedy_output", want, &nw, sw);
    if (st) return st;
    int n_new = (int)(nw - np);
    if (n_new <= 0 || n_new > 1024) return vc_fail(VC_ERR_FORMAT, "reference.safetensors: greedy_output is not longer than greedy_prompt");
    int32_t grid[3 * 64];
    vc_images im;
    if ((st = read_images(ck, "greedy_pixel_values", "greedy_image_grid_thw", grid, &im)) ||
        (st = greedy(m, prompt, (int)np, n_new, want + np, im.n ? &im : NULL, got))) {
        free((float *)im.pixels);
        return st;
    }
    free((float *)im.pixels);
    /* a flip is explained by the logits tolerance only where the reference top-2 margin is below twice it */
    int64_t nm = 0;
    float *margin = tolerances() == &TOL_BF16 ? ref_f32(ck, "greedy_margins", &nm) : NULL;
    double ztol = r->item[VC_CHECK_LOGITS].ran ? r->item[VC_CHECK_LOGITS].tol : tolerances()->logits;
    int diff = 0, tied = 0;
    for (int i = 0; i < n_new; i++) {
        if (got[i] == want[np + i]) continue;
        if (margin && i < nm && margin[i] < 2 * ztol) tied++;
        else diff++;
    }
    free(margin);
    char d[160];
    if (tied) snprintf(d, sizeof d, "%d/%d tokens differ (+%d near-tie flips within tolerance)", diff, n_new, tied);
    else snprintf(d, sizeof d, "%d/%d tokens differ", diff, n_new);
    item(r, VC_CHECK_GREEDY, diff, 0, d);
    return VC_OK;
}

vc_status vc_check_model(const char *dir, vc_check_result *r) {
    memset(r, 0, sizeof *r);
    double t0 = vc_now();
    vc_model *m = NULL;
    vc_checkpoint *ck = NULL;
    vc_status st = vc_model_load(dir, &m);
    if (st) return st;
    const vc_model_config *c = &m->cfg;
    snprintf(r->arch, sizeof r->arch, "%s", c->arch->name);
    snprintf(r->model_type, sizeof r->model_type, "%s", c->model_type);
    snprintf(r->dtype, sizeof r->dtype, "%s", vc_dtype_name(c->dtype));
    r->params = vc_model_param_count(m);
    char *ref = vc_path_join(dir, "reference.safetensors");
    if (ref && vc_file_exists(ref)) {
        r->has_reference = 1;
        st = vc_ckpt_open(ref, &ck);
        torch_bf16 tb;
        read_torch_bf16(dir, &tb);
        if (!st) st = check_forward(m, ck, &tb, r);
        if (!st) st = check_greedy(m, ck, r);
    } else {
        /* no reference: a forward and a short greedy generation must run */
        int32_t prompt[4] = { 1 % (int)c->vocab, 2 % (int)c->vocab, 3 % (int)c->vocab, 4 % (int)c->vocab }, got[8];
        st = greedy(m, prompt, 4, 8, NULL, NULL, got);
        if (!st) {
            int k = 0;
            for (int i = 0; i < 8; i++) k += snprintf(r->smoke + k, sizeof r->smoke - (size_t)k, "%s%d", i ? " " : "", got[i]);
        }
    }
    free(ref);
    vc_ckpt_close(ck);
    vc_model_free(m);
    r->ok = st == VC_OK;
    for (int i = 0; i < VC_CHECK_COUNT; i++)
        if (r->item[i].ran && !r->item[i].ok) r->ok = 0;
    r->seconds = vc_now() - t0;
    return st;
}
