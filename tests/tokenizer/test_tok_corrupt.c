/* Bad tokenizer files: truncated/corrupt tokenizer.json and tokenizer.model give one-line errors naming the
 * file and the fault, never a crash; whatever loads from a corrupt file must encode and decode safely. */
#include <stdint.h>
#include <unistd.h>
#include "vc_test.h"
#include "verlc/tokenizer.h"

static char tmpdir[64];

static void put_file(const char *name, const void *data, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(data, 1, n, f);
    fclose(f);
}

static void clear_dir(void) {
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir); unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer.model", tmpdir); unlink(path);
}

/* Loads tmpdir; on success exercises encode/decode. Returns the status. */
static vc_status try_load(void) {
    vc_tokenizer *t = NULL;
    vc_status st = vc_tokenizer_load(tmpdir, &t);
    if (st == VC_OK) {
        const char *s = "Hello  world <s> 123 \xe4\xb8\xad\xe6\x96\x87 \xff";
        int32_t *ids = NULL; size_t n = 0; char *back = NULL; size_t bl = 0;
        CHECK_OK(vc_tokenizer_encode(t, s, strlen(s), 1, &ids, &n));
        CHECK_OK(vc_tokenizer_decode(t, ids, n, 0, &back, &bl));
        free(ids); free(back);
        vc_tokenizer_free(t);
    } else {
        CHECK(t == NULL);
        const char *msg = vc_last_error();
        CHECK_MSG(msg && strstr(msg, "tokenizer.") && !strchr(msg, '\n'), "message: %s", msg ? msg : "(none)");
    }
    return st;
}

static void expect_json(const char *json, vc_status want, const char *words) {
    clear_dir();
    put_file("tokenizer.json", json, strlen(json));
    vc_status st = try_load();
    CHECK_MSG(st == want, "%s: got %s (%s)", json, vc_status_name(st), vc_last_error());
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), words), "want [%s] in: %s", words, vc_last_error());
}

static char *read_all(const char *path, size_t *n) {
    char *d = NULL;
    CHECK_OK(vc_read_file(path, &d, n));
    return d;
}

static void truncated_json(void) {
    char path[1024]; size_t n = 0;
    snprintf(path, sizeof path, "%s/fixtures/tokenizers/llama2/tokenizer.json", vc_test_shared());
    char *d = read_all(path, &n);
    if (!d) return;
    size_t cuts[] = {0, 1, 100, n / 3, n / 2, n - 2};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        clear_dir();
        put_file("tokenizer.json", d, cuts[i]);
        vc_status st = try_load();
        CHECK_MSG(st == VC_ERR_FORMAT && strstr(vc_last_error(), "not valid JSON"), "cut %zu: %s", cuts[i], vc_last_error());
    }
    free(d);
}

/* A model without an unk token cannot encode text it has no piece for: a clean error, as tokenizers gives. */
static void missing_unk(void) {
    const char *json = "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0, \"##a\": 1}}}";
    clear_dir();
    put_file("tokenizer.json", json, strlen(json));
    vc_tokenizer *t = NULL;
    CHECK_OK(vc_tokenizer_load(tmpdir, &t));
    if (!t) return;
    int32_t *ids = NULL; size_t n = 0;
    CHECK_OK(vc_tokenizer_encode(t, "aa", 2, 0, &ids, &n));
    CHECK(n == 2 && ids[0] == 0 && ids[1] == 1);
    free(ids); ids = NULL;
    CHECK(vc_tokenizer_encode(t, "ab", 2, 0, &ids, &n) == VC_ERR_MISSING && ids == NULL);
    vc_tokenizer_free(t);
}

static void bad_json(void) {
    expect_json("{\"model\": {\"type\": \"Fancy\", \"vocab\": {}}}", VC_ERR_UNSUPPORTED, "unknown model type `Fancy`");
    expect_json("{\"model\": {\"type\": \"BPE\", \"merges\": []}}", VC_ERR_MISSING, "no `vocab`");
    expect_json("{\"added_tokens\": []}", VC_ERR_MISSING, "missing `model`");
    expect_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}", VC_ERR_FORMAT, "bad merges entry 0");
    expect_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"ab\"]}}", VC_ERR_FORMAT, "bad merges");
    expect_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}}", VC_ERR_FORMAT, "bad merges");
    expect_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}}}", VC_ERR_MISSING, "no `merges`");
    expect_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}", VC_ERR_FORMAT, "bad id");
    expect_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"pre_tokenizer\": "
                "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(unclosed\"}, \"behavior\": \"Isolated\"}}", VC_ERR_FORMAT, "bad regex");
    expect_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"normalizer\": {\"type\": \"Magic\"}}",
                VC_ERR_UNSUPPORTED, "unsupported normalizer type `Magic`");
    expect_json("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", \"x\"]]}}", VC_ERR_FORMAT, "not [piece, score]");
    expect_json("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, \"added_tokens\": [{\"content\": \"x\"}]}",
                VC_ERR_FORMAT, "added_tokens entry 0");
}

static uint32_t lcg(uint32_t *s) { *s = *s * 1664525u + 1013904223u; return *s >> 8; }

static void bad_model(const char *name, size_t step, int flips) {
    char path[1024]; size_t n = 0;
    snprintf(path, sizeof path, "%s/fixtures/tokenizers/%s/tokenizer.model", vc_test_shared(), name);
    char *d = read_all(path, &n);
    if (!d) return;
    int failed = 0, loaded = 0;
    for (size_t cut = 0; cut < n; cut += step) { /* truncations */
        clear_dir();
        put_file("tokenizer.model", d, cut);
        if (try_load() == VC_OK) loaded++; else failed++;
    }
    uint32_t seed = 12345;
    for (int k = 0; k < flips; k++) { /* random byte corruption, 1..8 bytes */
        char *c = malloc(n);
        memcpy(c, d, n);
        int m = 1 + (int)(lcg(&seed) % 8);
        for (int j = 0; j < m; j++) c[lcg(&seed) % n] = (char)lcg(&seed);
        clear_dir();
        put_file("tokenizer.model", c, n);
        if (try_load() == VC_OK) loaded++; else failed++;
        free(c);
    }
    CHECK(failed > 0);
    printf("%s: %d corrupt/truncated variants rejected, %d loaded and encoded safely\n", name, failed, loaded);
    free(d);
}

static void handmade_model(void) {
    /* pieces <unk>(UNKNOWN) and a(NORMAL); trainer_spec model_type = WORD (3) */
    const unsigned char word[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
                                  0x0a, 0x03, 0x0a, 0x01, 'a', 0x12, 0x02, 0x18, 0x03};
    clear_dir();
    put_file("tokenizer.model", word, sizeof word);
    CHECK(try_load() == VC_ERR_UNSUPPORTED && strstr(vc_last_error(), "model type 3"));
    const unsigned char nopieces[] = {0x12, 0x02, 0x18, 0x02};
    clear_dir();
    put_file("tokenizer.model", nopieces, sizeof nopieces);
    CHECK(try_load() == VC_ERR_MISSING && strstr(vc_last_error(), "no pieces"));
    const unsigned char badwire[] = {0x0b, 0x01};
    clear_dir();
    put_file("tokenizer.model", badwire, sizeof badwire);
    CHECK(try_load() == VC_ERR_FORMAT && strstr(vc_last_error(), "bad protobuf"));
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vc_tok_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    CHECK(try_load() == VC_ERR_IO); /* empty folder */
    truncated_json();
    bad_json();
    missing_unk();
    handmade_model();
    bad_model("spm_bpe_bytefallback", 37, 300);
    bad_model("spm_unigram_nfkc", 997, 150);
    clear_dir();
    rmdir(tmpdir);
    return vc_test_done();
}
