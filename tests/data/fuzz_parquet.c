/* libFuzzer harness for the Parquet reader and writer (not a CTest program). Build and run:
 *   scripts/fuzz.sh 300 parquet
 * Input: a whole file; every row read is converted to JSON; the rows read are written as Parquet
 * (vc_parquet_write, which may refuse them: an int past 64 bits, an object without fields in every row) and
 * read back, each equal to the row written (pw_same) or the harness aborts. */
#include "data/parquet.h"
#include "data/parquet_w.h"
#include "verlc/data.h"
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

enum { MAX_ROWS = 4096 };
typedef struct {
    cJSON *rows[MAX_ROWS];
    size_t n;
} kept;

static vc_status take(void *user, cJSON *row, int64_t index) {
    kept *k = user;
    (void)index;
    char *s = cJSON_PrintUnformatted(row); /* walks every value */
    free(s);
    if (k->n < MAX_ROWS) k->rows[k->n++] = row;
    else cJSON_Delete(row);
    return VC_OK;
}

static void round_trip(kept *k) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_pw_%d.parquet", (int)getpid());
    if (vc_parquet_write(path, k->rows, k->n)) return;
    vc_jsonl *back = NULL;
    if (vc_jsonl_read(path, VC_JSONL_STRICT, &back)) {
        fprintf(stderr, "written rows not read back: %s\n", vc_last_error());
        abort();
    }
    if (back->n_rows != k->n) abort();
    for (size_t i = 0; i < k->n; i++)
        if (!pw_same(k->rows[i], back->rows[i])) {
            fprintf(stderr, "row %zu differs after a write and read\n", i + 1);
            abort();
        }
    vc_jsonl_free(back);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static kept k;
    k.n = 0;
    if (pq_rows("fuzz.parquet", data, size, size & 1, take, &k) == VC_OK) round_trip(&k);
    for (size_t i = 0; i < k.n; i++) cJSON_Delete(k.rows[i]);
    return 0;
}
