/* String building and SVG line plots with labelled axes. */
#include "verlc/report.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sb_reserve(vc_strbuf *b, size_t extra) {
    if (b->oom) return 0;
    if (b->n + extra + 1 <= b->cap) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->p = p;
    b->cap = cap;
    return 1;
}

void vc_sb_putn(vc_strbuf *b, const char *s, size_t n) {
    if (!sb_reserve(b, n)) return;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void vc_sb_puts(vc_strbuf *b, const char *s) { vc_sb_putn(b, s, strlen(s)); }

void vc_sb_printf(vc_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void vc_sb_escaped(vc_strbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': vc_sb_puts(b, "&lt;"); break;
        case '>': vc_sb_puts(b, "&gt;"); break;
        case '&': vc_sb_puts(b, "&amp;"); break;
        case '"': vc_sb_puts(b, "&quot;"); break;
        case '\'': vc_sb_puts(b, "&#39;"); break;
        default: {
            char c[2] = { *s, 0 };
            vc_sb_puts(b, c);
        }
        }
    }
}

/* Tick step of 1, 2 or 5 times a power of ten giving about `want` intervals over span. */
static double nice_step(double span, int want) {
    double raw = span / want;
    double p = pow(10.0, floor(log10(raw)));
    double f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

static void fmt_tick(char *out, size_t cap, double v, double step) {
    if (fabs(v) < step * 1e-9) v = 0;
    double a = fabs(v);
    if (a != 0 && (a >= 1e6 || a < 1e-3)) {
        int sig = (int)floor(log10(a)) - (int)floor(log10(step)) + 1; /* enough digits to tell ticks apart */
        snprintf(out, cap, "%.*g", sig < 1 ? 1 : sig > 6 ? 6 : sig, v);
        return;
    }
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (dec > 6) dec = 6;
    snprintf(out, cap, "%.*f", dec, v);
}

typedef struct axis {
    double lo, hi, step;
} axis;

static axis make_axis(double lo, double hi, int want) {
    if (!(hi > lo)) {
        double pad = lo != 0 ? fabs(lo) * 0.1 : 1.0;
        lo -= pad;
        hi += pad;
    }
    axis a = { .step = nice_step(hi - lo, want) };
    a.lo = floor(lo / a.step) * a.step;
    a.hi = ceil(hi / a.step) * a.step;
    return a;
}

static void finite_range(const vc_metric_series *s, double *xl, double *xh, double *yl, double *yh, size_t *n) {
    *xl = *yl = INFINITY;
    *xh = *yh = -INFINITY;
    *n = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->y[i]) || !isfinite(s->x[i])) continue;
        (*n)++;
        if (s->x[i] < *xl) *xl = s->x[i];
        if (s->x[i] > *xh) *xh = s->x[i];
        if (s->y[i] < *yl) *yl = s->y[i];
        if (s->y[i] > *yh) *yh = s->y[i];
    }
}

typedef struct frame {
    double x0, y0, w, h; /* plot area in pixels */
    axis ax, ay;
} frame;

static double px(const frame *f, double x) { return f->x0 + (x - f->ax.lo) / (f->ax.hi - f->ax.lo) * f->w; }
static double py(const frame *f, double y) { return f->y0 + f->h - (y - f->ay.lo) / (f->ay.hi - f->ay.lo) * f->h; }

static void draw_axes(vc_strbuf *b, const frame *f) {
    char lab[48];
    vc_sb_printf(b, "<g class=\"ax\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\"/>", f->x0,
                 f->y0, f->w, f->h);
    for (double v = f->ay.lo; v <= f->ay.hi + f->ay.step * 0.5; v += f->ay.step) {
        double y = py(f, v);
        fmt_tick(lab, sizeof lab, v, f->ay.step);
        vc_sb_printf(b, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", f->x0, y,
                     f->x0 + f->w, y);
        vc_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>", f->x0 - 4, y + 3.5, lab);
    }
    for (double v = f->ax.lo; v <= f->ax.hi + f->ax.step * 0.5; v += f->ax.step) {
        double x = px(f, v);
        fmt_tick(lab, sizeof lab, v, f->ax.step);
        vc_sb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x, f->y0 + f->h, x,
                     f->y0 + f->h + 4);
        vc_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>", x, f->y0 + f->h + 15, lab);
    }
    vc_sb_printf(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" class=\"xl\">step</text></g>",
                 f->x0 + f->w / 2, f->y0 + f->h + 28);
}

static void draw_line(vc_strbuf *b, const vc_metric_series *s, const frame *f, size_t n_finite) {
    int open = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!isfinite(s->y[i]) || !isfinite(s->x[i])) {
            if (open) vc_sb_puts(b, "\"/>");
            open = 0;
            continue;
        }
        if (!open) vc_sb_puts(b, "<polyline class=\"ln\" points=\"");
        vc_sb_printf(b, "%s%.1f,%.1f", open ? " " : "", px(f, s->x[i]), py(f, s->y[i]));
        open = 1;
    }
    if (open) vc_sb_puts(b, "\"/>");
    if (n_finite <= 40)
        for (size_t i = 0; i < s->n; i++)
            if (isfinite(s->y[i]) && isfinite(s->x[i]))
                vc_sb_printf(b, "<circle class=\"pt\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.2\"/>", px(f, s->x[i]),
                             py(f, s->y[i]));
}

void vc_svg_plot(vc_strbuf *b, const vc_metric_series *s, int width, int height) {
    double xl, xh, yl, yh;
    size_t nf;
    finite_range(s, &xl, &xh, &yl, &yh, &nf);
    vc_sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">",
                 width, height, width, height);
    vc_sb_puts(b, "<title>");
    vc_sb_escaped(b, s->name);
    vc_sb_puts(b, "</title><text x=\"8\" y=\"16\" class=\"tt\">");
    vc_sb_escaped(b, s->name);
    vc_sb_puts(b, "</text>");
    if (!nf) {
        vc_sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">no finite values</text></svg>", width / 2,
                     height / 2);
        return;
    }
    frame f = { .x0 = 62, .y0 = 26, .w = width - 62 - 14, .h = height - 26 - 36 };
    f.ax = make_axis(xl, xh, 5);
    if (f.ax.step < 1 && xl == floor(xl) && xh == floor(xh)) { /* steps are integers: no 0.5 ticks */
        f.ax.step = 1;
        f.ax.lo = xl < xh ? xl : xl - 1;
        f.ax.hi = xl < xh ? xh : xh + 1;
    }
    f.ay = make_axis(yl, yh, 4);
    draw_axes(b, &f);
    draw_line(b, s, &f, nf);
    vc_sb_puts(b, "</svg>");
}
