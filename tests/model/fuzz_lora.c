/* libFuzzer harness for PEFT adapters (not a CTest program; scripts/fuzz.sh builds and runs it): an adapter folder
 * attached to the shared mixtral fixture (vc_model_lora_attach_from). Input: the first byte picks what is fuzzed, the
 * rest is that file: 0, adapter_config.json beside the fixture's adapter weights; 1, adapter_model.safetensors beside
 * its config (tests/fixtures/lora/mixtral_all_linear). */
#include "verlc/model.h"
#include "verlc/safetensors.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char base[1024], dir[64];
static char *fixed[2];
static size_t fixed_n[2];
static const char *const FILES[2] = { "adapter_config.json", "adapter_model.safetensors" };

static int slurp(const char *path, char **out, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc(*n ? *n : 1);
    int bad = fread(*out, 1, *n, f) != *n;
    fclose(f);
    return bad;
}

static void put(int i, const void *d, size_t n) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, FILES[i]);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(d, 1, n, f);
    fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *sh = getenv("VERLC_SHARED") ? getenv("VERLC_SHARED") : "../shared";
    snprintf(base, sizeof base, "%s/fixtures/models/mixtral", sh);
    for (int i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/fixtures/lora/mixtral_all_linear/%s", FILES[i]);
        if (slurp(path, &fixed[i], &fixed_n[i])) {
            fprintf(stderr, "fuzz_lora: cannot read %s (run from the repository root)\n", path);
            abort();
        }
    }
    snprintf(dir, sizeof dir, "/tmp/vc_fuzz_lora_XXXXXX");
    if (!mkdtemp(dir)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int which = data[0] & 1;
    put(which, data + 1, size - 1);
    put(!which, fixed[!which], fixed_n[!which]);
    vc_model *m = NULL;
    if (vc_model_load(base, &m)) abort();
    vc_model_lora_attach_from(m, dir);
    vc_model_free(m);
    return 0;
}
