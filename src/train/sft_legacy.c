/* verl b178a3cd's fsdp_sft_trainer validation loss, for trainer.use_legacy_worker_impl=enable: a distributed sampler
 * without shuffling deals rows r, r + W, r + 2W, ... to rank r (W ranks; the rows past a multiple of W dropped), each
 * rank's loader takes micro_batch_size of them at a time (a partial batch dropped), each batch's loss is its token mean
 * (data.balance_dp_token: its NLL over the tokens of every rank's i-th batch, times W), averaged over the ranks, and
 * val/loss is the mean over the batches. Its training normalisation is the trainer's micro_norm (trainer.c); its
 * training rows reach the ranks as the same sampler deals them (sft_legacy_deal). */
#include "sft_internal.h"
#include <math.h>

/* a step's n rows dealt to w ranks every w-th, rank r's as the r-th block (rows idx[k], or base + k without idx) */
static void deal(const uint32_t *idx, uint32_t base, size_t n, size_t w, uint32_t *out) {
    size_t per = n / w;
    for (size_t r = 0; r < w; r++)
        for (size_t j = 0; j < per; j++) out[r * per + j] = idx ? idx[r + w * j] : base + (uint32_t)(r + w * j);
}

size_t sft_legacy_val_order(size_t n, int world, int micro, uint32_t *order) {
    size_t chunk = (size_t)world * (size_t)micro, kept = n / chunk * chunk;
    for (size_t c = 0; c < kept; c += chunk) deal(NULL, (uint32_t)c, chunk, (size_t)world, order + c);
    return kept;
}

double sft_legacy_val_loss(const double *nll, const double *tok, size_t kept, int world, int micro, int balance) {
    size_t m = (size_t)micro, chunk = (size_t)world * m, n_batches = kept / chunk;
    double sum = 0;
    for (size_t c = 0; c < kept; c += chunk) {
        double pooled[2] = { 0, 0 }, ranks = 0;
        for (size_t r = 0; r < (size_t)world; r++) {
            double l = 0, t = 0;
            for (size_t j = 0; j < m; j++) l += nll[c + r * m + j], t += tok[c + r * m + j];
            pooled[0] += l, pooled[1] += t;
            ranks += t > 0 ? l / t : 0.0;
        }
        sum += balance ? (pooled[1] > 0 ? pooled[0] / pooled[1] : 0.0) : ranks / world;
    }
    return n_batches ? sum / (double)n_batches : NAN;
}

int sft_legacy_deal(const uint32_t *idx, size_t n, int world, int micro, uint32_t *out) {
    if (world < 2 || micro < 1 || n % (size_t)world || n / (size_t)world % (size_t)micro) return 0;
    deal(idx, 0, n, (size_t)world, out);
    return 1;
}
