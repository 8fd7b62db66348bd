/* verlc's side of tools/fuzz/diff_rewards.py: reads lines "data_source<TAB>solution hex<TAB>ground truth hex" and prints
 * vc_reward_default's score for each (ERR where it fails). */
#include "verlc/reward.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char *unhex(const char *h) {
    size_t n = strlen(h) / 2;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) { unsigned v; sscanf(h + 2 * i, "%2x", &v); s[i] = (char)v; }
    s[n] = 0;
    return s;
}
int main(void) {
    static char line[1 << 20];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        char *ds = strtok(line, "\t"), *a = strtok(NULL, "\t"), *b = strtok(NULL, "\t");
        char *sol = unhex(a ? a : ""), *gt = unhex(b ? b : "");
        double sc = 0;
        vc_status st = vc_reward_default(ds, sol, gt, NULL, &sc);
        if (st) printf("ERR\n"); else printf("%.6f\n", sc);
        free(sol); free(gt);
    }
    return 0;
}
