/* JSON POSTs to one URL, many at once over libcurl, with a retry policy (the services verl's rewards and tools call:
 * Sandbox Fusion, retrieval servers), http_batch.c. */
#ifndef VC_RL_HTTP_BATCH_H
#define VC_RL_HTTP_BATCH_H
#include "verlc/core.h"

typedef struct vc_http_req {
    const char *body;   /* the JSON request */
    double timeout_s;   /* of one attempt */
    /* out */
    long code;          /* the HTTP status of the last attempt (0: no answer) */
    char *resp;         /* its body (malloc'd; NULL without one) */
    char err[256];      /* with code 0: what went wrong (curl's message) */
    int timed_out;      /* ... and whether it was a time-out */
    /* internal */
    int attempt;
    double not_before;
} vc_http_req;

typedef struct vc_http_policy {
    int max_in_flight;    /* requests at once (< 1: 64) */
    int max_attempts;     /* tries of one request in all */
    double retry_delay;   /* seconds before retry k (1, 2, ...): retry_delay * k */
    const long *retry_codes; /* HTTP statuses that are retried (n_retry_codes of them) */
    int n_retry_codes;
    int retry_transport;  /* connection failures and time-outs are retried too */
} vc_http_policy;

/* r[0..n) POSTed to url; each ends with its last answer or error. Fails only when out of memory or without
 * libcurl (VC_ERR_UNSUPPORTED, naming url). Long batches report progress on stderr every 30 s. */
vc_status vc_http_post_many(const char *url, vc_http_req *r, int n, const vc_http_policy *p);
void vc_http_reqs_free(vc_http_req *r, int n); /* the answers' bodies */
/* 1 when built with libcurl */
int vc_http_available(void);
#endif
