/* Chat templates: loading from tokenizer_config.json and rendering with the variables that
 * transformers' apply_chat_template passes (messages, tools, documents, add_generation_prompt,
 * the special tokens, extra keyword arguments such as enable_thinking). */
#include "verlc/chat_template.h"
#include "tokenizer/jinja.h"
#include <stdlib.h>
#include <string.h>

struct vc_chat_template {
    char *src;          /* normalized template source */
    jnode *root;
    char *tokens[4];    /* bos, eos, unk, pad (NULL = not set) */
};

static const char *const TOKEN_KEYS[4] = { "bos_token", "eos_token", "unk_token", "pad_token" };

static vc_status compile(const char *tmpl, vc_chat_template **out) {
    vc_chat_template *t = calloc(1, sizeof *t);
    if (!t) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    t->src = jinja_normalize(tmpl);
    vc_status st = t->src ? jinja_parse(t->src, &t->root) : vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    if (st) { vc_chat_template_free(t); return st; }
    *out = t;
    return VC_OK;
}

vc_status vc_chat_template_from_string(const char *tmpl, const char *bos, const char *eos, vc_chat_template **out) {
    *out = NULL;
    if (!tmpl) return vc_fail(VC_ERR_ARG, "chat template: NULL template");
    vc_chat_template *t = NULL;
    vc_status st = compile(tmpl, &t);
    if (st) return st;
    if ((bos && !(t->tokens[0] = strdup(bos))) || (eos && !(t->tokens[1] = strdup(eos)))) {
        vc_chat_template_free(t);
        return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    }
    *out = t;
    return VC_OK;
}

static const char *token_text(const cJSON *j) {
    if (cJSON_IsString(j)) return j->valuestring;
    if (cJSON_IsObject(j)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static const char *pick_template(const cJSON *ct) {
    if (cJSON_IsString(ct)) return ct->valuestring;
    if (!cJSON_IsArray(ct)) return NULL;
    const cJSON *e;
    cJSON_ArrayForEach(e, ct) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (cJSON_IsString(name) && !strcmp(name->valuestring, "default") && cJSON_IsString(tmpl)) return tmpl->valuestring;
    }
    return NULL;
}

/* the "chat_template" string of DIR/chat_template.json (a processor's, as image-text checkpoints carry it) into
 * *out (NULL when there is none) */
static vc_status processor_template(const char *dir, char **out) {
    *out = NULL;
    char *path = vc_path_join(dir, "chat_template.json"), *text = NULL;
    size_t len = 0;
    if (!path) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    vc_status st = vc_file_exists(path) ? vc_read_file(path, &text, &len) : VC_OK;
    cJSON *j = !st && text ? cJSON_ParseWithLength(text, len) : NULL;
    const cJSON *ct = j ? cJSON_GetObjectItemCaseSensitive(j, "chat_template") : NULL;
    if (!st && text && !cJSON_IsString(ct))
        st = vc_fail(VC_ERR_FORMAT, "%s: expected an object with a \"chat_template\" string", path);
    if (!st && text && !(*out = strdup(ct->valuestring))) st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    cJSON_Delete(j);
    free(text);
    free(path);
    return st;
}

static vc_status vc_chat_template_load_at(const char *dir, vc_chat_template **out) {
    *out = NULL;
    char *path = vc_path_join(dir, "tokenizer_config.json"), *text = NULL, *jpath = vc_path_join(dir, "chat_template.jinja");
    char *jtext = NULL;
    cJSON *cfg = NULL;
    vc_chat_template *t = NULL;
    size_t len;
    vc_status st;
    if (!path || !jpath) {
        free(path);
        free(jpath);
        return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    }
    /* chat_template.jinja (transformers' save_pretrained writes it since 4.47) overrides the config's template */
    if (vc_file_exists(jpath) && (st = vc_read_file(jpath, &jtext, &len))) goto out;
    st = vc_read_file(path, &text, &len);
    if (st && jtext) { /* a template file without a tokenizer_config.json: no special tokens */
        st = VC_OK;
        cfg = cJSON_CreateObject();
    } else if (st) goto out;
    else cfg = cJSON_ParseWithLength(text, len);
    if (!cfg || !cJSON_IsObject(cfg)) { st = vc_fail(VC_ERR_FORMAT, "%s: not a JSON object", path); goto out; }
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *tmpl = jtext ? jtext : pick_template(ct);
    if (!tmpl && (st = processor_template(dir, &jtext))) goto out;
    if (!tmpl && jtext) { /* a processor's chat_template.json (image-text checkpoints) */
        tmpl = jtext;
        free(jpath);
        jpath = vc_path_join(dir, "chat_template.json");
    }
    if (jtext) {
        free(path);
        path = jpath; /* messages about the template name its file */
        jpath = NULL;
    }
    if (!tmpl) {
        st = vc_fail(VC_ERR_MISSING, "%s: the tokenizer has no chat template (tokenizer.chat_template is not set%s); "
                     "transformers refuses apply_chat_template in this case", path,
                     cJSON_IsArray(ct) ? " to a string and no template is named \"default\"" : "");
        goto out;
    }
    st = compile(tmpl, &t);
    if (st) { vc_fail_ctx(st, "%s%s", path, jtext ? "" : ": chat_template"); goto out; }
    for (int i = 0; i < 4; i++) {
        const char *tok = token_text(cJSON_GetObjectItemCaseSensitive(cfg, TOKEN_KEYS[i]));
        if (tok && !(t->tokens[i] = strdup(tok))) { st = vc_fail(VC_ERR_NOMEM, "chat template: out of memory"); goto out; }
    }
    *out = t;
    t = NULL;
out:
    vc_chat_template_free(t);
    cJSON_Delete(cfg);
    free(text);
    free(jtext);
    free(path);
    free(jpath);
    return st;
}

/* a local directory, or a Hugging Face Hub id found in the local cache (vc_hf_resolve) */
vc_status vc_chat_template_load(const char *dir, vc_chat_template **out) {
    char *path = NULL;
    *out = NULL;
    vc_status st = vc_hf_resolve(dir, &path);
    if (!st) st = vc_chat_template_load_at(path, out);
    free(path);
    return st;
}

void vc_chat_template_free(vc_chat_template *t) {
    if (!t) return;
    jnode_free(t->root);
    free(t->src);
    for (int i = 0; i < 4; i++) free(t->tokens[i]);
    free(t);
}

const char *vc_chat_template_source(const vc_chat_template *t) { return t ? t->src : NULL; }

static vc_status set_json(jframe *f, const char *name, const cJSON *j) {
    jv *v = jv_from_json(j);
    if (!v) return vc_fail(VC_ERR_NOMEM, "chat template: out of memory");
    return jframe_set(f, name, v);
}

static vc_status build_globals(const vc_chat_template *t, const cJSON *messages, const vc_chat_opts *o, jframe *g) {
    vc_status st = VC_OK;
    for (int i = 0; i < 4 && !st; i++)
        if (t->tokens[i]) st = jframe_set(g, TOKEN_KEYS[i], jv_cstr(t->tokens[i]));
    if (!st && o && o->extra) {
        if (!cJSON_IsObject(o->extra)) return vc_fail(VC_ERR_ARG, "chat template: extra variables must be a JSON object");
        const cJSON *e;
        cJSON_ArrayForEach(e, o->extra) {
            if ((st = set_json(g, e->string, e))) break;
        }
    }
    if (!st) st = set_json(g, "messages", messages);
    if (!st) st = set_json(g, "tools", o ? o->tools : NULL);
    if (!st && !jframe_get(g, "documents")) st = jframe_set(g, "documents", jv_none());
    if (!st) st = jframe_set(g, "add_generation_prompt", jv_bool(o && o->add_generation_prompt));
    if (!st && o && o->enable_thinking >= 0) st = jframe_set(g, "enable_thinking", jv_bool(o->enable_thinking));
    return st;
}

vc_status vc_chat_template_render(const vc_chat_template *t, const cJSON *messages, const vc_chat_opts *opts, char **out) {
    *out = NULL;
    if (!t || !messages) return vc_fail(VC_ERR_ARG, "chat template: NULL template or messages");
    if (!cJSON_IsArray(messages)) return vc_fail(VC_ERR_ARG, "chat template: messages must be a JSON array");
    jframe g = { 0 };
    jbuf b = { 0 };
    vc_status st = build_globals(t, messages, opts, &g);
    if (!st) st = jinja_render(t->src, t->root, &g, &b);
    jframe_clear(&g);
    if (st) { free(b.p); return st; }
    *out = b.p;
    return VC_OK;
}
