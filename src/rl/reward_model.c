/* Model-based reward (verl's RewardModelWorker, reward_model.enable=true): a Hugging Face
 * *ForSequenceClassification / *ForTokenClassification checkpoint with one label (a score head on the
 * decoder's last hidden states). Each response's score is the head's output at the last token of its
 * sequence, placed on the last response token; it replaces the rule reward for training (validation
 * keeps the rule reward, as verl's does).
 *
 * With reward_model.model.input_tokenizer set (verl's default: the actor's path) the chat is
 * re-rendered for the reward model: the prompt's messages plus {"role": "assistant", "content": the
 * response decoded with its special tokens, the EOS text removed}, through the reward model's chat
 * template (no generation prompt) and tokenizer (no special tokens added), truncated on the right at
 * reward_model.max_length (default: data.max_prompt_length + data.max_response_length). With
 * input_tokenizer null the actor's tokens are scored as they are. */
#include "trainer_internal.h"
#include "verlc/chat_template.h"
#include "verlc/tokenizer.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

struct rl_rm {
    vc_model *m;
    vc_tokenizer *tok;          /* the reward model's, when switching templates (else NULL) */
    vc_chat_template *tmpl;
    int64_t max_len;
    char *path;
};

vc_model *rl_rm_model(const rl_rm *rm) { return rm->m; }

void rl_rm_free(rl_rm *rm) {
    if (!rm) return;
    vc_model_free(rm->m);
    vc_tokenizer_free(rm->tok);
    vc_chat_template_free(rm->tmpl);
    free(rm->path);
    free(rm);
}

#define RMK "reward_model."
vc_status rl_rm_open(const vc_config *c, rl_rm **out) {
    *out = NULL;
    int on = 0;
    const char *path = NULL, *in_tok = NULL;
    int64_t max_len = 0, pl = 512, rl = 512;
    vc_status st = vc_config_get_bool_or(c, RMK "enable", 0, &on);
    if (st || !on) return st;
    if ((st = vc_config_get_str(c, RMK "model.path", &path))) return vc_fail_ctx(st, RMK "model.path");
    if (!path) return vc_fail(VC_ERR_MISSING, RMK "model.path is not set (reward_model.enable=true)");
    if ((st = vc_config_get_str_or(c, RMK "model.input_tokenizer", NULL, &in_tok)) ||
        (st = vc_config_get_int_or(c, RMK "max_length", 0, &max_len)) ||
        (st = vc_config_get_int_or(c, "data.max_prompt_length", 512, &pl)) ||
        (st = vc_config_get_int_or(c, "data.max_response_length", 512, &rl)))
        return st;
    rl_rm *rm = vc_calloc(1, sizeof *rm);
    if (!rm) return VC_ERR_NOMEM;
    rm->max_len = max_len > 0 ? max_len : pl + rl;
    if (!(rm->path = vc_strdup(path))) st = VC_ERR_NOMEM;
    if (!st && (st = vc_model_load(path, &rm->m))) st = vc_fail_ctx(st, RMK "model.path");
    if (!st && vc_model_cfg(rm->m)->n_labels != 1)
        st = vc_fail(VC_ERR_UNSUPPORTED,
                     RMK "model.path (%s): a reward model is a *ForSequenceClassification checkpoint with one label; "
                         "this one has %s",
                     path, vc_model_cfg(rm->m)->n_labels ? "several labels" : "an LM head and no score head");
    if (!st && in_tok) { /* the reward model reads its own chat format */
        if ((st = vc_tokenizer_load(path, &rm->tok)))
            st = vc_fail_ctx(st, RMK "model.path (%s): the reward model's tokenizer, needed because "
                                 "reward_model.model.input_tokenizer is set (null scores the actor's tokens)", path);
        else if ((st = vc_chat_template_load(path, &rm->tmpl)))
            st = vc_fail_ctx(st, RMK "model.path (%s): the reward model's chat template", path);
    }
    if (st) {
        rl_rm_free(rm);
        return st;
    }
    *out = rm;
    return VC_OK;
}

/* the response as verl's _switch_chat_template decodes it: special tokens kept, the EOS text removed */
static vc_status response_text(const vc_tokenizer *tok, const int32_t *ids, int64_t n, char **out) {
    size_t len = 0;
    vc_status st = vc_tokenizer_decode(tok, ids, (size_t)n, 0, out, &len);
    const char *eos = st ? NULL : vc_tokenizer_id_to_token(tok, vc_tokenizer_eos_id(tok));
    size_t el = eos ? strlen(eos) : 0;
    if (!el) return st;
    char *s = *out, *w = s;
    for (char *r = s; *r;) {
        if (!strncmp(r, eos, el)) r += el;
        else *w++ = *r++;
    }
    *w = 0;
    return VC_OK;
}

/* prompt p's chat and an assistant message resp through the reward model's template and tokenizer (malloc'd; not
 * truncated) */
static vc_status chat_tokens(const rl_rm *rm, const vc_rl_prompt *p, const char *resp, int32_t **ids, size_t *len) {
    char *text = NULL;
    cJSON *chat = cJSON_Duplicate(p->messages, 1), *msg = cJSON_CreateObject();
    vc_status st = chat && msg && cJSON_AddStringToObject(msg, "role", "assistant") &&
                           cJSON_AddStringToObject(msg, "content", resp) ? VC_OK : VC_ERR_NOMEM;
    if (!st) {
        cJSON_AddItemToArray(chat, msg);
        msg = NULL;
        vc_chat_opts o = { .add_generation_prompt = 0, .enable_thinking = -1 };
        if ((st = vc_chat_template_render(rm->tmpl, chat, &o, &text)))
            st = vc_fail_ctx(st, "reward model chat template, data line %lld", (long long)p->line);
    }
    if (!st) st = vc_tokenizer_encode(rm->tok, text, strlen(text), 0, ids, len);
    cJSON_Delete(chat);
    cJSON_Delete(msg);
    free(text);
    return st;
}

/* row i's reward-model tokens (malloc'd) */
static vc_status row_tokens(const vc_rl_trainer *t, const rl_rm *rm, const vc_rl_dataset *d, const rl_batch *b, int i,
                            int32_t **ids, int64_t *n) {
    const int32_t *seq = b->ids + b->cu[i];
    if (!rm->tok) {
        *n = b->cu[i + 1] - b->cu[i];
        if (!(*ids = vc_malloc(sizeof(int32_t) * (size_t)(*n ? *n : 1)))) return VC_ERR_NOMEM;
        memcpy(*ids, seq, sizeof(int32_t) * (size_t)*n);
        return VC_OK;
    }
    char *resp = NULL;
    size_t len = 0;
    vc_status st = response_text(t->tok, seq + b->plen[i], b->rlen[i], &resp);
    if (!st) st = chat_tokens(rm, &d->p[b->prompt[i]], resp, ids, &len);
    *n = (int64_t)len < rm->max_len ? (int64_t)len : rm->max_len; /* verl truncates on the right */
    free(resp);
    return st;
}

vc_status rl_rm_plan_len(const rl_rm *rm, const vc_rl_dataset *d, int64_t seq, int64_t tail, int64_t *len) {
    *len = seq;
    if (!rm->tok || !d || !d->n) return VC_OK;
    size_t longest = 0;
    for (size_t i = 1; i < d->n; i++)
        if (d->p[i].len > d->p[longest].len) longest = i;
    int32_t *ids = NULL;
    size_t n = 0;
    vc_status st = chat_tokens(rm, &d->p[longest], "", &ids, &n);
    free(ids);
    if (st) return st;
    int64_t est = (int64_t)n + tail; /* the response's tokens, about as many in the reward model's tokenizer */
    *len = est < rm->max_len ? est : rm->max_len;
    return VC_OK;
}

/* the reward model's input: one row per response (its tokens as the "prompt", no response part) */
static vc_status build_inputs(const vc_rl_trainer *t, const rl_rm *rm, const vc_rl_dataset *d, const rl_batch *b,
                              rl_batch *rb) {
    memset(rb, 0, sizeof *rb);
    rb->B = b->B;
    rb->T = 1;
    rb->cu = vc_calloc((size_t)b->B + 1, sizeof(int64_t));
    rb->plen = vc_calloc((size_t)b->B + 1, sizeof(int64_t));
    rb->rlen = vc_calloc((size_t)b->B + 1, sizeof(int64_t));
    vc_status st = rb->cu && rb->plen && rb->rlen ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; !st && i < b->B; i++) {
        int32_t *ids = NULL;
        int64_t n = 0;
        if ((st = row_tokens(t, rm, d, b, i, &ids, &n))) break;
        int32_t *grown = realloc(rb->ids, sizeof(int32_t) * (size_t)(rb->cu[i] + n + 1));
        if (!grown) st = VC_ERR_NOMEM;
        else {
            rb->ids = grown;
            memcpy(rb->ids + rb->cu[i], ids, sizeof(int32_t) * (size_t)n);
            rb->cu[i + 1] = rb->cu[i] + n;
            rb->plen[i] = n;
            if (n < 1) st = vc_fail(VC_ERR_ARG, "reward model input of row %d is empty", i);
        }
        free(ids);
    }
    return st;
}

vc_status rl_rm_score(vc_rl_trainer *t, const vc_rl_dataset *d, const rl_batch *b, float *scores) {
    rl_batch rb;
    vc_status st = build_inputs(t, t->rm, d, b, &rb);
    if (!st) st = rl_batch_last_scores(t->rm->m, t->g, &rb, t->rm_tokens, scores);
    free(rb.cu);
    free(rb.ids);
    free(rb.plen);
    free(rb.rlen);
    return st ? vc_fail_ctx(st, "reward model (%s)", t->rm->path) : VC_OK;
}
