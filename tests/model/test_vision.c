/* Image inputs (Qwen2-VL's vision tower and M-RoPE) beyond the golden checks of `verlc check`: bad images and
 * checkpoints are refused by name; an image token after cached tokens is a token like any other; the rollout engine
 * keeps prompts that share tokens but not images apart, forks a prompt with images into its samples and recomputes
 * one after preemption with the same bits as alone. */
#include "vc_test.h"
#include "verlc/rollout.h"
#include "verlc/safetensors.h"
#include "verlc/train.h"
#include "verlc/vision.h"
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#define VL_DIR "tests/fixtures/models/qwen2_vl_image"
#define GLM_DIR "tests/fixtures/models/glm4v_image" /* GLM-4.1V's tower: bicubic positions, downsample, its merger */
#define GEMMA_DIR "tests/fixtures/models/gemma3_image" /* Gemma 3: SigLIP, bidirectional image runs */
#define INTERN_DIR "tests/fixtures/models/internvl_image" /* InternVL: tiles behind class tokens */
#define G4_DIR "tests/fixtures/models/gemma4_image" /* Gemma 4: 2-D rope, clipped linears, pooling */

typedef struct {
    int32_t prompt[64], want[64], grid[3];
    int64_t np, n_new;
    float *pix;
    vc_images im;
} greedy_ref;

static int read_ints(const vc_checkpoint *ck, const char *name, int32_t *out, int64_t cap, int64_t *n) {
    const vc_st_tensor *t = vc_ckpt_find(ck, name);
    if (!t || t->dtype != VC_I64 || (*n = vc_st_tensor_numel(t)) > cap) return 0;
    for (int64_t i = 0; i < *n; i++) out[i] = (int32_t)((const int64_t *)t->data)[i];
    return 1;
}

static int read_ref(const char *dir, greedy_ref *r) {
    vc_checkpoint *ck = NULL;
    int32_t out[64];
    int64_t no = 0, ng = 0;
    char path[600];
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    if (vc_ckpt_open(path, &ck)) return 0;
    const vc_st_tensor *p = vc_ckpt_find(ck, "greedy_pixel_values");
    int ok = p && p->dtype == VC_F32 && p->ndim == 2 && read_ints(ck, "greedy_prompt", r->prompt, 64, &r->np) &&
             read_ints(ck, "greedy_output", out, 64, &no) && read_ints(ck, "greedy_image_grid_thw", r->grid, 3, &ng) &&
             ng == 3 && no > r->np;
    if (ok && (r->pix = malloc(sizeof(float) * (size_t)vc_st_tensor_numel(p))))
        memcpy(r->pix, p->data, sizeof(float) * (size_t)vc_st_tensor_numel(p));
    ok = ok && r->pix;
    if (ok) {
        r->n_new = no - r->np;
        memcpy(r->want, out + r->np, sizeof(int32_t) * (size_t)r->n_new);
        r->im = (vc_images){ 1, r->grid, r->pix, p->shape[1] };
    }
    vc_ckpt_close(ck);
    return ok;
}

/* a forward of prompt with images im (and cache, when given) fails naming `what` */
static void forward_fails(vc_model *m, const greedy_ref *r, const vc_images *im, const char *what) {
    vc_graph *g = vc_graph_new();
    int64_t cu[2] = { 0, r->np };
    vc_batch b = { 1, cu, r->prompt, .images = im };
    vc_graph_set_grad(g, 0);
    vc_tensor *h = vc_model_forward(m, g, &b, NULL);
    CHECK_MSG(!h && strstr(vc_last_error(), what), "forward should fail naming '%s'; got: %s", what,
              h ? "success" : vc_last_error());
    vc_graph_free(g);
}

static void bad_images(vc_model *m, const greedy_ref *r) {
    CHECK_OK(vc_model_load_vision(m)); /* (loaded with the model) */
    vc_images im = r->im;
    im.row = r->im.row - 1;
    forward_fails(m, r, &im, "pixel rows of");
    int32_t odd[3] = { 1, 3, 4 }, big[3] = { 1, 4, 6 }, two[6] = { 1, 2, 2, 1, 2, 2 };
    im = r->im, im.grid = odd;
    forward_fails(m, r, &im, "blocks of patches");
    im = r->im, im.grid = big; /* 6 image tokens for a run of 4 (pixels are only read after the checks) */
    forward_fails(m, r, &im, "needs 6 image tokens");
    im = r->im, im.grid = two, im.n = 2; /* two images of one token each: the first run is 4 tokens */
    forward_fails(m, r, &im, "needs 1 image tokens");
}

/* InternVL: tiles of other sizes than the tower's are refused by name; an image's tiles are its grid's frames (two
 * tiles: twice the tokens) */
static void intern_images(vc_model *m, const greedy_ref *r) {
    vc_images im = r->im;
    int32_t wide[3] = { 1, 4, 6 }, two[3] = { 2, 4, 4 };
    im.grid = wide;
    forward_fails(m, r, &im, "tiles of 4 x 4 patches");
    float *pix = calloc((size_t)(32 * r->im.row), sizeof(float)); /* (pixels for both tiles) */
    im = r->im, im.grid = two, im.pixels = pix;
    if (pix) forward_fails(m, r, &im, "4 image tokens for images of 8 features");
    free(pix);
}

/* Llama 4: an image's tiles are runs of image tokens with one or two separators between (Llama4Processor's
 * tile_x / tile_y separators, <|image|> before the whole-image tile): the placement the rollout engine and the check
 * plan (vc_mrope_positions) takes them, and refuses three tokens between or runs of other lengths by name; the model
 * forward, as transformers' masked scatter, takes the image tokens wherever they are */
static void llama4_images(vc_model *m, const greedy_ref *r) {
    int32_t two[3] = { 2, 4, 4 }, img = vc_model_cfg(m)->image_id, ids[3][16];
    float *pix = calloc((size_t)(32 * r->im.row), sizeof(float)); /* (pixels for both tiles) */
    for (int k = 0; pix && k < 32 * r->im.row; k++) pix[k] = (float)((k * 37) % 101) / 50.0f - 1.0f;
    vc_images im = { 1, two, pix, r->im.row, NULL };
    /* 5 6 [4 image] 7 [4 image] 8; 5 6 [4 image] 7 9 10 [4 image] 8 (three between); 5 6 [3 image] 7 [5 image] 8 */
    int64_t len[3] = { 12, 14, 12 };
    for (int v = 0; v < 3; v++) {
        int n = 0, gap = v == 1 ? 3 : 1, first = v == 2 ? 3 : 4;
        ids[v][n++] = 5, ids[v][n++] = 6;
        for (int k = 0; k < first; k++) ids[v][n++] = img;
        for (int k = 0; k < gap; k++) ids[v][n++] = 7 + (k ? k + 1 : 0);
        for (int k = 0; k < 8 - first; k++) ids[v][n++] = img;
        ids[v][n++] = 8;
    }
    for (int v = 0; v < 3 && pix; v++) {
        int64_t cu[2] = { 0, len[v] }, delta = 0;
        vc_batch b = { 1, cu, ids[v], .images = &im };
        vc_status st = vc_mrope_positions(m, &b, NULL, NULL, &delta);
        if (v == 0) CHECK_MSG(!st && delta == 0, "Llama 4's two tiles with a separator between: %s", vc_last_error());
        else CHECK_MSG(st && strstr(vc_last_error(), "runs of 4 image tokens with one or two separators"),
                       "Llama 4's tiles, layout %d: %s", v, st ? vc_last_error() : "accepted");
        vc_graph *g = vc_graph_new();
        vc_graph_set_grad(g, 0);
        CHECK_MSG(vc_model_forward(m, g, &b, NULL) != NULL, "Llama 4's forward, layout %d: %s", v, vc_last_error());
        vc_graph_free(g);
    }
    free(pix);
}

/* Gemma 3's pan and scan: an image and its crop as one image of two frames (grid 2 x 4 x 4, the processor's
 * output) gives the hidden states of the two as separate images (transformers: the crops are more pixel_values rows,
 * each run of image tokens attending both ways on its own) */
static void gemma3_crops(vc_model *m, const greedy_ref *r) {
    int32_t img = vc_model_cfg(m)->image_id, ids[12] = { 5, 6, img, img, img, img, 7, img, img, img, img, 8 };
    int32_t one[3] = { 2, 4, 4 }, two[6] = { 1, 4, 4, 1, 4, 4 };
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(m)), cu[2] = { 0, 12 };
    float *pix = malloc(sizeof(float) * (size_t)(32 * r->im.row)), *out[2] = { NULL, NULL };
    for (int64_t k = 0; pix && k < 32 * r->im.row; k++)
        pix[k] = k < 16 * r->im.row ? r->pix[k % (16 * r->im.row)] : (float)((k * 37) % 101) / 50.0f - 1.0f;
    for (int v = 0; v < 2 && pix; v++) {
        vc_images im = { v ? 2 : 1, v ? two : one, pix, r->im.row, NULL };
        vc_batch b = { 1, cu, ids, .images = &im };
        vc_graph *g = vc_graph_new();
        vc_graph_set_grad(g, 0);
        vc_tensor *h = vc_model_forward(m, g, &b, NULL);
        CHECK_MSG(h != NULL, "Gemma 3, %s: %s", v ? "two images" : "an image of two frames", vc_last_error());
        if (h && (out[v] = malloc(sizeof(float) * (size_t)(12 * H))) && vc_tensor_read(h, out[v])) {
            free(out[v]);
            out[v] = NULL;
        }
        vc_graph_free(g);
    }
    double worst = out[0] && out[1] ? 0 : INFINITY;
    for (int64_t k = 0; out[0] && out[1] && k < 12 * H; k++) worst = fmax(worst, fabs(out[0][k] - out[1][k]));
    CHECK_MSG(worst == 0, "Gemma 3: an image of two frames is %g from two images", worst);
    free(out[0]);
    free(out[1]);
    free(pix);
}

/* Gemma 4: an image wider than its position table, several frames, a grid not whole pooling blocks: refused by name */
static void gemma4_images(vc_model *m, const greedy_ref *r) {
    vc_images im = r->im;
    int32_t wide[3] = { 1, 4, 18 }, frames[3] = { 2, 4, 4 }, odd[3] = { 1, 4, 3 };
    im.grid = wide;
    forward_fails(m, r, &im, "at most 16 patches a side");
    im.grid = frames;
    forward_fails(m, r, &im, "single images");
    im.grid = odd;
    forward_fails(m, r, &im, "blocks of patches");
}

/* after a prompt with images, a decode step feeding the image token runs like any other token */
static void image_token_decoded(vc_model *m, const greedy_ref *r) {
    vc_kv_cache *kc = NULL;
    vc_graph *g = vc_graph_new();
    int64_t cu[2] = { 0, r->np }, delta = 0;
    int32_t img = vc_model_cfg(m)->image_id;
    vc_batch b = { 1, cu, r->prompt, .images = &r->im };
    CHECK_OK(vc_mrope_positions(m, &b, NULL, NULL, &delta));
    CHECK_MSG(delta < 0, "M-RoPE delta of a prompt with a 2 x 2 merged image: %lld", (long long)delta);
    CHECK_OK(vc_kv_cache_new(m, 1, r->np + 2, &kc));
    vc_graph_set_grad(g, 0);
    CHECK(vc_model_forward(m, g, &b, kc) != NULL);
    vc_graph_reset(g);
    cu[1] = 1;
    vc_batch d = { 1, cu, &img, .mrope_delta = &delta };
    vc_tensor *h = vc_model_forward(m, g, &d, kc);
    CHECK_MSG(h != NULL, "decode step with the image token: %s", vc_last_error());
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(m));
    float *dec = calloc((size_t)H, sizeof(float)), *full = calloc((size_t)(H * (r->np + 1)), sizeof(float));
    if (h) CHECK_OK(vc_tensor_read(h, dec));
    /* the prompt and that token from the start: with the prompt as the image span, the same hidden state */
    int32_t ids[72];
    memcpy(ids, r->prompt, sizeof(int32_t) * (size_t)r->np);
    ids[r->np] = img;
    int64_t cu2[2] = { 0, r->np + 1 }, span = r->np;
    vc_batch whole = { 1, cu2, ids, .images = &r->im };
    vc_graph_reset(g);
    CHECK(vc_model_forward(m, g, &whole, NULL) == NULL && strstr(vc_last_error(), "past the batch's 1 images"));
    vc_graph_reset(g);
    whole.image_span = &span;
    h = vc_model_forward(m, g, &whole, NULL);
    CHECK_MSG(h != NULL, "the prompt and a generated image token: %s", vc_last_error());
    if (h) CHECK_OK(vc_tensor_read(h, full));
    double worst = 0;
    for (int64_t i = 0; i < H; i++) worst = fmax(worst, fabs(dec[i] - full[r->np * H + i]));
    CHECK_MSG(worst < 1e-4, "decoded vs recomputed hidden state of a generated image token: %g apart", worst);
    free(dec);
    free(full);
    vc_graph_free(g);
    vc_kv_cache_free(kc);
}

static int generate(vc_model *m, const vc_rollout_request *rq, int n, const vc_sampling *sp, double kv_bytes,
                    vc_rollout_sample **out, int *n_out, vc_rollout_stats *st) {
    vc_rollout_opts o = { .kv_budget_bytes = kv_bytes, .page_tokens = 4, .max_batch = 8, .prefill_chunk = 6 };
    vc_rollout_engine *e = NULL;
    vc_status s = vc_rollout_new(m, &o, &e);
    if (!s) s = vc_rollout_generate(e, rq, n, sp, out, n_out);
    if (!s && st) vc_rollout_last_stats(e, st);
    vc_rollout_free(e);
    return s == VC_OK;
}

static int same(const vc_rollout_sample *a, const vc_rollout_sample *b) {
    return a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, sizeof(int32_t) * (size_t)a->n_tokens) &&
           !memcmp(a->logp, b->logp, sizeof(float) * (size_t)a->n_tokens);
}

/* the engine refuses images the tower does not take and prompts whose image tokens are not the images' */
static void engine_refusals(vc_model *m, const greedy_ref *r) {
    vc_sampling sp = { .greedy = 1, .max_new_tokens = 2 };
    int32_t odd[3] = { 1, 3, 4 }, big[3] = { 1, 4, 6 };
    vc_images im = r->im;
    vc_rollout_request rq = { r->prompt, r->np, 1, 0, &im };
    vc_rollout_sample *out = NULL;
    int n = 0;
    im.grid = odd;
    CHECK(!generate(m, &rq, 1, &sp, 8e6, &out, &n, NULL) && strstr(vc_last_error(), "request 0: vision: image 0's grid"));
    im.grid = big;
    CHECK(!generate(m, &rq, 1, &sp, 8e6, &out, &n, NULL) && strstr(vc_last_error(), "needs 6 image tokens"));
}

static void engine(vc_model *m, const greedy_ref *r) {
    vc_sampling greedy = { .greedy = 1, .max_new_tokens = (int)r->n_new };
    float *other = malloc(sizeof(float) * (size_t)(4 * 4 * r->im.row));
    for (int64_t i = 0; i < 16 * r->im.row; i++) other[i] = -r->pix[i] * 0.5f + 0.1f;
    vc_images im2 = { 1, r->grid, other, r->im.row };
    /* B: A's tokens with other pixels; alone, then after A in one call with the prefix cache on; C: the tokens
     * without images (the image tokens are plain tokens then), alone and after them */
    vc_rollout_request rq[3] = { { r->prompt, r->np, 1, 0, &r->im }, { r->prompt, r->np, 1, 1, &im2 },
                                 { r->prompt, r->np, 1, 2, NULL } };
    vc_rollout_sample *a = NULL, *b = NULL, *c = NULL;
    int na = 0, nb = 0, nc = 0;
    vc_rollout_stats st;
    CHECK(generate(m, rq + 1, 1, &greedy, 8e6, &a, &na, NULL) && generate(m, rq, 3, &greedy, 8e6, &b, &nb, &st) &&
          generate(m, rq + 2, 1, &greedy, 8e6, &c, &nc, NULL));
    if (a && b && c) {
        CHECK_MSG(same(&c[0], &b[2]), "a prompt of image tokens without images: batched after ones with differs");
        CHECK_MSG(b[0].n_tokens == r->n_new && !memcmp(b[0].tokens, r->want, sizeof(int32_t) * (size_t)r->n_new),
                  "the fixture's greedy output through the engine");
        CHECK_MSG(same(&a[0], &b[1]), "other pixels, same tokens: batched after the first differs from alone");
        CHECK_MSG(memcmp(a[0].logp, b[0].logp, sizeof(float)), "the images do not change the log-probs");
        CHECK_MSG(st.prefix_hit_tokens == 0, "pages of a prompt with images were reused: %lld tokens",
                  (long long)st.prefix_hit_tokens);
    }
    vc_rollout_samples_free(a, na);
    vc_rollout_samples_free(b, nb);
    vc_rollout_samples_free(c, nc);
    /* four samples of each forked from their prompts, with a pool so small that samples are preempted and
     * recomputed (with their images) */
    vc_sampling hot = { .temperature = 1.5f, .top_p = 1, .max_new_tokens = 16, .seed = 7 };
    rq[0].n_samples = rq[1].n_samples = 4;
    vc_rollout_stats big, small;
    a = b = NULL;
    int ok = generate(m, rq, 2, &hot, 8e6, &a, &na, &big);
    double page = (double)big.page_bytes;
    ok = ok && generate(m, rq, 2, &hot, 9 * page, &b, &nb, &small);
    CHECK_MSG(ok, "sampling with images: %s", vc_last_error());
    if (ok) {
        int all = na == 8 && nb == 8;
        for (int i = 0; all && i < 8; i++) all = same(&a[i], &b[i]) && a[i].n_tokens == 16;
        CHECK_MSG(all && small.preemptions > 0, "a pool of 9 pages: %lld preemptions, samples %s", (long long)small.preemptions,
                  all ? "equal" : "differ");
        CHECK_MSG(!same(&a[0], &a[4]), "prompts with other images sample the same");
    }
    vc_rollout_samples_free(a, na);
    vc_rollout_samples_free(b, nb);
    free(other);
}

/* the last hidden state of the greedy prompt with its image under m (NULL on failure) */
static float *hidden(vc_model *m, const greedy_ref *r) {
    vc_graph *g = vc_graph_new();
    int64_t cu[2] = { 0, r->np }, H = vc_cfg_out_hidden(vc_model_cfg(m));
    vc_batch b = { 1, cu, r->prompt, .images = &r->im };
    vc_graph_set_grad(g, 0);
    vc_tensor *h = vc_model_forward(m, g, &b, NULL);
    float *all = h ? malloc(sizeof(float) * (size_t)(H * r->np)) : NULL, *out = NULL;
    if (all && !vc_tensor_read(h, all) && (out = malloc(sizeof(float) * (size_t)H)))
        memcpy(out, all + (r->np - 1) * H, sizeof(float) * (size_t)H);
    free(all);
    vc_graph_free(g);
    return out;
}

/* the tower's tensors are the model's last parameters, named as the checkpoint names them; freezing takes their
 * gradients away; an export writes their current values in the checkpoint's shapes and loads back to the same
 * forward */
static void tower_params(vc_model *m, const greedy_ref *r) {
    vc_vision *v = vc_model_vision(m);
    int np = vc_model_n_params(m), nv = v ? vc_vision_count(v) : 0, first = np - nv;
    const char *name = NULL;
    CHECK(nv > 0 && vc_model_param(m, first, &name, NULL) == vc_vision_tensor(v, 0, NULL));
    CHECK_MSG(name && strstr(name, "visual.") == name, "first tower parameter: %s", name ? name : "none");
    CHECK_OK(vc_model_enable_grad(m));
    CHECK(vc_model_param(m, np - 1, NULL, NULL)->grad != NULL);
    CHECK_OK(vc_model_freeze_vision(m, 1));
    CHECK(vc_model_param(m, np - 1, NULL, NULL)->grad == NULL && vc_model_param(m, first - 1, NULL, NULL)->grad);
    CHECK_OK(vc_model_freeze_vision(m, 0));
    CHECK(vc_model_param(m, np - 1, NULL, NULL)->grad != NULL);
    /* the patch embedding (the first tensor after the blocks' ...) nudged, exported, loaded back */
    int pe = -1;
    for (int i = first; i < np; i++) {
        vc_model_param(m, i, &name, NULL);
        if (strstr(name, "patch_embed")) pe = i;
    }
    CHECK(pe >= 0);
    if (pe < 0) return;
    vc_tensor *t = vc_model_param(m, pe, NULL, NULL);
    float *w = malloc(sizeof(float) * (size_t)t->n);
    CHECK_OK(vc_model_param_read(m, pe, 0, w));
    for (int64_t k = 0; k < t->n; k += 7) w[k] += 0.25f;
    CHECK_OK(vc_model_param_write(m, pe, w));
    free(w);
    char dir[] = "/tmp/vc_vision_exportXXXXXX", cmd[64];
    CHECK(mkdtemp(dir) != NULL);
    CHECK_OK(vc_model_save_hf(m, dir, VC_F32));
    vc_model *back = NULL;
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(dir, &ck));
    vc_model_param(m, pe, &name, NULL);
    const vc_st_tensor *st = ck ? vc_ckpt_find(ck, name) : NULL;
    CHECK_MSG(st && st->ndim == 5, "exported %s: %d dims", name, st ? st->ndim : -1);
    vc_ckpt_close(ck);
    CHECK_OK(vc_model_load(dir, &back));
    float *a = hidden(m, r), *b = back ? hidden(back, r) : NULL, *orig = NULL;
    vc_model *fresh = NULL;
    CHECK_OK(vc_model_load(VL_DIR, &fresh));
    if (fresh) orig = hidden(fresh, r);
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(m));
    CHECK_MSG(a && b && !memcmp(a, b, sizeof(float) * (size_t)H), "exported tower: the forward differs");
    CHECK_MSG(a && orig && memcmp(a, orig, sizeof(float) * (size_t)H), "the nudged patch embedding changes nothing");
    free(a);
    free(b);
    free(orig);
    vc_model_free(back);
    vc_model_free(fresh);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* the fixture's two rows (one image each) as a mini-batch */
typedef struct {
    int64_t cu[3], span[2];
    int32_t ids[64], grid[6];
    float *pix, loss;
    vc_images im[2];
    const vc_images *each[2];
    vc_minibatch b;
} rows_ref;

static int read_rows(const char *dir, rows_ref *r) {
    vc_checkpoint *ck = NULL;
    char path[600];
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    if (vc_ckpt_open(path, &ck)) return 0;
    const vc_st_tensor *ids = vc_ckpt_find(ck, "input_ids"), *mask = vc_ckpt_find(ck, "attention_mask"),
                       *pix = vc_ckpt_find(ck, "pixel_values"), *grid = vc_ckpt_find(ck, "image_grid_thw"),
                       *loss = vc_ckpt_find(ck, "loss");
    int ok = ids && mask && pix && grid && loss && ids->shape[0] == 2 && ids->shape[1] <= 32 && grid->shape[0] == 2 &&
             pix->dtype == VC_F32;
    if (ok) {
        int64_t T = ids->shape[1], n = 0;
        for (int b = 0; b < 2; b++) {
            for (int64_t t = 0; t < T; t++)
                if (((const int64_t *)mask->data)[b * T + t]) r->ids[n++] = (int32_t)((const int64_t *)ids->data)[b * T + t];
            r->cu[b + 1] = n;
            r->span[b] = n - r->cu[b];
        }
        for (int k = 0; k < 6; k++) r->grid[k] = (int32_t)((const int64_t *)grid->data)[k];
        r->pix = malloc(sizeof(float) * (size_t)vc_st_tensor_numel(pix));
        memcpy(r->pix, pix->data, sizeof(float) * (size_t)vc_st_tensor_numel(pix));
        int64_t rows0 = (int64_t)r->grid[0] * r->grid[1] * r->grid[2];
        r->im[0] = (vc_images){ 1, r->grid, r->pix, pix->shape[1] };
        r->im[1] = (vc_images){ 1, r->grid + 3, r->pix + rows0 * pix->shape[1], pix->shape[1] };
        r->each[0] = &r->im[0];
        r->each[1] = &r->im[1];
        r->loss = ((const float *)loss->data)[0];
        r->b = (vc_minibatch){ 2, r->cu, r->ids, .images = r->each, .image_span = r->span };
    }
    vc_ckpt_close(ck);
    return ok;
}

static float *tower_grad(vc_model *m, int i) {
    float *g = malloc(sizeof(float) * (size_t)vc_model_param(m, i, NULL, NULL)->n);
    if (vc_model_param_read(m, i, 1, g)) {
        free(g);
        return NULL;
    }
    return g;
}

/* the trainer with images: transformers' loss; the same tower gradients whatever the micro-batching (each row's
 * image goes with it); a step moves the tower, and a frozen tower stays */
static void trainer_images(const char *dir) {
    rows_ref r;
    vc_model *m = NULL;
    CHECK(read_rows(dir, &r));
    CHECK_OK(vc_model_load(dir, &m));
    if (!m || !r.pix) {
        vc_model_free(m);
        free(r.pix);
        return;
    }
    vc_trainer t;
    vc_trainer_config tc;
    vc_trainer_config_default(&tc);
    vc_lr_config lc;
    vc_lr_config_default(&lc);
    lc.lr = 1e-2;
    CHECK_OK(vc_lr_schedule_init(&tc.sched, &lc));
    tc.adamw.lr = 1e-2;
    tc.micro_bs = 2;
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    double sum = 0, n = 0;
    CHECK_OK(vc_trainer_eval_nll(&t, &r.b, &sum, &n));
    CHECK_MSG(n > 0 && fabs(sum / n - r.loss) < 2e-5, "%s: loss with images %.7f, transformers %.7f", dir,
              n ? sum / n : 0.0, r.loss);
    printf("%s: loss with images %.7f, transformers %.7f\n", dir, n ? sum / n : 0.0, r.loss);
    int np = vc_model_n_params(m), pe = np - vc_vision_count(vc_model_vision(m)); /* the first tower tensor */
    vc_step_stats ss;
    float *g2 = NULL, *g1 = NULL;
    vc_model_zero_grad(m);
    CHECK_OK(vc_trainer_accumulate(&t, &r.b, NULL, NULL, &ss));
    g2 = tower_grad(m, pe);
    vc_trainer_free(&t);
    tc.micro_bs = 1;
    CHECK_OK(vc_trainer_init(&t, m, &tc));
    vc_model_zero_grad(m);
    CHECK_OK(vc_trainer_accumulate(&t, &r.b, NULL, NULL, &ss));
    g1 = tower_grad(m, pe);
    double worst = 0, most = 0;
    for (int64_t k = 0; g1 && g2 && k < vc_model_param(m, pe, NULL, NULL)->n; k++) {
        worst = fmax(worst, fabs(g1[k] - g2[k]));
        most = fmax(most, fabs(g2[k]));
    }
    CHECK_MSG(g1 && g2 && most > 0 && worst <= 1e-5 * most, "tower gradient by micro-batches of 1 vs 2: %g of %g", worst,
              most);
    free(g1);
    free(g2);
    /* a step moves the tower; frozen, it stays while the text weights move */
    for (int frozen = 0; frozen < 2; frozen++) {
        vc_trainer_free(&t);
        CHECK_OK(vc_model_freeze_vision(m, frozen));
        CHECK_OK(vc_trainer_init(&t, m, &tc));
        float *e0 = malloc(sizeof(float) * (size_t)vc_model_param(m, 0, NULL, NULL)->n);
        float *p0 = malloc(sizeof(float) * (size_t)vc_model_param(m, pe, NULL, NULL)->n);
        float *p1 = malloc(sizeof(float) * (size_t)vc_model_param(m, pe, NULL, NULL)->n);
        float *e1 = malloc(sizeof(float) * (size_t)vc_model_param(m, 0, NULL, NULL)->n);
        CHECK_OK(vc_model_param_read(m, pe, 0, p0));
        CHECK_OK(vc_model_param_read(m, 0, 0, e0));
        CHECK_OK(vc_trainer_step(&t, &r.b, NULL, NULL, &ss));
        CHECK_OK(vc_model_param_read(m, pe, 0, p1));
        CHECK_OK(vc_model_param_read(m, 0, 0, e1));
        int tower_moved = memcmp(p0, p1, sizeof(float) * (size_t)vc_model_param(m, pe, NULL, NULL)->n) != 0;
        int text_moved = memcmp(e0, e1, sizeof(float) * (size_t)vc_model_param(m, 0, NULL, NULL)->n) != 0;
        CHECK_MSG(text_moved && tower_moved == !frozen, "%s tower: text %s, tower %s", frozen ? "frozen" : "trained",
                  text_moved ? "moved" : "stayed", tower_moved ? "moved" : "stayed");
        free(e0); free(e1); free(p0); free(p1);
    }
    vc_trainer_free(&t);
    vc_model_free(m);
    free(r.pix);
}

/* dir (a mkdtemp template, filled in): `model`'s checkpoint and reference (linked) with `from` replaced by `to` in its
 * config.json */
static void edited_copy(const char *model, const char *from, const char *to, char *dir) {
    char path[256], src[PATH_MAX], text[1 << 14], out[1 << 14];
    CHECK(mkdtemp(dir) != NULL);
    static const char *const LINKED[2] = { "model.safetensors", "reference.safetensors" };
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", model, LINKED[i]);
        CHECK(realpath(path, src) != NULL);
        snprintf(path, sizeof path, "%s/%s", dir, LINKED[i]);
        CHECK(symlink(src, path) == 0);
    }
    snprintf(path, sizeof path, "%s/config.json", model);
    FILE *in = fopen(path, "r");
    size_t n = in ? fread(text, 1, sizeof text - 1, in) : 0;
    if (in) fclose(in);
    text[n] = 0;
    char *at = strstr(text, from);
    CHECK_MSG(at != NULL, "%s: no '%s' in config.json", model, from);
    if (at) snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (f) fputs(at ? out : text, f), fclose(f);
}

static void remove_dir(const char *dir) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* loading `model`'s checkpoint with `from` replaced by `to` in its config.json fails naming `what` */
static void edited_fails(const char *model, const char *from, const char *to, const char *what) {
    char dir[] = "/tmp/vc_visionXXXXXX";
    edited_copy(model, from, to, dir);
    vc_model *m = NULL;
    vc_status st = vc_model_load(dir, &m);
    CHECK_MSG(st && !m && strstr(vc_last_error(), what), "%s with %s: %s", model, to, st ? vc_last_error() : "loaded");
    vc_model_free(m);
    remove_dir(dir);
}

/* configs asking for more than the checkpoint holds, or what no tower is, and a text model */
static void bad_checkpoints(void) {
    edited_fails(VL_DIR, "\"depth\": 2", "\"depth\": 3", "visual.blocks.2.");
    edited_fails(VL_DIR, "\"spatial_merge_size\": 2", "\"spatial_merge_size\": 3", "merger");
    const char *q3 = "tests/fixtures/models/qwen3_vl_image";
    edited_fails(q3, "\"deepstack_visual_indexes\": [", "\"deepstack_visual_indexes\": [7, ", "deepstack_visual_indexes");
    edited_fails(q3, "\"num_position_embeddings\": 16", "\"num_position_embeddings\": 15", "not a square");
    edited_fails(q3, "\"num_position_embeddings\": 16", "\"num_position_embeddings\": 25", "pos_embed");
    edited_fails(GLM_DIR, "\"image_size\": 56", "\"image_size\": 70", "embeddings.position_embedding");
    edited_fails(GLM_DIR, "\"out_hidden_size\": 64", "\"out_hidden_size\": 32", "output width");
    edited_fails(GLM_DIR, "\"attention_bias\": false", "\"attention_bias\": true", "attn.qkv.bias");
    /* InternVL: what its config asks for beyond the checkpoint, and what no tower of transformers' runs */
    edited_fails(INTERN_DIR, "\"use_qk_norm\": false", "\"use_qk_norm\": true", "attention.q_norm.weight");
    edited_fails(INTERN_DIR, "\"use_mean_pooling\": true", "\"use_mean_pooling\": false", "vision_tower.layernorm.weight");
    edited_fails(INTERN_DIR, "\"downsample_ratio\": 0.5", "\"downsample_ratio\": 0.3", "downsample_ratio");
    edited_fails(INTERN_DIR, "\"vision_feature_layer\": -1", "\"vision_feature_layer\": -2", "vision_feature_layer");
    edited_fails(INTERN_DIR, "\"vision_feature_select_strategy\": \"default\"",
                 "\"vision_feature_select_strategy\": \"full\"", "vision_feature_select_strategy");
    edited_fails(INTERN_DIR, "\"norm_type\": \"layer_norm\"", "\"norm_type\": \"batch_norm\"", "norm_type");
    /* Gemma 4: a rope it has not, a position table or key / value heads the checkpoint does not hold */
    edited_fails(G4_DIR, "\"rope_type\": \"axial\"", "\"rope_type\": \"default\"", "rope_type");
    edited_fails(G4_DIR, "\"position_embedding_size\": 16", "\"position_embedding_size\": 32", "position_embedding_table");
    edited_fails(G4_DIR, "\"num_key_value_heads\": 1", "\"num_key_value_heads\": 2", "k_proj.linear.weight");
    /* Kimi K2.5: a position table or projector it has not; Llama 4: a pixel shuffle its adapter's fc1 does not read */
    const char *k25 = "tests/fixtures/models/kimi_k25_image", *l4 = "tests/fixtures/models/llama4_image";
    edited_fails(k25, "\"pos_emb_type\": \"divided_fixed\"", "\"pos_emb_type\": \"learned\"", "pos_emb_type");
    edited_fails(k25, "\"mm_projector_type\": \"patchmerger\"", "\"mm_projector_type\": \"mlp\"", "mm_projector_type");
    edited_fails(k25, "\"projector_ln_eps\": 1e-05", "\"projector_ln_eps\": 2", "epsilon");
    edited_fails(l4, "\"pixel_shuffle_ratio\": 0.5", "\"pixel_shuffle_ratio\": 0.25", "intermediate_size");
    edited_fails(l4, "\"vision_output_dim\": 48", "\"vision_output_dim\": 40", "vision_output_dim");
    /* Mistral 3: a merge its patch merger does not hold, a rope Pixtral has not */
    const char *m3 = "tests/fixtures/models/mistral3_image";
    edited_fails(m3, "\"spatial_merge_size\": 2", "\"spatial_merge_size\": 3", "merging_layer");
    edited_fails(m3, "\"rope_type\": \"axial\"", "\"rope_type\": \"default\"", "rope_type");
    vc_model *m = NULL;
    char text_model[1024];
    snprintf(text_model, sizeof text_model, "%s/fixtures/models/qwen2", vc_test_shared());
    if (vc_model_load(text_model, &m) == VC_OK) {
        CHECK(vc_model_load_vision(m) != VC_OK && strstr(vc_last_error(), "vision_config"));
        vc_model_free(m);
    }
}

/* Gemma 3's image runs beside shared prompt prefixes (use_prefix_grouper): a batch of the image prompt, a text row and
 * a row behind that text row's tokens gives the image prompt the hidden states it has alone (its runs read its own
 * rows); the image prompt behind a prefix is refused by name; a prompt partly cached before its images too (as for
 * any model: its image tokens are no prompt's then) */
static void gemma_prefix(vc_model *m, const greedy_ref *r) {
    int64_t H = vc_cfg_out_hidden(vc_model_cfg(m)), np = r->np;
    float *alone = hidden(m, r);
    int32_t ids[80];
    for (int i = 0; i < 6; i++) ids[i] = 5 + i; /* a text row of 4, one of 2 behind it, then the image prompt */
    memcpy(ids + 6, r->prompt, sizeof(int32_t) * (size_t)np);
    int64_t cu[4] = { 0, 4, 6, 6 + np };
    int32_t prefix[3] = { -1, 0, -1 };
    vc_batch b = { 3, cu, ids, .prefix = prefix, .images = &r->im };
    vc_graph *g = vc_graph_new();
    vc_graph_set_grad(g, 0);
    vc_tensor *h = vc_model_forward(m, g, &b, NULL);
    CHECK_MSG(h != NULL, "Gemma 3 with images beside shared prefixes: %s", vc_last_error());
    float *all = h ? malloc(sizeof(float) * (size_t)(H * (np + 6))) : NULL;
    double worst = INFINITY;
    if (all && alone && !vc_tensor_read(h, all)) {
        worst = 0;
        for (int64_t i = 0; i < H; i++) worst = fmax(worst, fabs(all[(np + 5) * H + i] - alone[i]));
    }
    CHECK_MSG(worst < 1e-5, "Gemma 3: the image prompt beside shared prefixes is %g from alone", worst);
    free(all);
    free(alone);
    vc_graph_reset(g);
    int32_t behind[3] = { -1, 0, -1 }; /* the image prompt is sequence 1 here, behind sequence 0 */
    int32_t ids2[80];
    for (int i = 0; i < 4; i++) ids2[i] = 5 + i;
    memcpy(ids2 + 4, r->prompt, sizeof(int32_t) * (size_t)np);
    ids2[np + 4] = 9, ids2[np + 5] = 10;
    int64_t cu2[4] = { 0, 4, 4 + np, np + 6 };
    vc_batch b2 = { 3, cu2, ids2, .prefix = behind, .images = &r->im };
    h = vc_model_forward(m, g, &b2, NULL);
    CHECK_MSG(!h && strstr(vc_last_error(), "behind a shared prompt prefix"), "an image prompt behind a prefix: %s",
              h ? "accepted" : vc_last_error());
    vc_graph_free(g);
    /* its prompt cached in part before the images come: refused by name */
    vc_kv_cache *kc = NULL;
    CHECK_OK(vc_kv_cache_new(m, 1, np + 2, &kc));
    g = vc_graph_new();
    vc_graph_set_grad(g, 0);
    int64_t one[2] = { 0, 1 };
    vc_batch first = { 1, one, r->prompt };
    CHECK(vc_model_forward(m, g, &first, kc) != NULL);
    vc_graph_reset(g);
    int64_t rest[2] = { 0, np - 1 };
    vc_batch more = { 1, rest, r->prompt + 1, .images = &r->im };
    /* (its image tokens are not its prompt's images then: a prompt's images come with its first token) */
    CHECK_MSG(!vc_model_forward(m, g, &more, kc) && strstr(vc_last_error(), "0 image tokens for images of"),
              "a Gemma 3 prompt cached in part before its images: %s", vc_last_error());
    vc_graph_free(g);
    vc_kv_cache_free(kc);
}

/* fn on the fixture model in dir with its greedy reference's image */
static void with_fixture(const char *dir, void (*fn)(vc_model *, const greedy_ref *)) {
    greedy_ref r;
    vc_model *m = NULL;
    CHECK(read_ref(dir, &r));
    CHECK_OK(vc_model_load(dir, &m));
    if (m && r.pix) fn(m, &r);
    vc_model_free(m);
    free(r.pix);
}

int main(void) {
    greedy_ref r;
    vc_model *m = NULL;
    CHECK(read_ref(VL_DIR, &r));
    CHECK_OK(vc_model_load(VL_DIR, &m));
    if (m && r.pix) {
        engine_refusals(m, &r);
        bad_images(m, &r);
        image_token_decoded(m, &r);
        engine(m, &r);
        tower_params(m, &r);
    }
    vc_model_free(m);
    free(r.pix);
    with_fixture(GLM_DIR, bad_images); /* GLM-4.1V: bad images refused by its tower as by Qwen's */
    with_fixture(GEMMA_DIR, gemma_prefix);
    with_fixture(GEMMA_DIR, gemma3_crops);
    with_fixture(INTERN_DIR, intern_images);
    with_fixture("tests/fixtures/models/llama4_image", llama4_images);
    with_fixture(G4_DIR, gemma4_images);
    bad_checkpoints();
    trainer_images(VL_DIR);
    trainer_images(GLM_DIR);
    /* GLM-4.6V (Glm46VConfig: GLM-4.1V's vision and text models under model_type glm46v): the same loss */
    char g46[] = "/tmp/vc_glm46vXXXXXX";
    edited_copy(GLM_DIR, "\"model_type\": \"glm4v\"", "\"model_type\": \"glm46v\"", g46);
    trainer_images(g46);
    remove_dir(g46);
    return vc_test_done();
}
