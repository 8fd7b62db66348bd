/* libFuzzer harness for the tokenizer (not a CTest program). Build and run:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc tests/tokenizer/fuzz_tok.c \
 *     src/tokenizer/tok*.c src/core/[a-z]*.c $(pkg-config --cflags --libs libcjson oniguruma libutf8proc) -lpthread -lm -o /tmp/fuzz_tok
 *   VERLC_SHARED=../shared /tmp/fuzz_tok -max_total_time=60 tests/tokenizer/corpus
 * Input: first byte picks the target: 0-3 encode/decode the rest with a fixture tokenizer (text bytes, and the
 * same bytes read as little-endian ids for decode); 4 loads the rest as a tokenizer.model; 5 as a tokenizer.json;
 * 6-7 as 0-3 with verlc's own synthetic tokenizers (tests/tokenizer/data, from the repository root): added tokens
 * with every option, and WordLevel with the Nmt / CharDelimiterSplit / FixedLength / CTC / BPEDecoder pipeline. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "verlc/tokenizer.h"

static vc_tokenizer *toks[8];
static char tmpdir[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    static const char *names[4] = {"qwen3", "llama2", "spm_bpe_bytefallback", "spm_unigram_nfkc"};
    const char *sh = getenv("VERLC_SHARED") ? getenv("VERLC_SHARED") : "../shared";
    for (int i = 0; i < 4; i++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/%s", sh, names[i]);
        if (vc_tokenizer_load(dir, &toks[i])) { fprintf(stderr, "%s\n", vc_last_error()); abort(); }
    }
    if (vc_tokenizer_load("tests/tokenizer/data/added_edges", &toks[6]) ||
        vc_tokenizer_load("tests/tokenizer/data/decode_edges", &toks[7])) { fprintf(stderr, "%s\n", vc_last_error()); abort(); }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vc_fuzz_XXXXXX");
    if (!mkdtemp(tmpdir)) abort();
    return 0;
}

static void load_file(const char *name, const uint8_t *d, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(d, 1, n, f);
    fclose(f);
    vc_tokenizer *t = NULL;
    if (vc_tokenizer_load(tmpdir, &t) == VC_OK) {
        int32_t *ids = NULL; size_t k = 0; char *s = NULL; size_t sl = 0;
        if (!vc_tokenizer_encode(t, "Hello wor\xe4\xb8\xad ld 12", 16, 1, &ids, &k)) vc_tokenizer_decode(t, ids, k, 0, &s, &sl);
        free(ids); free(s);
        vc_tokenizer_free(t);
    }
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int which = data[0] % 8;
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    if (which == 4) { load_file("tokenizer.model", d, n); return 0; }
    if (which == 5) { load_file("tokenizer.json", d, n); return 0; }
    vc_tokenizer *t = toks[which];
    int32_t *ids = NULL; size_t k = 0; char *s = NULL; size_t sl = 0;
    if (vc_tokenizer_encode(t, (const char *)d, n, which & 1, &ids, &k) == VC_OK) {
        if (vc_tokenizer_decode(t, ids, k, 0, &s, &sl) == VC_OK && which == 0 && !memchr(d, 0, n)) {
            /* byte-level: decode(encode(x)) is x itself when x is valid UTF-8 in NFC; never longer than 3n */
            if (sl > 3 * n + 16) abort();
        }
        free(s); s = NULL;
    }
    free(ids);
    int32_t v[64]; size_t m = n / 4 < 64 ? n / 4 : 64;
    for (size_t i = 0; i < m; i++) { memcpy(&v[i], d + 4 * i, 4); v[i] = (int32_t)((uint32_t)v[i] % 200000u) - 10; }
    if (vc_tokenizer_decode(t, v, m, which & 1, &s, &sl) == VC_OK) free(s);
    return 0;
}
