/* SFT messages rows as verl's MultiTurnSFTDataset (b178a3cd) builds them: each message rendered by the chat template
 * alone (the row's tools with the first one), tokenized, the template's system prompt dropped from every later turn
 * but a system message, and an assistant turn's tokens trained but for as many leading tokens as the generation
 * prompt has; verl then checks that the turns' tokens are the whole conversation's. */
#include "sft_internal.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* the template's rendering of msgs (gen: with the generation prompt), tokenized without special tokens */
static vc_status encode_rendering(const sft_tok *tk, const cJSON *msgs, int gen, const cJSON *tools, int thinking,
                                  const cJSON *kwargs, int32_t **ids, size_t *n) {
    vc_chat_opts o = { gen, thinking, tools, kwargs };
    char *s = NULL;
    *ids = NULL, *n = 0;
    vc_status st = vc_chat_template_render(tk->tmpl, msgs, &o, &s);
    if (!st) st = vc_tokenizer_encode(tk->tok, s, strlen(s), 0, ids, n);
    free(s);
    return st;
}

/* the length of k lone user messages with empty contents, rendered as verl's probes render them (no row options) */
static vc_status probe(const sft_tok *tk, int k, int gen, int64_t *len) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < k && arr; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", "");
        cJSON_AddItemToArray(arr, m);
    }
    if (!arr) return vc_fail(VC_ERR_NOMEM, "out of memory");
    int32_t *ids = NULL;
    size_t n = 0;
    vc_status st = encode_rendering(tk, arr, gen, NULL, -1, NULL, &ids, &n);
    cJSON_Delete(arr);
    free(ids);
    *len = (int64_t)n;
    return st;
}

/* verl's extract_system_prompt_and_generation, in token counts with Python's slicing: the system prompt is
 * token1[:-(len(token2) - len(token1))] of one and two empty user turns, the generation prompt token3[len(token1):]
 * of one turn with it */
vc_status sft_turn_probe_init(const sft_tok *tk, sft_turn_probe *tp) {
    int64_t l1, l2, l3;
    memset(tp, 0, sizeof *tp);
    vc_status st = probe(tk, 1, 0, &l1);
    if (!st) st = probe(tk, 2, 0, &l2);
    if (!st) st = probe(tk, 1, 1, &l3);
    if (st) return st;
    int64_t d = l2 - l1;
    tp->sys_len = d > 0 ? (l1 > d ? l1 - d : 0) : d == 0 ? 0 : (-d < l1 ? -d : l1);
    tp->gen_len = l3 > l1 ? l3 - l1 : 0;
    tp->ok = 1;
    return VC_OK;
}

static vc_status grow(sft_turns *t, size_t more) {
    if (t->n + more <= t->cap) return VC_OK;
    size_t cap = (t->n + more) * 2 + 64;
    int32_t *a = realloc(t->ids, cap * sizeof *a);
    if (a) t->ids = a;
    float *b = a ? realloc(t->mask, cap * sizeof *b) : NULL;
    if (!a || !b) return vc_fail(VC_ERR_NOMEM, "out of memory");
    t->mask = b;
    t->cap = cap;
    return VC_OK;
}

/* one message's turn: its tokens after `skip`, targets after `keep0` more when it is the assistant's */
static vc_status add_turn(sft_turns *t, const int32_t *ids, size_t n, size_t skip, int assistant, size_t keep0) {
    size_t k = n > skip ? n - skip : 0;
    vc_status st = grow(t, k);
    for (size_t i = 0; i < k && !st; i++) {
        t->ids[t->n] = ids[skip + i];
        t->mask[t->n++] = assistant && i >= keep0 ? 1.0f : 0.0f;
    }
    return st;
}

vc_status sft_verl_turns(const sft_tok *tk, const sft_turn_probe *tp, const cJSON *msgs, const cJSON *tools,
                         int thinking, sft_turns *t) {
    int n = cJSON_GetArraySize(msgs);
    int32_t *ids = NULL;
    size_t k = 0;
    vc_status st = VC_OK;
    t->n = 0;
    t->mismatch_at = -1;
    for (int i = 0; i < n && !st; i++) {
        const cJSON *m = cJSON_GetArrayItem(msgs, i), *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role)) return vc_fail(VC_ERR_FORMAT, "message %d has no string role", i);
        cJSON *one = cJSON_CreateArray();
        if (!one) return vc_fail(VC_ERR_NOMEM, "out of memory");
        cJSON_AddItemToArray(one, cJSON_Duplicate(m, 1));
        st = encode_rendering(tk, one, 0, i == 0 ? tools : NULL, thinking, tk->kwargs, &ids, &k);
        cJSON_Delete(one);
        size_t skip = i != 0 && strcmp(role->valuestring, "system") ? (size_t)tp->sys_len : 0;
        if (!st) st = add_turn(t, ids, k, skip, !strcmp(role->valuestring, "assistant"), (size_t)tp->gen_len);
        free(ids);
        ids = NULL;
    }
    if (!st) st = encode_rendering(tk, msgs, 0, tools, thinking, tk->kwargs, &ids, &k);
    if (!st) { /* verl's sanity check: the turns' tokens are the whole conversation's */
        size_t j = 0;
        while (j < k && j < t->n && ids[j] == t->ids[j]) j++;
        if (j < k || j < t->n) t->mismatch_at = (int64_t)j;
    }
    free(ids);
    return st;
}

void sft_turns_free(sft_turns *t) {
    free(t->ids);
    free(t->mask);
    memset(t, 0, sizeof *t);
}
