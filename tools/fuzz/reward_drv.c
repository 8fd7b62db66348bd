/* verlc's side of tools/fuzz/diff_rewards.py: reads lines "data_source<TAB>solution hex<TAB>ground truth hex" and prints
 * vc_reward_default's score for each (ERR where it fails). */
#include "drv_util.h"
#include "verlc/reward.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        char *rest = line, *ds = drv_field(&rest), *sol = drv_unhex(drv_field(&rest)), *gt = drv_unhex(drv_field(&rest));
        double sc = 0;
        vc_status st = vc_reward_default(ds, sol, gt, NULL, &sc);
        if (st) printf("ERR\n"); else printf("%.6f\n", sc);
        free(sol); free(gt);
    }
    return 0;
}
