/* verl's file and tensorboard loggers (tracking.h): CRC-32C against its published check value, the event file
 * read back by an independent TFRecord / protobuf decoder (frame CRCs, Event fields, scalar tags and values),
 * verl's JSONL lines, trainer.logger texts, and an unwritable TENSORBOARD_DIR. */
#include "verlc/json.h"
#include "verlc/tracking.h"
#include "vc_test.h"
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];

/* ---- a minimal reader: TFRecord frames, then the Event fields verlc writes ---- */
typedef struct {
    const unsigned char *p, *end;
} rd;

static uint64_t varint(rd *r) {
    uint64_t v = 0;
    for (int s = 0; r->p < r->end && s < 64; s += 7) {
        unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7F) << s;
        if (!(b & 0x80)) break;
    }
    return v;
}

static uint64_t le(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

typedef struct ev {
    double wall;
    int64_t step;
    char version[32];
    int n;
    char tag[8][64];
    float val[8];
} ev;

static void parse_value(rd r, ev *e) {
    while (r.p < r.end && e->n < 8) {
        uint64_t key = varint(&r);
        if (key == (1 << 3 | 2)) {
            size_t n = varint(&r);
            snprintf(e->tag[e->n], sizeof e->tag[0], "%.*s", (int)n, (const char *)r.p);
            r.p += n;
        } else if (key == (2 << 3 | 5)) {
            uint32_t u = (uint32_t)le(r.p, 4);
            memcpy(&e->val[e->n], &u, 4);
            r.p += 4;
        } else return;
    }
    e->n++;
}

static int parse_event(const unsigned char *p, size_t n, ev *e) {
    memset(e, 0, sizeof *e);
    e->step = -1;
    rd r = { p, p + n };
    while (r.p < r.end) {
        uint64_t key = varint(&r);
        if (key == (1 << 3 | 1)) {
            uint64_t u = le(r.p, 8);
            memcpy(&e->wall, &u, 8);
            r.p += 8;
        } else if (key == (2 << 3 | 0)) e->step = (int64_t)varint(&r);
        else if (key == (3 << 3 | 2)) {
            size_t k = varint(&r);
            snprintf(e->version, sizeof e->version, "%.*s", (int)k, (const char *)r.p);
            r.p += k;
        } else if (key == (5 << 3 | 2)) { /* Summary: repeated Value value = 1 */
            size_t k = varint(&r);
            rd s = { r.p, r.p + k };
            while (s.p < s.end) {
                if (varint(&s) != (1 << 3 | 2)) return 0;
                size_t m = varint(&s);
                parse_value((rd){ s.p, s.p + m }, e);
                s.p += m;
            }
            r.p += k;
        } else return 0;
    }
    return r.p == r.end;
}

/* reads the event file's records (checking both CRCs of each) into evs; returns the count, -1 on a bad frame */
static int read_events(const char *path, ev *evs, int max) {
    char *text = NULL;
    size_t len = 0;
    if (vc_read_file(path, &text, &len)) return -1;
    const unsigned char *p = (const unsigned char *)text, *end = p + len;
    int n = 0;
    while (p < end && n < max) {
        if (end - p < 12) break;
        uint64_t k = le(p, 8);
        if ((uint32_t)le(p + 8, 4) != vc_crc32c_masked(p, 8) || (uint64_t)(end - p) < 16 + k) { n = -1; break; }
        if ((uint32_t)le(p + 12 + k, 4) != vc_crc32c_masked(p + 12, k) || !parse_event(p + 12, k, &evs[n])) { n = -1; break; }
        n++;
        p += 16 + k;
    }
    if (p != end && n >= 0) n = -1;
    free(text);
    return n;
}

static void find_event_file(const char *d, char *out, size_t n) {
    DIR *dp = opendir(d);
    struct dirent *e;
    *out = 0;
    while (dp && (e = readdir(dp)))
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) snprintf(out, n, "%s/%s", d, e->d_name);
    if (dp) closedir(dp);
}

static void test_crc(void) {
    CHECK(vc_crc32c("123456789", 9) == 0xE3069283u); /* the CRC-32C check value */
    CHECK(vc_crc32c("", 0) == 0);
    unsigned char z[32] = { 0 };
    CHECK(vc_crc32c(z, 32) == 0x8A9136AAu); /* RFC 3720 B.4: 32 bytes of zeros */
    uint32_t c = vc_crc32c("123456789", 9);
    CHECK(vc_crc32c_masked("123456789", 9) == ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

static void test_logs(void) {
    char tb[400], root[400], path[700];
    snprintf(tb, sizeof tb, "%s/tb", dir);
    snprintf(root, sizeof root, "%s/files", dir);
    setenv("TENSORBOARD_DIR", tb, 1);
    setenv("VERL_FILE_LOGGER_ROOT", root, 1);
    vc_tracker *t = NULL;
    CHECK_OK(vc_tracker_open_spec("['console','file',\"tensorboard\", wandb]", "proj", "exp1", &t));
    CHECK(t && vc_tracker_tb_path(t) && vc_tracker_file_path(t));
    const char *names[3] = { "actor/pg_loss", "critic/score/mean", "val-core/openai/gsm8k/acc/mean@1" };
    double v1[3] = { -0.125, 0.5, NAN }, v2[3] = { 3.25, 1e-3, 0.75 };
    CHECK_OK(vc_tracker_log(t, 1, 2, names, v1));
    CHECK_OK(vc_tracker_log(t, 2, 3, names, v2));
    vc_tracker_close(t);
    /* the event file */
    find_event_file(tb, path, sizeof path);
    ev e[8];
    int n = read_events(path, e, 8);
    CHECK_MSG(n == 3, "%s: %d events", path, n);
    if (n == 3) {
        CHECK(!strcmp(e[0].version, "brain.Event:2") && e[0].wall > 1.7e9 && e[0].n == 0);
        CHECK(e[1].step == 1 && e[1].n == 2 && !strcmp(e[1].tag[0], "actor/pg_loss") && e[1].val[0] == -0.125f &&
              !strcmp(e[1].tag[1], "critic/score/mean") && e[1].val[1] == 0.5f);
        CHECK(e[2].step == 2 && e[2].n == 3 && !strcmp(e[2].tag[2], "val-core/openai/gsm8k/acc/mean@1") &&
              e[2].val[2] == 0.75f && e[2].val[1] == 1e-3f && e[2].wall >= e[1].wall);
    }
    /* verl's file logger: <root>/<project>/<experiment>.jsonl, {"step", "data"} */
    snprintf(path, sizeof path, "%s/proj/exp1.jsonl", root);
    char *text = NULL;
    size_t len = 0;
    CHECK_OK(vc_read_file(path, &text, &len));
    char *nl = text ? strchr(text, '\n') : NULL;
    if (nl) {
        *nl = 0;
        cJSON *a = cJSON_Parse(text), *b = cJSON_Parse(nl + 1);
        const cJSON *da = cJSON_GetObjectItem(a, "data"), *db = cJSON_GetObjectItem(b, "data");
        CHECK(cJSON_GetObjectItem(a, "step")->valueint == 1 && cJSON_GetObjectItem(b, "step")->valueint == 2);
        CHECK(cJSON_GetArraySize((cJSON *)da) == 2 && cJSON_GetObjectItem(da, "actor/pg_loss")->valuedouble == -0.125);
        CHECK(cJSON_IsNull(cJSON_GetObjectItem(db, "val-core/openai/gsm8k/acc/mean@1")) == 0 &&
              cJSON_GetObjectItem(db, "critic/score/mean")->valuedouble == 1e-3);
        cJSON_Delete(a);
        cJSON_Delete(b);
    } else CHECK_MSG(0, "%s: no lines", path);
    free(text);
    /* non-finite values are JSON null */
    t = NULL;
    CHECK_OK(vc_tracker_open_spec("file", "proj", "exp2", &t));
    CHECK(t && !vc_tracker_tb_path(t));
    CHECK_OK(vc_tracker_log(t, 7, 3, names, v1));
    vc_tracker_close(t);
    snprintf(path, sizeof path, "%s/proj/exp2.jsonl", root);
    text = NULL;
    CHECK_OK(vc_read_file(path, &text, &len));
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "data"), "val-core/openai/gsm8k/acc/mean@1")));
    cJSON_Delete(j);
    free(text);
    /* console or unknown backends alone: no tracker */
    t = (vc_tracker *)1;
    CHECK_OK(vc_tracker_open_spec("[console, wandb]", "p", "e", &t));
    CHECK(t == NULL);
    CHECK_OK(vc_tracker_log(NULL, 1, 3, names, v1));
    /* an event folder that cannot be made: one error naming the variable */
    snprintf(path, sizeof path, "%s/files/proj/exp1.jsonl/sub", dir);
    setenv("TENSORBOARD_DIR", path, 1);
    vc_status st = vc_tracker_open_spec("tensorboard", "p", "e", &t);
    CHECK(st == VC_ERR_IO && t == NULL && strstr(vc_last_error(), "TENSORBOARD_DIR") && strstr(vc_last_error(), "sub"));
    unsetenv("TENSORBOARD_DIR");
    unsetenv("VERL_FILE_LOGGER_ROOT");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/verlc_track_%d", (int)getpid());
    CHECK_OK(vc_mkdirs(dir));
    test_crc();
    test_logs();
    if (!vc_t_fail) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) fprintf(stderr, "cleanup failed\n");
    }
    return vc_test_done();
}
