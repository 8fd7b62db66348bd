/* Config tree: scalar typing (YAML and Hydra), paths, overrides and their checks, interpolation,
 * YAML/JSON emission round trips. */
#include "config/cfg_internal.h"
#include "vc_test.h"
#include "verlc/config.h"
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static vc_cfg_kind kind_of(vc_config *c, const char *p) { return vc_config_kind(c, p); }

static int err_has(const char *needle) {
    const char *e = vc_last_error();
    int ok = e && strstr(e, needle) != NULL;
    if (!ok) fprintf(stderr, "  error text was: %s\n  expected to contain: %s\n", e ? e : "(null)", needle);
    return ok;
}

static void test_hydra_values(void) {
    vc_config *c;
    CHECK_OK(vc_config_new(&c));
    int64_t i;
    double d;
    int b;
    const char *s;
    size_t n;
    CHECK_OK(vc_config_set(c, "a.f", "1e-6"));
    CHECK(kind_of(c, "a.f") == VC_CFG_FLOAT);
    CHECK_OK(vc_config_get_double(c, "a.f", &d));
    CHECK_NEAR(d, 1e-6, 0);
    CHECK_OK(vc_config_set(c, "a.f2", "-2.5E+3"));
    CHECK_OK(vc_config_get_double(c, "a.f2", &d));
    CHECK_NEAR(d, -2500, 0);
    CHECK_OK(vc_config_set(c, "a.half", ".5"));
    CHECK(kind_of(c, "a.half") == VC_CFG_FLOAT);
    CHECK_OK(vc_config_set(c, "a.i", "42"));
    CHECK(kind_of(c, "a.i") == VC_CFG_INT);
    CHECK_OK(vc_config_get_int(c, "a.i", &i));
    CHECK(i == 42);
    CHECK_OK(vc_config_set(c, "a.big", "1_000_000"));
    CHECK_OK(vc_config_get_int(c, "a.big", &i));
    CHECK(i == 1000000);
    CHECK_OK(vc_config_set(c, "a.neg", "-7"));
    CHECK_OK(vc_config_get_int(c, "a.neg", &i));
    CHECK(i == -7);
    CHECK_OK(vc_config_set(c, "a.t", "True"));
    CHECK_OK(vc_config_get_bool(c, "a.t", &b));
    CHECK(b == 1);
    CHECK_OK(vc_config_set(c, "a.fl", "false"));
    CHECK_OK(vc_config_get_bool(c, "a.fl", &b));
    CHECK(b == 0);
    CHECK_OK(vc_config_set(c, "a.yes", "yes")); /* Hydra: yes is a plain string */
    CHECK(kind_of(c, "a.yes") == VC_CFG_STR);
    CHECK_OK(vc_config_set(c, "a.nul", "null"));
    CHECK(kind_of(c, "a.nul") == VC_CFG_NULL);
    CHECK(vc_config_get_int(c, "a.nul", &i) == VC_ERR_MISSING);
    CHECK_OK(vc_config_get_str(c, "a.nul", &s));
    CHECK(s == NULL);
    CHECK_OK(vc_config_set(c, "a.q", "'123'"));
    CHECK(kind_of(c, "a.q") == VC_CFG_STR);
    CHECK_OK(vc_config_get_str(c, "a.q", &s));
    CHECK(!strcmp(s, "123"));
    CHECK_OK(vc_config_set(c, "a.dq", "\"it's, fine\""));
    CHECK_OK(vc_config_get_str(c, "a.dq", &s));
    CHECK(!strcmp(s, "it's, fine"));
    CHECK_OK(vc_config_set(c, "a.sp", "  hello world  "));
    CHECK_OK(vc_config_get_str(c, "a.sp", &s));
    CHECK(!strcmp(s, "hello world"));
    CHECK_OK(vc_config_set(c, "a.empty", ""));
    CHECK_OK(vc_config_get_str(c, "a.empty", &s));
    CHECK(s && !strcmp(s, ""));
    CHECK_OK(vc_config_set(c, "a.path", "$HOME/data/gsm8k/train.parquet"));
    CHECK_OK(vc_config_get_str(c, "a.path", &s));
    CHECK(!strcmp(s, "$HOME/data/gsm8k/train.parquet"));
    /* numbers read back as text keep the spelling */
    CHECK_OK(vc_config_get_str(c, "a.f", &s));
    CHECK(!strcmp(s, "1e-6"));
    /* lists and maps */
    CHECK_OK(vc_config_set(c, "a.l", "[console, 'wandb', 3, [1,2], {k: v}]"));
    CHECK_OK(vc_config_list_len(c, "a.l", &n));
    CHECK(n == 5);
    CHECK_OK(vc_config_list_str(c, "a.l", 1, &s));
    CHECK(!strcmp(s, "wandb"));
    CHECK(kind_of(c, "a.l[2]") == VC_CFG_INT);
    CHECK(kind_of(c, "a.l.3.1") == VC_CFG_INT);
    CHECK_OK(vc_config_get_str(c, "a.l[4].k", &s));
    CHECK(!strcmp(s, "v"));
    CHECK_OK(vc_config_set(c, "a.m", "{x: 1, y: [0.9, 0.999], z: 'a b'}"));
    CHECK_OK(vc_config_list_double(c, "a.m.y", 1, &d));
    CHECK_NEAR(d, 0.999, 0);
    CHECK_OK(vc_config_set(c, "a.el", "[]"));
    CHECK_OK(vc_config_list_len(c, "a.el", &n));
    CHECK(n == 0);
    CHECK_OK(vc_config_set(c, "a.interp", "${a.i}"));
    CHECK(kind_of(c, "a.interp") == VC_CFG_STR);
    /* malformed values */
    CHECK(vc_config_set(c, "a.bad", "a,b") == VC_ERR_ARG);
    CHECK(err_has("ambiguous"));
    CHECK(vc_config_set(c, "a.bad", "[a, b") == VC_ERR_ARG);
    CHECK(vc_config_set(c, "a.bad", "'open") == VC_ERR_ARG);
    CHECK(err_has("unterminated"));
    CHECK(vc_config_set(c, "a.bad", "{k}") == VC_ERR_ARG);
    CHECK(vc_config_set(c, "a..b", "1") == VC_ERR_ARG);
    CHECK(vc_config_override(c, "novalue") == VC_ERR_ARG);
    CHECK(!vc_config_has(c, "a.bad"));
    /* ints read as doubles, integral floats as ints, non-integral fails */
    CHECK_OK(vc_config_get_double(c, "a.i", &d));
    CHECK_NEAR(d, 42, 0);
    CHECK(vc_config_get_int(c, "a.f", &i) == VC_ERR_ARG);
    CHECK(vc_config_get_int(c, "a.l", &i) == VC_ERR_ARG);
    CHECK(vc_config_get_bool(c, "a.q", &b) == VC_ERR_ARG);
    CHECK(vc_config_get_int(c, "a.nothere", &i) == VC_ERR_MISSING);
    CHECK_OK(vc_config_get_int_or(c, "a.nothere", 9, &i));
    CHECK(i == 9);
    CHECK_OK(vc_config_get_int_or(c, "a.nul", 8, &i));
    CHECK(i == 8);
    CHECK(vc_config_get_int_or(c, "a.q", 8, &i) == VC_ERR_ARG);
    vc_config_free(c);
}

static void test_yaml_scalars(void) {
    const char *y = "a: yes\nb: No\nc: ~\nd: '1'\ne: 1e-6\nf: 1.0e-06\ng: 0x1f\nh: .inf\ni: -3\nj: \"true\"\n"
                    "k: ???\nl: [1, two]\nm: {}\nn: \nanchor: &base {x: 1, y: 2}\nref: *base\n"
                    "merged:\n  <<: *base\n  y: 3\n";
    vc_config *c;
    CHECK_OK(vc_config_parse_yaml(y, strlen(y), "inline.yaml", &c));
    int b;
    int64_t i;
    double d;
    const char *s;
    CHECK_OK(vc_config_get_bool(c, "a", &b));
    CHECK(b == 1);
    CHECK_OK(vc_config_get_bool(c, "b", &b));
    CHECK(b == 0);
    CHECK(kind_of(c, "c") == VC_CFG_NULL);
    CHECK(kind_of(c, "d") == VC_CFG_STR);
    CHECK_OK(vc_config_get_double(c, "e", &d));
    CHECK_NEAR(d, 1e-6, 0);
    CHECK(kind_of(c, "f") == VC_CFG_FLOAT);
    CHECK_OK(vc_config_get_int(c, "g", &i));
    CHECK(i == 31);
    CHECK_OK(vc_config_get_double(c, "h", &d));
    CHECK(isinf(d));
    CHECK(kind_of(c, "j") == VC_CFG_STR);
    CHECK(kind_of(c, "k") == VC_CFG_MISSING);
    CHECK(vc_config_get_str(c, "k", &s) == VC_ERR_MISSING);
    CHECK(kind_of(c, "l") == VC_CFG_LIST);
    CHECK(kind_of(c, "m") == VC_CFG_MAP);
    CHECK(kind_of(c, "n") == VC_CFG_NULL);
    CHECK_OK(vc_config_get_int(c, "ref.y", &i));
    CHECK(i == 2);
    CHECK_OK(vc_config_get_int(c, "merged.x", &i));
    CHECK(i == 1);
    CHECK_OK(vc_config_get_int(c, "merged.y", &i));
    CHECK(i == 3);
    vc_config_free(c);
    /* YAML 1.1 as OmegaConf's loader reads it (compared with OmegaConf 2.3): octal, binary and base 60 ints, a float
     * starting with a point takes no sign, 08 is no number; JSON writes a float as a float */
    static const struct { const char *v; vc_cfg_kind k; double x; } yc[] = {
        { "010", VC_CFG_INT, 8 }, { "0b101", VC_CFG_INT, 5 }, { "1:30", VC_CFG_INT, 90 }, { "-1:30:05", VC_CFG_INT, -5405 },
        { "1:30.5", VC_CFG_FLOAT, 90.5 }, { "0_7", VC_CFG_INT, 7 }, { "08", VC_CFG_STR, 0 }, { "1:60", VC_CFG_STR, 0 },
        { "-.5", VC_CFG_STR, 0 }, { ".5e3", VC_CFG_STR, 0 }, { ".5e+3", VC_CFG_FLOAT, 500 }, { "09.5", VC_CFG_FLOAT, 9.5 },
        { "0o17", VC_CFG_STR, 0 }, { "1__0", VC_CFG_INT, 10 } };
    for (size_t k = 0; k < sizeof yc / sizeof yc[0]; k++) {
        char doc[64];
        snprintf(doc, sizeof doc, "v: %s\n", yc[k].v);
        CHECK_OK(vc_config_parse_yaml(doc, strlen(doc), "inline.yaml", &c));
        CHECK_MSG(kind_of(c, "v") == yc[k].k, "%s: kind %d, want %d", yc[k].v, kind_of(c, "v"), yc[k].k);
        if (yc[k].k == VC_CFG_INT) { CHECK_OK(vc_config_get_int(c, "v", &i)); CHECK_MSG(i == (int64_t)yc[k].x, "%s: %lld", yc[k].v, (long long)i); }
        if (yc[k].k == VC_CFG_FLOAT) { CHECK_OK(vc_config_get_double(c, "v", &d)); CHECK_NEAR(d, yc[k].x, 0); }
        vc_config_free(c);
    }
    const char *fy = "a: 1E3\nb: 9223372036854775807\nc: -0.0\n";
    CHECK_OK(vc_config_parse_yaml(fy, strlen(fy), "inline.yaml", &c));
    char *js = vc_config_to_json(c, NULL, 0);
    CHECK_MSG(js && !strcmp(js, "{\"a\":1000.0,\"b\":9223372036854775807,\"c\":-0.0}"), "json: %s", js ? js : "(null)");
    free(js);
    vc_config_free(c);
}

static void test_interpolation(void) {
    const char *y = "a:\n  b: 5\n  c: ${a.b}\n  d: ${.b}\n  e:\n    f: ${..b}\n  g: run_${a.b}_${t.flag}_${t.none}\n"
                    "t:\n  flag: true\n  none: null\n  list: [x, y]\n  copy: ${t.list}\n"
                    "s:\n  sel: ${oc.select:t.absent,7}\n  sel2: ${oc.select:a.b,7}\n  sel3: ${oc.select:t.absent}\n"
                    "  sel4: ${oc.select:t.none,3}\n  sel5: ${oc.select:t.absent,\"q, r\"}\n  sel6: ${oc.select:t.absent,${a.b}}\n"
                    "  sel7: ${oc.select:.sel,1}\n  env: ${oc.env:VC_CFG_TEST_ENV}\n  envd: ${oc.env:VC_CFG_TEST_NOPE,dflt}\n"
                    "  esc: cost \\${a.b}\n  chain: ${s.sel}\n";
    vc_config *c;
    setenv("VC_CFG_TEST_ENV", "from-env", 1);
    CHECK_OK(vc_config_parse_yaml(y, strlen(y), "interp.yaml", &c));
    CHECK_OK(vc_config_resolve(c));
    int64_t i;
    const char *s;
    size_t n;
    CHECK_OK(vc_config_get_int(c, "a.c", &i));
    CHECK(i == 5);
    CHECK(kind_of(c, "a.c") == VC_CFG_INT);
    CHECK_OK(vc_config_get_int(c, "a.d", &i));
    CHECK(i == 5);
    CHECK_OK(vc_config_get_int(c, "a.e.f", &i));
    CHECK(i == 5);
    CHECK_OK(vc_config_get_str(c, "a.g", &s));
    CHECK(!strcmp(s, "run_5_True_None"));
    CHECK_OK(vc_config_list_len(c, "t.copy", &n));
    CHECK(n == 2);
    CHECK_OK(vc_config_get_int(c, "s.sel", &i));
    CHECK(i == 7);
    CHECK_OK(vc_config_get_int(c, "s.sel2", &i));
    CHECK(i == 5);
    CHECK(kind_of(c, "s.sel3") == VC_CFG_NULL);
    CHECK(kind_of(c, "s.sel4") == VC_CFG_NULL); /* oc.select keeps an existing null */
    CHECK_OK(vc_config_get_str(c, "s.sel5", &s));
    CHECK(!strcmp(s, "q, r"));
    CHECK_OK(vc_config_get_int(c, "s.sel6", &i));
    CHECK(i == 5);
    CHECK_OK(vc_config_get_int(c, "s.sel7", &i));
    CHECK(i == 7);
    CHECK_OK(vc_config_get_str(c, "s.env", &s));
    CHECK(!strcmp(s, "from-env"));
    CHECK_OK(vc_config_get_str(c, "s.envd", &s));
    CHECK(!strcmp(s, "dflt"));
    CHECK_OK(vc_config_get_str(c, "s.esc", &s));
    CHECK(!strcmp(s, "cost ${a.b}"));
    CHECK_OK(vc_config_get_int(c, "s.chain", &i));
    CHECK(i == 7);
    vc_config_free(c);

    const char *bad[][2] = {
        { "a: ${b}\nb: ${a}\n", "cycle" },
        { "a: ${nothere.x}\n", "no such key" },
        { "a: ${oc.decode:1}\n", "not supported" },
        { "a: x${b\nb: 1\n", "unbalanced" },
        { "a: ${b}\nb: ???\n", "nobody set" },
        { "a: pre_${b}\nb: [1]\n", "inside a string" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CHECK_OK(vc_config_parse_yaml(bad[k][0], strlen(bad[k][0]), "bad.yaml", &c));
        CHECK_MSG(vc_config_resolve(c) != VC_OK, "case %zu", k);
        CHECK(err_has(bad[k][1]));
        vc_config_free(c);
    }
}

/* Emit -> parse gives the same tree; JSON carries the same values. */
static void test_emit_round_trip(void) {
    vc_config *c, *back;
    CHECK_OK(vc_config_new(&c));
    const char *sets[][2] = {
        { "s.t", "'true'" }, { "s.one", "'1'" }, { "s.empty", "''" }, { "s.colon", "'a: b'" },
        { "s.hash", "'#x'" }, { "s.dash", "'- x'" }, { "s.quote", "\"it's\"" }, { "s.tilde", "'~'" },
        { "s.nl", "\"x\"" }, { "s.interp", "checkpoints/${s.one}" }, { "s.q3", "'?\?\?'" },
        { "n.f", "1e-6" }, { "n.big", "123456789012" }, { "n.neg", "-0.25" }, { "n.inf", "-inf" },
        { "n.whole", "2.0" }, { "l.nested", "[[1, 2], [], [a, {k: v, m: [x]}]]" }, { "l.maps", "[{a: 1, b: {c: 2}}, {}]" },
        { "m.empty", "{}" }, { "m.null", "null" }, { "m.miss", "???" }, { "'odd key'", "1" },
    };
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) CHECK_OK(vc_config_set(c, sets[k][0], sets[k][1]));
    /* a string with a newline and a tab can only come from YAML; put one in directly */
    vc_cfg_node *nl = vc_cfg_scalar_str("line1\nline2\tx", 13);
    vc_cfg_map_put(vc_cfg_map_get(c->root, "s"), "nl", nl);
    char *y = vc_config_to_yaml(c, NULL);
    CHECK(y != NULL);
    CHECK_OK(vc_config_parse_yaml(y, strlen(y), "emitted.yaml", &back));
    if (back) {
        CHECK_MSG(vc_cfg_node_equal(c->root, back->root), "round trip differs:\n%s", y);
        vc_config_free(back);
    }
    free(y);
    char *j = vc_config_to_json(c, NULL, 0);
    cJSON *root = j ? cJSON_Parse(j) : NULL;
    CHECK(root != NULL);
    if (root) {
        cJSON *s = cJSON_GetObjectItem(root, "s"), *nn = cJSON_GetObjectItem(root, "n");
        CHECK(cJSON_IsString(cJSON_GetObjectItem(s, "t")) && !strcmp(cJSON_GetObjectItem(s, "t")->valuestring, "true"));
        CHECK_NEAR(cJSON_GetObjectItem(nn, "f")->valuedouble, 1e-6, 0);
        CHECK_NEAR(cJSON_GetObjectItem(nn, "big")->valuedouble, 123456789012.0, 0);
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(nn, "inf")));
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "m"), "null")));
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "l"), "nested")) == 3);
        cJSON_Delete(root);
    }
    free(j);
    /* a sub-tree and a scalar */
    y = vc_config_to_yaml(c, "n.f");
    CHECK(y && !strcmp(y, "1.0e-06\n"));
    free(y);
    CHECK(vc_config_to_yaml(c, "no.such") == NULL);
    vc_config_free(c);
}

static void test_delete_and_add(void) {
    vc_config *c;
    CHECK_OK(vc_config_defaults(&c));
    vc_config_set_quiet(c, 1);
    int64_t i;
    CHECK_OK(vc_config_override(c, "~trainer.logger"));
    CHECK(!vc_config_has(c, "trainer.logger"));
    CHECK(vc_config_override(c, "~trainer.logger") == VC_ERR_ARG);
    CHECK(vc_config_override(c, "~trainer.total_epochs=31") == VC_ERR_ARG);
    CHECK(err_has("different value"));
    CHECK_OK(vc_config_override(c, "~trainer.total_epochs=30"));
    CHECK(!vc_config_has(c, "trainer.total_epochs"));
    CHECK_OK(vc_config_override(c, "+trainer.total_epochs=3"));
    CHECK_OK(vc_config_get_int(c, "trainer.total_epochs", &i));
    CHECK(i == 3);
    CHECK(vc_config_override(c, "+data.train_batch_size=1") == VC_ERR_ARG);
    CHECK(err_has("already exists"));
    CHECK_OK(vc_config_override(c, "++data.train_batch_size=abc")); /* ++ forces */
    CHECK_OK(vc_config_override(c, "+my.new.section.value=[1,2]"));
    CHECK_OK(vc_config_override(c, "my.new.section.other=1")); /* new sections are open */
    CHECK_OK(vc_config_override(c, "~actor_rollout_ref.actor.optim.betas[0]"));
    size_t n;
    CHECK_OK(vc_config_list_len(c, "actor_rollout_ref.actor.optim.betas", &n));
    CHECK(n == 1);
    CHECK_OK(vc_config_override(c, "actor_rollout_ref.actor.optim.betas.0=0.95"));
    double d;
    CHECK_OK(vc_config_get_double(c, "actor_rollout_ref.actor.optim.betas[0]", &d));
    CHECK_NEAR(d, 0.95, 0);
    CHECK(vc_config_override(c, "actor_rollout_ref.actor.optim.betas.5=0.95") == VC_ERR_ARG);
    vc_config_free(c);
}

/* Truncated and corrupted YAML and override text: an error or a tree, never a crash (ASan checks). */
static void test_corrupt_inputs(void) {
    vc_config *d, *c;
    CHECK_OK(vc_config_defaults(&d));
    char *y = d ? vc_config_to_yaml(d, NULL) : NULL;
    CHECK(y != NULL);
    size_t len = y ? strlen(y) : 0;
    int ok = 0, failed = 0;
    for (size_t cut = 0; cut < len; cut += 61) {
        if (vc_config_parse_yaml(y, cut, "cut.yaml", &c) == VC_OK) { ok++; vc_config_free(c); }
        else failed++;
    }
    CHECK(ok > 0 && failed > 0);
    uint32_t rng = 12345;
    for (int k = 0; k < 200 && y; k++) { /* flip a few bytes to YAML punctuation */
        char *m = vc_strdup(y);
        for (int f = 0; f < 3; f++) {
            rng = rng * 1103515245u + 12345u;
            m[(rng >> 8) % len] = ":-[]{}'\"&*!|>%@#\n\t "[(rng >> 3) % 18];
        }
        if (vc_config_parse_yaml(m, len, "flip.yaml", &c) == VC_OK) {
            vc_config_set_quiet(c, 1);
            vc_config_resolve(c);
            char *e = vc_config_to_yaml(c, NULL);
            free(e);
            vc_config_free(c);
        } else {
            CHECK(strstr(vc_last_error(), "flip.yaml") != NULL);
        }
        free(m);
    }
    const char *vals[] = { "[", "]", "{", "}", "[[[", "{a:", "{a: [1, {b: }]}", "'", "\"", "${", "${a", "x${y}z${",
                           "[a,,b]", "{:}", ",", "a b, c", "\\", "[1,2]x", "${oc.select:}", "~", "??", "-", ".", "e5", "1e", "0x" };
    int rejected = 0;
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        vc_status st = vc_config_set(d, "trainer.experiment_name", vals[k]);
        rejected += st != VC_OK;
        if (st != VC_OK) CHECK(strstr(vc_last_error(), "trainer.experiment_name") != NULL);
        if (st == VC_OK) (void)vc_config_resolve(d); /* may fail on a half interpolation; must not crash */
    }
    CHECK(rejected >= 10);
    free(y);
    vc_config_free(d);
}

/* Found by tools/fuzz/diff_config.py against Hydra 1.3: its number grammar has no hex and no leading zeros (0x10, 007 and
 * 01.5 are strings there), one '_' between digits; a float interpolated into a string is Python's str() of it; `+a.b=v`
 * through a scalar a makes a a mapping, as OmegaConf.update does */
static void test_hydra_grammar(void) {
    vc_config *c;
    CHECK_OK(vc_config_new(&c));
    static const struct { const char *v; vc_cfg_kind k; } cases[] = {
        { "0x10", VC_CFG_STR }, { "007", VC_CFG_STR }, { "01.5", VC_CFG_STR }, { "1__0", VC_CFG_STR }, { "1e", VC_CFG_STR },
        { "1_000", VC_CFG_INT }, { "+7", VC_CFG_INT }, { "0", VC_CFG_INT }, { "5.", VC_CFG_FLOAT }, { "1.e5", VC_CFG_FLOAT },
        { "1_0.5_5", VC_CFG_FLOAT }, { "0.5e1_0", VC_CFG_FLOAT }, { "-INF", VC_CFG_FLOAT }, { "NaN", VC_CFG_FLOAT } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_OK(vc_config_set(c, "a.v", cases[i].v));
        CHECK_MSG(kind_of(c, "a.v") == cases[i].k, "%s: kind %d, want %d", cases[i].v, kind_of(c, "a.v"), cases[i].k);
    }
    double d;
    CHECK_OK(vc_config_set(c, "a.v", "1_0.5_5"));
    CHECK_OK(vc_config_get_double(c, "a.v", &d));
    CHECK_NEAR(d, 10.55, 0);
    const char *s = NULL;
    CHECK_OK(vc_config_set(c, "a.n", "inf"));
    CHECK_OK(vc_config_set(c, "a.m", "1e3"));
    CHECK_OK(vc_config_set(c, "a.dir", "'ckpt/${a.n}/${a.m}'"));
    CHECK_OK(vc_config_resolve(c));
    CHECK_OK(vc_config_get_str(c, "a.dir", &s));
    CHECK_MSG(s && !strcmp(s, "ckpt/inf/1000.0"), "interpolated: %s", s ? s : "(null)");
    vc_config_free(c);
    vc_config *v = NULL;
    char *argv[] = { "+trainer.resume_mode.extra=false" };
    CHECK_OK(vc_config_load_argv(1, argv, NULL, &v));
    CHECK(v && vc_config_kind(v, "trainer.resume_mode") == VC_CFG_MAP && vc_config_kind(v, "trainer.resume_mode.extra") == VC_CFG_BOOL);
    vc_config_free(v);
}

int main(void) {
    test_hydra_grammar();
    test_hydra_values();
    test_yaml_scalars();
    test_interpolation();
    test_emit_round_trip();
    test_delete_and_add();
    test_corrupt_inputs();
    return vc_test_done();
}
