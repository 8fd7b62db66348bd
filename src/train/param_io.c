/* Parameters in backend memory <-> host floats (checkpoints, exports, value heads): the only way the
 * training code moves weights across the device boundary. */
#include "tensor/backend.h"
#include "verlc/train.h"
#include <stdlib.h>

vc_status vc_train_param_read(const vc_tensor *p, float *dst) {
    if (!p || !p->data) return vc_fail(VC_ERR_INTERNAL, "parameter read: no data");
    if (p->n) vc_be()->d2h(dst, p->data, sizeof(float) * (size_t)p->n);
    return vc_be()->sync();
}

vc_status vc_train_param_write(vc_tensor *p, const float *src) {
    if (!p || !p->data) return vc_fail(VC_ERR_INTERNAL, "parameter write: no data");
    if (p->n) vc_be()->h2d(p->data, src, sizeof(float) * (size_t)p->n);
    return vc_be()->sync();
}

vc_status vc_train_param_host(const vc_tensor *p, float **out) {
    *out = vc_malloc(sizeof(float) * (size_t)(p->n ? p->n : 1));
    if (!*out) return vc_fail(VC_ERR_NOMEM, "parameter read: cannot allocate %lld floats", (long long)p->n);
    vc_status st = vc_train_param_read(p, *out);
    if (st) {
        free(*out);
        *out = NULL;
    }
    return st;
}

float *vc_train_backend_alloc(size_t n_floats) {
    float *p = vc_be()->alloc(sizeof(float) * (n_floats ? n_floats : 1));
    if (p) vc_be()->zero(p, sizeof(float) * (n_floats ? n_floats : 1));
    return p;
}

void vc_train_backend_free(float *p) {
    if (p) vc_be()->free(p);
}
