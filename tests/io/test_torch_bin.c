/* PyTorch checkpoints (pytorch_model.bin, torch.save's zip format; tests/fixtures/torch_bin, made by
 * tools/fixtures/make_torch_bin.py with torch 2.15): a single .bin (Baichuan2, f32) and an index with two
 * shards (Qwen3, bf16) give every tensor of the shared safetensors fixture byte for byte; `verlc check`
 * passes on the .bin folder with the shared references; tied tensors share their bytes, slices start at
 * their storage offset, f16 / int64 / bool / f64 / bf16 / 0-d tensors and Parameters read as torch wrote
 * them; a PEFT adapter_model.bin attaches as its safetensors copy does; non-contiguous tensors, the legacy format and truncated or byte-flipped files are refused with
 * a message naming the file (under the sanitizers: without reading outside the mapping). */
#include "cli_util.h"
#include "verlc/dtype.h"
#include "verlc/json.h"
#include "verlc/model.h"
#include "verlc/safetensors.h"
#include <cjson/cJSON.h>

#define DIR "tests/fixtures/torch_bin/"

static void same_tensors(const char *bin_path, const char *st_path) {
    vc_checkpoint *a = NULL, *b = NULL;
    CHECK_OK(vc_ckpt_open(bin_path, &a));
    CHECK_OK(vc_ckpt_open(st_path, &b));
    if (!a || !b) goto out;
    CHECK_MSG(vc_ckpt_count(a) == vc_ckpt_count(b) && vc_ckpt_count(a) > 0, "%s: %d tensors, %s: %d", bin_path,
              vc_ckpt_count(a), st_path, vc_ckpt_count(b));
    int same = 0;
    for (int i = 0; i < vc_ckpt_count(a) && i < vc_ckpt_count(b); i++) {
        const vc_st_tensor *x = vc_ckpt_at(a, i), *y = vc_ckpt_at(b, i);
        int eq = !strcmp(x->name, y->name) && x->dtype == y->dtype && x->ndim == y->ndim &&
                 !memcmp(x->shape, y->shape, sizeof x->shape[0] * (size_t)x->ndim) && x->nbytes == y->nbytes &&
                 !memcmp(x->data, y->data, x->nbytes);
        CHECK_MSG(eq, "%s: tensor %s differs from %s's %s", bin_path, x->name, st_path, y->name);
        same += eq;
    }
    printf("%s: %d tensors (%d files) equal to the safetensors fixture\n", bin_path, same, vc_ckpt_file_count(a));
out:
    vc_ckpt_close(a);
    vc_ckpt_close(b);
}

static void test_views(void) {
    vc_checkpoint *ck = NULL;
    cJSON *want = NULL;
    CHECK_OK(vc_ckpt_open(DIR "views.bin", &ck));
    CHECK_OK(vc_json_load_file(DIR "views.json", &want));
    if (!ck || !want) goto out;
    int n = 0;
    for (const cJSON *e = want->child; e; e = e->next, n++) {
        const vc_st_tensor *t = vc_ckpt_find(ck, e->string);
        CHECK_MSG(t, "views.bin: no tensor %s", e->string);
        if (!t) continue;
        vc_dtype dt;
        CHECK(!vc_dtype_from_name(cJSON_GetObjectItem(e, "dtype")->valuestring, &dt) && dt == t->dtype);
        const cJSON *shape = cJSON_GetObjectItem(e, "shape"), *vals = cJSON_GetObjectItem(e, "values");
        CHECK_MSG(cJSON_GetArraySize(shape) == t->ndim, "%s: %d dims", e->string, t->ndim);
        for (int d = 0; d < t->ndim; d++) CHECK(t->shape[d] == cJSON_GetArrayItem(shape, d)->valuedouble);
        int64_t numel = vc_st_tensor_numel(t);
        CHECK_MSG(numel == cJSON_GetArraySize(vals), "%s: %lld values", e->string, (long long)numel);
        float *f = malloc((size_t)(numel ? numel : 1) * sizeof *f);
        vc_st_tensor_to_f32(t, f);
        int bad = 0;
        for (int64_t i = 0; i < numel; i++) {
            double w = cJSON_GetArrayItem(vals, (int)i)->valuedouble;
            bad += (float)w != f[i];
        }
        CHECK_MSG(!bad, "%s: %d of %lld values differ", e->string, bad, (long long)numel);
        free(f);
    }
    CHECK(n == vc_ckpt_count(ck));
    /* tied weights share the storage's bytes; a row of it starts 8 floats in */
    const vc_st_tensor *emb = vc_ckpt_find(ck, "embed.weight"), *head = vc_ckpt_find(ck, "lm_head.weight"),
                       *row = vc_ckpt_find(ck, "row");
    CHECK(emb && head && row && emb->data == head->data && (const char *)row->data == (const char *)emb->data + 32);
    printf("views.bin: %d tensors as torch saved them (tied, offset, f16, int64, bool, f64, bf16, 0-d)\n", n);
out:
    cJSON_Delete(want);
    vc_ckpt_close(ck);
}

static void expect_fail(const char *path, const char *needle) {
    vc_checkpoint *ck = NULL;
    vc_status st = vc_ckpt_open(path, &ck);
    const char *e = vc_last_error();
    CHECK_MSG(st != VC_OK && !ck && e && strstr(e, needle) && strstr(e, path), "%s: status %d, '%s' (want '%s')", path,
              st, e ? e : "", needle);
    vc_ckpt_close(ck);
}

/* `verlc check` on the .bin folder with the shared fixture's references */
static void test_check_cli(void) {
    char dir[256];
    cli_tmpdir(dir, sizeof dir, "torchbin");
    CHECK(cli_sh("rm -rf %s && mkdir -p %s && cp " DIR "baichuan2/* %s/ && cp %s/fixtures/models/baichuan2/reference.* %s/",
                 dir, dir, dir, vc_test_shared(), dir) == 0);
    CHECK(cli_sh("%s check %s > %s/check.log 2>&1", cli_bin(), dir, dir) == 0);
    char log[300];
    snprintf(log, sizeof log, "%s/check.log", dir);
    char *text = NULL;
    size_t n = 0;
    CHECK(!vc_read_file(log, &text, &n) && strstr(text, "1 of 1 models passed"));
    if (text) printf("verlc check on a pytorch_model.bin folder: %s", strstr(text, "1 of 1 models passed") ? "passed\n" : text);
    free(text);
    /* saved as a Hugging Face folder: safetensors with the same tensors, the remote code beside it */
    char out[300], py[400];
    snprintf(out, sizeof out, "%s/hf", dir);
    snprintf(py, sizeof py, "%s/tokenization_baichuan.py", dir);
    CHECK_OK(vc_write_file_atomic(py, "# remote code\n", 14));
    vc_model *m = NULL;
    CHECK_OK(vc_model_load(dir, &m));
    if (m) CHECK_OK(vc_model_save_hf(m, out, VC_F32));
    vc_model_free(m);
    snprintf(py, sizeof py, "%s/model.safetensors", out);
    char st_dir[600];
    snprintf(st_dir, sizeof st_dir, "%s/fixtures/models/baichuan2", vc_test_shared());
    if (vc_file_exists(py)) same_tensors(out, st_dir);
    snprintf(py, sizeof py, "%s/tokenization_baichuan.py", out);
    CHECK_MSG(vc_file_exists(py), "remote code not copied to %s", out);
    cli_sh("rm -rf %s", dir);
}

/* a PEFT adapter saved as adapter_model.bin attaches with the same tensors as its safetensors copy */
static void test_adapter_bin(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/fixtures/models/qwen3", vc_test_shared());
    vc_model *a = NULL, *b = NULL;
    CHECK_OK(vc_model_load(dir, &a));
    CHECK_OK(vc_model_load(dir, &b));
    if (!a || !b) goto out;
    CHECK_OK(vc_model_lora_attach_from(a, DIR "adapter_bin"));
    CHECK_OK(vc_model_lora_attach_from(b, DIR "adapter_st"));
    vc_tensor *const *x = NULL, *const *y = NULL;
    int nx = vc_model_lora_params(a, &x), ny = vc_model_lora_params(b, &y), same = nx == ny && nx == 8;
    double norm = 0;
    for (int i = 0; same && i < nx; i++) {
        same = x[i]->n == y[i]->n && !memcmp(x[i]->data, y[i]->data, sizeof(float) * (size_t)x[i]->n);
        for (int64_t k = 0; k < x[i]->n; k++) norm += fabs(x[i]->data[k]);
    }
    CHECK_MSG(same && norm > 0, "adapter_model.bin: %d tensors, safetensors %d, equal %d, |sum| %g", nx, ny, same, norm);
    printf("adapter_model.bin: %d LoRA tensors equal to the safetensors adapter's\n", nx);
out:
    vc_model_free(a);
    vc_model_free(b);
}

static void test_corrupt(void) {
    const char *srcs[] = { DIR "views.bin", DIR "qwen3_bf16/pytorch_model-00002-of-00002.bin" };
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/verlc_ptc_%d.bin", (int)getpid());
    int fails = 0, oks = 0;
    for (size_t s = 0; s < 2; s++) {
        char *p = NULL;
        size_t n = 0;
        CHECK(!vc_read_file(srcs[s], &p, &n) && n > 100);
        if (!p) continue;
        uint64_t x = 0x2545f4914f6cdd1dull * (s + 3);
        for (int k = 0; k < 150; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t len = n;
            char *q = malloc(n);
            memcpy(q, p, n);
            if (k % 3 == 0) len = 1 + x % (n - 1);
            else /* changes near the end (directory, pickle) or anywhere */
                for (int j = 0; j < 1 + k % 3; j++) {
                    size_t at = (k % 2 ? n - 1 - (x >> (9 * j)) % 1500 % n : (x >> (9 * j)) % n);
                    q[at] ^= (char)(1u << (j + k) % 8);
                }
            FILE *f = fopen(tmp, "wb");
            if (!f) break;
            fwrite(q, 1, len, f);
            fclose(f);
            free(q);
            vc_checkpoint *ck = NULL;
            if (vc_ckpt_open(tmp, &ck)) {
                fails++;
                CHECK_MSG(strstr(vc_last_error(), tmp), "error without the file name: %s", vc_last_error());
            } else oks++;
            vc_ckpt_close(ck);
        }
        free(p);
    }
    unlink(tmp);
    printf("corrupted checkpoints: %d refused with a message, %d read (changes inside tensor bytes)\n", fails, oks);
    CHECK(fails > 100);
}

int main(void) {
    if (!vc_test_have_shared()) return vc_test_done();
    char st[600];
    snprintf(st, sizeof st, "%s/fixtures/models/baichuan2", vc_test_shared());
    same_tensors(DIR "baichuan2", st);
    same_tensors(DIR "baichuan2/pytorch_model.bin", st);
    snprintf(st, sizeof st, "%s/fixtures/models/qwen3_bf16", vc_test_shared());
    same_tensors(DIR "qwen3_bf16", st);
    test_views();
    expect_fail(DIR "strided.bin", "tensor 'w' is not contiguous");
    expect_fail(DIR "legacy.bin", "legacy (pre-1.6) format");
    test_check_cli();
    test_adapter_bin();
    test_corrupt();
    return vc_test_done();
}
