/* Status codes and the thread-local error message. */
#include "verlc/core.h"
#include <stdarg.h>
#include <string.h>

static _Thread_local char g_err[1024];

vc_status vc_fail(vc_status st, const char *fmt, ...) {
    char msg[sizeof g_err]; /* the arguments may be the last message itself (vc_last_error()) */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(g_err, msg, sizeof g_err);
    return st;
}

vc_status vc_fail_ctx(vc_status st, const char *fmt, ...) {
    char prefix[512], old[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, g_err, sizeof old);
    if (old[0]) snprintf(g_err, sizeof g_err, "%s: %s", prefix, old);
    else snprintf(g_err, sizeof g_err, "%s", prefix);
    return st;
}

const char *vc_last_error(void) { return g_err[0] ? g_err : "no error message"; }
void vc_clear_error(void) { g_err[0] = 0; }

const char *vc_status_name(vc_status st) {
    switch (st) {
    case VC_OK: return "ok";
    case VC_ERR_IO: return "io error";
    case VC_ERR_FORMAT: return "format error";
    case VC_ERR_UNSUPPORTED: return "unsupported";
    case VC_ERR_SHAPE: return "shape error";
    case VC_ERR_MISSING: return "missing";
    case VC_ERR_ARG: return "bad argument";
    case VC_ERR_NOMEM: return "out of memory";
    case VC_ERR_NUMERIC: return "numeric error";
    case VC_ERR_TIMEOUT: return "timeout";
    case VC_ERR_DEVICE: return "device error";
    case VC_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
