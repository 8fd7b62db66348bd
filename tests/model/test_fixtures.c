/* Every shared fixture model against transformers' references (logits, log-probs, entropy, loss, every
 * gradient, greedy decoding), and export round trips in each checkpoint's own layout. */
#include "verlc/check.h"
#include "verlc/model.h"
#include "model_test_util.h"
#include "model/arch.h"
#include <dirent.h>
#include <unistd.h>

static void roundtrip(const char *dir, const char *name) {
    vc_model *m;
    CHECK_OK(vc_model_load(dir, &m));
    if (!m) return;
    char out[256];
    snprintf(out, sizeof out, "/tmp/verlc_rt_%d_%s", (int)getpid(), name);
    vc_dtype dt = vc_model_cfg(m)->dtype;
    CHECK_OK(vc_model_save_hf(m, out, dt));
    int used = 0, n_out = 0, same = export_matches(dir, out, name, &used, &n_out);
    CHECK_MSG(same && used == n_out, "%s: export round trip (%d tensors)", name, used);
    vc_model *back = NULL; /* and the export loads back to the same weights, bit for bit */
    CHECK_OK(vc_model_load(out, &back));
    int np = back ? vc_model_n_params(m) : 0, eq = back && vc_model_n_params(back) == np;
    for (int i = 0; eq && i < np; i++) {
        vc_tensor *x = vc_model_param(m, i, NULL, NULL), *y = vc_model_param(back, i, NULL, NULL);
        float *hx = malloc(sizeof(float) * (size_t)x->n), *hy = malloc(sizeof(float) * (size_t)x->n);
        eq = x->n == y->n && hx && hy && !vc_model_param_read(m, i, 0, hx) && !vc_model_param_read(back, i, 0, hy) &&
             !memcmp(hx, hy, sizeof(float) * (size_t)x->n);
        free(hx);
        free(hy);
    }
    CHECK_MSG(eq, "%s: the export does not load back to the same weights", name);
    vc_model_free(back);
    vc_model_free(m);
    remove_tree(out);
}

/* `verlc init` from the fixture's config.json names shared experts and routers as transformers does (Qwen's gated
 * mlp.shared_expert, DeepSeek's and GLM's mlp.shared_experts, Hunyuan's shared_mlp and gate.wg): every such name it
 * writes is the fixture's (other names may be a family's other layout, which loads too) */
static void init_names(const char *dir, const char *name) {
    char cfg[1100], out[256];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(out, sizeof out, "/tmp/verlc_init_%d_%s", (int)getpid(), name);
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(cfg, 1, &m));
    if (!m) return;
    int hub = vc_model_cfg(m)->arch->model_names; /* (init writes transformers 5's names, the fixture the hub's) */
    int modules = vc_model_cfg(m)->arch->expert_modules; /* (Kimi-VL: every name init writes is the fixture's) */
    int64_t nl = vc_model_cfg(m)->n_layer;
    CHECK_OK(vc_model_save_hf(m, out, VC_F32));
    vc_model_free(m);
    vc_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(vc_ckpt_open(dir, &a));
    CHECK_OK(vc_ckpt_open(out, &b));
    for (int i = 0; modules && a && b && i < vc_ckpt_count(b); i++)
        CHECK_MSG(vc_ckpt_find(a, vc_ckpt_at(b, i)->name) != NULL, "%s: `verlc init` writes %s", name,
                  vc_ckpt_at(b, i)->name);
    for (int i = 0; a && b && i < vc_ckpt_count(b); i++) { /* by the part from layers.N on (prefixes differ by layout) */
        const char *n = vc_ckpt_at(b, i)->name, *tail = strstr(n, "layers.");
        /* the MTP layers a config declares (transformers writes none): init writes them as the hub's checkpoints */
        if (!strncmp(n, "mtp.", 4) || strstr(n, "mtp_layers.") || (tail && atoll(tail + 7) >= nl)) continue;
        int norm = !hub && !strstr(n, "visual.") && !strstr(n, "vision_tower.") &&
                   (strstr(n, "layernorm") || strstr(n, ".ln_")); /* (the towers: other layouts) norms too: Falcon-RW's
                   second norm was written as the new architecture's ln_mlp */
        if (!strstr(n, ".shared_") && !strstr(n, ".gate.") && !norm) continue;
        int found = 0;
        /* transformers 5 saves its routers' correction bias as mlp.e_score_correction_bias, and Sarvam-M's (renamed
         * on load, back on save) as the hub's mlp.gate.expert_bias */
        char alt[512] = "", hub[512] = "";
        const char *g = tail ? strstr(tail, "gate.e_score") : NULL;
        if (g) snprintf(alt, sizeof alt, "%.*s%s", (int)(g - tail), tail, g + 5);
        if (g) snprintf(hub, sizeof hub, "%.*sgate.expert_bias", (int)(g - tail), tail);
        if (!tail) found = vc_ckpt_find(a, n) != NULL; /* (names outside the layers: the whole name) */
        for (int j = 0; tail && j < vc_ckpt_count(a) && !found; j++) {
            const char *t = strstr(vc_ckpt_at(a, j)->name, "layers.");
            found = t && (!strcmp(t, tail) || !strcmp(t, alt) || !strcmp(t, hub));
        }
        CHECK_MSG(found, "%s: `verlc init` writes %s", name, n);
    }
    vc_ckpt_close(a);
    vc_ckpt_close(b);
    remove_tree(out);
}

/* every model of one fixture folder; returns how many */
static int check_root(const char *root) {
    DIR *d = opendir(root);
    CHECK_MSG(d != NULL, "cannot open %s", root);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s", root, e->d_name);
        vc_check_result r;
        vc_status st = vc_check_model(dir, &r);
        CHECK_MSG(st == VC_OK && r.ok && r.has_reference, "%s: %s", e->d_name, st ? vc_last_error() : "a check failed");
        for (int i = 0; i < VC_CHECK_COUNT; i++)
            if (r.item[i].ran && !r.item[i].ok)
                fprintf(stderr, "  %s %s: err %.3g > tol %.3g %s\n", e->d_name, vc_check_name(i), r.item[i].max_abs_err,
                        r.item[i].tol, r.item[i].detail);
        int ran = 0;
        for (int i = 0; i < VC_CHECK_COUNT; i++) ran += r.item[i].ran;
        CHECK_MSG(ran >= 5, "%s: only %d checks ran", e->d_name, ran);
        roundtrip(dir, e->d_name);
        init_names(dir, e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* an export larger than the writer's pieces (VC_ST_FILL_PIECE): InternLM2's embedding and LM head (plain layout,
 * read piece by piece) and its fused wqkv (grouped layout, copied whole once, then served piece by piece) span
 * several pieces in f32 and in bf16; the export loads back to the same weights (bf16: rounded once) */
static void export_pieces(void) {
    char cfg[256], out[256];
    snprintf(cfg, sizeof cfg, "/tmp/verlc_pieces_%d.json", (int)getpid());
    snprintf(out, sizeof out, "/tmp/verlc_pieces_%d", (int)getpid());
    const char *text = "{\"architectures\": [\"InternLM2ForCausalLM\"], \"model_type\": \"internlm2\", \"bias\": false, "
                       "\"hidden_act\": \"silu\", \"hidden_size\": 2048, \"intermediate_size\": 64, "
                       "\"max_position_embeddings\": 64, \"num_attention_heads\": 16, \"num_hidden_layers\": 1, "
                       "\"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, "
                       "\"tie_word_embeddings\": false, \"vocab_size\": 4200}";
    CHECK_OK(vc_write_file_atomic(cfg, text, strlen(text)));
    vc_model *m = NULL;
    CHECK_OK(vc_model_init_random(cfg, 3, &m));
    for (int bf = 0; m && bf < 2; bf++) {
        CHECK_OK(vc_model_save_hf(m, out, bf ? VC_BF16 : VC_F32));
        vc_model *back = NULL;
        CHECK_OK(vc_model_load(out, &back));
        int np = back ? vc_model_n_params(m) : 0, eq = back && vc_model_n_params(back) == np, pieces = 0;
        for (int i = 0; eq && i < np; i++) {
            vc_tensor *x = vc_model_param(m, i, NULL, NULL), *y = vc_model_param(back, i, NULL, NULL);
            size_t n = (size_t)x->n;
            float *hx = malloc(sizeof(float) * n), *hy = malloc(sizeof(float) * n);
            uint16_t *h16 = malloc(sizeof(uint16_t) * n);
            eq = x->n == y->n && hx && hy && h16 && !vc_model_param_read(m, i, 0, hx) && !vc_model_param_read(back, i, 0, hy);
            if (eq && bf) { /* the original rounded to bf16 */
                vc_convert_from_f32(h16, VC_BF16, hx, n);
                vc_convert_to_f32(hx, h16, VC_BF16, n);
            }
            eq = eq && !memcmp(hx, hy, sizeof(float) * n);
            free(hx);
            free(hy);
            free(h16);
        }
        vc_checkpoint *ck = NULL; /* the file's tensors over one piece: embedding, LM head, wqkv (f32) */
        CHECK_OK(vc_ckpt_open(out, &ck));
        for (int i = 0; ck && i < vc_ckpt_count(ck); i++) pieces += vc_ckpt_at(ck, i)->nbytes > VC_ST_FILL_PIECE;
        vc_ckpt_close(ck);
        CHECK_MSG(eq && pieces >= (bf ? 2 : 3), "%s export in pieces (%d tensors over one piece): weights %s",
                  bf ? "bf16" : "f32", pieces, eq ? "equal" : "differ");
        vc_model_free(back);
        remove_tree(out);
    }
    vc_model_free(m);
    unlink(cfg);
}

/* Kimi K2's model_type (DeepSeek-V3's architecture under its own name): the deepseek_v3 fixture renamed passes its
 * checks, and its export keeps the name */
static void kimi_k2(const char *shared_root) {
    char dir[256], out[256], cmd[900], *text = NULL;
    snprintf(dir, sizeof dir, "/tmp/verlc_kimi_%d", (int)getpid());
    snprintf(out, sizeof out, "%s_out", dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/deepseek_v3/* %s/ && sed -i 's/\"model_type\": *\"deepseek_v3\"/"
             "\"model_type\": \"kimi_k2\"/' %s/config.json && grep -q kimi_k2 %s/config.json", dir, shared_root, dir,
             dir, dir);
    CHECK(system(cmd) == 0);
    vc_check_result r;
    CHECK_OK(vc_check_model(dir, &r));
    CHECK_MSG(r.ok && r.has_reference, "kimi_k2: the deepseek_v3 fixture renamed fails its checks");
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (m) CHECK_OK(vc_model_save_hf(m, out, VC_F32));
    snprintf(cmd, sizeof cmd, "%s/config.json", out);
    size_t n = 0;
    CHECK_OK(vc_read_file(cmd, &text, &n));
    CHECK_MSG(text && strstr(text, "\"kimi_k2\""), "kimi_k2's export: %s", text ? text : "(none)");
    free(text);
    vc_model_free(m);
    remove_tree(dir);
    remove_tree(out);
}

/* MTP layers the forward does not use are copied through on export, unchanged: MiMo's model.mtp_layers.* (verlc's
 * mimo fixture) and, written into a copy of the qwen2 fixture, a DeepSeek-V3-style layer past n_layer; but not from a
 * quantized checkpoint (want 0: the export's weights are dequantized and its quantization_config dropped) */
static void mtp_copied(const char *src, const char *extra, int want) {
    char dir[256], out[256], cmd[900], path[320];
    snprintf(dir, sizeof dir, "/tmp/verlc_mtp_%d", (int)getpid());
    snprintf(out, sizeof out, "%s_out", dir);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp %s/* %s/", dir, dir, src, dir);
    CHECK(system(cmd) == 0);
    float w[6] = { 1, -2, 3.5f, 0.25f, -0.5f, 7 };
    if (extra) { /* the checkpoint rewritten with an MTP layer past the decoder's layers */
        vc_st_writer *wr = NULL;
        CHECK_OK(vc_st_writer_new(&wr));
        CHECK_OK(vc_st_writer_add(wr, extra, VC_F32, 2, (int64_t[]){ 2, 3 }, w, 0));
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        vc_checkpoint *ck = NULL;
        CHECK_OK(vc_ckpt_open(path, &ck));
        for (int i = 0; ck && i < vc_ckpt_count(ck); i++) {
            const vc_st_tensor *t = vc_ckpt_at(ck, i);
            CHECK_OK(vc_st_writer_add(wr, t->name, t->dtype, t->ndim, t->shape, t->data, 0));
        }
        snprintf(path, sizeof path, "%s/model2.safetensors", dir);
        CHECK_OK(vc_st_writer_write(wr, path));
        vc_st_writer_free(wr);
        vc_ckpt_close(ck);
        snprintf(cmd, sizeof cmd, "mv %s/model2.safetensors %s/model.safetensors", dir, dir);
        CHECK(system(cmd) == 0);
    }
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (m) CHECK_OK(vc_model_save_hf(m, out, VC_F32));
    vc_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(vc_ckpt_open(dir, &a));
    CHECK_OK(vc_ckpt_open(out, &b));
    int n = 0;
    for (int i = 0; a && b && i < vc_ckpt_count(a); i++) {
        const vc_st_tensor *t = vc_ckpt_at(a, i), *u;
        if (!strstr(t->name, "mtp_layers.") && !(extra && !strcmp(t->name, extra))) continue;
        n++;
        u = vc_ckpt_find(b, t->name);
        if (!want) {
            CHECK_MSG(!u, "%s: the quantized checkpoint's MTP tensor %s copied into the export", src, t->name);
            continue;
        }
        CHECK_MSG(u && u->nbytes == t->nbytes && !memcmp(u->data, t->data, t->nbytes), "%s: MTP tensor %s %s", src,
                  t->name, u ? "changed on export" : "missing from the export");
    }
    CHECK_MSG(n > 0, "%s: no MTP tensors to copy", src);
    vc_ckpt_close(a);
    vc_ckpt_close(b);
    vc_model_free(m);
    remove_tree(dir);
    remove_tree(out);
}

int main(void) {
    export_pieces();
    char root[512];
    int n = check_root(vc_test_model_root(0, root, sizeof root));
    kimi_k2(root);
    char src[600];
    snprintf(src, sizeof src, "%s/qwen2", root);
    mtp_copied(src, "model.layers.2.eh_proj.weight", 1);
    CHECK_MSG(n >= 29, "found %d shared fixture models", n);
    int own = check_root(vc_test_model_root(1, root, sizeof root));
    snprintf(src, sizeof src, "%s/mimo", root);
    mtp_copied(src, NULL, 1);
    snprintf(src, sizeof src, "%s/minimax_m2_fp8", root);
    mtp_copied(src, "model.layers.4.eh_proj.weight", 0);
    CHECK_MSG(own >= 5, "found %d of verlc's own fixture models", own);
    printf("%d shared and %d own fixture models checked\n", n, own);
    return vc_test_done();
}
