/* Custom reward programs: a child process speaking JSON lines on stdin/stdout, kept alive across rows,
 * with a per-call deadline; a hung or crashed program is killed and restarted and the row counted failed. */
#define _GNU_SOURCE
#include "verlc/reward.h"
#include "verlc/json.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct vc_reward_proc {
    char **argv;
    int timeout_ms;
    pid_t pid;      /* 0 when not running */
    int fd;         /* our end of the socket pair (child's stdin and stdout) */
    char *buf;      /* bytes read and not yet consumed */
    size_t len, cap;
    long row, failures, restarts, starts;
};

static void proc_kill(vc_reward_proc *p) {
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
    if (p->pid > 0) {
        kill(-p->pid, SIGKILL); /* the whole process group: shell wrappers and their children */
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    p->pid = 0;
    p->len = 0;
}

static void child_exec(vc_reward_proc *p, int sock, int errfd) {
    setpgid(0, 0);
    dup2(sock, 0);
    dup2(sock, 1);
    if (sock > 1) close(sock);
    signal(SIGPIPE, SIG_DFL);
    execvp(p->argv[0], p->argv);
    int e = errno;
    if (write(errfd, &e, sizeof e) < 0) { /* nothing more to do */ }
    _exit(127);
}

static vc_status proc_spawn(vc_reward_proc *p) {
    int sv[2], ep[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return vc_fail(VC_ERR_IO, "reward program: socketpair: %s", strerror(errno));
    if (pipe2(ep, O_CLOEXEC) != 0) {
        close(sv[0]); close(sv[1]);
        return vc_fail(VC_ERR_IO, "reward program: pipe: %s", strerror(errno));
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]); close(sv[1]); close(ep[0]); close(ep[1]);
        return vc_fail(VC_ERR_IO, "reward program: fork: %s", strerror(errno));
    }
    if (pid == 0) { close(sv[0]); close(ep[0]); child_exec(p, sv[1], ep[1]); }
    setpgid(pid, pid); /* also here, so that a kill right after the fork reaches the group */
    close(sv[1]);
    close(ep[1]);
    int e = 0;
    ssize_t n;
    while ((n = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR) {}
    close(ep[0]);
    p->pid = pid;
    p->fd = sv[0];
    p->len = 0;
    if (n > 0) {
        proc_kill(p);
        return vc_fail(VC_ERR_IO, "reward program '%s': cannot start: %s", p->argv[0], strerror(e));
    }
    fcntl(p->fd, F_SETFL, fcntl(p->fd, F_GETFL) | O_NONBLOCK);
    if (p->starts++) p->restarts++;
    return VC_OK;
}

vc_status vc_reward_proc_start(char *const *argv, int timeout_ms, vc_reward_proc **out) {
    *out = NULL;
    if (!argv || !argv[0]) return vc_fail(VC_ERR_ARG, "reward program: empty command");
    vc_reward_proc *p = vc_calloc(1, sizeof *p);
    if (!p) return VC_ERR_NOMEM;
    int n = 0;
    while (argv[n]) n++;
    p->argv = vc_calloc((size_t)n + 1, sizeof(char *));
    p->fd = -1;
    p->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
    vc_status st = p->argv ? VC_OK : VC_ERR_NOMEM;
    for (int i = 0; i < n && !st; i++)
        if (!(p->argv[i] = vc_strdup(argv[i]))) st = VC_ERR_NOMEM;
    if (!st) st = proc_spawn(p);
    if (st) { vc_reward_proc_close(p); return st; }
    *out = p;
    return VC_OK;
}

static int ms_left(double deadline) {
    double left = (deadline - vc_now()) * 1000.0;
    return left <= 0 ? 0 : (int)left + 1;
}

/* Writes all of msg before the deadline; 0 on success, -1 when the child is gone or too slow. */
static int send_all(vc_reward_proc *p, const char *msg, size_t n, double deadline) {
    while (n) {
        ssize_t k = send(p->fd, msg, n, MSG_NOSIGNAL);
        if (k > 0) { msg += k; n -= (size_t)k; continue; }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
        struct pollfd pf = { p->fd, POLLOUT, 0 };
        if (poll(&pf, 1, ms_left(deadline)) <= 0 || (pf.revents & (POLLERR | POLLHUP))) return -1;
    }
    return 0;
}

/* Reads one line (without '\n') into a new string; NULL on timeout or end of stream. */
static char *recv_line(vc_reward_proc *p, double deadline) {
    for (;;) {
        char *nl = p->len ? memchr(p->buf, '\n', p->len) : NULL;
        if (nl) {
            size_t k = (size_t)(nl - p->buf);
            char *line = vc_malloc(k + 1);
            if (!line) return NULL;
            memcpy(line, p->buf, k);
            line[k] = 0;
            memmove(p->buf, nl + 1, p->len - k - 1);
            p->len -= k + 1;
            return line;
        }
        if (p->cap - p->len < 4096) {
            size_t cap = p->cap ? p->cap * 2 : 8192;
            char *b = realloc(p->buf, cap);
            if (!b) return NULL;
            p->buf = b;
            p->cap = cap;
        }
        ssize_t k = recv(p->fd, p->buf + p->len, p->cap - p->len, 0);
        if (k > 0) { p->len += (size_t)k; continue; }
        if (k == 0) return NULL;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return NULL;
        struct pollfd pf = { p->fd, POLLIN, 0 };
        if (poll(&pf, 1, ms_left(deadline)) <= 0) return NULL;
    }
}

/* A JSON value as a request line (with its newline), or NULL when out of memory. */
static char *json_line(const cJSON *o) {
    char *s = o ? vc_json_print(o, 0) : NULL;
    char *line = s ? vc_malloc(strlen(s) + 2) : NULL;
    if (line) { strcpy(line, s); strcat(line, "\n"); }
    free(s);
    return line;
}

/* a copy of v, or JSON null for NULL (NULL only when out of memory) */
static cJSON *dup_or_null(const cJSON *v) { return v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull(); }

static char *request_v(const char *ds, const char *sol, const cJSON *gt, const cJSON *extra) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "data_source", ds ? ds : "");
    cJSON_AddStringToObject(o, "solution_str", sol ? sol : "");
    cJSON_AddItemToObject(o, "ground_truth", dup_or_null(gt));
    cJSON_AddItemToObject(o, "extra_info", dup_or_null(extra));
    char *line = cJSON_GetArraySize(o) == 4 ? json_line(o) : NULL;
    cJSON_Delete(o);
    return line;
}

/* The request line: ground_truth and extra_info are embedded as JSON when they parse, else as strings. */
static char *request(const char *ds, const char *sol, const char *gt, const char *extra) {
    cJSON *g = gt ? cJSON_Parse(gt) : NULL, *e = extra ? cJSON_Parse(extra) : NULL;
    if (gt && !g) g = cJSON_CreateString(gt);
    if (extra && !e) e = cJSON_CreateString(extra);
    char *line = (!gt || g) && (!extra || e) ? request_v(ds, sol, g, e) : NULL;
    cJSON_Delete(g);
    cJSON_Delete(e);
    return line;
}

static vc_status row_failed(vc_reward_proc *p, long row, const char *why, double *score) {
    proc_kill(p);
    p->failures++;
    *score = 0.0;
    return vc_fail(VC_ERR_TIMEOUT, "reward program '%s': row %ld %s; killed, restarting (%ld failed rows)",
                   p->argv[0], row, why, p->failures);
}

vc_status vc_reward_proc_call(vc_reward_proc *p, const char *request_line, cJSON **answer) {
    long row = p->row++;
    double dummy;
    vc_status st;
    *answer = NULL;
    if (!p->pid && (st = proc_spawn(p))) return st;
    double deadline = vc_now() + p->timeout_ms / 1000.0;
    if (send_all(p, request_line, strlen(request_line), deadline))
        return row_failed(p, row, "was not accepted (program exited or hung)", &dummy);
    char *line = recv_line(p, deadline);
    if (!line) {
        int gone = waitpid(p->pid, NULL, WNOHANG) == p->pid;
        if (gone) p->pid = 0;
        return row_failed(p, row, gone ? "got no answer: the program exited" : "timed out", &dummy);
    }
    cJSON *j = cJSON_Parse(line);
    if (!j) {
        vc_status r = row_failed(p, row, "got a line that is not JSON", &dummy);
        vc_fail_ctx(r, "'%.60s'", line);
        free(line);
        return r;
    }
    free(line);
    *answer = j;
    return VC_OK;
}

vc_status vc_reward_proc_call_many(vc_reward_proc *p, const char *request_line, int n, cJSON **answers) {
    long row = p->row;
    double dummy;
    vc_status st;
    for (int k = 0; k < n; k++) answers[k] = NULL;
    p->row += n;
    if (!p->pid && (st = proc_spawn(p))) return st;
    if (send_all(p, request_line, strlen(request_line), vc_now() + p->timeout_ms / 1000.0))
        return row_failed(p, row, "was not accepted (program exited or hung)", &dummy);
    for (int got = 0; got < n; got++) { /* each answer within the timeout (and 2 s) of the one before: the program
                                          * times its calls out itself; this catches one that hangs it */
        char *line = recv_line(p, vc_now() + p->timeout_ms / 1000.0 + 2.0);
        if (!line) {
            int gone = waitpid(p->pid, NULL, WNOHANG) == p->pid;
            if (gone) p->pid = 0;
            return row_failed(p, row + got, gone ? "got no answer: the program exited" : "timed out", &dummy);
        }
        cJSON *j = cJSON_Parse(line);
        const cJSON *i = cJSON_GetObjectItemCaseSensitive(j, "i");
        int k = cJSON_IsNumber(i) ? i->valueint : -1;
        if (!j || k < 0 || k >= n || answers[k]) {
            cJSON_Delete(j);
            st = row_failed(p, row + got, "got a line that is not the answer to one of its calls", &dummy);
            vc_fail_ctx(st, "'%.60s'", line);
            free(line);
            return st;
        }
        free(line);
        answers[k] = j;
    }
    return VC_OK;
}

/* The score of one answer j (a number, a bool or an object with "score"; {"error": text} fails the row);
 * the object itself into *answer when wanted. */
static vc_status answer_score(vc_reward_proc *p, long row, const cJSON *j, double *score) {
    *score = 0.0;
    const cJSON *err = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "error") : NULL;
    const cJSON *s = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "score") : j;
    if (cJSON_IsBool(s)) *score = cJSON_IsTrue(s);
    else if (cJSON_IsNumber(s) && isfinite(s->valuedouble)) *score = s->valuedouble;
    else if (cJSON_IsString(err)) { /* the function raised: the row fails, the program goes on */
        p->failures++;
        return vc_fail(VC_ERR_TIMEOUT, "reward program '%s': row %ld raised %.300s (%ld failed rows)", p->argv[0], row,
                       err->valuestring, p->failures);
    } else {
        char *line = vc_json_print(j, 0);
        p->failures++;
        vc_status st = vc_fail(VC_ERR_FORMAT, "reward program '%s': row %ld: score is not a number: %.80s", p->argv[0],
                               row, line ? line : "");
        free(line);
        return st;
    }
    return VC_OK;
}

static vc_status score_line(vc_reward_proc *p, char *req, double *score, cJSON **answer) {
    *score = 0.0;
    if (answer) *answer = NULL;
    if (!req) return vc_fail(VC_ERR_NOMEM, "reward program: cannot build request for row %ld", p->row);
    cJSON *j = NULL;
    vc_status st = vc_reward_proc_call(p, req, &j);
    free(req);
    if (!st) st = answer_score(p, p->row - 1, j, score);
    if (!st && answer && cJSON_IsObject(j)) {
        *answer = j;
        j = NULL;
    }
    cJSON_Delete(j);
    return st;
}

vc_status vc_reward_proc_score_ex(vc_reward_proc *p, const char *data_source, const char *solution,
                                  const char *ground_truth, const char *extra_info_json, double *score,
                                  cJSON **answer) {
    return score_line(p, request(data_source, solution, ground_truth, extra_info_json), score, answer);
}

vc_status vc_reward_proc_score_v(vc_reward_proc *p, const char *data_source, const char *solution,
                                 const cJSON *ground_truth, const cJSON *extra_info, double *score, cJSON **answer) {
    return score_line(p, request_v(data_source, solution, ground_truth, extra_info), score, answer);
}

vc_status vc_reward_proc_score_batch(vc_reward_proc *p, int n, const char *const *data_source,
                                     const char *const *solution, const cJSON *const *ground_truth,
                                     const cJSON *const *extra_info, double *score, cJSON **answer,
                                     int *failed) {
    static const char *const K[4] = { "data_sources", "solution_strs", "ground_truths", "extra_infos" };
    cJSON *o = cJSON_CreateObject(), *a[4];
    int ok = o != NULL;
    for (int k = 0; k < 4; k++) ok = ok && (a[k] = cJSON_AddArrayToObject(o, K[k])) != NULL;
    for (int i = 0; ok && i < n; i++) {
        score[i] = 0;
        failed[i] = 0;
        if (answer) answer[i] = NULL;
        ok = cJSON_AddItemToArray(a[0], cJSON_CreateString(data_source[i] ? data_source[i] : "")) &&
             cJSON_AddItemToArray(a[1], cJSON_CreateString(solution[i] ? solution[i] : "")) &&
             cJSON_AddItemToArray(a[2], dup_or_null(ground_truth[i])) &&
             cJSON_AddItemToArray(a[3], dup_or_null(extra_info[i]));
    }
    char *req = ok ? json_line(o) : NULL;
    cJSON_Delete(o);
    if (!req) return vc_fail(VC_ERR_NOMEM, "reward program: cannot build a batch request of %d rows", n);
    cJSON *j = NULL;
    long row = p->row;
    vc_status st = vc_reward_proc_call(p, req, &j);
    free(req);
    if (!st && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "error")))
        st = answer_score(p, row, j, score); /* the call raised: the whole batch fails */
    else if (!st && (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != n)) {
        p->failures++;
        st = vc_fail(VC_ERR_FORMAT, "reward program '%s': batch %ld: expected a list of %d answers", p->argv[0], row, n);
    }
    if (vc_reward_row_failed(st)) /* every row of the batch failed */
        for (int i = 0; i < n; i++) failed[i] = 1;
    const cJSON *e = cJSON_IsArray(j) ? j->child : NULL;
    for (int i = 0; !st && i < n; i++, e = e->next) {
        vc_status r = answer_score(p, row, e, &score[i]);
        if (vc_reward_row_failed(r)) failed[i] = 1;
        else if (r) st = vc_fail_ctx(r, "row %d of the batch", i);
        else if (answer && cJSON_IsObject(e)) answer[i] = cJSON_Duplicate(e, 1);
    }
    cJSON_Delete(j);
    return st;
}

vc_status vc_reward_proc_score(vc_reward_proc *p, const char *data_source, const char *solution,
                               const char *ground_truth, const char *extra_info_json, double *score) {
    return vc_reward_proc_score_ex(p, data_source, solution, ground_truth, extra_info_json, score, NULL);
}

vc_status vc_reward_proc_send_line(vc_reward_proc *p, const char *line, double deadline) {
    if (!p->pid) return vc_fail(VC_ERR_IO, "'%s' is not running", p->argv[0]);
    if (!send_all(p, line, strlen(line), deadline)) return VC_OK;
    proc_kill(p);
    return vc_fail(VC_ERR_TIMEOUT, "'%s' did not take its input (it exited or hung)", p->argv[0]);
}

vc_status vc_reward_proc_read_line(vc_reward_proc *p, double deadline, char **line) {
    *line = p->pid ? recv_line(p, deadline) : NULL;
    if (*line) return VC_OK;
    int gone = !p->pid || waitpid(p->pid, NULL, WNOHANG) == p->pid;
    if (gone) p->pid = 0;
    proc_kill(p);
    return vc_fail(VC_ERR_TIMEOUT, "'%s' %s", p->argv[0], gone ? "exited" : "timed out");
}

long vc_reward_proc_failures(const vc_reward_proc *p) { return p->failures; }
long vc_reward_proc_restarts(const vc_reward_proc *p) { return p->restarts; }

void vc_reward_proc_close(vc_reward_proc *p) {
    if (!p) return;
    if (p->pid > 0) { /* closing stdin lets a well-behaved program exit; give it a moment */
        close(p->fd);
        p->fd = -1;
        for (int i = 0; i < 20 && waitpid(p->pid, NULL, WNOHANG) == 0; i++) {
            struct timespec ts = { 0, 5 * 1000000L };
            nanosleep(&ts, NULL);
        }
        if (waitpid(p->pid, NULL, WNOHANG) != 0) p->pid = 0;
    }
    proc_kill(p);
    if (p->argv)
        for (int i = 0; p->argv[i]; i++) free(p->argv[i]);
    free(p->argv);
    free(p->buf);
    free(p);
}
