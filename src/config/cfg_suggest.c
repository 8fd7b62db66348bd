/* "Did you mean": the valid key closest to a mistyped one, by Levenshtein distance over full dotted
 * paths; if nothing is close, a key with the same last segment (the right leaf under the wrong parent). */
#include "config/cfg_internal.h"
#include <stdlib.h>
#include <string.h>

struct best {
    const char *key;
    const char *leaf;
    size_t key_len;
    size_t dist;
    size_t leaf_dist; /* distance of the best same-leaf candidate */
    char *path;       /* best by distance */
    char *leaf_path;  /* best with the same last segment */
    size_t *row;      /* DP scratch, key_len + 1 */
};

static size_t levenshtein(const char *a, size_t al, const char *b, size_t bl, size_t *row, size_t cutoff) {
    for (size_t j = 0; j <= al; j++) row[j] = j;
    for (size_t i = 1; i <= bl; i++) {
        size_t diag = row[0], lo;
        row[0] = lo = i;
        for (size_t j = 1; j <= al; j++) {
            size_t up = row[j];
            size_t v = diag + (a[j - 1] != b[i - 1]);
            if (up + 1 < v) v = up + 1;
            if (row[j - 1] + 1 < v) v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
            if (v < lo) lo = v;
        }
        if (lo > cutoff) return lo; /* cannot get better than the current best */
    }
    return row[al];
}

static void keep(char **slot, const char *path) {
    char *c = vc_strdup(path);
    if (!c) return;
    free(*slot);
    *slot = c;
}

static void walk(const vc_cfg_node *n, char *path, size_t plen, size_t cap, struct best *b) {
    if (n->kind != VC_CFG_MAP) return;
    for (size_t i = 0; i < n->n; i++) {
        size_t kl = strlen(n->keys[i]);
        if (plen + kl + 2 > cap) continue;
        size_t l = plen;
        if (l) path[l++] = '.';
        memcpy(path + l, n->keys[i], kl + 1);
        size_t pl = l + kl;
        size_t diff = pl > b->key_len ? pl - b->key_len : b->key_len - pl;
        if (diff < b->dist) {
            size_t d = levenshtein(b->key, b->key_len, path, pl, b->row, b->dist);
            if (d < b->dist) { b->dist = d; keep(&b->path, path); }
        }
        if (!strcmp(n->keys[i], b->leaf)) {
            size_t d = levenshtein(b->key, b->key_len, path, pl, b->row, (size_t)-1);
            if (d < b->leaf_dist) { b->leaf_dist = d; keep(&b->leaf_path, path); }
        }
        walk(n->items[i], path, pl, cap, b);
        path[plen] = 0;
    }
}

const char *vc_cfg_suggest(const vc_cfg_node *root, const char *key, char *buf, size_t n) {
    struct best b = { .key = key, .key_len = strlen(key), .dist = (size_t)-1, .leaf_dist = (size_t)-1 };
    const char *dot = strrchr(key, '.');
    b.leaf = dot ? dot + 1 : key;
    b.row = malloc((b.key_len + 1) * sizeof *b.row);
    char path[1024] = "";
    const char *r = NULL;
    if (!b.row || !root) goto out;
    walk(root, path, 0, sizeof path, &b);
    size_t limit = 2 + b.key_len / 8; /* a few typos for a long dotted key */
    if (b.path && b.dist > 0 && b.dist <= limit) r = b.path;
    else if (b.leaf_path && b.leaf_dist > 0) r = b.leaf_path;
    if (r) {
        snprintf(buf, n, "%s", r);
        r = buf;
    }
out:
    free(b.row);
    free(b.path);
    free(b.leaf_path);
    return r;
}
