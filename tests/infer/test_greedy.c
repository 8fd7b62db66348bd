/* Greedy decoding through the rollout engine reproduces every fixture's transformers greedy_output,
 * alone and batched with other prompts of different lengths (small pages, chunked prefill), on the cpu
 * device and on the sim device (weights, KV pages and activations behind poisoned pointers). */
#include "tensor/backend.h"
#include "verlc/device.h"
#include "vc_test.h"
#include "verlc/rng.h"
#include "verlc/rollout.h"
#include "verlc/safetensors.h"
#include "verlc/vision.h"
#include <dirent.h>

static int read_ids(const vc_checkpoint *ck, const char *name, int32_t *out, int64_t *n) {
    const vc_st_tensor *t = vc_ckpt_find(ck, name);
    if (!t || (t->dtype != VC_I64 && t->dtype != VC_I32)) return 0;
    *n = vc_st_tensor_numel(t);
    if (*n > 4096) return 0;
    for (int64_t i = 0; i < *n; i++)
        out[i] = t->dtype == VC_I64 ? (int32_t)((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
    return 1;
}

/* image-text fixtures: the greedy prompt's images (greedy_pixel_values, greedy_image_grid_thw); 0 when it has none */
static int read_images(const vc_checkpoint *ck, int32_t *grid, vc_images *im) {
    const vc_st_tensor *p = vc_ckpt_find(ck, "greedy_pixel_values");
    int64_t ng = 0;
    memset(im, 0, sizeof *im);
    if (!p) return 0;
    CHECK(p->dtype == VC_F32 && p->ndim == 2 && read_ids(ck, "greedy_image_grid_thw", grid, &ng) && ng % 3 == 0);
    *im = (vc_images){ (int)(ng / 3), grid, (const float *)p->data, p->shape[1] };
    return im->n > 0;
}

/* returns 1 when the fixture's request's greedy tokens equal want */
static int run(vc_model *m, const int32_t *prompt, int64_t np, const vc_images *im, const int32_t *want, int n_new,
               int batched) {
    const vc_model_config *c = vc_model_cfg(m);
    int32_t other[3][40];
    vc_rollout_request rq[4] = { { prompt, np, 1, 0, im } };
    int nreq = 1;
    if (batched) {
        static const int len[3] = { 3, 29, 11 };
        for (int k = 0; k < 3; k++) {
            for (int t = 0; t < len[k]; t++) other[k][t] = (int32_t)vc_rng_below((uint64_t)c->vocab, 5, (uint64_t)k, 0, (uint64_t)t);
            rq[k + 1] = (vc_rollout_request){ other[k], len[k], 1 + k % 2, (uint64_t)k + 1 };
        }
        /* the fixture's prompt goes in the middle of the batch */
        vc_rollout_request t = rq[0];
        rq[0] = rq[2];
        rq[2] = t;
        nreq = 4;
    }
    vc_rollout_opts o = { .kv_budget_bytes = 32e6, .page_tokens = batched ? 4 : 16, .max_batch = batched ? 4 : 1,
                          .prefill_chunk = batched ? 6 : 512 };
    vc_sampling sp = { .greedy = 1, .max_new_tokens = n_new };
    vc_rollout_engine *e = NULL;
    vc_rollout_sample *out = NULL;
    int n_out = 0, ok = 0;
    if (vc_rollout_new(m, &o, &e) || vc_rollout_generate(e, rq, nreq, &sp, &out, &n_out)) {
        fprintf(stderr, "generate: %s\n", vc_last_error());
    } else {
        int idx = 0; /* the fixture's prompt is request 2 when batched */
        for (int i = 0; i < n_out; i++)
            if (out[i].request == (batched ? 2 : 0)) idx = i;
        ok = out[idx].n_tokens == n_new && !memcmp(out[idx].tokens, want, (size_t)n_new * 4);
    }
    vc_rollout_samples_free(out, n_out);
    vc_rollout_free(e);
    return ok;
}

/* greedy decoding of every fixture model of one folder that carries a greedy reference */
static void run_root(const char *root, int *total, int *alone, int *batched) {
    DIR *d = opendir(root);
    CHECK_MSG(d != NULL, "cannot open %s", root);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char dir[1400], ref[1500];
        snprintf(dir, sizeof dir, "%s/%s", root, de->d_name);
        snprintf(ref, sizeof ref, "%s/reference.safetensors", dir);
        vc_checkpoint *ck = NULL;
        if (vc_ckpt_open(ref, &ck)) continue;
        int32_t prompt[4096], outp[4096];
        int64_t np, no;
        if (read_ids(ck, "greedy_prompt", prompt, &np) && read_ids(ck, "greedy_output", outp, &no) && no > np) {
            vc_model *m = NULL;
            CHECK_OK(vc_model_load(dir, &m));
            int32_t grid[3 * 16];
            vc_images im;
            if (m && read_images(ck, grid, &im)) CHECK_OK(vc_model_load_vision(m));
            if (m) {
                (*total)++;
                const vc_images *pim = im.n ? &im : NULL;
                int a = run(m, prompt, np, pim, outp + np, (int)(no - np), 0);
                int b = run(m, prompt, np, pim, outp + np, (int)(no - np), 1);
                *alone += a;
                *batched += b;
                CHECK_MSG(a && b, "%s: greedy alone %s, batched %s", de->d_name, a ? "ok" : "differs", b ? "ok" : "differs");
                vc_model_free(m);
            }
        }
        vc_ckpt_close(ck);
    }
    closedir(d);
}

static void run_device(const char *device) {
    char root[1024];
    CHECK_OK(vc_device_select(device, "test"));
    int total = 0, alone = 0, batched = 0;
    for (int i = 0; vc_test_model_root(i, root, sizeof root); i++) run_root(root, &total, &alone, &batched);
    printf("greedy through the engine (%s): %d/%d fixtures match alone, %d/%d batched\n", device, alone, total, batched,
           total);
    CHECK(total >= 23);
    CHECK_OK(vc_device_select("cpu", "test"));
}

int main(void) {
    CHECK(vc_backend_sim() != NULL); /* a strong reference links the sim backend in */
    run_device("cpu");
    run_device("sim");
    return vc_test_done();
}
