/* The backend's elementwise, layout, reduction and MoE entries against naive host references, on the
 * CPU backend and on the sim backend (values moved only with h2d / d2h); the bf16 matmul precision
 * against a naive product of bf16-rounded inputs; and a check that a host read of a sim pointer
 * really faults (so the sim runs can catch host dereferences). */
#include "tensor/backend.h"
#include "verlc/dtype.h"
#include "verlc/pool.h"
#include "verlc/tensor.h"
#include "vc_test.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}
static float *hrand(int64_t n) {
    float *h = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) h[i] = frand();
    return h;
}
static void *up(const void *h, size_t bytes) {
    void *d = vc_be()->alloc(bytes);
    vc_be()->h2d(d, h, bytes);
    return d;
}
static float *down(const float *d, int64_t n) {
    float *h = malloc((size_t)n * 4);
    vc_be()->d2h(h, d, (size_t)n * 4);
    return h;
}
/* max |got - want| over n, freeing got */
static double diff(float *got, const float *want, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= m)) m = e;
    }
    free(got);
    return m;
}
#define SAME(d, ref, n, tol, what) do { double e_ = diff(down(d, n), ref, n); \
    CHECK_MSG(e_ <= (tol), "%s %s: max error %.3g", vc_be()->name, what, e_); } while (0)

static void test_elementwise(void) {
    const vc_backend *B = vc_be();
    enum { N = 40000 }; /* several pool blocks */
    float *a = hrand(N), *b = hrand(N), *y0 = hrand(N), *ref = malloc(N * 4);
    float *da = up(a, N * 4), *db = up(b, N * 4), *dy = up(y0, N * 4);
    B->fill(dy, 2.5f, N);
    for (int i = 0; i < N; i++) ref[i] = 2.5f;
    SAME(dy, ref, N, 0, "fill");
    B->h2d(dy, y0, N * 4);
    B->axpy(dy, -0.75f, da, N);
    for (int i = 0; i < N; i++) ref[i] = y0[i] + -0.75f * a[i];
    SAME(dy, ref, N, 1e-6, "axpy");
    B->add(dy, da, db, N);
    for (int i = 0; i < N; i++) ref[i] = a[i] + b[i];
    SAME(dy, ref, N, 0, "add");
    B->mul(dy, da, db, N);
    for (int i = 0; i < N; i++) ref[i] = a[i] * b[i];
    SAME(dy, ref, N, 0, "mul");
    B->mul_acc(dy, da, db, N);
    for (int i = 0; i < N; i++) ref[i] += a[i] * b[i];
    SAME(dy, ref, N, 1e-6, "mul_acc");
    B->scale(dy, da, 3.0f, N);
    for (int i = 0; i < N; i++) ref[i] = 3.0f * a[i];
    SAME(dy, ref, N, 0, "scale");
    B->scale(da, da, 3.0f, N); /* in place */
    SAME(da, ref, N, 0, "scale in place");
    B->h2d(da, a, N * 4);
    B->softcap_fwd(dy, da, 0.5f, N);
    for (int i = 0; i < N; i++) ref[i] = 0.5f * tanhf(a[i] / 0.5f);
    SAME(dy, ref, N, 1e-6, "softcap_fwd");
    float *yc = down(dy, N), *dx = up(y0, N * 4);
    B->softcap_bwd(dx, db, dy, 0.5f, N);
    for (int i = 0; i < N; i++) { float t = yc[i] / 0.5f; ref[i] = y0[i] + b[i] * (1 - t * t); }
    SAME(dx, ref, N, 1e-6, "softcap_bwd");
    float *dout = up(&(float){ -1.5f }, 4);
    B->dot_fwd(dout, da, db, N);
    double acc = 0;
    for (int i = 0; i < N; i++) acc += (double)a[i] * b[i];
    float want = (float)acc;
    SAME(dout, &want, 1, 0, "dot_fwd");
    B->h2d(dout, &(float){ -1.5f }, 4);
    B->h2d(dx, y0, N * 4);
    B->dot_bwd(dx, dout, db, N);
    for (int i = 0; i < N; i++) ref[i] = y0[i] + -1.5f * b[i];
    SAME(dx, ref, N, 1e-6, "dot_bwd");
    /* sumsq: two tensors, double; a NaN makes it NaN */
    const float *xs[2] = { da, db };
    size_t sz[2] = { N, 7 };
    double ss = 0, got = -1;
    for (int i = 0; i < N; i++) ss += (double)a[i] * a[i];
    for (int i = 0; i < 7; i++) ss += (double)b[i] * b[i];
    CHECK_OK(B->sumsq(xs, sz, 2, &got));
    CHECK_NEAR(got, ss, 1e-9 * ss);
    free(yc); free(a); free(b); free(y0); free(ref);
    B->free(da); B->free(db); B->free(dy); B->free(dx); B->free(dout);
}

static void test_rows(void) {
    const vc_backend *B = vc_be();
    enum { R = 300, C = 37, REP = 3 };
    float *x = hrand(R * C), *s = hrand(R), *gy = hrand(R * C), *x0 = hrand(R * C), *s0 = hrand(R);
    float *ref = malloc(R * C * 4), *rs = malloc(R * 4);
    float *dx = up(x, R * C * 4), *ds = up(s, R * 4), *dg = up(gy, R * C * 4), *dy = up(x0, R * C * 4);
    float *dgx = up(x0, R * C * 4), *dgs = up(s0, R * 4);
    B->mul_rows_fwd(dy, dx, ds, R, C);
    for (int r = 0; r < R; r++) for (int c = 0; c < C; c++) ref[r * C + c] = x[r * C + c] * s[r];
    SAME(dy, ref, R * C, 0, "mul_rows_fwd");
    B->mul_rows_bwd(dgx, dgs, dg, dx, ds, R, C);
    for (int r = 0; r < R; r++) {
        double acc = 0;
        for (int c = 0; c < C; c++) {
            ref[r * C + c] = x0[r * C + c] + gy[r * C + c] * s[r];
            acc += (double)gy[r * C + c] * x[r * C + c];
        }
        rs[r] = s0[r] + (float)acc;
    }
    SAME(dgx, ref, R * C, 1e-6, "mul_rows_bwd dx");
    SAME(dgs, rs, R, 1e-5, "mul_rows_bwd ds");
    /* rows_copy: columns 5..15 of x with each of R / REP source rows repeated, then accumulated */
    B->h2d(dy, x0, R * C * 4);
    B->rows_copy(dy + 2, C, dx + 5, C * REP, R, 10, REP, 0);
    memcpy(ref, x0, R * C * 4);
    for (int r = 0; r < R; r++) for (int c = 0; c < 10; c++) ref[r * C + 2 + c] = x[(r / REP) * C * REP + 5 + c];
    SAME(dy, ref, R * C, 0, "rows_copy");
    B->rows_copy(dy, C, ds, 0, R, 1, 1, 1); /* sld 0: broadcast, accumulate */
    for (int r = 0; r < R; r++) ref[r * C] += s[0];
    SAME(dy, ref, R * C, 0, "rows_copy broadcast acc");
    /* rows_sum: R rows into R / REP, j ascending */
    B->h2d(dy, x0, R * C * 4);
    B->rows_sum(dy, C, dx, C, R, C, REP);
    memcpy(ref, x0, R * C * 4);
    for (int i = 0; i < R / REP; i++) for (int j = 0; j < REP; j++) for (int c = 0; c < C; c++)
        ref[i * C + c] += x[(i * REP + j) * C + c];
    SAME(dy, ref, R * C, 0, "rows_sum");
    /* col_sum over many columns (several blocks) */
    enum { CR = 5, CC = 1000 };
    float *cs = up(x0, CC * 4);
    B->col_sum(cs, dx, CR, CC);
    memcpy(ref, x0, CC * 4);
    for (int r = 0; r < CR; r++) for (int c = 0; c < CC; c++) ref[c] += x[r * CC + c];
    SAME(cs, ref, CC, 0, "col_sum");
    /* rownorm: one zero row is clamped */
    memset(x, 0, C * 4);
    B->h2d(dx, x, R * C * 4);
    float *nrm = up(s0, R * 4);
    B->rownorm_fwd(dy, nrm, dx, R, C);
    for (int r = 0; r < R; r++) {
        double ssq = 0;
        for (int c = 0; c < C; c++) ssq += (double)x[r * C + c] * x[r * C + c];
        rs[r] = (float)sqrt(ssq);
        for (int c = 0; c < C; c++) ref[r * C + c] = x[r * C + c] / (rs[r] > 1e-12f ? rs[r] : 1e-12f);
    }
    SAME(nrm, rs, R, 1e-5, "rownorm_fwd nrm");
    SAME(dy, ref, R * C, 1e-6, "rownorm_fwd");
    free(x); free(s); free(gy); free(x0); free(s0); free(ref); free(rs);
    B->free(dx); B->free(ds); B->free(dg); B->free(dy); B->free(dgx); B->free(dgs); B->free(cs); B->free(nrm);
}

static void test_gather_moe(void) {
    const vc_backend *B = vc_be();
    enum { V = 9, T = 50, H = 300, K = 2 };
    int32_t ids[T];
    int64_t perm[T * K], tok[T * K];
    for (int t = 0; t < T; t++) ids[t] = (t * 7 + 3) % V; /* duplicates */
    for (int i = 0; i < T * K; i++) perm[i] = (i * 37 + 11) % (T * K); /* a permutation: 37 is prime to 100 */
    for (int i = 0; i < T * K; i++) tok[i] = (i * 13) % T;
    float *W = hrand(V * H), *gy = hrand(T * H), *W0 = hrand(V * H), *ref = malloc(T * K * H * 4);
    float *dW = up(W, V * H * 4), *dgW = up(W0, V * H * 4), *dgy = up(gy, T * H * 4);
    float *dy = vc_be()->alloc(T * K * H * 4);
    int32_t *dids = up(ids, sizeof ids);
    int64_t *dperm = up(perm, sizeof perm), *dtok = up(tok, sizeof tok);
    B->embed_fwd(dy, dW, dids, T, H);
    for (int t = 0; t < T; t++) memcpy(ref + t * H, W + ids[t] * H, H * 4);
    SAME(dy, ref, T * H, 0, "embed_fwd");
    B->embed_bwd(dgW, dgy, dids, T, H);
    memcpy(ref, W0, V * H * 4);
    for (int t = 0; t < T; t++) for (int i = 0; i < H; i++) ref[ids[t] * H + i] += gy[t * H + i];
    SAME(dgW, ref, V * H, 0, "embed_bwd");
    /* gather rows of gy by tok */
    B->gather_rows(dy, dgy, dtok, T * K, H);
    for (int r = 0; r < T * K; r++) memcpy(ref + r * H, gy + tok[r] * H, H * 4);
    SAME(dy, ref, T * K * H, 0, "gather_rows");
    {   /* scatter rows of gy (C of its H columns) to permuted, strided slots of a bigger buffer */
        enum { LD = H + 7, C = H - 3 };
        int64_t off[T];
        for (int t = 0; t < T; t++) off[t] = (int64_t)((t * 17 + 5) % T) * LD + 2;
        float *big = hrand(T * LD), *dbig = up(big, T * LD * 4), *sref = malloc(T * LD * 4);
        int64_t *doff = up(off, sizeof off);
        memcpy(sref, big, T * LD * 4);
        for (int t = 0; t < T; t++) memcpy(sref + off[t], gy + t * H, C * 4);
        B->scatter_rows(dbig, doff, dgy, H, T, C);
        SAME(dbig, sref, T * LD, 0, "scatter_rows");
        free(big); free(sref);
        B->free(dbig); B->free(doff);
    }
    /* combine: Y = the gathered rows, weights w, inv = perm */
    float *Y = down(dy, T * K * H), *w = hrand(T * K), *out = malloc(T * H * 4), *dw = malloc(T * K * 4);
    float *dwd = up(w, T * K * 4), *dout = vc_be()->alloc(T * H * 4), *ddw = vc_be()->alloc(T * K * 4);
    float *dYg = vc_be()->alloc(T * K * H * 4);
    B->moe_combine_fwd(dout, dy, dwd, dperm, T, K, H);
    for (int t = 0; t < T; t++) for (int i = 0; i < H; i++) {
        float a = 0;
        for (int k = 0; k < K; k++) a += w[t * K + k] * Y[perm[t * K + k] * H + i];
        out[t * H + i] = a;
    }
    SAME(dout, out, T * H, 1e-6, "moe_combine_fwd");
    B->moe_combine_bwd(dYg, ddw, dgy, dy, dwd, dperm, T, K, H);
    for (int t = 0; t < T; t++) for (int k = 0; k < K; k++) {
        int64_t r = perm[t * K + k];
        double a = 0;
        for (int i = 0; i < H; i++) {
            ref[r * H + i] = w[t * K + k] * gy[t * H + i];
            a += (double)gy[t * H + i] * Y[r * H + i];
        }
        dw[t * K + k] = (float)a;
    }
    SAME(dYg, ref, T * K * H, 1e-6, "moe_combine_bwd dY");
    SAME(ddw, dw, T * K, 1e-4, "moe_combine_bwd dw");
    B->h2d(dout, gy, T * H * 4);
    B->moe_scatter_add(dout, dy, dperm, T, K, H);
    for (int t = 0; t < T; t++) for (int i = 0; i < H; i++) {
        float a = gy[t * H + i];
        for (int k = 0; k < K; k++) a += Y[perm[t * K + k] * H + i];
        out[t * H + i] = a;
    }
    SAME(dout, out, T * H, 1e-6, "moe_scatter_add");
    free(W); free(gy); free(W0); free(ref); free(Y); free(w); free(out); free(dw);
    B->free(dW); B->free(dgW); B->free(dgy); B->free(dy); B->free(dids); B->free(dperm); B->free(dtok);
    B->free(dwd); B->free(dout); B->free(ddw); B->free(dYg);
}

static float bf(float x) { return vc_bf16_to_f32(vc_f32_to_bf16(x)); }

/* bf16 precision: C = op(A) op(B) of the bf16-rounded inputs (products exact in f32, sums in f32) */
static void test_bf16_gemm(void) {
    const vc_backend *B = vc_be();
    enum { M = 70, N = 300, K = 290 }; /* large enough to take the blocked path */
    for (int ta = 0; ta < 2; ta++) {
        float *A = hrand(M * K), *Bm = hrand(K * N), *ref = malloc(M * N * 4), *f32 = malloc(M * N * 4);
        for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) {
            double s = 0, s32 = 0;
            for (int k = 0; k < K; k++) {
                float a = ta ? A[k * M + i] : A[i * K + k];
                s += (double)bf(a) * bf(Bm[k * N + j]);
                s32 += (double)a * Bm[k * N + j];
            }
            ref[i * N + j] = (float)s;
            f32[i * N + j] = (float)s32;
        }
        float *dA = up(A, M * K * 4), *dB = up(Bm, K * N * 4), *dC = vc_be()->alloc(M * N * 4);
        vc_set_matmul_precision(VC_PREC_BF16);
        B->gemm(ta, 0, M, N, K, 1.0f, dA, ta ? M : K, dB, N, 0.0f, dC, N);
        vc_set_matmul_precision(VC_PREC_F32);
        SAME(dC, ref, M * N, 2e-5, "bf16 gemm");
        double far = diff(down(dC, M * N), f32, M * N);
        CHECK_MSG(far > 1e-3, "bf16 gemm should differ from the f32 product (max diff %.3g)", far);
        B->gemm(ta, 0, M, N, K, 1.0f, dA, ta ? M : K, dB, N, 0.0f, dC, N);
        SAME(dC, f32, M * N, 2e-5, "f32 gemm");
        free(A); free(Bm); free(ref); free(f32);
        B->free(dA); B->free(dB); B->free(dC);
    }
}

/* a child process reads a sim pointer on the host: it must die of SIGSEGV or SIGBUS */
static void test_sim_faults(void) {
    const vc_backend *S = vc_backend_sim();
    float *p = S->alloc(64);
    CHECK(p != NULL && S->host_visible == 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler may turn the fault into exit(1) */
        signal(SIGBUS, SIG_DFL);
        volatile float *q = p;
        float v = q[0];
        _exit(v == 12345.0f ? 3 : 2); /* reached only if the read did not fault */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    int faulted = WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS);
    faulted |= WIFEXITED(status) && WEXITSTATUS(status) != 2 && WEXITSTATUS(status) != 3; /* sanitizer report */
    CHECK_MSG(faulted,
              "host read of a sim pointer did not fault (status %d)", status);
    /* a host pointer given where backend memory is expected is a sticky error named by sync */
    S->free(p);
    float host[4] = { 0 };
    S->fill(host, 1.0f, 4);
    CHECK(host[0] == 0.0f); /* the op was skipped */
    CHECK(S->sync() == VC_ERR_DEVICE && strstr(vc_last_error(), "fill") != NULL);
}

/* the step arena's vc_graph_dalloc_try (a cache the caller can do without, such as the LM head's kept logits): NULL
 * where the backend has no memory for it, the graph's status untouched and later allocations fine; vc_graph_dalloc of
 * the same size fails the graph by name */
static void *small_alloc(size_t bytes) {
    if (bytes > ((size_t)64 << 20)) {
        vc_fail(VC_ERR_NOMEM, "test backend: %zu bytes over its 64 MiB", bytes);
        return NULL;
    }
    return vc_backend_cpu()->alloc(bytes);
}
static void test_arena_try(void) {
    vc_backend small = *vc_backend_cpu();
    small.name = "small";
    small.alloc = small_alloc;
    vc_set_backend(&small);
    vc_graph *g = vc_graph_new();
    CHECK(g != NULL);
    float *a = g ? vc_graph_dalloc_try(g, (size_t)1 << 20) : NULL;
    CHECK_MSG(a != NULL && vc_graph_status(g) == VC_OK, "a small try allocation");
    void *big = g ? vc_graph_dalloc_try(g, (size_t)1 << 30) : NULL;
    CHECK_MSG(big == NULL && vc_graph_status(g) == VC_OK, "a try allocation past the backend's memory: NULL, status kept");
    float *b = g ? vc_graph_dalloc(g, (size_t)1 << 20, 1) : NULL;
    CHECK_MSG(b != NULL && b[0] == 0.0f && vc_graph_status(g) == VC_OK, "allocations go on after it");
    void *big2 = g ? vc_graph_dalloc(g, (size_t)1 << 30, 0) : NULL;
    CHECK_MSG(big2 == NULL && vc_graph_status(g) == VC_ERR_NOMEM && strstr(vc_last_error(), "step arena"),
              "vc_graph_dalloc past it fails the graph by name (%s)", vc_last_error());
    vc_graph_free(g);
    vc_set_backend(NULL);
    vc_clear_error();
}

int main(void) {
    vc_set_threads(2);
    test_arena_try();
    const vc_backend *bes[2] = { vc_backend_cpu(), vc_backend_sim() };
    for (int b = 0; b < 2; b++) {
        rng = 0x9e3779b97f4a7c15ull;
        vc_set_backend(bes[b]);
        test_elementwise();
        test_rows();
        test_gather_moe();
        test_bf16_gemm();
        CHECK_OK(vc_be()->sync());
    }
    vc_set_backend(NULL);
    test_sim_faults(); /* last: leaves the sim's sticky error set */
    return vc_test_done();
}
