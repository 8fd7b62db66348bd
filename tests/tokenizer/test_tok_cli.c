/* verlc tokenize / detokenize: JSONL in, JSONL out, one-line errors for malformed rows. */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>
#include "vc_test.h"

static const char *bin(void) {
    const char *b = getenv("VERLC_BIN");
    return b && *b ? b : "build/verlc";
}

/* Runs `cmd` with stdin from `in`; returns exit status, output in out (stdout and stderr to separate files). */
static int run(const char *cmd, const char *in, char *out, size_t outcap, char *err, size_t errcap) {
    char inpath[] = "/tmp/vc_cli_in_XXXXXX", cmdline[4096];
    int fd = mkstemp(inpath);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    fputs(in, f);
    fclose(f);
    snprintf(cmdline, sizeof cmdline, "%s < %s 2> %s.err", cmd, inpath, inpath);
    FILE *p = popen(cmdline, "r");
    size_t n = p ? fread(out, 1, outcap - 1, p) : 0;
    out[n] = 0;
    int st = p ? pclose(p) : -1;
    char errpath[64];
    snprintf(errpath, sizeof errpath, "%s.err", inpath);
    FILE *e = fopen(errpath, "r");
    n = e ? fread(err, 1, errcap - 1, e) : 0;
    err[n] = 0;
    if (e) fclose(e);
    unlink(errpath); unlink(inpath);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void) {
    char cmd[2048], out[8192], err[2048];
    const char *sh = vc_test_shared();
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s/fixtures/tokenizers/llama2", bin(), sh);
    CHECK(run(cmd, "{\"text\": \"Hello world\"}\n\n{\"text\": \"\", \"extra\": 1}\n", out, sizeof out, err, sizeof err) == 0);
    CHECK_MSG(!strcmp(out, "{\"ids\": [22557, 1526]}\n{\"ids\": []}\n"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s/fixtures/tokenizers/llama2 --add-special-tokens", bin(), sh);
    CHECK(run(cmd, "{\"text\": \"Hello world\"}\n", out, sizeof out, err, sizeof err) == 0);
    CHECK_MSG(!strcmp(out, "{\"ids\": [1, 22557, 1526]}\n"), "%s", out);
    /* malformed rows: one line naming stdin and the line, exit 1 */
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s/fixtures/tokenizers/llama2", bin(), sh);
    CHECK(run(cmd, "{\"text\": \"a\"}\n{\"text\": 5}\n{\"text\": \"b\"}\n", out, sizeof out, err, sizeof err) == 1);
    CHECK_MSG(!strncmp(err, "verlc: <stdin>:2: ", 18) && strchr(err, '\n') == err + strlen(err) - 1, "%s", err);
    CHECK(run(cmd, "{\"text\": \"a\"\n", out, sizeof out, err, sizeof err) == 1);
    CHECK_MSG(!strncmp(err, "verlc: <stdin>:1: ", 18), "%s", err);
    /* detokenize, with and without special tokens; NUL and quotes are escaped */
    snprintf(cmd, sizeof cmd, "%s detokenize --tokenizer %s/fixtures/tokenizers/qwen3", bin(), sh);
    CHECK(run(cmd, "{\"ids\": [151644, 9707, 1879, 1]}\n{\"ids\": [15, 151645]}\n", out, sizeof out, err, sizeof err) == 0);
    CHECK_MSG(!strcmp(out, "{\"text\": \"<|im_start|>Hello world\\\"\"}\n{\"text\": \"0<|im_end|>\"}\n"), "%s", out);
    snprintf(cmd, sizeof cmd, "%s detokenize --tokenizer %s/fixtures/tokenizers/qwen3 --skip-special-tokens", bin(), sh);
    CHECK(run(cmd, "{\"ids\": [151644, 9707, 1879, 1]}\n", out, sizeof out, err, sizeof err) == 0);
    CHECK_MSG(!strcmp(out, "{\"text\": \"Hello world\\\"\"}\n"), "%s", out);
    CHECK(run(cmd, "{\"ids\": [1, \"x\"]}\n", out, sizeof out, err, sizeof err) == 1);
    CHECK_MSG(!strncmp(err, "verlc: <stdin>:1: ", 18), "%s", err);
    /* bad tokenizer folder: one line, exit 1 */
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer /nonexistent/dir", bin());
    CHECK(run(cmd, "", out, sizeof out, err, sizeof err) == 1);
    CHECK_MSG(strstr(err, "/nonexistent/dir") != NULL, "%s", err);
    return vc_test_done();
}
