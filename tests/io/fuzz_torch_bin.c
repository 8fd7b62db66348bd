/* libFuzzer harness for the PyTorch checkpoint reader (not a CTest program). Build and run:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc tests/io/fuzz_torch_bin.c src/io/pt_*.c \
 *     src/io/st_read.c src/io/json.c src/core/[a-z]*.c $(pkg-config --cflags --libs libcjson) -lopenblas -lpthread \
 *     -lm -o /tmp/fuzz_torch_bin
 *   mkdir -p /tmp/pt_corpus && cp $(find tests/fixtures/torch_bin -name "*.bin") /tmp/pt_corpus
 *   /tmp/fuzz_torch_bin -max_total_time=300 -max_len=120000 /tmp/pt_corpus
 * Input: a whole file; every tensor found is read to the end; read a second time taking DTensors (verl's FSDP
 * checkpoints: scripts/fuzz.sh seeds tests/fixtures/verl_ckpt's rank files too) as their local parts and places. */
#include "io/st_internal.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int shards = 0; shards < 2; shards++) {
        vc_st_lists l = { .want_shards = shards };
        if (!vc_pt_parse_mem("fuzz.bin", data, size, &l)) {
            volatile uint8_t sum = 0;
            for (int i = 0; i < l.n; i++)
                for (size_t k = 0; k < l.t[i].nbytes; k++) sum += ((const uint8_t *)l.t[i].data)[k];
            for (int i = 0; shards && i < l.n; i++) sum += (uint8_t)(l.shard[i].n_dims + l.shard[i].shape[0]);
        }
        vc_st_lists_free(&l);
    }
    return 0;
}
