/* Helpers of the libFuzzer harnesses (tests/DIR/fuzz_NAME.c) that hand their input to a loader as a file: a scratch folder
 * made once per process, and the file's path in it. */
#ifndef VC_FUZZ_UTIL_H
#define VC_FUZZ_UTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* /tmp/vc_fuzz_TAG_XXXXXX into dir (made), dir/NAME into path; aborts when the folder cannot be made */
static inline void fuzz_scratch(const char *tag, const char *name, char *dir, size_t dcap, char *path, size_t pcap) {
    snprintf(dir, dcap, "/tmp/vc_fuzz_%s_XXXXXX", tag);
    if (!mkdtemp(dir)) abort();
    snprintf(path, pcap, "%s/%s", dir, name);
}
#endif
