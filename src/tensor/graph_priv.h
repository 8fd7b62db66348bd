/* Graph internals shared by the op front-ends (not public). */
#ifndef VC_GRAPH_PRIV_H
#define VC_GRAPH_PRIV_H
#include "verlc/tensor.h"

/* Records st as the graph's status unless an earlier failure is already recorded. */
void vc_graph_fail(vc_graph *g, vc_status st);
/* the add's tape node for y = a + b computed elsewhere (a fused kernel that also normed it) */
void vc_tape_add(vc_graph *g, vc_tensor *y, vc_tensor *a, vc_tensor *b);
#endif
