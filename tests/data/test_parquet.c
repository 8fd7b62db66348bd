/* Parquet datasets (vc_jsonl_read on a file with the PAR1 magic) against the rows pyarrow reads back
 * (tests/fixtures/parquet, made by tools/fixtures/make_parquet.py): verl's GSM8K layout with snappy,
 * zstd, gzip and no compression, dictionary and plain values, data pages v1 and v2, several row groups
 * and pages; every type the reader maps (nulls, nested lists, maps, structs, decimals, dates,
 * timestamps, binary); the older list layout; the DELTA_* and BYTE_STREAM_SPLIT encodings with LZ4_RAW
 * and Brotli pages; a non-parquet and an encrypted file refused by name; truncated and
 * byte-flipped files fail with a message (under the sanitizers: without touching memory outside them). */
#include "cli_util.h"
#include "verlc/data.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>

#define DIR "tests/fixtures/parquet/"

static unsigned char *slurp(const char *path, size_t *n);

static vc_jsonl *read_ok(const char *path) {
    vc_jsonl *d = NULL;
    CHECK_OK(vc_jsonl_read(path, VC_JSONL_STRICT, &d));
    return d;
}

/* every row of the parquet file equals the expected JSONL row (numbers within a relative 1e-15) */
static void compare(const char *pq_name, const char *jsonl_name) {
    char a[256], b[256];
    snprintf(a, sizeof a, DIR "%s", pq_name);
    snprintf(b, sizeof b, DIR "%s", jsonl_name);
    vc_jsonl *got = read_ok(a), *want = NULL;
    CHECK_OK(vc_jsonl_read(b, VC_JSONL_STRICT, &want));
    if (!got || !want) goto out;
    CHECK_MSG(got->n_rows == want->n_rows, "%s: %zu rows, want %zu", a, got->n_rows, want->n_rows);
    size_t bad = 0;
    for (size_t i = 0; i < got->n_rows && i < want->n_rows; i++) {
        if (cJSON_Compare(got->rows[i], want->rows[i], 1)) continue;
        if (bad++ < 3) {
            char *x = cJSON_PrintUnformatted(got->rows[i]), *y = cJSON_PrintUnformatted(want->rows[i]);
            fprintf(stderr, "%s row %zu:\n  got  %.600s\n  want %.600s\n", a, i + 1, x, y);
            free(x);
            free(y);
        }
        CHECK_MSG(got->lines[i] == (int64_t)i + 1, "row number %lld", (long long)got->lines[i]);
    }
    CHECK_MSG(bad == 0, "%s: %zu of %zu rows differ", a, bad, got->n_rows);
    printf("%s: %zu rows equal to pyarrow's\n", pq_name, got->n_rows);
out:
    vc_jsonl_free(got);
    vc_jsonl_free(want);
}

static void test_verl_rows(void) {
    vc_jsonl *d = read_ok(DIR "gsm8k_snappy.parquet");
    if (!d) return;
    CHECK_OK(vc_verl_check(d, 1));
    vc_verl_row r;
    CHECK_OK(vc_verl_row_get(d, 3, &r));
    CHECK(!strcmp(r.data_source, "openai/gsm8k") && r.n_prompt == 1 && !strcmp(r.prompt[0].role, "user"));
    CHECK(r.ground_truth && strlen(r.ground_truth) > 0 && r.line == 4);
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(r.extra_info, "index");
    CHECK(cJSON_IsNumber(idx) && idx->valuedouble == 3);
    vc_verl_row_clear(&r);
    vc_jsonl_free(d);
}

/* GSM8K conversion from Hugging Face's parquet: the same verl rows as from the JSONL of the same rows */
static void test_gsm8k_convert(void) {
    char raw[1024], a[64], b[64], c[64];
    snprintf(raw, sizeof raw, "%s/data/gsm8k/train.jsonl", vc_test_shared());
    snprintf(a, sizeof a, "/tmp/verlc_pqg_%d_a.jsonl", (int)getpid());
    snprintf(b, sizeof b, "/tmp/verlc_pqg_%d_b.jsonl", (int)getpid());
    snprintf(c, sizeof c, "/tmp/verlc_pqg_%d_c.jsonl", (int)getpid());
    size_t n1 = 0, n2 = 0, na = 0, nb = 0;
    /* the first 40 raw rows as JSONL */
    FILE *in = fopen(raw, "r"), *out = fopen(c, "w");
    char line[65536];
    for (int i = 0; in && out && i < 40 && fgets(line, sizeof line, in); i++) fputs(line, out);
    if (in) fclose(in);
    if (out) fclose(out);
    CHECK_OK(vc_gsm8k_convert(DIR "gsm8k_raw.parquet", a, "train", &n1));
    CHECK_OK(vc_gsm8k_convert(c, b, "train", &n2));
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    CHECK_MSG(n1 == 40 && n2 == 40 && x && y && na == nb && na > 0 && !memcmp(x, y, na),
              "gsm8k from parquet: %zu rows, %zu bytes; from jsonl: %zu rows, %zu bytes", n1, na, n2, nb);
    free(x);
    free(y);
    unlink(a);
    unlink(b);
    unlink(c);
}

/* `verlc data jsonl`: the rows verlc reads, written as JSONL, read back equal */
static void test_cli(void) {
    char out[64];
    snprintf(out, sizeof out, "/tmp/verlc_pqcli_%d.jsonl", (int)getpid());
    CHECK(cli_sh("%s data jsonl --input " DIR "gsm8k_pages.parquet --out %s > /dev/null", cli_bin(), out) == 0);
    vc_jsonl *a = NULL, *b = NULL;
    CHECK_OK(vc_jsonl_read(out, VC_JSONL_STRICT, &a));
    CHECK_OK(vc_jsonl_read(DIR "gsm8k.jsonl", VC_JSONL_STRICT, &b));
    int same = a && b && a->n_rows == b->n_rows;
    for (size_t i = 0; same && i < a->n_rows; i++) same = cJSON_Compare(a->rows[i], b->rows[i], 1);
    CHECK_MSG(same, "verlc data jsonl: rows differ from pyarrow's");
    vc_jsonl_free(a);
    vc_jsonl_free(b);
    unlink(out);
    cli_quiet = 1;
    CHECK(cli_sh("%s data jsonl --input " DIR "types.jsonl.missing --out %s 2> /dev/null", cli_bin(), out) == 1);
    cli_quiet = 0;
}

static void expect_fail(const char *path, const char *needle) {
    vc_jsonl *d = NULL;
    vc_status st = vc_jsonl_read(path, VC_JSONL_STRICT, &d);
    const char *e = vc_last_error();
    CHECK_MSG(st != VC_OK && !d && e && strstr(e, needle) && strstr(e, path), "%s: status %d, '%s' (want '%s')", path,
              st, e ? e : "", needle);
    vc_jsonl_free(d);
}

static int write_bytes(const char *path, const unsigned char *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len);
    *n = p && fread(p, 1, (size_t)len, f) == (size_t)len ? (size_t)len : 0;
    fclose(f);
    return p;
}

static void test_refused(void) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/verlc_pq_%d.parquet", (int)getpid());
    const unsigned char junk[] = "PAR1 not really a parquet file";
    CHECK(write_bytes(tmp, junk, sizeof junk - 1));
    expect_fail(tmp, "not a parquet file");
    const unsigned char enc[] = "PAR1 an encrypted footer PARE";
    CHECK(write_bytes(tmp, enc, sizeof enc - 1));
    expect_fail(tmp, "encrypted parquet files are not read");
    size_t n = 0;
    unsigned char *p = slurp(DIR "types.parquet", &n);
    if (p && n > 100) { /* footer length beyond the file */
        unsigned char q[4] = { 0xff, 0xff, 0xff, 0x7f };
        memcpy(p + n - 8, q, 4);
        CHECK(write_bytes(tmp, p, n));
        expect_fail(tmp, "footer length");
    }
    free(p);
    unlink(tmp);
}

/* truncations and byte flips: each read ends (rows or one error), nothing crashes */
static void test_corrupt(void) {
    const char *srcs[] = { DIR "gsm8k_snappy.parquet", DIR "types.parquet", DIR "gsm8k_plain.parquet",
                           DIR "types_v2.parquet", DIR "encodings.parquet", DIR "encodings_v2.parquet" };
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/verlc_pqc_%d.parquet", (int)getpid());
    int fails = 0, oks = 0;
    for (size_t s = 0; s < sizeof srcs / sizeof srcs[0]; s++) {
        size_t n = 0;
        unsigned char *p = slurp(srcs[s], &n);
        CHECK(p && n > 64);
        if (!p) continue;
        uint64_t x = 0x9e3779b97f4a7c15ull * (s + 1);
        for (int k = 0; k < 120; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            unsigned char *q = malloc(n);
            memcpy(q, p, n);
            size_t len = n;
            if (k % 3 == 0) len = 4 + x % (n - 4); /* truncated */
            else {                                  /* 1-4 bytes changed, mostly in the footer and pages */
                for (int j = 0; j < 1 + k % 4; j++) q[(x >> (8 * j)) % n] ^= (unsigned char)(1u << (j + k) % 8);
            }
            if (!write_bytes(tmp, q, len)) break;
            vc_jsonl *d = NULL;
            vc_status st = vc_jsonl_read(tmp, VC_JSONL_STRICT, &d);
            if (st) {
                fails++;
                const char *e = vc_last_error();
                CHECK_MSG(e && strstr(e, tmp), "error without the file name: %s", e ? e : "(none)");
            } else oks++;
            vc_jsonl_free(d);
            free(q);
        }
        free(p);
    }
    unlink(tmp);
    printf("corrupted files: %d refused with a message, %d read (changes inside values)\n", fails, oks);
    CHECK(fails > 100);
}

/* found by tools/fuzz/diff_parquet.py: a table of no rows with dictionary-encoded columns (a data page offset of 0)
 * reads as no rows; 64-bit integers keep their digits past 2^53 and a UINT64's past 2^63, as written back out */
static void test_edges(void) {
    vc_jsonl *d = read_ok(DIR "empty_dict.parquet");
    CHECK(d && d->n_rows == 0);
    vc_jsonl_free(d);
    d = read_ok(DIR "big_ints.parquet");
    static const char *const want[] = { "{\"u\":18446744073709551615,\"i\":-9223372036854775808}",
        "{\"u\":9223372036854775808,\"i\":9223372036854775807}", "{\"u\":9007199254740993,\"i\":-9007199254740993}",
        "{\"u\":0,\"i\":7}" };
    for (size_t i = 0; d && i < 4; i++) {
        char *s = i < d->n_rows ? vc_json_print(d->rows[i], 0) : NULL;
        CHECK_MSG(s && !strcmp(s, want[i]), "big_ints row %zu: %s, want %s", i + 1, s ? s : "(none)", want[i]);
        free(s);
    }
    vc_jsonl_free(d);
}

int main(void) {
    test_edges();
    compare("gsm8k_snappy.parquet", "gsm8k.jsonl");
    compare("gsm8k_zstd.parquet", "gsm8k.jsonl");
    compare("gsm8k_gzip.parquet", "gsm8k.jsonl");
    compare("gsm8k_plain.parquet", "gsm8k.jsonl");
    compare("gsm8k_pages.parquet", "gsm8k.jsonl");
    compare("types.parquet", "types.jsonl");
    compare("types_v2.parquet", "types.jsonl");
    compare("legacy.parquet", "legacy.jsonl");
    compare("encodings.parquet", "encodings.jsonl");
    compare("encodings_v2.parquet", "encodings.jsonl");
    test_verl_rows();
    test_gsm8k_convert();
    test_cli();
    test_refused();
    test_corrupt();
    return vc_test_done();
}
