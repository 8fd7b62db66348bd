/* verlc bench tokenize: encode throughput of a tokenizer on the text fields of a JSONL file. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "verlc/tokenizer.h"

int vc_bench_tokenize(int argc, char **argv);

typedef struct { char **s; size_t *len; size_t n, cap, bytes; } texts;
typedef struct { const vc_tokenizer *t; const texts *x; size_t lo, hi; size_t tokens; int fail; } job;

static int texts_add(texts *x, const char *s) {
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 1024;
        char **ns = realloc(x->s, cap * sizeof *ns);
        if (!ns) return -1;
        x->s = ns;
        size_t *nl = realloc(x->len, cap * sizeof *nl);
        if (!nl) return -1;
        x->len = nl; x->cap = cap;
    }
    if (!(x->s[x->n] = strdup(s))) return -1;
    x->len[x->n] = strlen(s);
    x->bytes += x->len[x->n++];
    return 0;
}

static int load_texts(const char *path, texts *x) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "verlc: %s: cannot open\n", path); return -1; }
    char *line = NULL; size_t cap = 0; ssize_t n; long no = 0; int rc = 0;
    static const char *fields[] = {"question", "answer", "text"};
    while (!rc && (n = getline(&line, &cap, f)) > 0) {
        no++;
        cJSON *r = cJSON_ParseWithLength(line, (size_t)n);
        if (!r) { fprintf(stderr, "verlc: %s:%ld: not valid JSON\n", path, no); rc = -1; break; }
        for (int i = 0; i < 3 && !rc; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, fields[i]);
            if (cJSON_IsString(v)) rc = texts_add(x, v->valuestring);
        }
        cJSON_Delete(r);
    }
    free(line);
    fclose(f);
    return rc;
}

static void *run_job(void *arg) {
    job *j = arg;
    for (size_t i = j->lo; i < j->hi; i++) {
        int32_t *ids = NULL; size_t n = 0;
        if (vc_tokenizer_encode(j->t, j->x->s[i], j->x->len[i], 0, &ids, &n)) { j->fail = 1; return NULL; }
        j->tokens += n;
        free(ids);
    }
    return NULL;
}

/* Encodes every text with `nt` threads; returns seconds, sets *tokens. */
static double timed_pass(const vc_tokenizer *t, const texts *x, int nt, size_t *tokens) {
    pthread_t th[256];
    job jobs[256];
    double t0 = vc_now();
    for (int i = 0; i < nt; i++) {
        jobs[i] = (job){t, x, x->n * (size_t)i / (size_t)nt, x->n * (size_t)(i + 1) / (size_t)nt, 0, 0};
        if (nt == 1) run_job(&jobs[i]); else pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    *tokens = 0;
    for (int i = 0; i < nt; i++) {
        if (nt > 1) pthread_join(th[i], NULL);
        *tokens += jobs[i].tokens;
        if (jobs[i].fail) return -1;
    }
    return vc_now() - t0;
}

int vc_bench_tokenize(int argc, char **argv) {
    const char *dir = NULL, *input = NULL;
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--input") && i + 1 < argc) input = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "tokenize")) continue;
        else { fprintf(stderr, "usage: verlc bench tokenize --tokenizer DIR --input FILE.jsonl [--threads N]\n"); return 2; }
    }
    if (!dir || !input) { fprintf(stderr, "usage: verlc bench tokenize --tokenizer DIR --input FILE.jsonl [--threads N]\n"); return 2; }
    if (threads < 1) threads = 1;
    if (threads > 256) threads = 256;
    texts x = {0};
    vc_tokenizer *t = NULL;
    int rc = 1;
    if (load_texts(input, &x)) goto out;
    if (vc_tokenizer_load(dir, &t)) { fprintf(stderr, "verlc: %s\n", vc_last_error()); goto out; }
    double mb = (double)x.bytes / 1e6;
    size_t tok1 = 0, tokn = 0;
    double cold = timed_pass(t, &x, 1, &tok1);   /* fresh word cache */
    double warm = timed_pass(t, &x, 1, &tok1);
    vc_tokenizer_free(t); t = NULL;
    if (vc_tokenizer_load(dir, &t)) { fprintf(stderr, "verlc: %s\n", vc_last_error()); goto out; }
    double par = timed_pass(t, &x, threads, &tokn);
    if (cold < 0 || warm < 0 || par < 0) { fprintf(stderr, "verlc: encode failed: %s\n", vc_last_error()); goto out; }
    printf("tokenizer %s: %zu texts, %.2f MB, %zu tokens\n", dir, x.n, mb, tok1);
    printf("  1 thread  (cold cache): %8.2f MB/s  %10.0f tokens/s\n", mb / cold, (double)tok1 / cold);
    printf("  1 thread  (warm cache): %8.2f MB/s  %10.0f tokens/s\n", mb / warm, (double)tok1 / warm);
    printf("  %d threads (cold cache): %8.2f MB/s  %10.0f tokens/s\n", threads, mb / par, (double)tokn / par);
    rc = 0;
out:
    vc_tokenizer_free(t);
    for (size_t i = 0; i < x.n; i++) free(x.s[i]);
    free(x.s); free(x.len);
    return rc;
}
