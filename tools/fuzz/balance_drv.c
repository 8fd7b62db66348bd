/* Driver of tools/fuzz/diff_balance.py: trainer.balance_batch's partition of a step's rows over the ranks
 * (rl_balance_partition). Each input line: GB W, then GB row lengths; each output line: every rank's rows in their
 * order, the ranks separated by '|' ("ERR" where it fails). */
#include "../../src/rl/trainer_internal.h"
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    int GB, W;
    while (scanf("%d %d", &GB, &W) == 2 && GB > 0 && W > 0) {
        int64_t *len = malloc(sizeof *len * (size_t)GB);
        int *owner = malloc(sizeof(int) * (size_t)GB), *label = malloc(sizeof(int) * (size_t)GB);
        int *at = malloc(sizeof(int) * (size_t)GB), ok = len && owner && label && at;
        for (int i = 0; ok && i < GB; i++) ok = scanf("%ld", &len[i]) == 1;
        if (!ok || rl_balance_partition(len, GB, W, owner, label)) printf("ERR\n");
        else {
            for (int g = 0; g < GB; g++) at[label[g]] = g;
            for (int r = 0; r < W; r++) {
                for (int p = 0; p < GB; p++)
                    if (owner[at[p]] == r) printf("%d ", at[p]);
                printf("|");
            }
            printf("\n");
        }
        free(len), free(owner), free(label), free(at);
    }
    return 0;
}
