/* Tokenizer API: vocabulary queries, special ids from tokenizer_config.json, round trips of our own texts
 * through byte-level tokenizers, invalid UTF-8 input, and concurrent encoding from several threads. */
#include <pthread.h>
#include <stdint.h>
#include "vc_test.h"
#include <utf8proc.h>
#include "verlc/tokenizer.h"

static vc_tokenizer *load(const char *name) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fixtures/tokenizers/%s", vc_test_shared(), name);
    vc_tokenizer *t = NULL;
    CHECK_OK(vc_tokenizer_load(dir, &t));
    return t;
}

static const char *texts[] = {
    "", " ", "\n\n", "   \t  \n ", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "def add(a, b):\n\treturn a + b  # sum\n\n\nclass X:\n    pass\n",
    "for (int i = 0; i < n; ++i) { s += a[i] * b[i]; }",
    "Привет, мир! Γειά σου κόσμε. שלום עולם. مرحبا بالعالم. नमस्ते दुनिया",
    "日本語と中文と한국어が混ざった文章です。",
    "emoji: 🧑‍🚀👩🏾‍🔬🏳️‍🌈 and flags 🇫🇷🇯🇵",
    "combining: e\xcc\x81 a\xcc\x8a o\xcc\x88\xcc\x81 vs é å",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>",
    "<|im_start|<|im_end|>>>< |endoftext| > <|endoftext|><|endoftext|>",
    "numbers 1234567890 3.14159e-10 1,000,000 0xDEADBEEF",
    "                                                                spaces",
    "tabs\t\t\t\tand\r\nCRLF\r\n\r\nline\x0b" "breaks\x0c",
    "\xc2\xa0\xe2\x80\x8b\xe3\x80\x80 odd spaces \xe2\x80\xaf",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE I'M YOU'LL",
};

/* nfc: the tokenizer normalizes to NFC (Qwen), so the round trip gives the NFC form of the text */
static void roundtrip(const vc_tokenizer *t, const char *name, int nfc) {
    int ok = 0, n = (int)(sizeof texts / sizeof texts[0]);
    for (int i = 0; i < n; i++) {
        int32_t *ids = NULL; size_t k = 0;
        char *back = NULL; size_t bl = 0;
        CHECK_OK(vc_tokenizer_encode(t, texts[i], strlen(texts[i]), 0, &ids, &k));
        CHECK_OK(vc_tokenizer_decode(t, ids, k, 0, &back, &bl));
        char *want = nfc ? (char *)utf8proc_NFC((const utf8proc_uint8_t *)texts[i]) : NULL;
        const char *w = want ? want : texts[i];
        int same = back && bl == strlen(w) && !memcmp(back, w, bl);
        free(want);
        CHECK_MSG(same, "%s: round trip of text %d: [%s]", name, i, back ? back : "");
        ok += same;
        free(ids); free(back);
    }
    printf("%s: %d/%d own texts round-trip\n", name, ok, n);
}

/* Invalid UTF-8: byte-level models encode the raw bytes; decoding gives from_utf8_lossy of them. */
static void invalid_utf8(const vc_tokenizer *t) {
    const char bad[] = "ok \xff\xfe bad \xe2\x82 cut \xf0\x9f\x98 end \xc3";
    int32_t *ids = NULL; size_t k = 0;
    char *back = NULL; size_t bl = 0;
    CHECK_OK(vc_tokenizer_encode(t, bad, sizeof bad - 1, 0, &ids, &k));
    CHECK(k > 0);
    CHECK_OK(vc_tokenizer_decode(t, ids, k, 0, &back, &bl));
    const char *want = "ok \xef\xbf\xbd\xef\xbf\xbd bad \xef\xbf\xbd cut \xef\xbf\xbd end \xef\xbf\xbd";
    CHECK_MSG(back && !strcmp(back, want), "lossy decode: [%s]", back ? back : "");
    free(ids); free(back);
    /* lone byte ids decode as from_utf8_lossy does: one U+FFFD per maximal invalid prefix */
    int32_t *b1 = NULL, *b2 = NULL; size_t n1 = 0, n2 = 0;
    CHECK_OK(vc_tokenizer_encode(t, "\xe2", 1, 0, &b1, &n1));
    CHECK_OK(vc_tokenizer_encode(t, "\x82", 1, 0, &b2, &n2));
    CHECK(n1 == 1 && n2 == 1);
    int32_t one = n1 ? b1[0] : 0, two = n2 ? b2[0] : 0;
    free(b1); free(b2);
    int32_t seq[3] = {one, two, one};
    CHECK_OK(vc_tokenizer_decode(t, seq, 3, 0, &back, &bl));
    CHECK_MSG(back && !strcmp(back, "\xef\xbf\xbd\xef\xbf\xbd"), "partial sequences: [%s]", back ? back : "");
    free(back);
}

/* SentencePiece replaces each invalid byte by U+FFFD in normalization; expected ids from sentencepiece 0.2 */
static void spm_invalid_utf8(void) {
    static const struct { const char *model, *text; int n; int32_t ids[24]; } cases[] = {
        {"spm_bpe_bytefallback", "ok \xff\xfe bad \xe2\x82 cut", 20,
         {268, 955, 923, 244, 196, 194, 244, 196, 194, 274, 347, 923, 244, 196, 194, 244, 196, 194, 273, 338}},
        {"spm_bpe_bytefallback", "a\xf0\x9f\x98" "b", 11, {263, 244, 196, 194, 244, 196, 194, 244, 196, 194, 951}},
        {"spm_unigram_nfkc", "ok \xff\xfe bad \xe2\x82 cut", 10, {11, 10, 55, 11, 0, 87, 227, 11, 0, 656}},
        {"spm_unigram_nfkc", "\xc3", 2, {11, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vc_tokenizer *t = load(cases[i].model);
        if (!t) continue;
        int32_t *ids = NULL; size_t k = 0;
        CHECK_OK(vc_tokenizer_encode(t, cases[i].text, strlen(cases[i].text), 0, &ids, &k));
        CHECK_MSG(k == (size_t)cases[i].n && !memcmp(ids, cases[i].ids, k * sizeof *ids), "case %zu", i);
        free(ids);
        vc_tokenizer_free(t);
    }
}

typedef struct { const vc_tokenizer *t; int bad; } thr;
static void *worker(void *arg) {
    thr *w = arg;
    for (int rep = 0; rep < 20; rep++)
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
            int32_t *a = NULL, *b = NULL; size_t na = 0, nb = 0;
            char buf[512];
            snprintf(buf, sizeof buf, "%s %d words%d", texts[i], rep, (int)i * rep);
            if (vc_tokenizer_encode(w->t, buf, strlen(buf), 1, &a, &na) || vc_tokenizer_encode(w->t, buf, strlen(buf), 1, &b, &nb) ||
                na != nb || memcmp(a, b, na * sizeof *a)) w->bad++;
            free(a); free(b);
        }
    return NULL;
}

static void threads(const vc_tokenizer *t) {
    pthread_t th[4];
    thr w[4] = {{t, 0}, {t, 0}, {t, 0}, {t, 0}};
    for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, worker, &w[i]);
    for (int i = 0; i < 4; i++) { pthread_join(th[i], NULL); CHECK(w[i].bad == 0); }
}

int main(void) {
    vc_tokenizer *q = load("qwen3"), *l3 = load("llama3"), *l2 = load("llama2"), *ds = load("deepseek_v3");
    if (!q || !l3 || !l2 || !ds) return vc_test_done();
    /* sizes and ids checked against tokenizers' get_vocab_size(with_added_tokens=True) and the configs */
    CHECK(vc_tokenizer_vocab_size(q) == 151669);
    CHECK(vc_tokenizer_vocab_size(l3) == 128256);
    CHECK(vc_tokenizer_vocab_size(l2) == 32000);
    CHECK(vc_tokenizer_vocab_size(ds) == 128815);
    CHECK(vc_tokenizer_bos_id(q) == -1 && vc_tokenizer_eos_id(q) == 151645 && vc_tokenizer_pad_id(q) == 151643);
    CHECK(vc_tokenizer_bos_id(l3) == 128000 && vc_tokenizer_eos_id(l3) == 128001 && vc_tokenizer_pad_id(l3) == -1);
    CHECK(vc_tokenizer_bos_id(l2) == 1 && vc_tokenizer_eos_id(l2) == 2 && vc_tokenizer_unk_id(l2) == 0);
    CHECK(vc_tokenizer_bos_id(ds) == 0 && vc_tokenizer_eos_id(ds) == 1 && vc_tokenizer_pad_id(ds) == 1);
    CHECK(vc_tokenizer_token_to_id(q, "<|im_start|>") == 151644);
    CHECK(vc_tokenizer_token_to_id(q, "Hello") == 9707);
    CHECK(vc_tokenizer_token_to_id(q, "no such token at all") == -1);
    CHECK(vc_tokenizer_id_to_token(q, 151645) && !strcmp(vc_tokenizer_id_to_token(q, 151645), "<|im_end|>"));
    CHECK(vc_tokenizer_id_to_token(q, -1) == NULL && vc_tokenizer_id_to_token(q, 10000000) == NULL);
    CHECK(vc_tokenizer_is_special(q, 151645) && !vc_tokenizer_is_special(q, 9707));

    /* skip_special_tokens drops special added tokens only */
    const char *chat = "<|im_start|>user\nHi<|im_end|>";
    int32_t *ids = NULL; size_t k = 0; char *s = NULL; size_t sl = 0;
    CHECK_OK(vc_tokenizer_encode(q, chat, strlen(chat), 0, &ids, &k));
    CHECK_OK(vc_tokenizer_decode(q, ids, k, 1, &s, &sl));
    CHECK(s && !strcmp(s, "user\nHi"));
    free(ids); free(s);
    /* out-of-range ids are skipped, as tokenizers does */
    int32_t odd[3] = {9707, 99999999, -5};
    CHECK_OK(vc_tokenizer_decode(q, odd, 3, 0, &s, &sl));
    CHECK(s && !strcmp(s, "Hello"));
    free(s);

    roundtrip(q, "qwen3", 1); roundtrip(l3, "llama3", 0); roundtrip(ds, "deepseek_v3", 0);
    invalid_utf8(q); invalid_utf8(l3);
    spm_invalid_utf8();
    threads(q); threads(l2);
    vc_tokenizer_free(q); vc_tokenizer_free(l3); vc_tokenizer_free(l2); vc_tokenizer_free(ds);
    return vc_test_done();
}
