/* verlc CUDA emulator: the kernel scheduler. A launch runs block after block on the calling thread;
 * the threads of a block are fibers with their own stacks, switched only at barriers, in the order
 * VC_EMU_ORDER says (forward, reverse or random: a missing barrier shows as results that change with
 * the order). A block whose threads all wait at barriers that can never open (a __syncthreads that
 * some threads skip, lanes of a warp at different barriers) is reported as a deadlock, naming the
 * kernel, the block and the threads. */
#include "emu_internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <vector>

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

/* ---- fibers: an x86-64 context switch (callee-saved registers and the stack pointer) ---- */
extern "C" void vc_emu_swap(void **save_sp, void *to_sp);
#if defined(__x86_64__)
asm(".text\n"
    ".globl vc_emu_swap\n"
    ".type vc_emu_swap,@function\n"
    "vc_emu_swap:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size vc_emu_swap,.-vc_emu_swap\n");
#else
#error "the CUDA emulator's fibers need x86-64"
#endif

enum { F_RUN, F_BLOCK, F_WARP, F_DONE };
struct fiber {
    void *sp;
    char *stack;
    int state;
    unsigned mask, lane, warp;
    uint3 tid;
};

static fiber *g_fib;
static int g_cap, g_n;
static fiber *g_cur;
static void *g_sched_sp;
static vc_emu_task *g_task;
static const char *g_kname;
static char *g_smem;
static size_t g_smem_cap, g_smem_len;
static uint64_t g_rng = 0x243F6A8885A308D3ull;

static size_t stack_bytes(void) {
    static size_t n = 0;
    if (!n) n = (size_t)vc_emu_env_int("VC_EMU_STACK_KB", 256) << 10;
    return n;
}

static void fibers_reserve(int n) {
    if (n <= g_cap) return;
    fiber *f = (fiber *)realloc(g_fib, sizeof(fiber) * (size_t)n);
    if (!f) vc_emu_die("out of host memory for %d fibers", n);
    g_fib = f;
    size_t sz = stack_bytes(), page = 4096;
    for (int i = g_cap; i < n; i++) {
        void *p = mmap(NULL, sz + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) vc_emu_die("cannot map a %zu KiB fiber stack", sz >> 10);
        mprotect(p, page, PROT_NONE); /* guard page: an overflow faults */
        g_fib[i].stack = (char *)p + page;
    }
    g_cap = n;
}

[[noreturn]] static void fiber_entry(void) {
    g_task->run_thread();
    g_cur->state = F_DONE;
    void *dead;
    vc_emu_swap(&dead, g_sched_sp);
    __builtin_unreachable();
}

/* Stack tops are staggered by a multiple of 64 bytes (below 64 KiB): tops at the same offset from a
 * large power of two would all map to the same cache sets. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define VC_EMU_NO_ASAN __attribute__((no_sanitize_address))
#else
#define VC_EMU_NO_ASAN
#endif
/* under ASan (a sanitizer build of the emulator) a reused stack is unpoisoned first: frames of fibers that ended
 * switched out leave their redzones behind */
VC_EMU_NO_ASAN static void fiber_start(fiber *f, int i) {
#if defined(__SANITIZE_ADDRESS__)
    __asan_unpoison_memory_region(f->stack, stack_bytes());
#endif
    uintptr_t top = ((uintptr_t)f->stack + stack_bytes() - ((size_t)i * 1088u % 65536u)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;                  /* fiber_entry's return address (never used) */
    *--sp = (void *)&fiber_entry;  /* where vc_emu_swap's ret goes */
    for (int i = 0; i < 6; i++) *--sp = NULL; /* rbp rbx r12-r15 */
    f->sp = sp;
}

static void wait_here(int state, unsigned mask) {
    fiber *f = g_cur;
    if (!f) vc_emu_die("a barrier or warp function was called outside a kernel");
    f->state = state;
    f->mask = mask;
    vc_emu_swap(&f->sp, g_sched_sp);
}

/* ---- cp.async: each thread's copies in flight. A copy reads its source when issued (a GPU may read it any time
 * before the copy completes) and fills its destination with NaN bytes at once; its bytes land when the thread waits
 * for its group, so a read of the destination before that wait, or by another thread before a barrier that follows
 * the wait, sees NaN. A wait for groups a thread never committed retires nothing; uncommitted copies stay in flight
 * (cp.async.wait_group's rule). Copies still in flight when a block ends are dropped. ---- */
struct cp_pending {
    void *dst;
    unsigned char bytes[16];
    int size;  /* 4, 8 or 16 */
    int group; /* 0: not committed yet */
};
static std::vector<std::vector<cp_pending>> g_cp; /* per thread of the block */
static std::vector<int> g_cp_groups;              /* groups each thread committed */

static int cur_index(const char *what) {
    if (!g_cur) vc_emu_die("%s was called outside a kernel", what);
    return (int)(g_cur - g_fib);
}
void vc_emu_cp(void *dst, const void *src, int size, int src_size) {
    const int i = cur_index("cp.async");
    if ((size != 4 && size != 8 && size != 16) || src_size < 0 || src_size > size)
        vc_emu_die("cp.async of %d bytes, %d from the source", size, src_size);
    if (((uintptr_t)dst % (unsigned)size) || (src_size && (uintptr_t)src % (unsigned)size)) {
        char where[256];
        vc_emu_where(where, sizeof where);
        vc_emu_die("%s: cp.async of %d bytes between addresses not %d-byte aligned (%p <- %p)", where, size, size, dst,
                   src);
    }
    cp_pending c;
    c.dst = dst;
    memset(c.bytes, 0, sizeof c.bytes);
    if (src_size) memcpy(c.bytes, src, (size_t)src_size); /* (the rest zeros: cp.async's src-size) */
    c.size = size;
    c.group = 0;
    memset(dst, 0xff, (size_t)size);
    g_cp[i].push_back(c);
}
void vc_emu_cp_commit(void) {
    const int i = cur_index("cp.async.commit_group");
    const int g = ++g_cp_groups[i];
    for (cp_pending &c : g_cp[i])
        if (!c.group) c.group = g;
}
/* a copy's destination still holds the NaN bytes its issue left: anything else is a store (or another copy) into it
 * while the copy was in flight, which a GPU may order either way */
static void cp_land(const cp_pending &c) {
    const unsigned char *d = (const unsigned char *)c.dst;
    for (int b = 0; b < c.size; b++)
        if (d[b] != 0xff) {
            char where[256];
            vc_emu_where(where, sizeof where);
            vc_emu_die("%s: shared memory at %p written while a cp.async into it was in flight", where, c.dst);
        }
    memcpy(c.dst, c.bytes, (size_t)c.size);
}
void vc_emu_cp_wait(int n) {
    const int i = cur_index("cp.async.wait_group");
    const int upto = g_cp_groups[i] - n;
    std::vector<cp_pending> &v = g_cp[i];
    size_t k = 0; /* (the copies left, compacted in place in issue order) */
    for (size_t j = 0; j < v.size(); j++) {
        if (v[j].group && v[j].group <= upto) cp_land(v[j]);
        else v[k++] = v[j];
    }
    v.resize(k);
}

void __syncthreads(void) { wait_here(F_BLOCK, 0); }
void __syncwarp(unsigned mask) { wait_here(F_WARP, mask); }
unsigned vc_emu_lane(void) { return g_cur ? g_cur->lane : 0; }
void *vc_emu_dyn_smem(void) { return g_smem; }
/* __isGlobal: not within the block's dynamic shared memory (static __shared__ arrays are host statics here: kernels
 * that copy out of them must not ask) */
unsigned __isGlobal(const void *p) {
    const char *c = (const char *)p;
    return !(g_smem && c >= g_smem && c < g_smem + g_smem_cap);
}

unsigned __activemask(void) {
    if (!g_cur) return 0;
    unsigned m = 0, w = g_cur->warp;
    for (int l = 0; l < 32; l++) {
        int i = (int)w * 32 + l;
        if (i < g_n && g_fib[i].state != F_DONE) m |= 1u << l;
    }
    return m;
}

/* the exchanges' values, [warp][VC_EMU_XMAX][lane]: a warp's j-th values side by side (each lane reads them with one
 * copy a value, not a walk over 32 fibers); zero at a block's start */
static uint64_t *g_xslot;
static size_t g_xcap;

static void xslots_reset(int n) {
    size_t need = (size_t)(n + 31) / 32 * VC_EMU_XMAX * 32;
    if (need > g_xcap) {
        uint64_t *p = (uint64_t *)realloc(g_xslot, need * sizeof *p);
        if (!p) vc_emu_die("out of host memory for the warps' exchanges");
        g_xslot = p, g_xcap = need;
    }
    memset(g_xslot, 0, need * sizeof *g_xslot);
}

const uint64_t *vc_emu_exchange_begin(const uint64_t *v, int n, unsigned mask) {
    fiber *f = g_cur;
    if (!f) vc_emu_die("a warp function was called outside a kernel");
    if (n < 1 || n > VC_EMU_XMAX) vc_emu_die("an exchange of %d values (1 to %d)", n, VC_EMU_XMAX);
    uint64_t *w = g_xslot + (size_t)f->warp * VC_EMU_XMAX * 32;
    for (int j = 0; j < n; j++) w[j * 32 + f->lane] = v[j];
    wait_here(F_WARP, mask);
    return w; /* (absent lanes' values stay 0 from the block's start) */
}

void vc_emu_exchange_end(unsigned mask) { wait_here(F_WARP, mask); } /* nobody publishes again before all have read */

void vc_emu_exchange(uint64_t v, unsigned mask, uint64_t out[32]) {
    memcpy(out, vc_emu_exchange_begin(&v, 1, mask), sizeof *out * 32);
    vc_emu_exchange_end(mask);
}

/* opens the warp barriers of warp w that every live participant has reached; returns the threads released */
static int release_warp(int w) {
    unsigned A = 0, W = 0;
    int rel = 0;
    for (int l = 0; l < 32 && w * 32 + l < g_n; l++) {
        const fiber *f = &g_fib[w * 32 + l];
        if (f->state != F_DONE) A |= 1u << l;
        if (f->state == F_WARP) W |= 1u << l;
    }
    for (int l = 0; l < 32; l++) {
        if (!(W >> l & 1)) continue;
        unsigned m = (g_fib[w * 32 + l].mask & A) | 1u << l;
        if (m & ~W) continue; /* a participant is elsewhere */
        for (int k = 0; k < 32; k++)
            if (m >> k & 1) {
                g_fib[w * 32 + k].state = F_RUN;
                rel++;
            }
        W &= ~m;
    }
    return rel;
}

/* opens __syncthreads when every live thread of the block waits there */
static int release_block(int alive) {
    int nb = 0;
    for (int i = 0; i < g_n; i++) nb += g_fib[i].state == F_BLOCK;
    if (!nb || nb != alive) return 0;
    for (int i = 0; i < g_n; i++)
        if (g_fib[i].state == F_BLOCK) g_fib[i].state = F_RUN;
    return nb;
}

[[noreturn]] static void deadlock(void) {
    static const char *what[] = { "running", "at __syncthreads", "at a warp barrier", "done" };
    fprintf(stderr, "cuda emulator: kernel %s, block (%u,%u,%u): deadlock: no barrier can open\n", g_kname, blockIdx.x,
            blockIdx.y, blockIdx.z);
    int shown = 0;
    for (int i = 0; i < g_n && shown < 8; i++) {
        const fiber *f = &g_fib[i];
        if (i > 0 && f->state == g_fib[i - 1].state && i + 1 < g_n) continue;
        fprintf(stderr, "  thread (%u,%u,%u) lane %u: %s (mask %08x)\n", f->tid.x, f->tid.y, f->tid.z, f->lane,
                what[f->state], f->mask);
        shown++;
    }
    abort();
}

/* runs the lanes of warp w until none can go on (all done, or waiting at __syncthreads or at a warp
 * barrier that cannot open yet); warp barriers open here, without a pass over the block */
static int run_warp(int w, const int *lorder, int *alive) {
    int total = 0;
    for (;;) {
        int ran = 0;
        for (int k = 0; k < 32; k++) {
            int i = w * 32 + lorder[k];
            if (i >= g_n) continue;
            fiber *f = &g_fib[i];
            if (f->state != F_RUN) continue;
            g_cur = f;
            threadIdx = f->tid;
            vc_emu_swap(&g_sched_sp, f->sp);
            ran++;
            if (f->state == F_DONE) (*alive)--;
        }
        g_cur = NULL;
        total += ran;
        if (!release_warp(w)) return total;
    }
}

static void run_block(const int *worder, const int *lorder) {
    for (int i = 0; i < g_n; i++) {
        fiber *f = &g_fib[i];
        f->tid = uint3{ i % blockDim.x, i / blockDim.x % blockDim.y, i / (blockDim.x * blockDim.y) };
        f->lane = (unsigned)i % 32;
        f->warp = (unsigned)i / 32;
        f->state = F_RUN;
        f->mask = 0;
        fiber_start(f, i);
    }
    xslots_reset(g_n);
    if (g_smem_len) memset(g_smem, 0xff, g_smem_len); /* uninitialised shared memory reads as NaN */
    if ((int)g_cp.size() < g_n) g_cp.resize((size_t)g_n);
    g_cp_groups.assign((size_t)g_n, 0);
    for (int i = 0; i < g_n; i++) g_cp[i].clear();
    int alive = g_n, nw = (g_n + 31) / 32;
    for (;;) {
        int ran = 0;
        for (int k = 0; k < nw; k++) ran += run_warp(worder[k], lorder, &alive);
        if (!alive) return;
        if (!release_block(alive) && !ran) deadlock();
    }
}

static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

static void make_order(int *o, int n, int mode) {
    for (int i = 0; i < n; i++) o[i] = mode == 1 ? n - 1 - i : i;
    if (mode == 2)
        for (int i = n - 1; i > 0; i--) {
            int j = (int)(rnd() % (uint64_t)(i + 1)), t = o[i];
            o[i] = o[j];
            o[j] = t;
        }
}

const char *vc_emu_current_kernel(void) { return g_kname; }
int vc_emu_in_kernel(void) { return g_cur != NULL; }
void vc_emu_where(char *buf, size_t len) {
    if (g_cur)
        snprintf(buf, len, "kernel %s, block (%u,%u,%u), thread (%u,%u,%u)", g_kname, blockIdx.x, blockIdx.y,
                 blockIdx.z, g_cur->tid.x, g_cur->tid.y, g_cur->tid.z);
    else snprintf(buf, len, "host code");
}

void vc_emu_run_grid(const char *name, const vc_emu_cfg &c, vc_emu_task *t) {
    static int mode = -1;
    if (mode < 0) mode = vc_emu_order();
    if (mode == 2) g_rng = 0x243F6A8885A308D3ull ^ (uint64_t)vc_emu_env_int("VC_EMU_SEED", 1) * 0x9E3779B97F4A7C15ull;
    gridDim = c.grid;
    blockDim = c.block;
    g_n = (int)(c.block.x * c.block.y * c.block.z);
    fibers_reserve(g_n);
    if (c.smem > g_smem_cap) {
        free(g_smem);
        g_smem = (char *)aligned_alloc(128, (c.smem + 127) & ~(size_t)127);
        if (!g_smem) vc_emu_die("out of host memory for %zu bytes of shared memory", c.smem);
        g_smem_cap = c.smem;
    }
    g_smem_len = c.smem;
    g_task = t;
    g_kname = name;
    int nw = (g_n + 31) / 32, *worder = (int *)malloc(sizeof(int) * (size_t)nw), lorder[32];
    uint64_t nb = (uint64_t)c.grid.x * c.grid.y * c.grid.z;
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t i = mode == 1 ? nb - 1 - b : b;
        blockIdx = uint3{ (unsigned)(i % c.grid.x), (unsigned)(i / c.grid.x % c.grid.y), (unsigned)(i / ((uint64_t)c.grid.x * c.grid.y)) };
        make_order(worder, nw, mode);
        make_order(lorder, 32, mode);
        run_block(worder, lorder);
    }
    free(worder);
    g_task = NULL;
    g_kname = NULL;
}
