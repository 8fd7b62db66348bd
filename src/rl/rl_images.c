/* The images of the prompts a step uses (image-text models): made from the dataset on first use (fetch_image and the
 * image processor, vc_rl_prompt_images), kept for the step's passes (rollout, log-probs, updates) and dropped at its
 * end, so a dataset of many images never holds more pixels than one step's prompts. */
#include "rl_internal.h"
#include <stdlib.h>
#include <string.h>

vc_status rl_images_init(rl_images *c, const vc_rl_dataset *d) {
    memset(c, 0, sizeof *c);
    if (!d || !d->vl) return VC_OK;
    c->d = d;
    c->im = vc_calloc(d->n + 1, sizeof *c->im);
    c->loaded = vc_calloc(d->n + 1, 1);
    return c->im && c->loaded ? VC_OK : vc_fail(VC_ERR_NOMEM, "images of %zu prompts", d->n);
}

vc_status rl_images_get(rl_images *c, int prompt, const vc_images **out) {
    *out = NULL;
    if (!c || !c->d || prompt < 0 || (size_t)prompt >= c->d->n || c->d->p[prompt].n_images == 0) return VC_OK;
    vc_images *im = &c->im[prompt];
    if (!c->loaded[prompt]) {
        float *pix = NULL, *ts = NULL;
        int32_t *grid = NULL;
        int n = 0;
        int64_t row = 0;
        vc_status st = vc_rl_prompt_visuals(c->d, (size_t)prompt, &pix, &grid, &n, &row, &ts);
        if (st) return st;
        *im = (vc_images){ n, grid, pix, row, ts };
        c->loaded[prompt] = 1;
    }
    *out = im->n ? im : NULL;
    return VC_OK;
}

void rl_images_drop(rl_images *c) {
    for (size_t i = 0; c && c->d && i < c->d->n; i++)
        if (c->loaded[i]) {
            free((void *)c->im[i].grid);
            free((void *)c->im[i].pixels);
            free((void *)c->im[i].t_scale);
            memset(&c->im[i], 0, sizeof c->im[i]);
            c->loaded[i] = 0;
        }
}

void rl_images_free(rl_images *c) {
    rl_images_drop(c);
    free(c->im);
    free(c->loaded);
    memset(c, 0, sizeof *c);
}

vc_status rl_batch_row_images(const rl_batch *b, int r, const vc_images **im, int64_t *span) {
    if (b->rimg && b->rimg[r].n) {
        *im = &b->rimg[r];
        *span = b->rspan[r];
        return VC_OK;
    }
    *span = b->plen[r];
    return rl_images_get(b->imgs, b->prompt[r], im);
}

vc_status rl_batch_rimg_alloc(rl_batch *b) {
    if (b->rimg) return VC_OK;
    b->rimg = vc_calloc((size_t)b->B + 1, sizeof *b->rimg);
    b->rspan = vc_calloc((size_t)b->B + 1, sizeof *b->rspan);
    return b->rimg && b->rspan ? VC_OK : VC_ERR_NOMEM;
}

vc_status rl_images_of_rows(vc_graph *g, const rl_batch *b, const int *rows, int n, vc_batch *batch) {
    if (!b->imgs && !b->rimg) return VC_OK;
    const vc_images **each = vc_graph_alloc(g, sizeof *each * (size_t)(n ? n : 1), 0);
    int64_t *span = vc_graph_alloc(g, sizeof *span * (size_t)(n ? n : 1), 0);
    vc_images *im = vc_graph_alloc(g, sizeof *im, 0);
    if (!each || !span || !im) return vc_graph_status(g) ? vc_graph_status(g) : VC_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        vc_status st = rl_batch_row_images(b, rows[i], &each[i], &span[i]);
        if (st) return st;
    }
    vc_status st = vc_images_gather(g, each, n, im);
    if (st || !im->n) return st;
    batch->images = im;
    batch->image_span = span;
    return VC_OK;
}
