/* Configuration inputs found by fuzzing (ASan/UBSan) that overflowed the stack or ran without end; each
 * must now fail quickly with one line naming the file and line or the key. */
#include "vc_test.h"
#include "verlc/config.h"
#include <stdlib.h>
#include <string.h>

static char *repeat(const char *head, const char *unit, size_t times, const char *tail) {
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * times + tl + 1), *p = s;
    memcpy(p, head, hl); p += hl;
    for (size_t i = 0; i < times; i++) { memcpy(p, unit, ul); p += ul; }
    memcpy(p, tail, tl + 1);
    return s;
}

/* Parses (and with resolve, resolves) text; 1 when it fails with a one-line message holding `part`. */
static int fails(const char *text, int resolve, const char *part) {
    vc_config *c = NULL;
    vc_status st = vc_config_parse_yaml(text, strlen(text), "f.yaml", &c);
    if (!st && resolve) st = vc_config_resolve(c);
    vc_config_free(c);
    const char *e = st ? vc_last_error() : "(no error)";
    int ok = st && strstr(e, part) && !strchr(e, '\n');
    if (!ok) fprintf(stderr, "  error text was: %.300s\n  expected to contain: %s\n", e, part);
    return ok;
}

int main(void) {
    /* 1e6 nested flow sequences overflowed the stack of the recursive YAML reader */
    char *deep = repeat("a: ", "[", 1000000, "");
    CHECK(fails(deep, 0, "f.yaml:1: YAML nested deeper than 256 levels"));
    free(deep);
    deep = repeat("a: ", "{b: ", 100000, "1");
    CHECK(fails(deep, 0, "f.yaml:1: YAML nested deeper than 256 levels"));
    free(deep);
    /* "billion laughs": nine levels of nine aliases expanded to 9^9 nodes */
    const char *laughs = "a: &a [1, 2]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                         "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
                         "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
                         "h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\ni: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n";
    CHECK(fails(laughs, 0, "aliases expand the document to more than"));
    /* interpolations that double at each level: 2^60 bytes of text (lists doubling the same way stop at
     * 10^6 copied nodes: "interpolations copy more than") */
    char text[8192], *p = text;
    p += sprintf(p, "k0: x\n");
    for (int i = 1; i < 60; i++) p += sprintf(p, "k%d: \"${k%d}${k%d}\"\n", i, i - 1, i - 1);
    CHECK(fails(text, 1, "interpolated text grows past 16 MiB"));
    /* resolver arguments nested 50000 deep, and a 300-long chain of keys, recursed without a bound */
    char *sel = repeat("a: \"", "${oc.select:zz,", 50000, "1");
    char *sel2 = repeat(sel, "}", 50000, "\"\n");
    CHECK(fails(sel2, 1, "config: a: interpolations nested more than 200 deep"));
    free(sel);
    free(sel2);
    char *chain = malloc(300 * 32), *q = chain;
    q += sprintf(q, "k0: 1\n");
    for (int i = 1; i < 300; i++) q += sprintf(q, "k%d: ${k%d}\n", i, i - 1);
    /* resolution walks keys in order, so the chain resolves one link at a time; a reversed chain nests */
    vc_config *c = NULL;
    CHECK_OK(vc_config_parse_yaml(chain, strlen(chain), "f.yaml", &c));
    CHECK_OK(vc_config_resolve(c));
    int64_t v = 0;
    CHECK_OK(vc_config_get_int(c, "k299", &v));
    CHECK(v == 1);
    vc_config_free(c);
    q = chain;
    for (int i = 0; i < 299; i++) q += sprintf(q, "k%d: ${k%d}\n", i, i + 1);
    q += sprintf(q, "k299: 1\n");
    CHECK(fails(chain, 1, "interpolations nested more than 200 deep"));
    free(chain);
    /* a mapping of n keys was read in O(n^2) (20 s for 30000 keys under ASan); duplicates are still found */
    char *many = malloc(20000 * 16 + 32);
    q = many;
    for (int i = 0; i < 20000; i++) q += sprintf(q, "k%d: %d\n", i, i);
    c = NULL;
    CHECK_OK(vc_config_parse_yaml(many, strlen(many), "f.yaml", &c));
    CHECK_OK(vc_config_get_int(c, "k19999", &v));
    CHECK(v == 19999);
    vc_config_free(c);
    sprintf(q, "k17: 0\n");
    CHECK(fails(many, 0, "f.yaml:20001: duplicate key 'k17'"));
    free(many);
    /* merge keys keep their meaning: explicit keys win, then the first merged map */
    const char *merge = "base: &b {x: 1, y: 2}\nother: &o {y: 3, z: 4}\nm:\n  <<: [*b, *o]\n  x: 9\n";
    c = NULL;
    CHECK_OK(vc_config_parse_yaml(merge, strlen(merge), "f.yaml", &c));
    int64_t x = 0, y = 0, z = 0;
    CHECK_OK(vc_config_get_int(c, "m.x", &x));
    CHECK_OK(vc_config_get_int(c, "m.y", &y));
    CHECK_OK(vc_config_get_int(c, "m.z", &z));
    CHECK(x == 9 && y == 2 && z == 4);
    vc_config_free(c);
    return vc_test_done();
}
