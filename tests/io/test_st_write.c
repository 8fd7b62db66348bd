/* safetensors writer: every dtype, scalars and empty tensors, escaped names and metadata, header padding and
 * alignment, sharding with an index, atomic replacement and argument errors. */
#include "io_helpers.h"
#include <dirent.h>
#include <sys/stat.h>
#include "vc_test.h"
#include "verlc/json.h"
#include "verlc/safetensors.h"

static char *T;

static void test_all_dtypes(void) {
    vc_st_writer *w = NULL;
    CHECK_OK(vc_st_writer_new(&w));
    unsigned char buf[VC_DTYPE_COUNT][48];
    for (int d = 0; d < VC_DTYPE_COUNT; d++) {
        for (int i = 0; i < 48; i++) buf[d][i] = (unsigned char)(d * 31 + i * 13);
        char name[32];
        snprintf(name, sizeof name, "t.%s", vc_dtype_name((vc_dtype)d));
        int64_t shape[2] = { 2, (int64_t)(24 / vc_dtype_size((vc_dtype)d)) };
        CHECK_OK(vc_st_writer_add(w, name, (vc_dtype)d, 2, shape, buf[d], 1));
    }
    float scalar = 3.5f;
    CHECK_OK(vc_st_writer_add(w, "scalar", VC_F32, 0, NULL, &scalar, 0));
    int64_t zshape[3] = { 3, 0, 5 };
    CHECK_OK(vc_st_writer_add(w, "empty", VC_BF16, 3, zshape, NULL, 1));
    CHECK_OK(vc_st_writer_add(w, "we\"ird\\name\n\xc3\xa9", VC_U8, 1, (int64_t[]){ 1 }, "z", 1));
    CHECK_OK(vc_st_writer_set_metadata(w, "format", "pt"));
    CHECK_OK(vc_st_writer_set_metadata(w, "note", "quote \" backslash \\ tab \t unicode \xe2\x82\xac"));
    CHECK_OK(vc_st_writer_set_metadata(w, "format", "np")); /* replaces */
    CHECK(vc_st_writer_count(w) == VC_DTYPE_COUNT + 3);
    memset(buf[0], 0xEE, sizeof buf[0]); /* copies were taken */
    char *p = join2(T, "all.safetensors");
    CHECK_OK(vc_st_writer_write(w, p));
    vc_st_writer_free(w);

    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(p, &ck));
    CHECK(vc_ckpt_count(ck) == VC_DTYPE_COUNT + 3);
    for (int d = 0; ck && d < VC_DTYPE_COUNT; d++) {
        char name[32];
        snprintf(name, sizeof name, "t.%s", vc_dtype_name((vc_dtype)d));
        const vc_st_tensor *t = vc_ckpt_find(ck, name);
        unsigned char want[48];
        for (int i = 0; i < 48; i++) want[i] = (unsigned char)(d * 31 + i * 13);
        CHECK_MSG(t && t->dtype == (vc_dtype)d && t->nbytes == 48 && !memcmp(t->data, want, 48), "%s", name);
        CHECK(t && ((uintptr_t)t->data % vc_dtype_size(t->dtype)) == 0);
    }
    const vc_st_tensor *s = vc_ckpt_find(ck, "scalar");
    CHECK(s && s->ndim == 0 && s->nbytes == 4 && vc_st_tensor_numel(s) == 1);
    float sv = 0;
    if (s) vc_st_tensor_to_f32(s, &sv);
    CHECK(sv == 3.5f);
    const vc_st_tensor *e = vc_ckpt_find(ck, "empty");
    CHECK(e && e->ndim == 3 && e->shape[1] == 0 && e->nbytes == 0 && vc_st_tensor_numel(e) == 0);
    const vc_st_tensor *wn = vc_ckpt_find(ck, "we\"ird\\name\n\xc3\xa9");
    CHECK(wn && wn->nbytes == 1 && ((const char *)wn->data)[0] == 'z');
    CHECK(vc_ckpt_metadata(ck, "format") && !strcmp(vc_ckpt_metadata(ck, "format"), "np"));
    CHECK(vc_ckpt_metadata(ck, "note") &&
          !strcmp(vc_ckpt_metadata(ck, "note"), "quote \" backslash \\ tab \t unicode \xe2\x82\xac"));
    CHECK(vc_ckpt_metadata(ck, "absent") == NULL);
    CHECK(vc_ckpt_metadata_count(ck) == 2);
    vc_ckpt_close(ck);

    /* header layout: length is a multiple of 8, header is valid JSON with integer offsets */
    char *raw = NULL;
    size_t len = 0;
    CHECK_OK(vc_read_file(p, &raw, &len));
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | (unsigned char)raw[i];
    CHECK(hl % 8 == 0 && 8 + hl <= len);
    CHECK(raw[8] == '{' && strstr(raw + 8, "\"__metadata__\":{"));
    CHECK(strstr(raw + 8, "e+") == NULL);
    free(raw);
    free(p);
}

static void test_reference_and_replace(void) {
    /* copy = 0 references the caller's buffer until the write */
    float a[4] = { 1, 2, 3, 4 };
    vc_st_writer *w = NULL;
    CHECK_OK(vc_st_writer_new(&w));
    CHECK_OK(vc_st_writer_add(w, "a", VC_F32, 1, (int64_t[]){ 4 }, a, 0));
    a[3] = 40;
    char *p = join2(T, "ref.safetensors");
    CHECK_OK(vc_st_writer_write(w, p));
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(p, &ck));
    float got[4] = { 0 };
    if (ck) vc_st_tensor_to_f32(vc_ckpt_find(ck, "a"), got);
    CHECK(got[3] == 40.0f);
    /* writing again over a mapped file replaces it atomically; the old mapping stays readable */
    a[0] = -1;
    CHECK_OK(vc_st_writer_write(w, p));
    CHECK(ck && ((const float *)vc_ckpt_find(ck, "a")->data)[0] == 1.0f);
    vc_ckpt_close(ck);
    CHECK_OK(vc_ckpt_open(p, &ck));
    CHECK(ck && ((const float *)vc_ckpt_find(ck, "a")->data)[0] == -1.0f);
    vc_ckpt_close(ck);
    /* errors */
    CHECK(vc_st_writer_add(w, "", VC_F32, 1, (int64_t[]){ 1 }, a, 0) == VC_ERR_ARG);
    CHECK(vc_st_writer_add(w, "__metadata__", VC_F32, 1, (int64_t[]){ 1 }, a, 0) == VC_ERR_ARG);
    CHECK(vc_st_writer_add(w, "n", VC_F32, 1, (int64_t[]){ -1 }, a, 0) == VC_ERR_ARG);
    CHECK(vc_st_writer_add(w, "n", VC_F32, 9, (int64_t[]){ 1, 1, 1, 1, 1, 1, 1, 1, 1 }, a, 0) == VC_ERR_ARG);
    CHECK(vc_st_writer_add(w, "n", VC_F32, 1, (int64_t[]){ 2 }, NULL, 0) == VC_ERR_ARG);
    CHECK(vc_st_writer_add(w, "n", VC_DTYPE_COUNT, 1, (int64_t[]){ 2 }, a, 0) == VC_ERR_ARG);
    CHECK_OK(vc_st_writer_add(w, "a", VC_F32, 1, (int64_t[]){ 1 }, a, 1));
    CHECK(vc_st_writer_write(w, p) == VC_ERR_ARG && strstr(vc_last_error(), "'a' added twice"));
    vc_st_writer_free(w);
    char *bad = join2(T, "no/such/dir/x.safetensors");
    CHECK_OK(vc_st_writer_new(&w));
    CHECK(vc_st_writer_write(w, bad) == VC_ERR_IO && strstr(vc_last_error(), "no/such/dir"));
    vc_st_writer_free(w);
    free(bad);
    free(p);
}

static void test_shards(void) {
    vc_st_writer *w = NULL;
    CHECK_OK(vc_st_writer_new(&w));
    static int32_t data[10][100];
    for (int i = 0; i < 10; i++) {
        for (int j = 0; j < 100; j++) data[i][j] = i * 1000 + j;
        char name[32];
        snprintf(name, sizeof name, "layer.%d.w", i);
        CHECK_OK(vc_st_writer_add(w, name, VC_I32, 2, (int64_t[]){ 10, 10 }, data[i], 0));
    }
    CHECK_OK(vc_st_writer_set_metadata(w, "format", "pt"));
    char *d = join2(T, "sub/ckpt");
    CHECK_OK(vc_st_writer_write_dir(w, d, 1000)); /* 400-byte tensors, 2 per shard */
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(d, &ck));
    CHECK(vc_ckpt_file_count(ck) == 5 && vc_ckpt_count(ck) == 10);
    CHECK(ck && vc_ckpt_metadata(ck, "format") && !strcmp(vc_ckpt_metadata(ck, "format"), "pt"));
    const vc_st_tensor *t = ck ? vc_ckpt_find(ck, "layer.7.w") : NULL;
    CHECK(t && ((const int32_t *)t->data)[5] == 7005 && strstr(t->file, "-of-00005.safetensors"));
    vc_ckpt_close(ck);
    char *ip = join2(d, "model.safetensors.index.json");
    cJSON *idx = NULL;
    CHECK_OK(vc_json_load_file(ip, &idx));
    int64_t total = 0;
    CHECK_OK(vc_json_req_int(vc_json_member(idx, "metadata"), "total_size", &total, ip));
    CHECK(total == 4000);
    CHECK(cJSON_GetArraySize(vc_json_member(idx, "weight_map")) == 10);
    cJSON_Delete(idx);
    /* a tensor bigger than the shard limit gets a shard of its own */
    CHECK_OK(vc_st_writer_write_dir(w, d, 300));
    CHECK_OK(vc_ckpt_open(d, &ck));
    CHECK(vc_ckpt_file_count(ck) == 10);
    vc_ckpt_close(ck);
    /* unsharded rewrite removes the index; sharded rewrite removes model.safetensors */
    CHECK_OK(vc_st_writer_write_dir(w, d, 0));
    CHECK(!vc_file_exists(ip));
    CHECK_OK(vc_ckpt_open(d, &ck));
    CHECK(vc_ckpt_file_count(ck) == 1 && vc_ckpt_count(ck) == 10);
    vc_ckpt_close(ck);
    CHECK_OK(vc_st_writer_write_dir(w, d, 2000));
    char *mp = join2(d, "model.safetensors");
    CHECK(!vc_file_exists(mp) && vc_file_exists(ip));
    free(mp);
    free(ip);
    free(d);
    vc_st_writer_free(w);
}

/* lazy tensors: the bytes come from a fill function as the file is written, in order, in pieces of at most
 * VC_ST_FILL_PIECE bytes; a failing fill leaves the file that was there and no temp file */
#define HUGE_N ((int64_t)(VC_ST_FILL_PIECE / 4 + 5))
static int fills, in_order = 1;
static size_t biggest_piece;
static vc_status fill_ramp(void *ctx, int64_t index, size_t offset, void *dst, size_t nbytes) {
    static int64_t last_index = -1;
    static size_t next = 0;
    fills++;
    in_order &= index == last_index ? offset == next : offset == 0;
    last_index = index, next = offset + nbytes;
    if (nbytes > biggest_piece) biggest_piece = nbytes;
    if (ctx) return vc_fail(VC_ERR_IO, "fill of tensor %lld failed", (long long)index);
    float *f = dst;
    for (size_t i = 0; i < nbytes / 4; i++) f[i] = (float)(index * 1000 + (int64_t)(offset / 4 + i));
    return VC_OK;
}

static int count_entries(const char *dir) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void test_lazy(void) {
    char *dir = join2(T, "lazy"), *p = join2(dir, "l.safetensors");
    mkdir(dir, 0755);
    float b[3] = { 7, 8, 9 };
    int fail = 1;
    for (int round = 0; round < 2; round++) { /* 0: written; 1: a fill fails */
        vc_st_writer *w = NULL;
        CHECK_OK(vc_st_writer_new(&w));
        CHECK_OK(vc_st_writer_add_lazy(w, "big", VC_F32, 2, (int64_t[]){ 3, 5 }, fill_ramp, NULL, 4));
        CHECK_OK(vc_st_writer_add_lazy(w, "huge", VC_F32, 1, (int64_t[]){ HUGE_N }, fill_ramp, NULL, 2)); /* 2 pieces */
        CHECK_OK(vc_st_writer_add(w, "b", VC_F32, 1, (int64_t[]){ 3 }, b, 0));
        CHECK_OK(vc_st_writer_add_lazy(w, "small", VC_F32, 1, (int64_t[]){ 2 }, fill_ramp, round ? &fail : NULL, 9));
        CHECK_OK(vc_st_writer_add_lazy(w, "none", VC_F32, 1, (int64_t[]){ 0 }, fill_ramp, &fail, 1)); /* never called */
        CHECK(vc_st_writer_add_lazy(w, "x", VC_F32, 1, (int64_t[]){ 2 }, NULL, NULL, 0) == VC_ERR_ARG);
        fills = 0;
        vc_status st = vc_st_writer_write(w, p);
        if (!round) CHECK_OK(st);
        else CHECK_MSG(st == VC_ERR_IO && strstr(vc_last_error(), "tensor 'small'") && strstr(vc_last_error(), "fill of tensor 9"),
                       "failing fill: %d %s", st, vc_last_error());
        CHECK_MSG(fills == 4 && in_order && biggest_piece == VC_ST_FILL_PIECE, "%d fills, in order %d, pieces up to %zu",
                  fills, in_order, biggest_piece);
        vc_st_writer_free(w);
        b[0] = -1;
    }
    CHECK_MSG(count_entries(dir) == 1, "%d files in the folder after a failed write (the temp file left?)", count_entries(dir));
    vc_checkpoint *ck = NULL;
    CHECK_OK(vc_ckpt_open(p, &ck)); /* the first round's file */
    const vc_st_tensor *big = ck ? vc_ckpt_find(ck, "big") : NULL, *sm = ck ? vc_ckpt_find(ck, "small") : NULL;
    const vc_st_tensor *bt = ck ? vc_ckpt_find(ck, "b") : NULL;
    CHECK(big && big->nbytes == 60 && ((const float *)big->data)[14] == 4014.0f && ((const float *)big->data)[0] == 4000.0f);
    CHECK(sm && sm->nbytes == 8 && ((const float *)sm->data)[1] == 9001.0f);
    CHECK(bt && ((const float *)bt->data)[0] == 7.0f);
    const vc_st_tensor *hg = ck ? vc_ckpt_find(ck, "huge") : NULL;
    const float *hv = hg ? hg->data : NULL;
    CHECK(hg && hg->nbytes == HUGE_N * 4 && hv[0] == 2000.0f && hv[HUGE_N / 2] == 2000.0f + HUGE_N / 2 &&
          hv[VC_ST_FILL_PIECE / 4] == 2000.0f + VC_ST_FILL_PIECE / 4 && hv[HUGE_N - 1] == 2000.0f + HUGE_N - 1);
    CHECK(ck && vc_ckpt_find(ck, "none") && vc_ckpt_find(ck, "none")->nbytes == 0);
    vc_ckpt_close(ck);
    free(p);
    free(dir);
}

int main(void) {
    T = tmp_dir();
    CHECK(T != NULL);
    test_all_dtypes();
    test_reference_and_replace();
    test_shards();
    test_lazy();
    rm_tree(T);
    free(T);
    return vc_test_done();
}
