/* libFuzzer harness for the Parquet reader (not a CTest program). Build and run:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc tests/data/fuzz_parquet.c \
 *     src/data/parquet*.c src/core/[a-z]*.c $(pkg-config --cflags --libs libcjson snappy libzstd zlib liblz4 \
 *     libbrotlidec) -lopenblas -lstdc++ -lpthread -lm -o /tmp/fuzz_parquet
 *   mkdir -p /tmp/pq_corpus && /tmp/fuzz_parquet -max_total_time=300 -max_len=120000 /tmp/pq_corpus \
 *     tests/fixtures/parquet
 * Input: a whole file; every row read is converted to JSON and freed. */
#include "data/parquet.h"
#include <cjson/cJSON.h>
#include <stdlib.h>

static vc_status take(void *user, cJSON *row, int64_t index) {
    (void)user;
    (void)index;
    char *s = cJSON_PrintUnformatted(row); /* walks every value */
    free(s);
    cJSON_Delete(row);
    return VC_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pq_rows("fuzz.parquet", data, size, size & 1, take, NULL);
    return 0;
}
