/* libFuzzer harness for the PNG / JPEG decoding (not a CTest program; scripts/fuzz.sh builds and runs it). Input:
 * the first byte picks the alpha conversion, the rest is the file. */
#include "verlc/image.h"
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    vc_image img;
    if (!vc_image_decode(data + 1, size - 1, "fuzz", (vc_image_alpha)(data[0] % 2), &img)) vc_image_free(&img);
    return 0;
}
