/* Seeded epoch iteration over dataset rows. */
#include "verlc/data.h"
#include "verlc/rng.h"
#include <stdlib.h>
#include <string.h>

static void make_order(vc_epoch_iter *it) {
    for (size_t i = 0; i < it->n_rows; i++) it->order[i] = (uint32_t)i;
    if (it->shuffle) vc_shuffle_u32(it->order, it->n_rows, it->seed, (uint64_t)it->epoch);
}

vc_status vc_epoch_iter_init(vc_epoch_iter *it, size_t n_rows, size_t batch_size, int shuffle, int drop_last,
                             uint64_t seed) {
    memset(it, 0, sizeof *it);
    if (batch_size == 0) return vc_fail(VC_ERR_ARG, "batch size must be positive");
    if (n_rows > UINT32_MAX) return vc_fail(VC_ERR_ARG, "%zu rows: at most 2^32-1 supported", n_rows);
    if (drop_last && n_rows < batch_size)
        return vc_fail(VC_ERR_ARG, "dataset of %zu rows has no full batch of %zu (drop_last)", n_rows, batch_size);
    it->order = vc_malloc((n_rows ? n_rows : 1) * sizeof *it->order);
    if (!it->order) return VC_ERR_NOMEM;
    it->n_rows = n_rows;
    it->batch_size = batch_size;
    it->shuffle = shuffle;
    it->drop_last = drop_last;
    it->seed = seed;
    make_order(it);
    return VC_OK;
}

size_t vc_epoch_iter_batches(const vc_epoch_iter *it) {
    if (!it->batch_size) return 0;
    return it->drop_last ? it->n_rows / it->batch_size : (it->n_rows + it->batch_size - 1) / it->batch_size;
}

void vc_epoch_iter_seek(vc_epoch_iter *it, int64_t epoch, size_t batch) {
    if (epoch != it->epoch) {
        it->epoch = epoch;
        make_order(it);
    }
    it->batch = batch;
}

size_t vc_epoch_iter_next(vc_epoch_iter *it, const uint32_t **idx) {
    *idx = NULL;
    size_t nb = vc_epoch_iter_batches(it);
    if (!nb) return 0;
    if (it->batch >= nb) vc_epoch_iter_seek(it, it->epoch + 1, 0);
    size_t start = it->batch * it->batch_size;
    size_t count = it->n_rows - start < it->batch_size ? it->n_rows - start : it->batch_size;
    *idx = it->order + start;
    it->batch++;
    return count;
}

void vc_epoch_iter_free(vc_epoch_iter *it) {
    free(it->order);
    memset(it, 0, sizeof *it);
}
