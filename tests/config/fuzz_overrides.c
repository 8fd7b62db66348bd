/* libFuzzer harness for verl command lines (not a CTest program; scripts/fuzz.sh builds and runs it): the input's
 * lines as `verlc train` arguments (Hydra overrides, --config-name and the like) over verl's defaults, resolved, then
 * written back as YAML. */
#include "verlc/config.h"
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1), *argv[64];
    memcpy(text, data, size);
    text[size] = 0;
    int argc = 0;
    for (char *p = text; argc < 64;) {
        argv[argc++] = p;
        char *nl = memchr(p, '\n', (size_t)(text + size - p));
        if (!nl) break;
        *nl = 0;
        p = nl + 1;
    }
    vc_config *c = NULL;
    if (!vc_config_load_argv(argc, argv, NULL, &c)) free(vc_config_to_yaml(c, NULL));
    vc_config_free(c);
    free(text);
    return 0;
}
