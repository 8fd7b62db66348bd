/* Driver of tools/fuzz/diff_balance.py: trainer.balance_batch's partition of a step's rows over the ranks
 * (rl_balance_partition). Each input line: GB W G, then GB row lengths (G > 0: groups of G rows sharing a prompt, as
 * with use_prefix_grouper; 0: none); each output line: every rank's rows in their order, the ranks separated by '|'
 * ("ERR" where it fails). */
#include "../../src/rl/trainer_internal.h"
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    int GB, W, G;
    while (scanf("%d %d %d", &GB, &W, &G) == 3 && GB > 0 && W > 0) {
        int64_t *len = malloc(sizeof *len * (size_t)GB), *start = malloc(sizeof *start * (size_t)GB);
        int *owner = malloc(sizeof(int) * (size_t)GB), *label = malloc(sizeof(int) * (size_t)GB);
        int *at = malloc(sizeof(int) * (size_t)GB), ok = len && start && owner && label && at;
        for (int i = 0; ok && i < GB; i++) ok = scanf("%ld", &len[i]) == 1, start[i] = G > 0 && i % G == 0;
        if (!ok || rl_balance_partition(len, G > 0 ? start : NULL, GB, W, owner, label)) printf("ERR\n");
        else {
            for (int g = 0; g < GB; g++) at[label[g]] = g;
            for (int r = 0; r < W; r++) {
                for (int p = 0; p < GB; p++)
                    if (owner[at[p]] == r) printf("%d ", at[p]);
                printf("|");
            }
            printf("\n");
        }
        free(len), free(start), free(owner), free(label), free(at);
    }
    return 0;
}
