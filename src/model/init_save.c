/* Random initialisation from a config.json, and export back to a Hugging Face directory in the
 * checkpoint's own layout and names. */
#include "model_internal.h"
#include "verlc/vision.h"
#include "verlc/json.h"
#include "verlc/pool.h"
#include "verlc/rng.h"
#include "verlc/safetensors.h"
#include <dirent.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

static int is_norm(int slot) {
    return slot == VC_W_OUT_NORM || slot == VC_W_ATTN_NORM || slot == VC_W_FFN_NORM || slot == VC_W_Q_NORM ||
           slot == VC_W_K_NORM || slot == VC_W_Q_A_NORM || slot == VC_W_KV_A_NORM || slot == VC_W_POST_ATTN_NORM ||
           slot == VC_W_POST_FFN_NORM || slot == VC_W_PRE_FFN_NORM2 || slot == VC_W_POST_FFN_NORM1 ||
           slot == VC_W_POST_FFN_NORM2 || slot == VC_W_PLE_NORM || slot == VC_W_PLE_PROJ_NORM ||
           slot == VC_W_ROUTER_SCALE || slot == VC_W_EXP_SCALE || slot == VC_W_LAYER_SCALAR || /* (ones, as transformers) */
           slot == VC_W_EMB_NORM || slot == VC_W_IDX_KNORM || slot == VC_W_MTP_ENORM || slot == VC_W_MTP_HNORM ||
           slot == VC_W_MTP_NORM;
}


typedef struct {
    float *w;
    int64_t n;
    uint64_t seed, index;
} init_ctx;

#define INIT_BLOCK 65536
static void init_block(void *p, int64_t blk) {
    init_ctx *c = p;
    int64_t k1 = (blk + 1) * INIT_BLOCK < c->n ? (blk + 1) * INIT_BLOCK : c->n;
    for (int64_t k = blk * INIT_BLOCK; k < k1; k++)
        c->w[k] = 0.02f * vc_rng_normal(c->seed, c->index, (uint64_t)k >> 32, (uint64_t)k & 0xffffffffu);
}

vc_status vc_model_init_random(const char *config_path, uint64_t seed, vc_model **out) {
    return vc_model_init_random_ex(config_path, seed, -1, out);
}

vc_status vc_model_init_random_ex(const char *config_path, uint64_t seed, int want_mtp, vc_model **out) {
    *out = NULL;
    vc_model *m = vc_calloc(1, sizeof *m);
    cJSON *root = NULL;
    vc_status st = m ? vc_read_file(config_path, &m->config_text, NULL) : VC_ERR_NOMEM;
    if (!st) st = vc_json_parse(m->config_text, strlen(m->config_text), config_path, &root);
    if (!st) st = vc_config_parse_model(root, config_path, &m->cfg);
    cJSON_Delete(root);
    /* the MTP layers its config declares, written as the hub's checkpoints carry them, where verlc builds them (a
     * layout it cannot train: left out, as before) */
    int mtp = !st && want_mtp && (m->cfg.arch->mtp_prefix || want_mtp > 0) ? vc_model_mtp_layers(m) : 0;
    if (!st && (mtp || want_mtp > 0) && (st = vc_config_mtp_rows(&m->cfg, mtp, config_path)) && want_mtp < 0) {
        vc_clear_error();
        st = VC_OK;
    }
    if (!st) st = vc_model_alloc_from_config(m, NULL);
    if (!st) st = vc_model_synthesize_sources(m);
    if (st) {
        vc_model_free(m);
        return st;
    }
    /* each tensor is drawn on the host (staging buffer) and uploaded */
    int64_t most = 1;
    for (int i = 0; i < m->n_params; i++) most = m->params[i].t.n > most ? m->params[i].t.n : most;
    float *w = vc_malloc((size_t)most * sizeof(float));
    if (!w) {
        vc_model_free(m);
        return VC_ERR_NOMEM;
    }
    for (int i = 0; i < m->n_params; i++) {
        vc_param *p = &m->params[i];
        size_t nl = strlen(p->name);
        int vis_bias = p->slot == VC_SLOT_VISION && nl > 5 && !strcmp(p->name + nl - 5, ".bias");
        int vis_norm = p->slot == VC_SLOT_VISION && !vis_bias && (strstr(p->name, "norm") || strstr(p->name, "ln_q"));
        float fixed;
        int vis_buf = p->buffer && vc_vision_buffer(m->vision, i - (m->n_params - vc_vision_count(m->vision)), &fixed);
        if (vis_buf) /* the vision tower's buffers: their fixed start (Gemma 4's unbounded clips, plain standardization) */
            for (int64_t k = 0; k < p->t.n; k++) w[k] = fixed;
        else if (vis_bias) memset(w, 0, (size_t)p->t.n * 4); /* the vision tower's: biases 0, norms 1 */
        else if (vis_norm)
            for (int64_t k = 0; k < p->t.n; k++) w[k] = 1.0f;
        else if (p->slot == VC_W_LIN_NORM || p->slot == VC_W_LIN_DT || p->slot == VC_W_LIN_D) /* gated norms (plain w), dt_bias, D */
            for (int64_t k = 0; k < p->t.n; k++) w[k] = 1.0f;
        else if (p->slot == VC_W_LIN_ALOG) /* A uniform in (0, 16], as transformers draws it, kept as its log */
            for (int64_t k = 0; k < p->t.n; k++) w[k] = logf(16.0f * (1.0f - vc_rng_uniform(seed, (uint64_t)i, 0, (uint64_t)k)));
        else if (is_norm(p->slot)) {
            float v = m->cfg.norm_offset != 0 ? 0.0f : 1.0f; /* (1 + w) norms start at w = 0 */
            for (int64_t k = 0; k < p->t.n; k++) w[k] = v;
        } else if (vc_slot_is_bias(p->slot)) memset(w, 0, (size_t)p->t.n * 4);
        else {
            init_ctx c = { w, p->t.n, seed, (uint64_t)i };
            vc_parallel((p->t.n + INIT_BLOCK - 1) / INIT_BLOCK, init_block, &c);
        }
        m->be->h2d(p->t.data, w, (size_t)p->t.n * sizeof(float));
    }
    free(w);
    if ((st = m->be->sync())) {
        vc_model_free(m);
        return st;
    }
    *out = m;
    return VC_OK;
}

/* config.json with the dtype key set to what was written and no quantization_config (the weights written are
 * plain: MXFP4 experts dequantized); the rest keeps its bytes (transformers' typed configs want 7.0, not 7) */
static vc_status write_config(const vc_model *m, const char *dir, vc_dtype dtype) {
    cJSON *root = NULL;
    vc_status st = vc_json_parse(m->config_text, strlen(m->config_text), "config.json", &root);
    if (st) return st;
    const char *name = dtype == VC_BF16 ? "\"bfloat16\"" : dtype == VC_F16 ? "\"float16\"" : "\"float32\"";
    const char *key = cJSON_GetObjectItem(root, "dtype") ? "dtype" : "torch_dtype";
    cJSON_Delete(root);
    char *text = vc_strdup(m->config_text), *path = vc_path_join(dir, "config.json");
    st = text && path ? vc_json_text_set(&text, key, name) : VC_ERR_NOMEM;
    if (!st) st = vc_json_text_set(&text, "quantization_config", NULL);
    if (!st) st = vc_write_file_atomic(path, text, strlen(text));
    free(text);
    free(path);
    return st;
}

/* a file that travels with the weights: generation settings, tokenizer and processor files, remote code */
static int side_file(const char *name) {
    static const char *FILES[] = { "generation_config.json", "tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                                   "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json",
                                   "qwen.tiktoken", "chat_template.jinja", "chat_template.json", "preprocessor_config.json",
                                   "processor_config.json", "video_preprocessor_config.json" };
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++)
        if (!strcmp(name, FILES[i])) return 1;
    size_t n = strlen(name); /* the remote code config.json's auto_map names (modeling_*.py, tokenization_*.py) */
    return n > 3 && !strcmp(name + n - 3, ".py");
}

vc_status vc_model_copy_side_files(const char *from, const char *to, int overwrite) {
    DIR *d = opendir(from);
    if (!d) return VC_OK; /* a single checkpoint file, not a folder: nothing beside it to copy */
    vc_status st = VC_OK;
    for (struct dirent *e; !st && (e = readdir(d));) {
        if (!side_file(e->d_name)) continue;
        char *src = vc_path_join(from, e->d_name), *dst = vc_path_join(to, e->d_name), *buf = NULL;
        size_t n = 0;
        st = src && dst ? VC_OK : VC_ERR_NOMEM;
        if (!st && vc_file_exists(src) && (overwrite || !vc_file_exists(dst))) {
            st = vc_read_file(src, &buf, &n);
            if (!st) st = vc_write_file_atomic(dst, buf, n);
        }
        free(src);
        free(dst);
        free(buf);
    }
    closedir(d);
    return st;
}

/* 1 when the model's vision tower has a parameter named `name` (written from the parameter, not copied) */
static int vision_param(const vc_model *m, const char *name) {
    for (int i = m->n_params - 1; i >= 0 && m->params[i].slot == VC_SLOT_VISION; i--)
        if (!strcmp(m->params[i].name, name)) return 1;
    return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* 1 when `name` is one of the model's sources (own: their names sorted; written from its parameters: trained MTP layers
 * under an ignored prefix) */
static int own_source(const char **own, int n, const char *name) {
    return own && bsearch(&name, own, (size_t)n, sizeof *own, cmp_name) != NULL;
}

/* the source checkpoint's tensors of other towers (a multimodal model's vision tower verlc does not build) and its
 * multi-token-prediction layers, as they were, so the export loads as the same kind of model */
static vc_status copy_other_towers(const vc_model *m, vc_st_writer *w, vc_checkpoint **ck) {
    if (!m->dir) return VC_OK;
    const char **own = m->cfg.n_mtp ? vc_malloc(sizeof *own * (size_t)(m->n_src + 1)) : NULL;
    if (m->cfg.n_mtp && !own) return VC_ERR_NOMEM;
    for (int i = 0; own && i < m->n_src; i++) own[i] = m->src[i].name;
    if (own) qsort(own, (size_t)m->n_src, sizeof *own, cmp_name);
    vc_status st = vc_ckpt_open(m->dir, ck); /* open until the file is written: its data is referenced, not copied */
    for (int i = 0; !st && i < vc_ckpt_count(*ck); i++) {
        const vc_st_tensor *t = vc_ckpt_at(*ck, i);
        int mtp = vc_arch_mtp_tensor(&m->cfg, t->name) && !m->cfg.fp8_quant && !m->cfg.ct_quant; /* (the export writes
                                                      * plain weights without the quantization_config: not its MTP's) */
        if ((vc_arch_other_tower(m->cfg.arch, t->name) || mtp) && !vision_param(m, t->name) &&
            !own_source(own, m->n_src, t->name))
            st = vc_st_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, 0);
    }
    free(own);
    return st;
}

typedef struct {
    const vc_model *m;
    vc_dtype dtype;
    float *piece;
    int64_t whole_i; /* the parameter `whole` holds transposed (the checkpoint's layout), -1: none */
    float *whole;
} vision_ctx;

/* parameter i as the checkpoint lays it out, whole, where the tower keeps it transposed (Gemma 3's projection) */
static vc_status vision_transposed(vision_ctx *c, int64_t i, int64_t rows, int64_t cols) {
    if (c->whole_i == i) return VC_OK;
    free(c->whole);
    c->whole = NULL, c->whole_i = -1;
    float *a = vc_malloc(sizeof(float) * (size_t)(rows * cols)), *t = vc_malloc(sizeof(float) * (size_t)(rows * cols));
    vc_status st = a && t ? vc_model_param_read_range(c->m, (int)i, 0, (size_t)(rows * cols), a) : VC_ERR_NOMEM;
    for (int64_t r = 0; !st && r < rows; r++)
        for (int64_t k = 0; k < cols; k++) t[k * rows + r] = a[r * cols + k];
    free(a);
    if (st) free(t);
    else c->whole = t, c->whole_i = i;
    return st;
}

/* bytes [offset, offset + nbytes) of parameter i (a vision tower tensor) in the export dtype */
static vc_status vision_fill(void *p, int64_t i, size_t offset, void *dst, size_t nbytes) {
    vision_ctx *c = p;
    size_t es = vc_dtype_size(c->dtype), n = nbytes / es;
    int64_t first = c->m->n_params - vc_vision_count(c->m->vision), rows, cols;
    if (vc_vision_transposed(c->m->vision, (int)(i - first), &rows, &cols)) {
        vc_status st = vision_transposed(c, i, rows, cols);
        if (!st && c->dtype == VC_F32) memcpy(dst, c->whole + offset / es, nbytes);
        else if (!st) vc_convert_from_f32(dst, c->dtype, c->whole + offset / es, n);
        return st;
    }
    if (c->dtype == VC_F32) return vc_model_param_read_range(c->m, (int)i, offset / es, n, dst);
    if (!c->piece && !(c->piece = vc_malloc(VC_ST_FILL_PIECE / es * sizeof(float)))) return VC_ERR_NOMEM;
    vc_status st = vc_model_param_read_range(c->m, (int)i, offset / es, n, c->piece);
    if (!st) vc_convert_from_f32(dst, c->dtype, c->piece, n);
    return st;
}

/* the vision tower's parameters (the last ones) in their checkpoint shapes */
static vc_status vision_tensors(const vc_model *m, vc_st_writer *w, vision_ctx *c) {
    int first = m->n_params - (m->vision ? vc_vision_count(m->vision) : 0);
    vc_status st = VC_OK;
    for (int i = first; i < m->n_params && !st; i++) {
        int64_t shape[5];
        int nd = vc_vision_hf_shape(m->vision, i - first, shape);
        st = vc_st_writer_add_lazy(w, m->params[i].name, c->dtype, nd, shape, vision_fill, c, i);
    }
    return st;
}

/* xIELU's beta and eps beside each layer's alpha_p (Apertus): buffers transformers saves and loads; without them it
 * leaves them uninitialised */
static vc_status xielu_constants(const vc_model *m, vc_st_writer *w, vc_dtype dtype) {
    vc_status st = VC_OK;
    for (int i = 0; i < m->n_src && !st; i++) {
        const char *n = m->src[i].name, *at = strstr(n, "alpha_p");
        if (m->src[i].rule->slot != VC_W_XIELU_AP || !at) continue;
        for (int k = 0; k < 2 && !st; k++) {
            char name[512];
            float v = k ? VC_XIELU_EPS : VC_XIELU_BETA;
            uint8_t out[4];
            int64_t one = 1;
            snprintf(name, sizeof name, "%.*s%s", (int)(at - n), n, k ? "eps" : "beta");
            vc_convert_from_f32(out, dtype, &v, 1);
            st = vc_st_writer_add(w, name, dtype, 0, &one, out, 1);
        }
    }
    return st;
}

typedef struct {
    const vc_model *m;
    vc_dtype dtype;
    float *piece;  /* a piece in f32 before its conversion to dtype */
    int64_t whole_i; /* the source whose whole f32 copy `whole` holds (a transformed layout), -1: none */
    float *whole;
} export_ctx;

/* floats [off, off + n) of source tensor i in the checkpoint layout: straight from the slots where that layout is
 * theirs, else from one whole copy of the tensor (made at its first piece) */
static vc_status export_range(export_ctx *c, int64_t i, size_t off, size_t n, float *to) {
    const vc_source *s = &c->m->src[i];
    vc_status st = c->whole_i == i ? VC_ERR_UNSUPPORTED : vc_rule_read_range(c->m, s, off, n, to);
    if (st != VC_ERR_UNSUPPORTED) return st;
    if (c->whole_i != i) {
        free(c->whole);
        c->whole_i = -1;
        size_t total = 1;
        for (int d = 0; d < s->ndim; d++) total *= (size_t)s->shape[d];
        if (!(c->whole = vc_malloc((total ? total : 1) * sizeof(float)))) return VC_ERR_NOMEM;
        if ((st = vc_rule_transfer(c->m, s, c->whole, 1))) return st; /* d2h: the host holds it on return */
        c->whole_i = i;
    }
    memcpy(to, c->whole + off, n * sizeof(float));
    return VC_OK;
}

/* bytes [offset, offset + nbytes) of source tensor i in the export dtype (the writer asks piece by piece) */
static vc_status export_fill(void *p, int64_t i, size_t offset, void *dst, size_t nbytes) {
    export_ctx *c = p;
    size_t es = vc_dtype_size(c->dtype), n = nbytes / es;
    if (c->dtype == VC_F32) return export_range(c, i, offset / es, n, dst); /* straight into the file's bytes */
    if (!c->piece && !(c->piece = vc_malloc(VC_ST_FILL_PIECE / es * sizeof(float)))) return VC_ERR_NOMEM;
    vc_status st = export_range(c, i, offset / es, n, c->piece);
    if (!st) vc_convert_from_f32(dst, c->dtype, c->piece, n);
    return st;
}

vc_status vc_model_save_hf(const vc_model *m, const char *dir, vc_dtype dtype) {
    if (dtype != VC_F32 && dtype != VC_BF16 && dtype != VC_F16)
        return vc_fail(VC_ERR_ARG, "export dtype must be f32, bf16 or f16");
    if (mkdir(dir, 0755) != 0 && !vc_file_exists(dir)) return vc_fail(VC_ERR_IO, "%s: cannot create directory", dir);
    vc_st_writer *w = NULL;
    vc_status st = vc_st_writer_new(&w);
    export_ctx ec = { m, dtype, NULL, -1, NULL }; /* the weights are read as the file is written, piece by piece */
    for (int i = 0; i < m->n_src && !st; i++)
        st = vc_st_writer_add_lazy(w, m->src[i].name, dtype, m->src[i].ndim, m->src[i].shape, export_fill, &ec, i);
    vc_checkpoint *towers = NULL;
    vision_ctx vc = { m, dtype, NULL, -1, NULL };
    if (!st) st = vision_tensors(m, w, &vc);
    if (!st) st = copy_other_towers(m, w, &towers);
    if (!st) st = xielu_constants(m, w, dtype);
    if (!st) st = vc_st_writer_set_metadata(w, "format", "pt");
    if (!st) st = vc_st_writer_write_dir(w, dir, (size_t)5 << 30);
    vc_st_writer_free(w);
    free(ec.piece);
    free(ec.whole);
    free(vc.piece);
    free(vc.whole);
    vc_ckpt_close(towers);
    if (!st) st = write_config(m, dir, dtype);
    if (!st && m->dir) st = vc_model_copy_side_files(m->dir, dir, 1);
    return st;
}
