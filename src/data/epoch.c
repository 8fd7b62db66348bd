/* Seeded epoch iteration over dataset rows. */
#include "verlc/data.h"
#include "verlc/rng.h"
#include <stdlib.h>
#include <string.h>

/* VC_ORDER_TORCH_STREAM: the generator moved on to epoch it->epoch's randperm (continued from the last epoch's
 * state where the run goes forward, else from the seed) */
static void torch_stream(vc_epoch_iter *it) {
    int64_t want = it->first + (int64_t)it->draws * it->epoch, done = it->mt_done;
    if (done < 0 || done > want) vc_np_seed(it->mt, (uint32_t)it->seed), done = -1;
    for (; done < want; done++) vc_torch_randperm(it->mt, it->order, it->n_rows);
    it->mt_done = want;
}

static void make_order(vc_epoch_iter *it) {
    if (it->shuffle && it->torch == VC_ORDER_TORCH_STREAM) {
        torch_stream(it);
    } else if (it->shuffle && it->torch == VC_ORDER_TORCH_EPOCH) {
        vc_np_seed(it->mt, (uint32_t)(it->seed + (uint64_t)it->epoch));
        vc_torch_randperm(it->mt, it->order, it->n_rows);
    } else {
        for (size_t i = 0; i < it->n_rows; i++) it->order[i] = (uint32_t)i;
        if (it->shuffle) vc_shuffle_u32(it->order, it->n_rows, it->seed, (uint64_t)it->epoch);
    }
}

vc_status vc_epoch_iter_torch(vc_epoch_iter *it, int kind, uint64_t seed, int draws, int first) {
    if ((kind != VC_ORDER_TORCH_STREAM && kind != VC_ORDER_TORCH_EPOCH) || draws < 1 || first < 0)
        return vc_fail(VC_ERR_ARG, "epoch order: kind %d, draws %d, first %d", kind, draws, first);
    if (!it->mt && !(it->mt = vc_malloc(sizeof *it->mt))) return VC_ERR_NOMEM;
    it->torch = kind, it->seed = seed, it->draws = draws, it->first = first, it->mt_done = -1;
    make_order(it);
    return VC_OK;
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
    free(it->order), free(it->mt);
    memset(it, 0, sizeof *it);
}
