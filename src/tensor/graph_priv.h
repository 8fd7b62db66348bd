/* Graph internals shared by the op front-ends (not public). */
#ifndef VC_GRAPH_PRIV_H
#define VC_GRAPH_PRIV_H
#include "verlc/tensor.h"

/* Records st as the graph's status unless an earlier failure is already recorded. */
void vc_graph_fail(vc_graph *g, vc_status st);
/* the add's tape node for y = a + b computed elsewhere (a fused kernel that also normed it) */
void vc_tape_add(vc_graph *g, vc_tensor *y, vc_tensor *a, vc_tensor *b);
/* the linear's tape node for y = x W^T + b computed elsewhere; x16: x's storage is bf16 (only W's gradient reads it) */
void vc_tape_linear(vc_graph *g, vc_tensor *y, vc_tensor *x, vc_tensor *W, vc_tensor *b, int x16);
#endif
