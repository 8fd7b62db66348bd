/* Parquet writing (vc_parquet_write) read back by verlc's reader: nested lists and structs, nulls at every level,
 * empty lists, keys missing from some rows, a key repeated in a row (its last value), bools past a byte, ints and
 * floats, unicode; pages and row groups cut small so that rows span several of each; every Parquet fixture's rows written and read back the same (a missing
 * key reading as null; ints past 2^63 - 1 as uint64; a Hugging Face datasets file's image bytes binary again); no rows
 * at all. Refused with the row and key named and no file
 * left: a key holding a string in one row and a number in another, an int past 64 bits, ints below 0 and past 2^63 - 1
 * in one column, an int past 2^53 among floats, an object without fields in every row. (pyarrow reads these files as verlc does: tools/fixtures/check_parquet_write.py.) */
#include "cli_util.h"
#include "verlc/data.h"
#include "verlc/json.h"
#include "../../src/data/parquet.h"
#include "../../src/data/parquet_w.h"
#include <cjson/cJSON.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* rows written to dir/name and read back equal, rows for rows */
static void round_trip(const char *name, vc_jsonl *in) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK_OK(vc_parquet_write(p, in->rows, in->n_rows));
    vc_jsonl *back = NULL;
    CHECK_OK(vc_jsonl_read(p, VC_JSONL_STRICT, &back));
    if (!back) return;
    CHECK_MSG(back->n_rows == in->n_rows, "%s: %zu rows back of %zu", name, back->n_rows, in->n_rows);
    size_t bad = 0;
    for (size_t i = 0; i < back->n_rows && i < in->n_rows; i++)
        if (!pw_same(in->rows[i], back->rows[i]) && bad++ < 2) {
            char *x = vc_json_print(in->rows[i], 0), *y = vc_json_print(back->rows[i], 0);
            fprintf(stderr, "%s row %zu:\n  wrote %.500s\n  read  %.500s\n", name, i + 1, x, y);
            free(x);
            free(y);
        }
    CHECK_MSG(bad == 0, "%s: %zu rows differ", name, bad);
    vc_jsonl_free(back);
}

static vc_jsonl *parse(const char *text) {
    vc_jsonl *d = NULL;
    CHECK_OK(vc_jsonl_parse("rows", text, strlen(text), VC_JSONL_STRICT, &d));
    return d;
}

static void nested(void) {
    vc_jsonl *d = parse(
        "{\"a\": 1, \"b\": \"x\", \"c\": [1, 2, 3], \"d\": {\"e\": true, \"f\": null}, \"g\": [{\"h\": \"p\", \"i\": 1.5}], "
        "\"n\": null, \"el\": []}\n"
        "{\"a\": 2.5, \"b\": null, \"c\": [], \"d\": null, \"g\": [], \"el\": [], \"u\": \"\\u00fcn\\u00efc\\u00f8d\\u00e9 "
        "\\ud83d\\ude00\"}\n"
        "{\"a\": -7, \"c\": null, \"d\": {\"f\": [1, null, 2]}, \"g\": [null, {\"h\": null, \"i\": 2}], "
        "\"nested\": [[1, 2], [], null, [3]], \"big\": 9007199254740993}\n"
        "{\"b\": \"\", \"c\": [null], \"d\": {\"e\": false, \"f\": []}, \"g\": null, \"t\": 3.0, \"big\": -9223372036854775808}\n"
        "{\"flags\": [true, false, true, true, false, false, true, false, true, null, false], \"deep\": "
        "{\"x\": {\"y\": [{\"z\": [\"a\", null]}, {\"z\": []}, {}]}}}\n");
    if (!d) return;
    round_trip("nested.parquet", d);
    /* the ints and floats of "a" read back as floats (one double column, as pyarrow infers it) */
    char p[128];
    snprintf(p, sizeof p, "%s/nested.parquet", dir);
    vc_jsonl *back = NULL;
    CHECK_OK(vc_jsonl_read(p, VC_JSONL_STRICT, &back));
    if (back) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(back->rows[0], "a");
        const cJSON *big = cJSON_GetObjectItemCaseSensitive(back->rows[2], "big");
        CHECK(a && vc_json_number_is_float(a) && a->valuedouble == 1.0);
        CHECK_MSG(big && big->valuestring && !strcmp(big->valuestring, "9007199254740993"), "%s",
                  big && big->valuestring ? big->valuestring : "?");
        vc_jsonl_free(back);
    }
    vc_jsonl_free(d);
}

/* 3,000 rows of about 1 KB each through pages of 4 KiB and row groups of 256 KiB */
static void many_pages(void) {
    cJSON **rows = calloc(3000, sizeof *rows);
    char text[1100];
    for (int i = 0; i < 3000; i++) {
        for (int k = 0; k < 1000; k++) text[k] = (char)('a' + (i * 7 + k) % 26);
        text[1000 + i % 50] = 0;
        for (int k = 1000; k < 1000 + i % 50; k++) text[k] = 'z';
        rows[i] = cJSON_CreateObject();
        cJSON_AddNumberToObject(rows[i], "i", i);
        if (i % 3) cJSON_AddStringToObject(rows[i], "s", text);
        cJSON *l = cJSON_AddArrayToObject(rows[i], "l");
        for (int k = 0; k < i % 5; k++) cJSON_AddItemToArray(l, cJSON_CreateBool((i + k) % 2));
    }
    pw_set_limits(4096, 256 << 10);
    vc_jsonl in = { .path = "many", .n_rows = 3000, .rows = rows };
    round_trip("many.parquet", &in);
    pw_set_limits(0, 0);
    for (int i = 0; i < 3000; i++) cJSON_Delete(rows[i]);
    free(rows);
}

/* the image bytes of a Hugging Face datasets file (read as data URIs) written back as binary: no UTF-8 annotation on
 * the images' bytes column, and the file about as large as the original (base64 text would be a third larger) */
static void binary_again(void) {
    char p[128];
    snprintf(p, sizeof p, "%s/rt_hf.parquet", dir);
    size_t n = 0, n0 = 0;
    char *data = NULL, *orig = NULL;
    CHECK_OK(vc_read_file(p, &data, &n));
    CHECK_OK(vc_read_file("tests/fixtures/vision/dataset/rows_hf.parquet", &orig, &n0));
    pq_file f = { .path = p, .data = (const uint8_t *)data, .size = n };
    CHECK(data && orig && pq_meta_read(&f) == VC_OK);
    int found = 0;
    for (int l = 0; data && l < f.n_leaves; l++) {
        char name[400];
        const pq_node *nd = &f.nodes[f.leaf_node[l]];
        if (!strcmp(pq_leaf_name(&f, l, name, sizeof name), "images.list.element.bytes"))
            found = nd->type == PQ_BYTE_ARRAY && nd->converted != 0 && nd->logical != 1;
    }
    CHECK_MSG(found, "the images' bytes were not written as binary");
    CHECK_MSG(n < n0 + n0 / 8, "%zu bytes written for %zu read", n, n0);
    pq_meta_free(&f);
    free(data);
    free(orig);
}

/* every reader fixture's rows (JSON as verlc reads them) written and read back */
static void fixtures(void) {
    const char *names[] = { "gsm8k_snappy", "gsm8k_pages", "legacy", "types", "types_v2", "encodings", "empty_dict",
                            "big_ints" /* (past 2^63: uint64, as pandas' to_parquet writes them) */,
                            "../vision/dataset/rows_hf" /* (image bytes: binary again) */ };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char p[128], o[64];
        snprintf(p, sizeof p, "tests/fixtures/parquet/%s.parquet", names[i]);
        if (strchr(names[i], '/')) snprintf(o, sizeof o, "rt_hf.parquet");
        else snprintf(o, sizeof o, "rt_%s.parquet", names[i]);
        vc_jsonl *d = NULL;
        CHECK_OK(vc_jsonl_read(p, VC_JSONL_STRICT, &d));
        if (d) round_trip(o, d);
        vc_jsonl_free(d);
    }
}

static void refused(const char *rows, const char *want) {
    char p[128];
    snprintf(p, sizeof p, "%s/bad.parquet", dir);
    vc_jsonl *d = parse(rows);
    if (!d) return;
    vc_status st = vc_parquet_write(p, d->rows, d->n_rows);
    CHECK_MSG(st != VC_OK && strstr(vc_last_error(), want), "want '%s', got '%s'", want, st ? vc_last_error() : "success");
    CHECK_MSG(access(p, F_OK) != 0, "%s written after a failure", p);
    vc_jsonl_free(d);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/vc_pq_writeXXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    nested();
    many_pages();
    fixtures();
    binary_again();
    /* a key repeated in a row (a Parquet file's columns may share a name): its last value, as json.loads keeps it */
    cJSON *dup = cJSON_CreateObject();
    cJSON_AddNumberToObject(dup, "a", 1);
    cJSON_AddStringToObject(dup, "b", "x");
    cJSON_AddNumberToObject(dup, "a", 2);
    vc_jsonl one = { .path = "dup", .n_rows = 1, .rows = &dup };
    round_trip("dup.parquet", &one);
    cJSON_Delete(dup);
    vc_jsonl empty = { .path = "none" };
    round_trip("empty.parquet", &empty);
    refused("{\"a\": {\"b\": [1]}}\n{\"a\": {\"b\": [\"x\"]}}\n",
            "row 2: key 'a.b[]' holds a string where earlier rows hold a int");
    refused("{\"a\": 1}\n{\"a\": [1]}\n", "row 2: key 'a' holds a list where earlier rows hold a int");
    refused("{\"a\": 18446744073709551616}\n", "row 1: key 'a': an int past 64 bits");
    refused("{\"a\": -1}\n{\"a\": 18446744073709551615}\n", "row 2: key 'a' holds ints below 0 and past 2^63 - 1");
    refused("{\"a\": 0.5}\n{\"a\": 18446744073709551615}\n", "row 2: column 'a' holds floats and the int 18446744073709551615");
    refused("{\"a\": 0.5}\n{\"a\": 9007199254740993}\n", "row 2: column 'a' holds floats and the int 9007199254740993");
    refused("{\"a\": 1, \"e\": {}}\n{\"e\": null}\n", "key 'e' is an empty object in every row");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    return vc_test_done();
}
