/* Chat templates: Hugging Face tokenizer_config.json "chat_template" strings rendered with a
 * Jinja2-subset interpreter that follows transformers' apply_chat_template (sandboxed Jinja with
 * trim_blocks and lstrip_blocks, tojson with ensure_ascii=False, raise_exception, strftime_now). */
#ifndef VERLC_CHAT_TEMPLATE_H
#define VERLC_CHAT_TEMPLATE_H
#include "verlc/core.h"
#include <cjson/cJSON.h>

typedef struct vc_chat_template vc_chat_template;

/* Reads DIR/tokenizer_config.json: chat_template (a string, or a list of {name, template} from which
 * "default" is used; DIR/chat_template.jinja, when present, overrides it as in transformers), bos/eos/unk/pad
 * tokens (strings or AddedToken objects {"content": ...}).
 * A missing template is VC_ERR_MISSING with transformers' "... no chat template ..." meaning.
 * Template syntax errors are VC_ERR_FORMAT naming line and column. */
vc_status vc_chat_template_load(const char *dir, vc_chat_template **out);
/* bos/eos may be NULL (then the variables are undefined inside the template). */
vc_status vc_chat_template_from_string(const char *tmpl, const char *bos, const char *eos, vc_chat_template **out);
void vc_chat_template_free(vc_chat_template *t);

typedef struct {
    int add_generation_prompt;
    int enable_thinking;   /* -1 = not passed (undefined in the template), else 0/1 */
    const cJSON *tools;    /* NULL = none */
    const cJSON *extra;    /* object of further template variables, or NULL */
} vc_chat_opts;

/* Renders messages (a JSON array of {role, content, ...}) into a new NUL-terminated string (free()).
 * opts may be NULL (no generation prompt, thinking not passed). Thread-safe: a template may be
 * rendered from several threads at once. */
vc_status vc_chat_template_render(const vc_chat_template *t, const cJSON *messages, const vc_chat_opts *opts,
                                  char **out);
/* The template source (after newline normalization), for diagnostics. */
const char *vc_chat_template_source(const vc_chat_template *t);
#endif
