#include "verlc/core.h"
#include "verlc/data.h"
#include "verlc/rng.h"
#include "vc_test.h"

/* Checks p against groups written as "2 6 9|1 3 7 8|0 4 5|". */
static int same_groups(const vc_partition *p, const char *want) {
    char buf[512] = "";
    size_t at = 0;
    for (size_t g = 0; g < p->n_groups; g++) {
        for (size_t j = p->offsets[g]; j < p->offsets[g + 1]; j++)
            at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%u", j > p->offsets[g] ? " " : "", p->items[j]);
        at += (size_t)snprintf(buf + at, sizeof buf - at, "|");
    }
    if (strcmp(buf, want)) fprintf(stderr, "got %s want %s\n", buf, want);
    return !strcmp(buf, want);
}

/* Expected groups from verl's seqlen_balancing.karmarkar_karp (volcengine/verl b178a3cd) run on the
 * same inputs, each group sorted as get_seqlen_balanced_partitions returns them. */
static void test_kk_golden(void) {
    vc_partition p;
    int64_t a[] = { 5, 1, 9, 3, 3, 7, 2, 8, 4, 6 };
    CHECK_OK(vc_partition_balanced(a, 10, 3, 0, &p));
    CHECK(same_groups(&p, "2 6 9|1 3 7 8|0 4 5|"));
    CHECK(vc_partition_sum(&p, 0, a) == 17 && vc_partition_sum(&p, 1, a) == 15 + 1 && vc_partition_sum(&p, 2, a) == 15);
    vc_partition_free(&p);
    int64_t b[] = { 10, 10, 1, 1, 1, 1, 2, 2, 30 };
    CHECK_OK(vc_partition_balanced(b, 9, 2, 0, &p));
    CHECK(same_groups(&p, "8|0 1 2 3 4 5 6 7|"));
    vc_partition_free(&p);
    int64_t c[] = { 7, 3, 5, 5, 2, 8, 1, 9 };
    CHECK_OK(vc_partition_balanced(c, 8, 4, 1, &p));
    CHECK(same_groups(&p, "6 7|4 5|2 3|0 1|"));
    vc_partition_free(&p);
    int64_t d[] = { 0, 0, 0, 1, 1, 2 };
    CHECK_OK(vc_partition_balanced(d, 6, 3, 0, &p));
    CHECK(same_groups(&p, "5|0 2 3|1 4|"));
    vc_partition_free(&p);
    CHECK(vc_partition_balanced(c, 8, 3, 1, &p) == VC_ERR_ARG); /* 8 items, 3 equal groups */
    CHECK(vc_partition_balanced(c, 2, 3, 0, &p) == VC_ERR_ARG);
    CHECK(vc_partition_balanced(c, 8, 0, 0, &p) == VC_ERR_ARG);
}

static void test_micro_batches(void) {
    enum { N = 256 };
    int64_t lens[N];
    int64_t total = 0, longest = 0;
    for (int i = 0; i < N; i++) {
        lens[i] = 16 + (int64_t)vc_rng_below(1000, 3, 0, 0, (uint64_t)i);
        if (i % 17 == 0) lens[i] = 2048; /* lumpy */
        total += lens[i];
        if (lens[i] > longest) longest = lens[i];
    }
    int64_t budgets[] = { 2048, 3000, 4096, 10000, 1000000 };
    for (size_t b = 0; b < 5; b++) {
        vc_partition p;
        CHECK_OK(vc_micro_batches_by_tokens(lens, N, budgets[b], 1, &p));
        int64_t lower = (total + budgets[b] - 1) / budgets[b];
        CHECK((int64_t)p.n_groups >= lower && p.n_items == N);
        int fits = 1;
        unsigned char seen[N] = { 0 };
        int perm = 1;
        for (size_t g = 0; g < p.n_groups; g++) {
            fits &= vc_partition_sum(&p, g, lens) <= budgets[b];
            for (size_t j = p.offsets[g]; j < p.offsets[g + 1]; j++) {
                if (seen[p.items[j]]) perm = 0;
                seen[p.items[j]] = 1;
            }
        }
        CHECK_MSG(fits && perm, "budget %lld: %zu groups", (long long)budgets[b], p.n_groups);
        /* balanced: well under twice the minimum number of groups */
        CHECK_MSG((int64_t)p.n_groups <= lower + lower / 4 + 2, "budget %lld: %zu groups, lower bound %lld",
                  (long long)budgets[b], p.n_groups, (long long)lower);
        vc_partition_free(&p);
    }
    vc_partition p;
    CHECK_OK(vc_micro_batches_by_tokens(lens, N, 1000000, 4, &p)); /* min_groups */
    CHECK(p.n_groups == 4);
    vc_partition_free(&p);
    CHECK(vc_micro_batches_by_tokens(lens, N, 2000, 1, &p) == VC_ERR_ARG);
    CHECK_MSG(strstr(vc_last_error(), "sequence 0 has 2048 tokens, over the budget of 2000") != NULL, "%s",
              vc_last_error());
    /* a case where the balanced split at the lower bound overshoots: 3 x 6 in budget 9 needs 3 groups */
    int64_t three[] = { 6, 6, 6 };
    CHECK_OK(vc_micro_batches_by_tokens(three, 3, 9, 1, &p));
    CHECK(p.n_groups == 3);
    vc_partition_free(&p);

    /* verl b178a3cd's rearrange_micro_batches on the same lengths and budgets (its groups within the budget): the
     * groups balanced by calculate_workload, in its order; a -1 ends a group */
    static const struct {
        int n;
        int64_t lens[12], budget;
        int want[16];
    } V[] = {
        { 8, { 38, 818, 38, 31, 681, 26, 15, 34 }, 883, { 0, 2, 3, 4, 5, 7, -1, 1, 6, -1 } },
        { 7, { 243, 475, 596, 790, 9, 339, 464 }, 1098, { 1, 6, -1, 0, 3, -1, 2, 4, 5, -1 } },
        { 5, { 39, 800, 36, 3, 5 }, 1002, { 0, 1, 2, 3, 4, -1 } },
    };
    for (size_t c = 0; c < sizeof V / sizeof V[0]; c++) {
        CHECK_OK(vc_micro_batches_by_tokens(V[c].lens, (size_t)V[c].n, V[c].budget, 1, &p));
        size_t w = 0, g = 0, ok = 1;
        for (; g < p.n_groups; g++, w++)
            for (size_t j = p.offsets[g]; j < p.offsets[g + 1]; j++) ok &= V[c].want[w++] == (int)p.items[j];
        CHECK_MSG(ok && V[c].want[w - 1] == -1 && w == (size_t)V[c].n + p.n_groups, "case %zu: %zu groups", c, p.n_groups);
        vc_partition_free(&p);
    }

    CHECK_OK(vc_micro_batches_by_count(10, 4, &p));
    CHECK(p.n_groups == 3 && p.offsets[1] == 4 && p.offsets[2] == 8 && p.offsets[3] == 10 && p.items[9] == 9);
    vc_partition_free(&p);
    CHECK(vc_micro_batches_by_count(10, 0, &p) == VC_ERR_ARG);
}

static void test_epoch_iter(void) {
    vc_epoch_iter it;
    CHECK_OK(vc_epoch_iter_init(&it, 10, 4, 1, 1, 7));
    CHECK(vc_epoch_iter_batches(&it) == 2);
    const uint32_t *idx;
    uint32_t first[8];
    unsigned seen = 0;
    for (int b = 0; b < 2; b++) {
        size_t n = vc_epoch_iter_next(&it, &idx);
        CHECK(n == 4);
        for (int j = 0; j < 4; j++) {
            first[b * 4 + j] = idx[j];
            CHECK(!(seen & (1u << idx[j])));
            seen |= 1u << idx[j];
        }
    }
    CHECK(it.epoch == 0);
    size_t n = vc_epoch_iter_next(&it, &idx); /* wraps into epoch 1, reshuffled */
    CHECK(n == 4 && it.epoch == 1);
    uint32_t e1[4];
    memcpy(e1, idx, sizeof e1);
    CHECK(memcmp(e1, first, sizeof e1) != 0);
    /* resume: seeking reproduces exactly */
    vc_epoch_iter it2;
    CHECK_OK(vc_epoch_iter_init(&it2, 10, 4, 1, 1, 7));
    vc_epoch_iter_seek(&it2, 1, 0);
    CHECK(vc_epoch_iter_next(&it2, &idx) == 4 && !memcmp(idx, e1, sizeof e1));
    vc_epoch_iter_seek(&it2, 0, 1);
    CHECK(vc_epoch_iter_next(&it2, &idx) == 4 && !memcmp(idx, first + 4, 4 * sizeof *idx));
    vc_epoch_iter_free(&it2);
    vc_epoch_iter_free(&it);

    /* no shuffle, keep the last partial batch */
    CHECK_OK(vc_epoch_iter_init(&it, 10, 4, 0, 0, 7));
    CHECK(vc_epoch_iter_batches(&it) == 3);
    CHECK(vc_epoch_iter_next(&it, &idx) == 4 && idx[0] == 0 && idx[3] == 3);
    CHECK(vc_epoch_iter_next(&it, &idx) == 4 && idx[0] == 4);
    CHECK(vc_epoch_iter_next(&it, &idx) == 2 && idx[0] == 8 && idx[1] == 9);
    CHECK(vc_epoch_iter_next(&it, &idx) == 4 && idx[0] == 0 && it.epoch == 1);
    vc_epoch_iter_free(&it);
    CHECK(vc_epoch_iter_init(&it, 3, 4, 1, 1, 0) == VC_ERR_ARG);
    CHECK(vc_epoch_iter_init(&it, 3, 0, 1, 1, 0) == VC_ERR_ARG);
}

/* verl's data orders against torch 2.15's own (torch.randperm over torch.Generator().manual_seed(s); the loaders'
 * epochs as torchdata 0.11's StatefulDataLoader and torch's DistributedSampler draw them, tools printed them) */
static int batches_are(vc_epoch_iter *it, const uint32_t *want, size_t rows) {
    const uint32_t *idx;
    int ok = 1;
    for (size_t a = 0; a < rows; a += it->batch_size)
        ok &= vc_epoch_iter_next(it, &idx) == it->batch_size && !memcmp(idx, want + a, it->batch_size * sizeof *idx);
    return ok;
}

static void test_torch_orders(void) {
    /* RandomSampler over a generator seeded 7, with loader workers (the 2nd, 4th, 6th randperm) and without */
    static const uint32_t W[3][10] = { { 1, 8, 9, 5, 7, 4, 0, 3, 6, 2 }, { 7, 0, 8, 4, 2, 6, 9, 3, 1, 5 },
                                       { 1, 8, 0, 7, 2, 9, 5, 6, 3, 4 } };
    static const uint32_t N0[10] = { 5, 0, 3, 4, 1, 7, 9, 6, 8, 2 };
    vc_epoch_iter it;
    CHECK_OK(vc_epoch_iter_init(&it, 10, 3, 1, 1, 0));
    CHECK_OK(vc_epoch_iter_torch(&it, VC_ORDER_TORCH_STREAM, 7, 2, 1));
    for (int e = 0; e < 3; e++) CHECK_MSG(batches_are(&it, W[e], 9) && it.epoch == e, "workers, epoch %d", e);
    vc_epoch_iter_seek(&it, 1, 1); /* back: from the seed again */
    CHECK(batches_are(&it, W[1] + 3, 6));
    vc_epoch_iter_free(&it);
    CHECK_OK(vc_epoch_iter_init(&it, 10, 5, 1, 1, 0));
    CHECK_OK(vc_epoch_iter_torch(&it, VC_ORDER_TORCH_STREAM, 7, 1, 0));
    CHECK(batches_are(&it, N0, 10) && batches_are(&it, W[0], 10));
    vc_epoch_iter_free(&it);
    /* data.seed null: torch's default seed */
    static const uint32_t D[10] = { 9, 3, 7, 4, 8, 2, 0, 6, 5, 1 };
    CHECK_OK(vc_epoch_iter_init(&it, 10, 10, 1, 1, 0));
    CHECK_OK(vc_epoch_iter_torch(&it, VC_ORDER_TORCH_STREAM, VC_TORCH_DEFAULT_SEED, 2, 1));
    CHECK(batches_are(&it, D, 10));
    vc_epoch_iter_free(&it);
    /* DistributedSampler (seed + epoch), a resumed iterator seeking straight to epoch 1; seed 5's epoch 1 */
    static const uint32_t E[2][11] = { { 10, 0, 4, 3, 5, 8, 2, 1, 9, 7, 6 }, { 0, 10, 2, 3, 7, 6, 4, 8, 1, 9, 5 } };
    static const uint32_t S5[11] = { 2, 0, 8, 7, 1, 4, 5, 9, 3, 6, 10 };
    CHECK_OK(vc_epoch_iter_init(&it, 11, 4, 1, 1, 0));
    CHECK_OK(vc_epoch_iter_torch(&it, VC_ORDER_TORCH_EPOCH, 0, 1, 0));
    CHECK(batches_are(&it, E[0], 8) && batches_are(&it, E[1], 8));
    vc_epoch_iter_seek(&it, 1, 0);
    CHECK(batches_are(&it, E[1], 8));
    CHECK_OK(vc_epoch_iter_torch(&it, VC_ORDER_TORCH_EPOCH, 5, 1, 0)); /* (the current epoch's order redone) */
    vc_epoch_iter_seek(&it, 1, 0);
    CHECK(batches_are(&it, S5, 8));
    CHECK(vc_epoch_iter_torch(&it, 3, 5, 1, 0) == VC_ERR_ARG);
    vc_epoch_iter_free(&it);
}

int main(void) {
    test_kk_golden();
    test_torch_orders();
    test_micro_batches();
    test_epoch_iter();
    return vc_test_done();
}
