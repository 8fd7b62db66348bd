/* verl's file and tensorboard loggers (tracking.h): JSON lines, and TFRecord-framed Event protocol buffers
 * encoded by hand (three messages, six fields: no protobuf library needed). */
#define _GNU_SOURCE
#include "verlc/tracking.h"
#include "verlc/config.h"
#include "verlc/json.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

struct vc_tracker {
    FILE *file, *tb;
    char *file_path, *tb_path;
};

/* ---- CRC-32C, reflected polynomial 0x82F63B78 ---- */
static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t vc_crc32c(const void *data, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init);
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t vc_crc32c_masked(const void *data, size_t n) {
    uint32_t c = vc_crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

/* ---- protocol buffer encoding into a growing byte buffer ---- */
typedef struct pb {
    unsigned char *p;
    size_t n, cap;
    int oom;
} pb;

static void pb_put(pb *b, const void *s, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void pb_varint(pb *b, uint64_t v) {
    unsigned char t[10];
    size_t k = 0;
    do {
        t[k] = v & 0x7F;
        v >>= 7;
        if (v) t[k] |= 0x80;
        k++;
    } while (v);
    pb_put(b, t, k);
}

static void pb_le(pb *b, uint64_t v, int bytes) {
    unsigned char t[8];
    for (int i = 0; i < bytes; i++) t[i] = (unsigned char)(v >> (8 * i));
    pb_put(b, t, (size_t)bytes);
}

/* field with wire type 2 (length-delimited) */
static void pb_bytes(pb *b, int field, const void *s, size_t n) {
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_put(b, s, n);
}

static void pb_double(pb *b, int field, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    pb_varint(b, (uint64_t)field << 3 | 1);
    pb_le(b, u, 8);
}

static void pb_float(pb *b, int field, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    pb_varint(b, (uint64_t)field << 3 | 5);
    pb_le(b, u, 4);
}

static double wall_time(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

/* one TFRecord: length, masked CRC of the length, data, masked CRC of the data */
static vc_status tb_record(vc_tracker *t, const pb *ev) {
    if (ev->oom) return VC_ERR_NOMEM;
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)ev->n >> (8 * i));
    uint32_t c1 = vc_crc32c_masked(len, 8), c2 = vc_crc32c_masked(ev->p, ev->n);
    unsigned char c[8];
    for (int i = 0; i < 4; i++) c[i] = (unsigned char)(c1 >> (8 * i)), c[4 + i] = (unsigned char)(c2 >> (8 * i));
    if (fwrite(len, 1, 8, t->tb) != 8 || fwrite(c, 1, 4, t->tb) != 4 || fwrite(ev->p, 1, ev->n, t->tb) != ev->n ||
        fwrite(c + 4, 1, 4, t->tb) != 4 || fflush(t->tb))
        return vc_fail(VC_ERR_IO, "%s: write failed", t->tb_path);
    return VC_OK;
}

/* Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 * Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; } */
static vc_status tb_scalars(vc_tracker *t, int64_t step, size_t n, const char *const *names, const double *values) {
    pb sum = { 0 }, ev = { 0 };
    for (size_t i = 0; i < n; i++) {
        pb v = { 0 };
        pb_bytes(&v, 1, names[i], strlen(names[i]));
        pb_float(&v, 2, (float)values[i]);
        sum.oom |= v.oom;
        pb_bytes(&sum, 1, v.p, v.n);
        free(v.p);
    }
    pb_double(&ev, 1, wall_time());
    pb_varint(&ev, 2 << 3 | 0);
    pb_varint(&ev, (uint64_t)step);
    ev.oom |= sum.oom;
    pb_bytes(&ev, 5, sum.p, sum.n);
    vc_status st = tb_record(t, &ev);
    free(sum.p);
    free(ev.p);
    return st;
}

/* add_text's summary: Value { tag = TAG/text_summary, metadata = { plugin_data = { plugin_name: "text",
 * content: TextPluginData {} } }, tensor = TensorProto { dtype: DT_STRING (7), tensor_shape: [1],
 * string_val: [text] } } */
static vc_status tb_text(vc_tracker *t, int64_t step, const char *tag, const char *text) {
    pb v = { 0 }, md = { 0 }, pd = { 0 }, tp = { 0 }, shape = { 0 }, dim = { 0 }, sum = { 0 }, ev = { 0 };
    size_t tl = strlen(tag);
    char *full = vc_malloc(tl + 16);
    if (!full) return VC_ERR_NOMEM;
    snprintf(full, tl + 16, "%s/text_summary", tag);
    pb_bytes(&pd, 1, "text", 4);
    pb_bytes(&pd, 2, "", 0);
    pb_bytes(&md, 1, pd.p, pd.n);
    pb_varint(&dim, 1 << 3 | 0);
    pb_varint(&dim, 1);
    pb_bytes(&shape, 2, dim.p, dim.n);
    pb_varint(&tp, 1 << 3 | 0);
    pb_varint(&tp, 7);
    pb_bytes(&tp, 2, shape.p, shape.n);
    pb_bytes(&tp, 8, text, strlen(text));
    pb_bytes(&v, 1, full, strlen(full));
    pb_bytes(&v, 9, md.p, md.n);
    pb_bytes(&v, 8, tp.p, tp.n);
    pb_bytes(&sum, 1, v.p, v.n);
    pb_double(&ev, 1, wall_time());
    pb_varint(&ev, 2 << 3 | 0);
    pb_varint(&ev, (uint64_t)step);
    pb_bytes(&ev, 5, sum.p, sum.n);
    ev.oom |= v.oom | md.oom | pd.oom | tp.oom | shape.oom | dim.oom | sum.oom;
    vc_status st = tb_record(t, &ev);
    pb *all[] = { &v, &md, &pd, &tp, &shape, &dim, &sum, &ev };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->p);
    free(full);
    return st;
}

vc_status vc_tracker_text(vc_tracker *t, int64_t step, const char *tag, const char *text) {
    return t && t->tb ? tb_text(t, step, tag, text) : VC_OK;
}

static vc_status tb_open(vc_tracker *t, const char *project, const char *experiment) {
    const char *env = getenv("TENSORBOARD_DIR");
    char dir[4096], host[256] = "localhost", name[512];
    if (env && *env) snprintf(dir, sizeof dir, "%s", env);
    else snprintf(dir, sizeof dir, "tensorboard_log/%s/%s", project, experiment);
    vc_status st = vc_mkdirs(dir);
    if (st) return vc_fail_ctx(st, "trainer.logger tensorboard (TENSORBOARD_DIR)");
    gethostname(host, sizeof host - 1);
    snprintf(name, sizeof name, "events.out.tfevents.%lld.%s.%d.0", (long long)wall_time(), host, (int)getpid());
    if (!(t->tb_path = vc_path_join(dir, name))) return VC_ERR_NOMEM;
    if (!(t->tb = fopen(t->tb_path, "wb"))) return vc_fail(VC_ERR_IO, "%s: cannot create (trainer.logger tensorboard)", t->tb_path);
    pb ev = { 0 };
    pb_double(&ev, 1, wall_time());
    pb_bytes(&ev, 3, "brain.Event:2", 13);
    st = tb_record(t, &ev);
    free(ev.p);
    return st;
}

static vc_status file_open(vc_tracker *t, const char *project, const char *experiment) {
    const char *path = getenv("VERL_FILE_LOGGER_PATH");
    if (path && *path) t->file_path = vc_strdup(path);
    else {
        const char *root = getenv("VERL_FILE_LOGGER_ROOT");
        char dir[4096];
        if (!root || !*root) root = ".";
        if (root[0] == '~' && getenv("HOME")) snprintf(dir, sizeof dir, "%s%s/%s", getenv("HOME"), root + 1, project);
        else snprintf(dir, sizeof dir, "%s/%s", root, project);
        vc_status st = vc_mkdirs(dir);
        if (st) return vc_fail_ctx(st, "trainer.logger file (VERL_FILE_LOGGER_ROOT)");
        char name[1024];
        snprintf(name, sizeof name, "%s.jsonl", experiment);
        t->file_path = vc_path_join(dir, name);
    }
    if (!t->file_path) return VC_ERR_NOMEM;
    if (!(t->file = fopen(t->file_path, "w")))
        return vc_fail(VC_ERR_IO, "%s: cannot create (trainer.logger file)", t->file_path);
    return VC_OK;
}

vc_status vc_tracker_open(const char *const *backends, size_t n_backends, const char *project, const char *experiment,
                          vc_tracker **out) {
    *out = NULL;
    int want_file = 0, want_tb = 0;
    for (size_t i = 0; i < n_backends; i++) {
        want_file |= !strcmp(backends[i], "file");
        want_tb |= !strcmp(backends[i], "tensorboard");
    }
    if (!want_file && !want_tb) return VC_OK;
    vc_tracker *t = vc_calloc(1, sizeof *t);
    if (!t) return VC_ERR_NOMEM;
    vc_status st = VC_OK;
    if (want_file) st = file_open(t, project ? project : "verl_examples", experiment ? experiment : "gsm8k");
    if (!st && want_tb) st = tb_open(t, project ? project : "verl_examples", experiment ? experiment : "gsm8k");
    if (st) {
        vc_tracker_close(t);
        return st;
    }
    *out = t;
    return VC_OK;
}

vc_status vc_tracker_log(vc_tracker *t, int64_t step, size_t n, const char *const *names, const double *values) {
    if (!t) return VC_OK;
    if (t->file) {
        fprintf(t->file, "{\"step\": %lld, \"data\": {", (long long)step);
        for (size_t i = 0; i < n; i++) {
            if (i) fputs(", ", t->file);
            vc_json_fput_str(t->file, names[i]);
            if (isfinite(values[i])) fprintf(t->file, ": %.17g", values[i]);
            else fputs(": null", t->file);
        }
        fputs("}}\n", t->file);
        if (fflush(t->file) || ferror(t->file)) return vc_fail(VC_ERR_IO, "%s: write failed", t->file_path);
    }
    return t->tb ? tb_scalars(t, step, n, names, values) : VC_OK;
}

const char *vc_tracker_file_path(const vc_tracker *t) { return t && t->file ? t->file_path : NULL; }
const char *vc_tracker_tb_path(const vc_tracker *t) { return t && t->tb ? t->tb_path : NULL; }

void vc_tracker_close(vc_tracker *t) {
    if (!t) return;
    if (t->file) fclose(t->file);
    if (t->tb) fclose(t->tb);
    free(t->file_path);
    free(t->tb_path);
    free(t);
}

static void announce(const vc_tracker *t) {
    if (vc_tracker_file_path(t)) printf("verlc: file logger at %s\n", vc_tracker_file_path(t));
    if (vc_tracker_tb_path(t)) printf("verlc: tensorboard log in %s\n", vc_tracker_tb_path(t));
    fflush(stdout);
}

vc_status vc_tracker_open_spec(const char *logger, const char *project, const char *experiment, vc_tracker **out) {
    *out = NULL;
    char buf[512], *names[16];
    size_t n = 0;
    snprintf(buf, sizeof buf, "%s", logger ? logger : "");
    for (char *tok = strtok(buf, "[], \t\"'"); tok && n < 16; tok = strtok(NULL, "[], \t\"'")) names[n++] = tok;
    vc_status st = vc_tracker_open((const char *const *)names, n, project, experiment, out);
    if (st) return vc_fail_ctx(st, "trainer.logger");
    announce(*out);
    return VC_OK;
}

vc_status vc_tracker_open_config(const vc_config *c, const char *def_project, const char *def_experiment,
                                 vc_tracker **out) {
    *out = NULL;
    size_t n = 0;
    const char *proj = NULL, *exp = NULL, *names[16];
    vc_status st = vc_config_has(c, "trainer.logger") ? vc_config_list_len(c, "trainer.logger", &n) : VC_OK;
    if (n > 16) n = 16;
    for (size_t i = 0; !st && i < n; i++) st = vc_config_list_str(c, "trainer.logger", i, &names[i]);
    if (!st) st = vc_config_get_str_or(c, "trainer.project_name", def_project, &proj);
    if (!st) st = vc_config_get_str_or(c, "trainer.experiment_name", def_experiment, &exp);
    if (!st) st = vc_tracker_open(names, n, proj, exp, out);
    if (st) return vc_fail_ctx(st, "trainer.logger");
    announce(*out);
    return VC_OK;
}
