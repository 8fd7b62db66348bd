/* LoRA on the vision towers of the image fixtures (qwen2_vl_image, qwen2_5_vl_image, qwen3_vl_image, glm4v_image, qwen3_5_image)
 * against PEFT 0.21 on transformers 5.24 (tools/fixtures/make_peft_vl_lora.py, tests/fixtures/lora): verlc adapts exactly the
 * modules PEFT adapts (all-linear, name lists, exclude_modules; count and names); PEFT's adapter with every A and B
 * drawn, read by verlc, gives PEFT's logits on two rows with images, and merged gives the same; a training step with
 * images moves the tower's adapters and not its weights, frozen (freeze_vision_tower) leaves them as drawn; the saved
 * adapter loads back to the same logits bit for bit; names that reach the tower's Conv3d are refused. On cpu and on the
 * sim device. */
#include "tensor/backend.h"
#include "verlc/device.h"
#include "verlc/json.h"
#include "verlc/model.h"
#include "verlc/safetensors.h"
#include "verlc/train.h"
#include "verlc/vision.h"
#include "model_test_util.h"
#include "vc_test.h"
#include <sys/stat.h>
#include <unistd.h>

static const char *FIXTURES[] = { "qwen2_vl_image", "qwen2_5_vl_image", "qwen3_vl_image", "glm4v_image", "qwen3_5_image" };
#define NFX (sizeof FIXTURES / sizeof FIXTURES[0])

/* the fixture's two rows with their images (reference.safetensors), packed */
typedef struct {
    int64_t cu[3], span[2], T;
    int32_t ids[64], grid[6], at[64]; /* at[t]: the padded position (row * width + column) of packed token t */
    int64_t width;
    float *pix;
    vc_images all, im[2];
    const vc_images *each[2];
} rows_t;

static int read_rows(const char *mdir, rows_t *r) {
    char path[320];
    vc_checkpoint *ck = NULL;
    memset(r, 0, sizeof *r);
    snprintf(path, sizeof path, "%s/reference.safetensors", mdir);
    if (vc_ckpt_open(path, &ck)) return 0;
    const vc_st_tensor *ids = vc_ckpt_find(ck, "input_ids"), *mask = vc_ckpt_find(ck, "attention_mask"),
                       *pix = vc_ckpt_find(ck, "pixel_values"), *grid = vc_ckpt_find(ck, "image_grid_thw");
    int ok = ids && mask && pix && grid && ids->shape[0] == 2 && ids->shape[1] <= 32 && grid->shape[0] == 2 &&
             pix->dtype == VC_F32 && (r->pix = malloc(sizeof(float) * (size_t)vc_st_tensor_numel(pix)));
    if (ok) {
        int64_t W = ids->shape[1], n = 0;
        r->width = W;
        for (int b = 0; b < 2; b++) {
            for (int64_t t = 0; t < W; t++)
                if (((const int64_t *)mask->data)[b * W + t]) {
                    r->at[n] = (int32_t)(b * W + t);
                    r->ids[n++] = (int32_t)((const int64_t *)ids->data)[b * W + t];
                }
            r->cu[b + 1] = n;
            r->span[b] = n - r->cu[b];
        }
        r->T = n;
        for (int k = 0; k < 6; k++) r->grid[k] = (int32_t)((const int64_t *)grid->data)[k];
        memcpy(r->pix, pix->data, sizeof(float) * (size_t)vc_st_tensor_numel(pix));
        int64_t row = pix->shape[1], rows0 = (int64_t)r->grid[0] * r->grid[1] * r->grid[2];
        r->all = (vc_images){ 2, r->grid, r->pix, row };
        r->im[0] = (vc_images){ 1, r->grid, r->pix, row };
        r->im[1] = (vc_images){ 1, r->grid + 3, r->pix + rows0 * row, row };
        r->each[0] = &r->im[0];
        r->each[1] = &r->im[1];
    }
    vc_ckpt_close(ck);
    return ok;
}

/* the logits [T, vocab] of the rows under m (NULL on failure) */
static float *logits(vc_model *m, const rows_t *r) {
    vc_graph *g = vc_graph_new();
    vc_batch b = { 2, r->cu, r->ids, .images = &r->all, .image_span = r->span };
    vc_graph_set_grad(g, 0);
    vc_tensor *h = vc_model_forward(m, g, &b, NULL), *L = h ? vc_model_logits(m, g, h) : NULL;
    float *out = L ? malloc(sizeof(float) * (size_t)L->n) : NULL;
    if (out && vc_tensor_read(L, out)) {
        free(out);
        out = NULL;
    }
    if (!out) fprintf(stderr, "forward with images: %s\n", vc_last_error());
    vc_graph_free(g);
    return out;
}

static double max_diff(const float *a, const float *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; a && b && i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return a && b ? d : INFINITY;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* the module paths of dir's adapter_model.safetensors (its lora_A tensors' names less base_model.model. and
 * .lora_A.weight), sorted; returns how many (-1: unreadable) */
static int adapter_modules(const char *dir, char ***out) {
    char path[320];
    vc_checkpoint *ck = NULL;
    *out = NULL;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (vc_ckpt_open(path, &ck)) return -1;
    int n = 0, cap = vc_ckpt_count(ck);
    char **names = calloc((size_t)cap + 1, sizeof *names);
    for (int i = 0; names && i < cap; i++) {
        const char *t = vc_ckpt_at(ck, i)->name, *a = strstr(t, ".lora_A.weight");
        const char *p = "base_model.model.";
        if (!a || strncmp(t, p, strlen(p))) continue;
        names[n++] = strndup(t + strlen(p), (size_t)(a - t - (ptrdiff_t)strlen(p)));
    }
    vc_ckpt_close(ck);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    *out = names;
    return n;
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

static int count_visual(char **names, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += strstr(names[i], "visual.") != NULL;
    return k;
}

/* a spec's target_modules ("all-linear" or the list's names comma-separated) */
static void targets_of(const cJSON *tm, char *buf, size_t cap) {
    const cJSON *e;
    *buf = 0;
    if (cJSON_IsString(tm)) snprintf(buf, cap, "%s", tm->valuestring);
    else
        cJSON_ArrayForEach(e, tm) snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", *buf ? "," : "",
                                           e->valuestring);
}

/* the adapters verlc attaches for each of PEFT's LoraConfigs, saved: PEFT's modules, no more, no fewer; and read back
 * from verlc's adapter_config.json (its target_modules and exclude_modules), the same ones again */
static void same_modules_as_peft(const char *tmp) {
    cJSON *ref = NULL;
    CHECK_OK(vc_json_load_file("tests/fixtures/lora/vl_targets.json", &ref));
    for (size_t f = 0; ref && f < NFX; f++) {
        char mdir[256];
        snprintf(mdir, sizeof mdir, "tests/fixtures/models/%s", FIXTURES[f]);
        const cJSON *cases = cJSON_GetObjectItem(ref, FIXTURES[f]), *c;
        CHECK_MSG(cJSON_GetArraySize(cases) >= 5, "%s: vl_targets.json has %d cases", FIXTURES[f],
                  cJSON_GetArraySize(cases));
        int k = 0;
        cJSON_ArrayForEach(c, cases) {
            char tg[512], out[320];
            const cJSON *ex = cJSON_GetObjectItem(c, "exclude_modules"), *mods = cJSON_GetObjectItem(c, "modules");
            targets_of(cJSON_GetObjectItem(c, "target_modules"), tg, sizeof tg);
            vc_lora_spec sp = { 2, 4.0, tg, NULL, cJSON_IsString(ex) ? ex->valuestring : NULL, 11, 0 };
            vc_model *m = NULL, *back = NULL;
            snprintf(out, sizeof out, "%s/%s_%d", tmp, FIXTURES[f], k++);
            mkdir(out, 0755);
            CHECK_OK(vc_model_load(mdir, &m));
            CHECK_OK(vc_model_lora_attach(m, &sp));
            CHECK_OK(vc_model_lora_save(m, out));
            char **got = NULL, **again = NULL;
            int n = adapter_modules(out, &got), want = cJSON_GetArraySize(mods), same = n == want;
            for (int i = 0; same && i < n; i++) same = !strcmp(got[i], cJSON_GetArrayItem(mods, i)->valuestring);
            printf("%s: target_modules %s, exclude_modules %s: %d modules (%d of the tower), PEFT %d\n", FIXTURES[f], tg,
                   cJSON_IsString(ex) ? ex->valuestring : "none", n, n > 0 ? count_visual(got, n) : 0, want);
            CHECK_MSG(same, "%s (%s, exclude %s): verlc's %d modules are not PEFT's %d (first: %s)", FIXTURES[f], tg,
                      cJSON_IsString(ex) ? ex->valuestring : "none", n, want, n > 0 ? got[0] : "none");
            if (cJSON_IsString(ex) && !strcmp(ex->valuestring, ".*visual.*"))
                CHECK_MSG(n > 0 && count_visual(got, n) == 0, "exclude_modules .*visual.*: the tower has adapters");
            CHECK_OK(vc_model_load(mdir, &back));
            CHECK_OK(vc_model_lora_attach_from(back, out)); /* its own config: the same modules, all in the file */
            CHECK_OK(vc_model_lora_save(back, out));
            int n2 = adapter_modules(out, &again), same2 = n2 == n;
            for (int i = 0; same2 && i < n; i++) same2 = !strcmp(got[i], again[i]);
            CHECK_MSG(same2, "%s (%s): attached again from verlc's adapter_config.json: %d modules, not %d", FIXTURES[f],
                      tg, n2, n);
            free_names(got, n > 0 ? n : 0);
            free_names(again, n2 > 0 ? n2 : 0);
            vc_model_free(m);
            vc_model_free(back);
        }
    }
    cJSON_Delete(ref);
}

struct lg_ctx { const rows_t *r; float *out; };
static vc_status merged_logits(vc_model *m, void *p) {
    struct lg_ctx *c = p;
    c->out = logits(m, c->r);
    return c->out ? VC_OK : VC_ERR_INTERNAL;
}

/* PEFT's adapter (all-linear, every A and B drawn) read by verlc: PEFT's logits on the rows with images; without the
 * tower's adapters far from them; the merged weights give the adapted logits */
static void peft_logits(void) {
    for (size_t f = 0; f < NFX; f++) {
        char mdir[256], adir[256], path[320];
        snprintf(mdir, sizeof mdir, "tests/fixtures/models/%s", FIXTURES[f]);
        snprintf(adir, sizeof adir, "tests/fixtures/lora/%s", FIXTURES[f]);
        snprintf(path, sizeof path, "%s/reference.safetensors", adir);
        rows_t r;
        vc_checkpoint *ck = NULL;
        vc_model *m = NULL, *text = NULL;
        CHECK(read_rows(mdir, &r));
        CHECK_OK(vc_ckpt_open(path, &ck));
        const vc_st_tensor *want = ck ? vc_ckpt_find(ck, "logits") : NULL;
        CHECK_OK(vc_model_load(mdir, &m));
        CHECK_OK(vc_model_lora_attach_from(m, adir));
        /* the same file into text adapters only (the tower's excluded): their part loads, the tower's is left out */
        vc_lora_spec sp = { 2, 4.0, "all-linear", NULL, ".*visual.*", 1, 0 };
        CHECK_OK(vc_model_load(mdir, &text));
        CHECK_OK(vc_model_lora_attach(text, &sp));
        CHECK_OK(vc_model_lora_load(text, adir));
        int64_t V = m ? vc_model_cfg(m)->vocab : 0;
        float *got = m && r.pix ? logits(m, &r) : NULL, *part = text && r.pix ? logits(text, &r) : NULL;
        double worst = 0, span = 0, tower = 0;
        int ok = got && part && want && want->ndim == 3 && want->shape[2] == V && want->dtype == VC_F32;
        for (int64_t t = 0; ok && t < r.T; t++)
            for (int64_t v = 0; v < V; v++) {
                double w = ((const float *)want->data)[(int64_t)r.at[t] * V + v];
                worst = fmax(worst, fabs(w - got[t * V + v]));
                tower = fmax(tower, fabs(w - part[t * V + v]));
                span = fmax(span, fabs(w));
            }
        struct lg_ctx c = { &r, NULL };
        if (m) CHECK_OK(vc_model_lora_merged(m, merged_logits, &c));
        double dm = max_diff(got, c.out, r.T * V);
        printf("%s: PEFT's adapter: |verlc - PEFT| logits %.2g (largest %.3g; without the tower's adapters %.3g), "
               "|adapted - merged| %.2g\n", FIXTURES[f], worst, span, tower, dm);
        /* (Qwen3.5: the Gated DeltaNet's recurrence carries the GEMMs' rounding further, see below) */
        double lt = strstr(FIXTURES[f], "qwen3_5") ? 2e-4 : 1e-4;
        CHECK_MSG(ok && worst < lt && span > 1, "%s: verlc's logits differ from PEFT's by %g", FIXTURES[f], worst);
        CHECK_MSG(ok && tower > 100 * worst && tower > 1e-3, "%s: the tower's adapters change the logits by %g only",
                  FIXTURES[f], tower);
        /* Qwen3.5's Gated DeltaNet recurrence carries rounding further: PEFT's own adapted and merged logits of this
         * fixture differ by 3.9e-5 (its logits match transformers' to 4.7e-5 for the same reason) */
        double tol = strstr(FIXTURES[f], "qwen3_5") ? 2e-4 : 2e-5;
        CHECK_MSG(dm < tol, "%s: adapted vs merged logits %g", FIXTURES[f], dm);
        free(got);
        free(part);
        free(c.out);
        free(r.pix);
        vc_ckpt_close(ck);
        vc_model_free(m);
        vc_model_free(text);
    }
}

/* a tensor of dir's adapter file as floats (NULL: absent) */
static float *adapter_tensor(const char *dir, const char *name, int64_t *n) {
    char path[320];
    vc_checkpoint *ck = NULL;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (vc_ckpt_open(path, &ck)) return NULL;
    const vc_st_tensor *t = vc_ckpt_find(ck, name);
    float *out = t ? malloc(sizeof(float) * (size_t)vc_st_tensor_numel(t)) : NULL;
    if (out) {
        vc_st_tensor_to_f32(t, out);
        *n = vc_st_tensor_numel(t);
    }
    vc_ckpt_close(ck);
    return out;
}

/* the largest |value| of each lora_B of dir's file: the least and the most of those over the tower's adapters (vis[0],
 * vis[1]), the least over the text's (*txt); -1 where there are none */
static void b_sizes(const char *dir, double vis[2], double *txt) {
    char **mods = NULL, name[300];
    int n = adapter_modules(dir, &mods);
    vis[0] = vis[1] = *txt = -1;
    for (int i = 0; i < n; i++) {
        int64_t k = 0;
        snprintf(name, sizeof name, "base_model.model.%s.lora_B.weight", mods[i]);
        float *b = adapter_tensor(dir, name, &k);
        double d = b ? 0 : INFINITY;
        for (int64_t j = 0; b && j < k; j++) d = fmax(d, fabs(b[j]));
        if (strstr(mods[i], "visual.")) {
            vis[0] = vis[0] < 0 ? d : fmin(vis[0], d);
            vis[1] = fmax(vis[1], d);
        } else *txt = *txt < 0 ? d : fmin(*txt, d);
        free(b);
    }
    free_names(mods, n > 0 ? n : 0);
}

/* dir's adapter file rewritten with the hub's module names (model.language_model. -> model., model.visual. ->
 * visual.); 1 when done */
static int hub_names(const char *dir) {
    static const char *const MAP[2][2] = { { "base_model.model.model.language_model.", "base_model.model.model." },
                                           { "base_model.model.model.visual.", "base_model.model.visual." } };
    char path[320], name[300];
    vc_checkpoint *ck = NULL;
    vc_st_writer *w = NULL;
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (vc_ckpt_open(path, &ck) || vc_st_writer_new(&w)) {
        vc_ckpt_close(ck);
        return 0;
    }
    vc_status st = VC_OK;
    for (int i = 0; !st && i < vc_ckpt_count(ck); i++) {
        const vc_st_tensor *t = vc_ckpt_at(ck, i);
        snprintf(name, sizeof name, "%s", t->name);
        for (int k = 0; k < 2; k++)
            if (!strncmp(t->name, MAP[k][0], strlen(MAP[k][0])))
                snprintf(name, sizeof name, "%s%s", MAP[k][1], t->name + strlen(MAP[k][0]));
        float *v = malloc(sizeof(float) * (size_t)vc_st_tensor_numel(t));
        if (v) vc_st_tensor_to_f32(t, v);
        st = v ? vc_st_writer_add(w, name, VC_F32, t->ndim, t->shape, v, 1) : VC_ERR_NOMEM;
        free(v);
    }
    vc_ckpt_close(ck);
    if (!st) st = vc_st_writer_write(w, path);
    vc_st_writer_free(w);
    return st == VC_OK;
}

/* a step on the rows with images (the trainer with the adapters as its parameters, as `verlc sft` and the RL trainer
 * run LoRA): every adapter's B moves, the tower's weights do not; with the tower frozen its adapters stay as drawn (B 0)
 * and out of the trained tensors while the text's move; saved and read back, the same logits bit for bit */
static void train_step(const char *tmp) {
    for (size_t f = 0; f < NFX; f++) {
        for (int frozen = 0; frozen < 2; frozen++) {
            char mdir[256], out[320];
            snprintf(mdir, sizeof mdir, "tests/fixtures/models/%s", FIXTURES[f]);
            snprintf(out, sizeof out, "%s/step_%s_%d", tmp, FIXTURES[f], frozen);
            mkdir(out, 0755);
            rows_t r;
            vc_model *m = NULL;
            CHECK(read_rows(mdir, &r));
            CHECK_OK(vc_model_load(mdir, &m));
            if (!m || !r.pix) {
                vc_model_free(m);
                free(r.pix);
                continue;
            }
            vc_lora_spec sp = { 4, 8.0, "all-linear", NULL, NULL, 5, 0 };
            CHECK_OK(vc_model_lora_attach(m, &sp));
            vc_tensor *const *p = NULL;
            int all = vc_model_lora_params(m, &p);
            CHECK_OK(vc_model_freeze_vision(m, frozen));
            int trained = vc_model_lora_params(m, &p);
            vc_vision *v = vc_model_vision(m);
            int np = vc_model_n_params(m), first = np - vc_vision_count(v);
            vc_tensor *pw = vc_model_param(m, first, NULL, NULL);
            float *w0 = malloc(sizeof(float) * (size_t)pw->n), *w1 = malloc(sizeof(float) * (size_t)pw->n);
            CHECK_OK(vc_model_param_read(m, first, 0, w0));
            vc_trainer t;
            vc_trainer_config tc;
            vc_trainer_config_default(&tc);
            vc_lr_config lc;
            vc_lr_config_default(&lc);
            lc.lr = 1e-2;
            CHECK_OK(vc_lr_schedule_init(&tc.sched, &lc));
            tc.adamw.lr = 1e-2;
            tc.micro_bs = 2;
            tc.extra_params = p;
            tc.n_extra_params = trained;
            CHECK_OK(vc_trainer_init(&t, m, &tc));
            vc_minibatch b = { 2, r.cu, r.ids, .images = r.each, .image_span = r.span };
            vc_step_stats ss;
            CHECK_OK(vc_trainer_step(&t, &b, NULL, NULL, &ss));
            CHECK_OK(vc_model_param_read(m, first, 0, w1));
            CHECK_OK(vc_model_lora_save(m, out));
            double vis[2], txt;
            b_sizes(out, vis, &txt);
            char **mods = NULL;
            int n = adapter_modules(out, &mods), nv = n > 0 ? count_visual(mods, n) : 0;
            printf("%s%s: a step with images: %d of %d adapter tensors trained; max |B| of each of the tower's %d "
                   "adapters in [%.3g, %.3g], of the text's >= %.3g\n", FIXTURES[f], frozen ? " (tower frozen)" : "",
                   trained, all, nv, vis[0], vis[1], txt);
            CHECK_MSG(nv > 0 && txt > 1e-4, "%s: %d tower adapters; text B %g", FIXTURES[f], nv, txt);
            CHECK_MSG(frozen ? vis[1] == 0 && trained == all - 2 * nv : vis[0] > 1e-4 && trained == all,
                      "%s %s: the tower's B in [%g, %g] (%d of %d tensors trained)", FIXTURES[f],
                      frozen ? "frozen" : "trained", vis[0], vis[1], trained, all);
            CHECK_MSG(!memcmp(w0, w1, sizeof(float) * (size_t)pw->n), "%s: LoRA moved the tower's %s", FIXTURES[f],
                      "first weight");
            /* read back into a fresh model: the trained model's logits, bit for bit */
            vc_model *back = NULL;
            CHECK_OK(vc_model_load(mdir, &back));
            CHECK_OK(vc_model_lora_attach_from(back, out));
            float *a = logits(m, &r), *c = back ? logits(back, &r) : NULL;
            int64_t V = vc_model_cfg(m)->vocab;
            CHECK_MSG(a && c && !memcmp(a, c, sizeof(float) * (size_t)(r.T * V)), "%s: the saved adapter read back "
                      "gives other logits (%g)", FIXTURES[f], max_diff(a, c, r.T * V));
            /* the same adapter under the hub's names (model.layers.*, visual.*: transformers < 4.52, earlier verlc) */
            vc_model *hub = NULL;
            float *h = NULL;
            if (!frozen && hub_names(out)) {
                CHECK_OK(vc_model_load(mdir, &hub));
                CHECK_OK(vc_model_lora_attach_from(hub, out));
                h = hub ? logits(hub, &r) : NULL;
                CHECK_MSG(a && h && !memcmp(a, h, sizeof(float) * (size_t)(r.T * V)), "%s: the adapter under the hub's "
                          "names gives other logits (%g)", FIXTURES[f], max_diff(a, h, r.T * V));
            }
            free(h);
            vc_model_free(hub);
            free(a);
            free(c);
            free_names(mods, n > 0 ? n : 0);
            free(w0);
            free(w1);
            vc_trainer_free(&t);
            vc_model_free(back);
            vc_model_free(m);
            free(r.pix);
        }
    }
}

/* names that reach what PEFT adapts and verlc does not (the Conv3d patch embedding, Qwen3-VL's and GLM-4V's position
 * tables, GLM-4V's Conv2d downsample) are refused by name; a name that reaches nothing is refused */
static void refusals(void) {
    static const struct { const char *fx, *targets, *what; } C[] = {
        { "qwen2_vl_image", "qkv,proj", "Conv3d patch_embed.proj" },
        { "qwen3_vl_image", "pos_embed", "nn.Embedding pos_embed" },
        { "qwen2_vl_image", "linear_fc9", "linear_fc9" },
        { "glm4v_image", "downsample", "Conv2d downsample" },
        { "glm4v_image", "position_embedding", "nn.Embedding embeddings.position_embedding" },
    };
    for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
        char mdir[256];
        snprintf(mdir, sizeof mdir, "tests/fixtures/models/%s", C[i].fx);
        vc_model *m = NULL;
        CHECK_OK(vc_model_load(mdir, &m));
        vc_lora_spec sp = { 2, 4.0, C[i].targets, NULL, NULL, 1, 0 };
        vc_status st = m ? vc_model_lora_attach(m, &sp) : VC_OK;
        CHECK_MSG(st && strstr(vc_last_error(), C[i].what), "%s with %s: %s", C[i].fx, C[i].targets,
                  st ? vc_last_error() : "attached");
        vc_model_free(m);
    }
}

int main(void) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/verlc_lora_vision_%d", (int)getpid());
    mkdir(tmp, 0755);
    same_modules_as_peft(tmp);
    peft_logits();
    train_step(tmp);
    refusals();
    /* again on the sim device: backend memory behind pointers that fault on host access (VC_LORA_DEVICE=cuda: on the
     * CUDA backend) */
    const char *dev = getenv("VC_LORA_DEVICE");
    CHECK(vc_backend_sim() != NULL);
    CHECK_OK(vc_device_select(dev && *dev ? dev : "sim", "test"));
    peft_logits();
    train_step(tmp);
    CHECK_OK(vc_device_select("cpu", "test"));
    if (!vc_t_fail) remove_tree(tmp);
    return vc_test_done();
}
