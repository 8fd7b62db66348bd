/* Replays the libFuzzer regression corpus (tests/tokenizer/corpus) through the fuzz harness, so every input
 * that once found a bug, and a sample of the coverage corpus, runs in CI under the sanitizers. */
#include <dirent.h>
#include "vc_test.h"
#include "tokenizer/fuzz_tok.c"

int main(void) {
    int argc = 0; char **argv = NULL;
    LLVMFuzzerInitialize(&argc, &argv);
    DIR *d = opendir("tests/tokenizer/corpus");
    CHECK(d != NULL);
    int files = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[512];
        snprintf(path, sizeof path, "tests/tokenizer/corpus/%s", e->d_name);
        char *data = NULL; size_t n = 0;
        CHECK_OK(vc_read_file(path, &data, &n));
        if (data) LLVMFuzzerTestOneInput((const uint8_t *)data, n);
        free(data);
        files++;
    }
    if (d) closedir(d);
    CHECK(files > 0);
    printf("%d corpus inputs replayed\n", files);
    for (int i = 0; i < 4; i++) vc_tokenizer_free(toks[i]);
    rmdir(tmpdir);
    return vc_test_done();
}
