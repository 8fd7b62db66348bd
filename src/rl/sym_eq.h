/* The sympy part of mathruler's grader (internal; sym_eq.c, sym_eval.c). */
#ifndef VC_RL_SYM_EQ_H
#define VC_RL_SYM_EQ_H
#include <stddef.h>
#include <stdint.h>

/* mathruler's are_equal_under_sympy(a, b): 1 when should_allow_eval passes on "(a)-(b)" and
 * sympy.simplify(parse_expr("(a)-(b)" with ^ as **, standard transformations and implicit multiplication /
 * application)) == 0; 0 otherwise (Python raising included). */
int vc_sym_equal(const char *a, const char *b);

/* ---- the parsed expression (sym_eq.c) and its evaluation (sym_eval.c) ---- */
typedef enum { SN_INT, SN_FLOAT, SN_IMAG, SN_SYM, SN_PI, SN_INF, SN_NAN, SN_ZOO, SN_ADD, SN_SUB, SN_MUL, SN_DIV,
               SN_POW, SN_NEG, SN_FACT, SN_SQRT, SN_LN, SN_RE, SN_IM, SN_CSC, SN_FRAC } sym_kind;

typedef struct sym_node {
    sym_kind kind;
    struct sym_node *a, *b;
    char text[48];  /* a number's digits (no '_'), a symbol's name */
    __int128 ival;  /* SN_INT */
    int big;        /* SN_INT too large for ival */
    long double fval; /* SN_FLOAT / SN_IMAG / a big SN_INT */
} sym_node;

/* exact when sympy's result would be exact zero and the linear form could be built: 1 zero, 0 not zero, -1
 * the form cannot say (a function, a division by a sum (unless opaque_sums: then an atom), ...) */
int vc_sym_linear_zero(const sym_node *n, int opaque_sums);
/* the numeric test at points for the symbols: 1 equal within 1e-11 relative at every point */
int vc_sym_numeric_zero(const sym_node *n);
/* whether the tree holds a Float literal */
int vc_sym_has_float(const sym_node *n);
#endif
