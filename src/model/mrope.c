/* Multimodal rope positions (Qwen2-VL's M-RoPE, transformers' get_rope_index) and the placement of image features
 * among a batch's token embeddings. */
#include "verlc/vision.h"
#include "model_internal.h"
#include <string.h>

/* an image's tokens and the texts between them (span tokens from t) at plain positions from cur */
static vc_status plain_span(int64_t *pos, int64_t T, int64_t t, int64_t cur, int64_t span, int64_t *n_out, int64_t *adv,
                            int64_t *maxp) {
    for (int64_t k = 0; k < span; k++) {
        for (int x = 0; x < 3 && pos; x++) pos[x * T + t + k] = cur + k;
        if (cur + k > *maxp) *maxp = cur + k;
    }
    *n_out = span, *adv = span;
    return VC_OK;
}

/* image i's run at t of sequence s: its tokens take (cur + frame, cur + row, cur + column) of the merged grid */
static vc_status image_run(const vc_model *m, const vc_batch *b, int s, int64_t t, int64_t t1, int i, int64_t cur,
                           int64_t *pos, int64_t T, int64_t *n_out, int64_t *adv, int64_t *maxp) {
    const vc_images *im = b->images;
    if (!im || i >= im->n)
        return vc_fail(VC_ERR_ARG, "sequence %d: image tokens at position %lld, past the batch's %d images", s,
                       (long long)(t - b->cu_seqlens[s]), im ? im->n : 0);
    if (!m->vision) return vc_fail(VC_ERR_ARG, "model forward: images without the vision tower loaded");
    int mg = vc_vision_merge(m->vision);
    const int32_t *gr = im->grid + 3 * i;
    int64_t H = gr[1] / mg, W = gr[2] / mg, n = vc_vision_image_tokens(m->vision, im, i);
    int64_t run = 0;
    while (t + run < t1 && b->ids[t + run] == b->ids[t] && vc_image_row(&m->cfg, b, s, t + run, 0)) run++;
    if (m->cfg.image_wrap == 2 && run != n) { /* Mistral 3's processor: H rows of W image tokens, a break token between
                                               * rows (plain positions; one run of them is taken too, as transformers
                                               * takes any placement) */
        int64_t span = 0;
        for (int64_t r = 0; r < H; r++) {
            int64_t k = 0;
            while (t + span + k < t1 && b->ids[t + span + k] == b->ids[t] && vc_image_row(&m->cfg, b, s, t + span + k, 0)) k++;
            if (k != W || (r + 1 < H && (t + span + k >= t1 || vc_image_row(&m->cfg, b, s, t + span + k, 0))))
                return vc_fail(VC_ERR_ARG, "sequence %d: image %d (grid %d x %d x %d) needs %lld rows of %lld image tokens "
                               "with a break token after each but the last, from position %lld; row %lld has %lld", s, i,
                               gr[0], gr[1], gr[2], (long long)H, (long long)W, (long long)(t - b->cu_seqlens[s]),
                               (long long)r, (long long)k);
            span += k + (r + 1 < H);
        }
        return plain_span(pos, T, t, cur, span, n_out, adv, maxp);
    }
    if (m->cfg.image_wrap == 3 && run != n) { /* Llama 4's processor: a run of image tokens a tile, one or two
                                               * separators between (tile_x / tile_y, and <|image|> before the whole-
                                               * image tile); plain positions */
        int64_t per = n / gr[0], span = 0;
        for (int64_t tile = 0; tile < gr[0]; tile++) {
            int64_t k = 0, gap = 0;
            while (t + span + k < t1 && b->ids[t + span + k] == b->ids[t] && vc_image_row(&m->cfg, b, s, t + span + k, 0)) k++;
            while (tile + 1 < gr[0] && gap < 3 && t + span + k + gap < t1 &&
                   !vc_image_row(&m->cfg, b, s, t + span + k + gap, 0))
                gap++;
            if (k != per || (tile + 1 < gr[0] && (gap < 1 || gap > 2 || t + span + k + gap >= t1)))
                return vc_fail(VC_ERR_ARG, "sequence %d: image %d (%d tiles of %d x %d) needs %d runs of %lld image "
                               "tokens with one or two separators between, from position %lld; run %lld has %lld", s, i,
                               gr[0], gr[1], gr[2], gr[0], (long long)per, (long long)(t - b->cu_seqlens[s]),
                               (long long)tile, (long long)k);
            span += k + (tile + 1 < gr[0] ? gap : 0);
        }
        return plain_span(pos, T, t, cur, span, n_out, adv, maxp);
    }
    if (run != n)
        return vc_fail(VC_ERR_ARG, "sequence %d: image %d (grid %d x %d x %d) needs %lld image tokens from position "
                       "%lld; the run there has %lld", s, i, gr[0], gr[1], gr[2], (long long)n,
                       (long long)(t - b->cu_seqlens[s]), (long long)run);
    float step = im->t_scale ? im->t_scale[i] : 1.0f;
    for (int64_t k = 0; k < n; k++) {
        int64_t f = k / (H * W), r = k % (H * W);
        int64_t a[3] = { cur + (int64_t)((float)f * step), cur + r / W, cur + r % W };
        for (int x = 0; x < 3; x++) {
            if (pos) pos[x * T + t + k] = a[x];
            if (a[x] > *maxp) *maxp = a[x];
        }
    }
    *n_out = n;
    *adv = H > W ? H : W;
    return VC_OK;
}

vc_status vc_mrope_positions(const vc_model *m, const vc_batch *b, const int64_t *start, int64_t *pos, int64_t *delta) {
    int64_t T = b->cu_seqlens[b->n_seq];
    int img = 0;
    if (b->images && m->vision) {
        vc_status st = vc_vision_check(m->vision, b->images);
        if (st) return st;
    }
    for (int s = 0; s < b->n_seq; s++) {
        int64_t t0 = b->cu_seqlens[s], t1 = b->cu_seqlens[s + 1], base = start ? start[s] : 0;
        int64_t cur = base + (b->mrope_delta ? b->mrope_delta[s] : 0), maxp = cur - 1;
        for (int64_t t = t0; t < t1;) {
            if (vc_image_row(&m->cfg, b, s, t, base)) {
                int64_t n = 0, adv = 0;
                vc_status st = image_run(m, b, s, t, t1, img++, cur, pos, T, &n, &adv, &maxp);
                if (st) return st;
                t += n;
                cur += adv;
                continue;
            }
            if (pos) pos[t] = pos[T + t] = pos[2 * T + t] = cur;
            maxp = cur > maxp ? cur : maxp;
            cur++;
            t++;
        }
        if (delta) delta[s] = maxp + 1 - (base + t1 - t0);
    }
    if (b->images && img != b->images->n)
        return vc_fail(VC_ERR_ARG, "model forward: the batch has %d images but %d runs of image tokens", b->images->n, img);
    return VC_OK;
}

vc_status vc_images_gather(vc_graph *g, const vc_images *const *each, int n, vc_images *out) {
    int64_t rows = 0, row = 0;
    int k = 0;
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++) {
        const vc_images *e = each[i];
        if (!e || e->n < 1) continue;
        if (row && e->row != row)
            return vc_fail(VC_ERR_SHAPE, "images: sequence %d's pixel rows are %lld floats, an earlier one's %lld", i,
                           (long long)e->row, (long long)row);
        row = e->row;
        k += e->n;
        for (int j = 0; j < e->n; j++) rows += (int64_t)e->grid[3 * j] * e->grid[3 * j + 1] * e->grid[3 * j + 2];
    }
    if (!k) return VC_OK;
    int32_t *grid = vc_graph_alloc(g, sizeof(int32_t) * 3 * (size_t)k, 0);
    float *pix = vc_graph_alloc(g, sizeof(float) * (size_t)(rows * row), 0), *ts = NULL;
    if (!grid || !pix) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        if (each[i] && each[i]->n > 0 && each[i]->t_scale && !ts &&
            !(ts = vc_graph_alloc(g, sizeof(float) * (size_t)k, 0)))
            return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    int at = 0;
    int64_t r = 0;
    for (int i = 0; i < n; i++) {
        const vc_images *e = each[i];
        if (!e || e->n < 1) continue;
        int64_t er = 0;
        for (int j = 0; j < e->n; j++) er += (int64_t)e->grid[3 * j] * e->grid[3 * j + 1] * e->grid[3 * j + 2];
        memcpy(grid + 3 * at, e->grid, sizeof(int32_t) * 3 * (size_t)e->n);
        for (int j = 0; ts && j < e->n; j++) ts[at + j] = e->t_scale ? e->t_scale[j] : 1.0f;
        memcpy(pix + r * row, e->pixels, sizeof(float) * (size_t)(er * row));
        at += e->n;
        r += er;
    }
    *out = (vc_images){ k, grid, pix, row, ts };
    return VC_OK;
}

int64_t vc_images_trial_ids(const vc_model *m, const vc_images *im, int32_t *ids, int64_t len) {
    int32_t img = m->cfg.image_id, sep = img ? 0 : 1;
    int64_t span = 0;
    for (int i = 0; i < im->n; i++) {
        int64_t k = vc_vision_image_tokens(m->vision, im, i);
        if (span + k + 1 > len) return -1;
        for (int64_t j = 0; j < k; j++) ids[span++] = img;
        ids[span++] = sep;
    }
    for (int64_t k = span; k < len; k++)
        if (ids[k] == img) ids[k] = sep;
    return span;
}

int64_t vc_images_rows(const vc_images *im, int n) {
    int64_t rows = 0;
    for (int k = 0; im && k < n; k++) rows += (int64_t)im->grid[3 * k] * im->grid[3 * k + 1] * im->grid[3 * k + 2];
    return rows;
}

vc_status vc_images_of_seq(const vc_model *m, const vc_batch *b, int s, vc_images *out) {
    const vc_images *im = b->images;
    memset(out, 0, sizeof *out);
    if (!im) return VC_OK;
    if (!m->vision) return vc_fail(VC_ERR_ARG, "images without the vision tower loaded");
    int i = 0, first = -1;
    for (int q = 0; q <= s && q < b->n_seq; q++) {
        if (q == s) first = i;
        for (int64_t t = b->cu_seqlens[q]; t < b->cu_seqlens[q + 1];) {
            if (!vc_image_row(&m->cfg, b, q, t, 0)) { t++; continue; }
            if (i >= im->n) return vc_fail(VC_ERR_ARG, "sequence %d: more runs of image tokens than images", q);
            t += vc_vision_image_tokens(m->vision, im, i++);
        }
    }
    int64_t rows = vc_images_rows(im, first);
    out->n = i - first;
    out->grid = im->grid + 3 * first;
    out->pixels = im->pixels + rows * im->row;
    out->t_scale = im->t_scale ? im->t_scale + first : NULL;
    out->row = im->row;
    return VC_OK;
}
