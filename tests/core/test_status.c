#include "verlc/core.h"
#include "vc_test.h"
#include <unistd.h>

int main(void) {
    vc_status st = vc_fail(VC_ERR_IO, "%s: cannot open", "x.json");
    CHECK(st == VC_ERR_IO);
    CHECK(strcmp(vc_last_error(), "x.json: cannot open") == 0);
    vc_fail_ctx(VC_ERR_IO, "loading %s", "model");
    CHECK(strcmp(vc_last_error(), "loading model: x.json: cannot open") == 0);
    char *buf; size_t n;
    CHECK(vc_read_file("/nonexistent/verlc", &buf, &n) == VC_ERR_IO);
    CHECK(strstr(vc_last_error(), "/nonexistent/verlc") != NULL);
    char path[] = "/tmp/verlc_test_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK_OK(vc_write_file_atomic(path, "hello", 5));
    CHECK_OK(vc_read_file(path, &buf, &n));
    CHECK(n == 5 && memcmp(buf, "hello", 5) == 0);
    free(buf);
    unlink(path);
    char *j = vc_path_join("a/b", "c.json");
    CHECK(strcmp(j, "a/b/c.json") == 0);
    free(j);
    return vc_test_done();
}
