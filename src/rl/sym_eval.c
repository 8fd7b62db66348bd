/* Whether sympy would make an expression exactly zero (sym_eq.h).
 *
 * The linear form: a sum of terms, each a coefficient (an exact rational, or a binary64 float as sympy's
 * 53-bit Floats are) times a monomial (symbols and pi to integer powers, times the square root of a
 * square-free integer). That is sympy's automatic evaluation for these expressions: rationals exact, a Float
 * meeting a rational makes a Float (the rational rounded first), like terms collected, square roots with
 * their square factors taken out (sqrt(12) = 2 sqrt(3), 1/sqrt(3) = sqrt(3)/3), integer powers expanded.
 * Expressions it cannot hold (functions, a division by a sum, other powers) are decided numerically when
 * they hold no Float: at three complex points per symbol in long double (a Float's exact cancellation
 * cannot be seen that way, so those answer "not equal", as simplify mostly does for them). */
#include "rl/sym_eq.h"
#include <complex.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LF_TERMS 64
#define LF_ATOMS 6

typedef struct {
    int flt;       /* a Float of this many bits (sympy's precision from the literal's digits), 0: a rational */
    long double f; /* the Float's value */
    __int128 p, q; /* the rational: q > 0, reduced */
} coef;

typedef struct {
    char name[LF_ATOMS][24]; /* sorted; "" unused */
    int exp[LF_ATOMS];
    int n;
    uint64_t rad; /* square-free, 1 when none */
} mono;

typedef struct {
    coef c;
    mono m;
} lterm;

typedef struct {
    int n;
    lterm t[LF_TERMS];
} lform;

static const __int128 LIM = (__int128)1 << 62;

static __int128 gcd128(__int128 a, __int128 b) {
    if (a < 0) a = -a;
    if (b < 0) b = -b;
    while (b) { __int128 t = a % b; a = b; b = t; }
    return a;
}
static int cnorm(coef *c) {
    if (c->flt) return 1;
    if (c->q < 0) { c->q = -c->q; c->p = -c->p; }
    __int128 g = gcd128(c->p, c->q);
    if (g > 1) { c->p /= g; c->q /= g; }
    if (!c->p) c->q = 1;
    return c->p < LIM && c->p > -LIM && c->q < LIM; /* later products stay within 128 bits */
}
/* x rounded to `bits` (53: binary64; 64 and more: long double as it is) */
static long double rnd(long double x, int bits) {
    if (bits == 53) return (double)x;
    if (bits >= 64 || x == 0 || !isfinite(x)) return x;
    int e;
    long double m = frexpl(x, &e);
    return ldexpl(rintl(ldexpl(m, bits)), e - bits);
}
/* a coefficient as a Float of `bits`, a rational rounded once where it can be */
static long double cval(const coef *c, int bits) {
    if (c->flt) return c->f;
    const __int128 B53 = (__int128)1 << 53;
    if (bits == 53 && c->p < B53 && c->p > -B53 && c->q < B53) return (double)c->p / (double)c->q;
    return rnd((long double)c->p / (long double)c->q, bits);
}
static int cbits(const coef *a, const coef *b) { return a->flt > b->flt ? a->flt : b->flt; }
/* a Float result of `bits` */
static void cset(coef *r, long double v, int bits) {
    r->flt = bits;
    r->f = rnd(v, bits);
    r->p = 0;
    r->q = 1;
}
static int czero(const coef *c) { return c->flt ? c->f == 0 : c->p == 0; }
static int cadd(coef *r, const coef *a, const coef *b) {
    if (a->flt || b->flt) { /* r may be a */
        int bits = cbits(a, b);
        long double x = cval(a, bits), y = cval(b, bits);
        cset(r, bits == 53 ? (long double)((double)x + (double)y) : x + y, bits);
        return 1;
    }
    __int128 p = a->p * b->q + b->p * a->q, q = a->q * b->q;
    r->flt = 0;
    r->p = p;
    r->q = q;
    return cnorm(r);
}
static int cmul(coef *r, const coef *a, const coef *b) {
    if (a->flt || b->flt) {
        int bits = cbits(a, b);
        long double x = cval(a, bits), y = cval(b, bits);
        cset(r, bits == 53 ? (long double)((double)x * (double)y) : x * y, bits);
        return 1;
    }
    __int128 p = a->p * b->p, q = a->q * b->q;
    r->flt = 0;
    r->p = p;
    r->q = q;
    return cnorm(r);
}
static coef cint(__int128 v) { coef c = { 0, 0, v, 1 }; return c; }

static int mono_eq(const mono *a, const mono *b) {
    if (a->n != b->n || a->rad != b->rad) return 0;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->name[i], b->name[i]) || a->exp[i] != b->exp[i]) return 0;
    return 1;
}

/* the largest k with k^2 | v, and v / k^2 */
static void square_part(uint64_t v, uint64_t *k, uint64_t *rest) {
    uint64_t kk = 1;
    for (uint64_t d = 2; d <= 1000000 && d * d <= v; d++)
        while (v % (d * d) == 0) { v /= d * d; kk *= d; }
    uint64_t s = (uint64_t)sqrtl((long double)v);
    while (s * s > v) s--;
    while ((s + 1) * (s + 1) <= v) s++;
    if (s > 1 && s * s == v) { kk *= s; v = 1; }
    *k = kk;
    *rest = v;
}

/* a * b of monomials; the square factor of the radicals' product goes to *c */
static int mono_mul(mono *r, const mono *a, const mono *b, coef *c) {
    mono m = *a;
    for (int j = 0; j < b->n; j++) {
        int i = 0;
        while (i < m.n && strcmp(m.name[i], b->name[j]) < 0) i++;
        if (i < m.n && !strcmp(m.name[i], b->name[j])) {
            m.exp[i] += b->exp[j];
            if (!m.exp[i]) { /* x^0: gone */
                memmove(&m.name[i], &m.name[i + 1], (size_t)(m.n - i - 1) * sizeof m.name[0]);
                memmove(&m.exp[i], &m.exp[i + 1], (size_t)(m.n - i - 1) * sizeof m.exp[0]);
                m.n--;
            }
            continue;
        }
        if (m.n == LF_ATOMS) return 0;
        memmove(&m.name[i + 1], &m.name[i], (size_t)(m.n - i) * sizeof m.name[0]);
        memmove(&m.exp[i + 1], &m.exp[i], (size_t)(m.n - i) * sizeof m.exp[0]);
        memcpy(m.name[i], b->name[j], sizeof m.name[0]);
        m.exp[i] = b->exp[j];
        m.n++;
    }
    if (a->rad > 1 && b->rad > 1) {
        if (a->rad > UINT32_MAX || b->rad > UINT32_MAX) return 0;
        uint64_t k, rest;
        square_part(a->rad * b->rad, &k, &rest);
        coef kc = cint(k);
        if (!cmul(c, c, &kc)) return 0;
        m.rad = rest;
    } else m.rad = a->rad > 1 ? a->rad : b->rad;
    *r = m;
    return 1;
}

static int lf_add_term(lform *f, const lterm *t) {
    for (int i = 0; i < f->n; i++)
        if (mono_eq(&f->t[i].m, &t->m)) {
            if (!cadd(&f->t[i].c, &f->t[i].c, &t->c)) return 0;
            if (czero(&f->t[i].c)) f->t[i] = f->t[--f->n]; /* sympy drops a zero coefficient's term */
            return 1;
        }
    if (czero(&t->c)) return 1;
    if (f->n == LF_TERMS) return 0;
    f->t[f->n++] = *t;
    return 1;
}

static int lf_num(lform *f, coef c) {
    memset(f, 0, sizeof *f);
    lterm t = { c, { .rad = 1 } };
    lf_add_term(f, &t);
    return 1;
}

static int lf_atom(lform *f, const char *name) {
    memset(f, 0, sizeof *f);
    lterm t = { cint(1), { .n = 1, .rad = 1 } };
    size_t len = strlen(name);
    if (len >= sizeof t.m.name[0]) return 0; /* a long name: left to the numeric test */
    memcpy(t.m.name[0], name, len);
    t.m.exp[0] = 1;
    f->n = 1;
    f->t[0] = t;
    return 1;
}

static int lf_mul(lform *r, const lform *a, const lform *b) {
    lform out = { 0 };
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++) {
            lterm t;
            if (!cmul(&t.c, &a->t[i].c, &b->t[j].c)) return 0;
            if (!mono_mul(&t.m, &a->t[i].m, &b->t[j].m, &t.c)) return 0;
            if (!lf_add_term(&out, &t)) return 0;
        }
    *r = out;
    return 1;
}

static int lf_addsub(lform *r, const lform *a, const lform *b, int sub) {
    lform out = *a;
    for (int j = 0; j < b->n; j++) {
        lterm t = b->t[j];
        if (sub) {
            coef m1 = cint(-1);
            if (!cmul(&t.c, &t.c, &m1)) return 0;
        }
        if (!lf_add_term(&out, &t)) return 0;
    }
    *r = out;
    return 1;
}

/* Where a Float is in the expression, 1 / (a sum) is an atom named by the sum's terms: sympy keeps such a
 * power whole, so equal sums cancel (in exact expressions a sum in a denominator goes to the numeric test) */
static _Thread_local int g_opaque;
static int lf_atom(lform *f, const char *name);

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ULL;
    return h;
}
static int lf_sum_atom(lform *r, const lform *a) {
    uint64_t key = 0;
    for (int i = 0; i < a->n; i++) { /* the terms in any order */
        const lterm *t = &a->t[i];
        uint64_t h = fnv(1469598103934665603ULL, &t->c.flt, sizeof t->c.flt);
        if (t->c.flt) h = fnv(h, &t->c.f, 10);
        else { h = fnv(h, &t->c.p, sizeof t->c.p); h = fnv(h, &t->c.q, sizeof t->c.q); }
        for (int j = 0; j < t->m.n; j++) { h = fnv(h, t->m.name[j], strlen(t->m.name[j]) + 1); h = fnv(h, &t->m.exp[j], sizeof(int)); }
        h = fnv(h, &t->m.rad, sizeof t->m.rad);
        key += h * 0x9e3779b97f4a7c15ULL;
    }
    char name[24];
    snprintf(name, sizeof name, "\x02%016llx", (unsigned long long)key);
    return lf_atom(r, name);
}

/* 1 / a for a single term: 1/coef, exponents negated, 1/sqrt(r) = sqrt(r)/r */
static int lf_inv(lform *r, const lform *a) {
    if (a->n > 1 && g_opaque) return lf_sum_atom(r, a);
    if (a->n != 1) return 0;
    lterm t = a->t[0];
    if (t.c.flt) {
        if (t.c.f == 0) return 0;
        cset(&t.c, t.c.flt == 53 ? (long double)(1.0 / (double)t.c.f) : 1 / t.c.f, t.c.flt);
    } else {
        if (!t.c.p) return 0;
        __int128 p = t.c.p;
        t.c.p = t.c.q;
        t.c.q = p;
        if (!cnorm(&t.c)) return 0;
    }
    for (int i = 0; i < t.m.n; i++) t.m.exp[i] = -t.m.exp[i];
    if (t.m.rad > 1) {
        coef rr = { 0, 0, 1, (__int128)t.m.rad };
        if (!cmul(&t.c, &t.c, &rr)) return 0;
    }
    r->n = 1;
    r->t[0] = t;
    return 1;
}

static int is_number(const lform *a) { return a->n == 0 || (a->n == 1 && a->t[0].m.n == 0 && a->t[0].m.rad == 1); }
static coef number_of(const lform *a) { return a->n ? a->t[0].c : cint(0); }

/* sqrt of a number: a rational's square factors out of the radical, a Float's root as a Float */
static int lf_sqrt(lform *r, const lform *a) {
    if (!is_number(a)) return 0;
    coef c = number_of(a);
    if (c.flt) {
        if (c.f < 0) return 0;
        cset(&c, c.flt == 53 ? (long double)sqrt((double)c.f) : sqrtl(c.f), c.flt);
        return lf_num(r, c);
    }
    if (c.p < 0) return 0;
    if (c.p == 0) return lf_num(r, c);
    __int128 v = c.p * c.q; /* sqrt(p/q) = sqrt(p q) / q */
    if (v > (__int128)UINT64_MAX) return 0;
    uint64_t k, rest;
    square_part((uint64_t)v, &k, &rest);
    lterm t = { { 0, 0, (__int128)k, c.q }, { .rad = rest } };
    if (!cnorm(&t.c)) return 0;
    memset(r, 0, sizeof *r);
    r->n = 1;
    r->t[0] = t;
    return 1;
}

static int lf_pow(lform *r, const lform *b, const lform *e) {
    if (!is_number(e)) return 0;
    coef x = number_of(e);
    if (x.flt) { /* a number to a Float power: a Float (real results only) */
        if (!is_number(b)) return 0;
        coef bc = number_of(b), res;
        int bits = cbits(&bc, &x);
        long double v = cval(&bc, bits);
        if (v <= 0) return 0;
        cset(&res, bits == 53 ? (long double)pow((double)v, (double)x.f) : powl(v, x.f), bits);
        return lf_num(r, res);
    }
    if (x.q == 2 && x.p == 1) return lf_sqrt(r, b);
    if (x.q != 1 || x.p > 64 || x.p < -64) return 0;
    int n = (int)x.p;
    lform base = *b;
    if (n < 0) {
        if (!lf_inv(&base, b)) return 0;
        n = -n;
    }
    if (is_number(&base) && base.n && base.t[0].c.flt) { /* Float ** Integer, rounded once */
        coef res;
        cset(&res, powl(base.t[0].c.f, n), base.t[0].c.flt);
        return lf_num(r, res);
    }
    lform acc;
    lf_num(&acc, cint(1));
    for (int i = 0; i < n; i++)
        if (!lf_mul(&acc, &acc, &base)) return 0;
    *r = acc;
    return 1;
}

/* sympy's Float(literal) precision: dps = max(15, the decimal's significant digits), bits = round((dps + 1)
 * log2(10)); past 64 bits long double's */
static int float_bits(const char *lit) {
    int digits = 0, lead = 1;
    for (const char *p = lit; *p && (*p | 32) != 'e'; p++) {
        if (*p < '0' || *p > '9') continue;
        if (lead && *p == '0') continue;
        lead = 0;
        digits++;
    }
    int dps = digits > 15 ? digits : 15;
    int bits = (int)lround((dps + 1) * 3.3219280948873626);
    return bits > 64 ? 64 : bits;
}

static int lf_eval2(const sym_node *n, lform *out, lform *ab, int depth);

/* the operands' forms live on the heap: a form is 10+ KiB */
static int lf_eval(const sym_node *n, lform *out, int depth) {
    if (depth > 200) return 0;
    lform *ab = malloc(2 * sizeof *ab);
    if (!ab) return 0;
    int r = lf_eval2(n, out, ab, depth);
    free(ab);
    return r;
}

static int lf_eval2(const sym_node *n, lform *out, lform *ab, int depth) {
    lform *A = &ab[0], *B = &ab[1];
    switch (n->kind) {
    case SN_INT:
        if (n->big || n->ival >= LIM) return 0;
        return lf_num(out, cint(n->ival));
    case SN_FLOAT: {
        coef c = { float_bits(n->text), 0, 0, 1 };
        c.f = c.flt == 53 ? (long double)strtod(n->text, NULL) : rnd(strtold(n->text, NULL), c.flt);
        return lf_num(out, c);
    }
    case SN_SYM: return lf_atom(out, n->text);
    case SN_PI: return lf_atom(out, "\x01pi");
    case SN_NEG:
        if (!lf_eval(n->a, A, depth + 1)) return 0;
        lf_num(B, cint(0));
        return lf_addsub(out, B, A, 1);
    case SN_ADD:
    case SN_SUB:
        if (!lf_eval(n->a, A, depth + 1) || !lf_eval(n->b, B, depth + 1)) return 0;
        return lf_addsub(out, A, B, n->kind == SN_SUB);
    case SN_MUL:
        if (!lf_eval(n->a, A, depth + 1) || !lf_eval(n->b, B, depth + 1)) return 0;
        return lf_mul(out, A, B);
    case SN_DIV: {
        if (!lf_eval(n->a, A, depth + 1) || !lf_eval(n->b, B, depth + 1)) return 0;
        if (is_number(A) && is_number(B) && (number_of(A).flt || number_of(B).flt)) {
            coef x = number_of(A), y = number_of(B), res; /* Float / Number: one rounding */
            int bits = cbits(&x, &y);
            long double u = cval(&x, bits), d = cval(&y, bits);
            if (d == 0) return 0;
            cset(&res, bits == 53 ? (long double)((double)u / (double)d) : u / d, bits);
            return lf_num(out, res);
        }
        lform *inv = malloc(sizeof *inv);
        int ok = inv && lf_inv(inv, B) && lf_mul(out, A, inv);
        free(inv);
        return ok;
    }
    case SN_POW:
        if (!lf_eval(n->a, A, depth + 1) || !lf_eval(n->b, B, depth + 1)) return 0;
        return lf_pow(out, A, B);
    case SN_SQRT:
        if (!lf_eval(n->a, A, depth + 1)) return 0;
        return lf_sqrt(out, A);
    case SN_FACT: {
        if (!lf_eval(n->a, A, depth + 1) || !is_number(A)) return 0;
        coef c = number_of(A);
        if (c.flt || c.q != 1 || c.p < 0 || c.p > 25) return 0;
        __int128 v = 1;
        for (__int128 i = 2; i <= c.p; i++) v *= i;
        if (v >= LIM) return 0;
        return lf_num(out, cint(v));
    }
    default: return 0; /* imaginary numbers, infinities, functions */
    }
}

int vc_sym_linear_zero(const sym_node *n, int opaque_sums) {
    lform *f = malloc(sizeof *f);
    if (!f) return -1;
    g_opaque = opaque_sums;
    int r = lf_eval(n, f, 0) ? f->n == 0 : -1;
    g_opaque = 0;
    free(f);
    return r;
}

int vc_sym_has_float(const sym_node *n) {
    if (!n) return 0;
    return n->kind == SN_FLOAT || (n->kind == SN_IMAG && strpbrk(n->text, ".eE")) || vc_sym_has_float(n->a) ||
           vc_sym_has_float(n->b);
}

/* ---- numeric: complex long double at points ---- */
typedef long double complex cld;

static cld sym_value(const char *name, int k) {
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h ^= (uint64_t)(k + 1) * 0x9e3779b97f4a7c15ULL;
    h *= 0xbf58476d1ce4e5b9ULL;
    long double re = (long double)((h >> 11) & 0xfffff) / 0xfffff, im = (long double)((h >> 31) & 0xfffff) / 0xfffff;
    static const long double SX[3] = { 1, -1, 1 }, SY[3] = { 1, 1, -1 };
    return SX[k] * (0.3L + 1.7L * re) + SY[k] * (0.2L + 1.3L * im) * I;
}

static long double frac_part(long double x) { return x - floorl(x); }

static int num_eval(const sym_node *n, int k, cld *out, int depth) {
    if (depth > 200) return 0;
    cld a = 0, b = 0;
    if (n->a && !num_eval(n->a, k, &a, depth + 1)) return 0;
    if (n->b && !num_eval(n->b, k, &b, depth + 1)) return 0;
    switch (n->kind) {
    case SN_INT: *out = n->big ? n->fval : (long double)n->ival; return 1;
    case SN_FLOAT: *out = n->fval; return 1;
    case SN_IMAG: *out = n->fval * I; return 1;
    case SN_SYM: *out = sym_value(n->text, k); return 1;
    case SN_PI: *out = 3.14159265358979323846264338327950288L; return 1;
    case SN_INF: *out = INFINITY; return 1;
    case SN_NAN:
    case SN_ZOO: *out = NAN; return 1;
    case SN_ADD: *out = a + b; return 1;
    case SN_SUB: *out = a - b; return 1;
    case SN_MUL: *out = a * b; return 1;
    case SN_DIV: *out = b == 0 ? (cld)NAN : a / b; return 1;
    case SN_NEG: *out = -a; return 1;
    case SN_POW:
        if (cimagl(b) == 0 && fabsl(creall(b)) <= 64 && creall(b) == roundl(creall(b))) { /* integer powers */
            int e = (int)creall(b);
            cld r = 1, base = e < 0 ? (a == 0 ? (cld)NAN : 1 / a) : a;
            for (int i = 0; i < abs(e); i++) r *= base;
            *out = r;
            return 1;
        }
        *out = a == 0 ? (creall(b) > 0 ? 0 : (cld)NAN) : cpowl(a, b);
        return 1;
    case SN_SQRT: *out = csqrtl(a); return 1;
    case SN_LN: *out = a == 0 ? (cld)NAN : clogl(a); return 1;
    case SN_RE: *out = creall(a); return 1;
    case SN_IM: *out = cimagl(a); return 1;
    case SN_CSC: *out = 1 / csinl(a); return 1;
    case SN_FRAC: *out = frac_part(creall(a)) + frac_part(cimagl(a)) * I; return 1;
    case SN_FACT:
        if (cimagl(a) != 0 || creall(a) < 0 || creall(a) > 170 || creall(a) != roundl(creall(a))) return 0;
        *out = tgammal(creall(a) + 1);
        return 1;
    }
    return 0;
}

/* the root is (a) - (b): each side at each point, equal within 1e-11 of their size */
int vc_sym_numeric_zero(const sym_node *n) {
    if (n->kind != SN_SUB) return 0;
    for (int k = 0; k < 3; k++) {
        cld a, b;
        if (!num_eval(n->a, k, &a, 0) || !num_eval(n->b, k, &b, 0)) return 0;
        long double d = cabsl(a - b), s = 1 + cabsl(a) + cabsl(b);
        if (!isfinite(d) || !isfinite(s) || d > 1e-11L * s) return 0;
    }
    return 1;
}
