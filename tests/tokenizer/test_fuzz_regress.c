/* Chat-template inputs found by fuzzing (ASan/UBSan) that crashed or ran without end; each must now fail
 * quickly with a one-line error, or render. */
#include "verlc/chat_template.h"
#include "vc_test.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Renders tmpl over one user message: the output, or "ERR:" and the error text. */
static char *render(const char *tmpl) {
    vc_chat_template *t = NULL;
    cJSON *m = cJSON_Parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
    char *out = NULL;
    vc_status st = vc_chat_template_from_string(tmpl, "<s>", "</s>", &t);
    if (!st) st = vc_chat_template_render(t, m, NULL, &out);
    if (st) {
        const char *e = vc_last_error();
        out = malloc(strlen(e) + 5);
        strcpy(out, "ERR:");
        strcat(out, e);
    }
    vc_chat_template_free(t);
    cJSON_Delete(m);
    return out;
}

#define FAILS(tmpl, part) do { char *_g = render(tmpl); \
    CHECK_MSG(!strncmp(_g, "ERR:", 4) && strstr(_g, part) && !strchr(_g, '\n'), "template %s\n  got: [%s]\n  want one-line error with [%s]", tmpl, _g, part); \
    free(_g); } while (0)
#define SAME(tmpl, want) do { char *_g = render(tmpl); \
    CHECK_MSG(!strcmp(_g, want), "template %s\n  got: [%s]\n want: [%s]", tmpl, _g, want); free(_g); } while (0)

int main(void) {
    /* a parse error after a chained comparison freed its left operand twice (heap-use-after-free) */
    FAILS("{{ 1 < 2 < }}", "line 1 col");
    FAILS("{% if 1 < 2 < 3 == %}x{% endif %}", "line 1 col");
    SAME("{{ 1 < 2 < 3 }}", "True");
    /* data work counts against the step limit: equality and printing of a list that holds one 100000-item list
     * 100000 times walked 10^10 items on a few steps */
    FAILS("{% set a = range(100000)|list %}{% set b = [a] * 100000 %}{{ b == b }}", "evaluation limit");
    FAILS("{% set a = range(100000)|list %}{% set b = [a] * 100000 %}{% set ns = namespace(x=1) %}{% set ns.x = b %}",
          "evaluation limit");
    /* substring search was a byte-by-byte memcmp scan: 'x' * 100000 in 'x' * 10000000 made 10^12 compares */
    SAME("{% set h = 'x' * 10000000 %}{% set n = 'x' * 100000 ~ 'y' %}{{ n in h }}{{ h.find(n) }}", "False-1");
    FAILS("{% set h = 'x' * 10000000 %}{% set n = 'x' * 100000 ~ 'y' %}{{ h.rfind(n) }}", "evaluation limit");
    /* a string starting with a UTF-8 continuation byte had one more character than its offset table held
     * (heap-buffer-overflow when indexing or slicing it); template text and message contents may hold such bytes */
    SAME("{{ '\x9c<\x83\xc2\xa9llo'[1] }}|{{ '\x9c<\x83\xc2\xa9llo'[::-1] }}|{{ '\x9c<\x83\xc2\xa9llo'|length }}",
         "<\x83|oll\xc2\xa9<\x83\x9c|6");
    SAME("{% for c in '\x80\x80" "ab' %}[{{ c }}]{% endfor %}{{ '\x80\x80" "ab'[-3:] }}", "[\x80\x80][a][b]\x80\x80" "ab");
    /* ordinary loops and strings are unaffected */
    SAME("{% for i in range(1000) %}{% if loop.last %}{{ i }}{% endif %}{% endfor %}", "999");
    SAME("{{ ('ab' * 1000)|length }}{{ 'b' in 'ab' * 1000 }}{{ ('ab' * 1000).rfind('ba') }}", "2000True1997");
    return vc_test_done();
}
