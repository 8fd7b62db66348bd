/* Corrupt safetensors files and indexes: each fails with the right status and a message naming the file
 * and the tensor, without crashing or leaking. */
#include "io_helpers.h"
#include "vc_test.h"
#include "verlc/safetensors.h"

static char *T; /* temp folder */

/* Expects opening `path` to fail with `want`, and the message to contain every non-NULL needle. */
static void expect_fail(const char *path, vc_status want, const char *n1, const char *n2) {
    vc_checkpoint *ck = (vc_checkpoint *)1;
    vc_status st = vc_ckpt_open(path, &ck);
    const char *msg = vc_last_error();
    CHECK_MSG(st == want, "%s: got %s want %s (%s)", path, vc_status_name(st), vc_status_name(want), msg);
    CHECK(ck == NULL);
    CHECK_MSG(!n1 || strstr(msg, n1), "message '%s' lacks '%s'", msg, n1);
    CHECK_MSG(!n2 || strstr(msg, n2), "message '%s' lacks '%s'", msg, n2);
    if (st == VC_OK) vc_ckpt_close(ck);
}

/* Writes header+data to T/name and expects the open to fail. */
static void bad_file(const char *name, const char *header, size_t ndata, vc_status want, const char *needle) {
    char *p = join2(T, name);
    CHECK(write_st(p, header, ndata) == 0);
    expect_fail(p, want, p, needle);
    free(p);
}

static void good_file(const char *name, const char *header, size_t ndata, int count) {
    char *p = join2(T, name);
    CHECK(write_st(p, header, ndata) == 0);
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(p, &ck));
    CHECK(vc_ckpt_count(ck) == count);
    vc_ckpt_close(ck);
    free(p);
}

static void test_headers(void) {
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    good_file("ok.safetensors", ok, 8, 1);
    /* unaligned data start, trailing spaces, metadata */
    good_file("odd.safetensors", "{\"__metadata__\":{\"k\":\"v\"},\"b\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]},"
              "\"a\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[3,5]}}   ", 5, 2);
    good_file("empty.safetensors", "{}", 0, 0);
    good_file("zero.safetensors", "{\"z\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[0,0]},"
              "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, 2);
    /* file shorter than the 8-byte length */
    char *p = join2(T, "tiny.safetensors");
    CHECK(write_bytes(p, "\x02\0\0", 3) == 0);
    expect_fail(p, VC_ERR_FORMAT, p, "too small");
    free(p);
    /* header length past EOF, and over the limit */
    p = join2(T, "hlen.safetensors");
    CHECK(write_st_raw(p, ok, 4096, 8) == 0);
    expect_fail(p, VC_ERR_FORMAT, p, "past the end");
    CHECK(write_st_raw(p, ok, 200000000ull, 8) == 0);
    expect_fail(p, VC_ERR_FORMAT, p, "limit");
    free(p);
    /* truncated file: data section shorter than the offsets */
    bad_file("trunc.safetensors", ok, 5, VC_ERR_FORMAT, "'a'");
    /* extra bytes after the last tensor */
    bad_file("extra.safetensors", ok, 12, VC_ERR_FORMAT, "cover 8 of the 12");
    bad_file("json.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]", 8, VC_ERR_FORMAT, "byte");
    bad_file("json2.safetensors", "{\"a\": nope}", 0, VC_ERR_FORMAT, "JSON syntax error at byte 6");
    bad_file("start.safetensors", "[1,2]", 0, VC_ERR_FORMAT, "'{'");
    bad_file("entry.safetensors", "{\"a\":[1]}", 0, VC_ERR_FORMAT, "'a'");
    bad_file("nodtype.safetensors", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, VC_ERR_FORMAT, "'a': missing 'dtype'");
    bad_file("noshape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, VC_ERR_FORMAT, "missing 'shape'");
    bad_file("nooff.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, VC_ERR_FORMAT, "missing 'data_offsets'");
    bad_file("dtype.safetensors", "{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1, VC_ERR_UNSUPPORTED, "'a': unknown or unsupported dtype 'F4'");
    bad_file("dtype2.safetensors", "{\"a\":{\"dtype\":\"float32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, VC_ERR_UNSUPPORTED, "'float32'");
    bad_file("negshape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, VC_ERR_FORMAT, "'a': shape[0]");
    bad_file("fracshape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, VC_ERR_FORMAT, "'a'");
    bad_file("dims.safetensors", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, VC_ERR_UNSUPPORTED, "'a'");
    bad_file("offrange.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 8, VC_ERR_FORMAT, "'a': data_offsets [4, 12] out of range");
    bad_file("offneg.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, VC_ERR_FORMAT, "'a'");
    bad_file("off3.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", 8, VC_ERR_FORMAT, "'a'");
    bad_file("order.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, VC_ERR_FORMAT, "'a': data_offsets [8, 0] begin after end");
    bad_file("bytes.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, VC_ERR_SHAPE, "'a': 8 bytes");
    bad_file("huge.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8, VC_ERR_SHAPE, "'a'");
    bad_file("overlap.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, VC_ERR_FORMAT, "'b': data_offsets [4, 12] overlap tensor 'a'");
    bad_file("same.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, VC_ERR_FORMAT, "overlap");
    bad_file("gap.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, VC_ERR_FORMAT, "'b': gap of 4 bytes");
    bad_file("dupname.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, VC_ERR_FORMAT, "'a' appears twice");
    bad_file("meta.safetensors", "{\"__metadata__\":{\"n\":3}}", 0, VC_ERR_FORMAT, "'n'");
    bad_file("meta2.safetensors", "{\"__metadata__\":[1]}", 0, VC_ERR_FORMAT, "__metadata__");
    p = join2(T, "missing.safetensors");
    expect_fail(p, VC_ERR_IO, p, NULL);
    free(p);
}

static void write_shard(const char *dir, const char *name, const char *tensor, size_t n) {
    char h[256], *p = join2(dir, name);
    snprintf(h, sizeof h, "{\"%s\":{\"dtype\":\"U8\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", tensor, n, n);
    CHECK(write_st(p, h, n) == 0);
    free(p);
}

static void write_index(const char *dir, const char *json) {
    char *p = join2(dir, "model.safetensors.index.json");
    CHECK(write_bytes(p, json, strlen(json)) == 0);
    free(p);
}

static void test_index(void) {
    char *d = join2(T, "sharded");
    mkdir(d, 0755);
    write_shard(d, "s1.safetensors", "x", 3);
    write_shard(d, "s2.safetensors", "y", 5);
    write_index(d, "{\"metadata\":{\"total_size\":8},\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\"}}");
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(d, &ck));
    CHECK(vc_ckpt_count(ck) == 2 && vc_ckpt_file_count(ck) == 2);
    CHECK(vc_ckpt_find(ck, "y") && vc_ckpt_find(ck, "y")->nbytes == 5);
    vc_ckpt_close(ck);
    /* shard missing */
    write_index(d, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s3.safetensors\"}}");
    expect_fail(d, VC_ERR_IO, "s3.safetensors", "model.safetensors.index.json");
    /* tensor absent from its shard */
    write_index(d, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\",\"z\":\"s2.safetensors\"}}");
    expect_fail(d, VC_ERR_MISSING, "'z'", "s2.safetensors");
    /* tensor found in another shard than mapped */
    write_index(d, "{\"weight_map\":{\"x\":\"s2.safetensors\",\"y\":\"s2.safetensors\",\"q\":\"s1.safetensors\"}}");
    expect_fail(d, VC_ERR_FORMAT, "'x'", "s1.safetensors");
    /* shard tensor not listed */
    char *s4 = join2(d, "s4.safetensors");
    CHECK(write_st(s4, "{\"v\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                       "\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2) == 0);
    write_index(d, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"v\":\"s4.safetensors\"}}");
    expect_fail(d, VC_ERR_FORMAT, "tensor 'u' of", "not listed");
    free(s4);
    /* duplicate tensor across shards */
    write_shard(d, "s3.safetensors", "x", 2);
    write_index(d, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\",\"w\":\"s3.safetensors\"}}");
    expect_fail(d, VC_ERR_FORMAT, "'x' appears twice", "s3.safetensors");
    /* a corrupt shard is reported with its own path */
    char *s2 = join2(d, "s2.safetensors");
    CHECK(write_st(s2, "{\"y\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[0,5]}}", 2) == 0);
    write_index(d, "{\"weight_map\":{\"x\":\"s1.safetensors\",\"y\":\"s2.safetensors\"}}");
    expect_fail(d, VC_ERR_FORMAT, s2, "'y'");
    free(s2);
    /* malformed indexes */
    write_index(d, "{\"weight_map\":{\"x\":\"s1.safetensors\",}");
    expect_fail(d, VC_ERR_FORMAT, "model.safetensors.index.json", "byte");
    write_index(d, "{\"metadata\":{}}");
    expect_fail(d, VC_ERR_MISSING, "weight_map", NULL);
    write_index(d, "{\"weight_map\":{\"x\":3}}");
    expect_fail(d, VC_ERR_FORMAT, "'x'", NULL);
    write_index(d, "{\"weight_map\":{\"x\":\"../s1.safetensors\"}}");
    expect_fail(d, VC_ERR_FORMAT, "'x'", NULL);
    write_index(d, "{\"weight_map\":{}}");
    expect_fail(d, VC_ERR_FORMAT, "weight_map", NULL);
    free(d);
    /* folder without any checkpoint */
    d = join2(T, "emptydir");
    mkdir(d, 0755);
    expect_fail(d, VC_ERR_IO, d, "model.safetensors");
    free(d);
}

int main(void) {
    T = tmp_dir();
    CHECK(T != NULL);
    test_headers();
    test_index();
    rm_tree(T);
    free(T);
    return vc_test_done();
}
