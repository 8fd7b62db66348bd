/* ZIP central directory reading for PyTorch checkpoints: the end record (and its ZIP64 form), the
 * central directory's entries (ZIP64 extra fields for large sizes and offsets) and each local header's
 * lengths, every offset checked against the file. */
#include "pt_zip.h"
#include <stdlib.h>
#include <string.h>

#define MAX_ENTRIES 10000000

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* central directory offset and entry count from the end record; 0 when none is found */
static int find_directory(const uint8_t *m, size_t n, uint64_t *cd_off, uint64_t *cd_count) {
    if (n < 22) return 0;
    size_t lo = n - 22 > 65535 ? n - 22 - 65535 : 0;
    for (size_t at = n - 22 + 1; at-- > lo;) {
        if (le(m + at, 4) != 0x06054b50) continue;
        *cd_count = le(m + at + 10, 2);
        *cd_off = le(m + at + 16, 4);
        if (*cd_count != 0xffff && *cd_off != 0xffffffff) return 1;
        /* ZIP64: the locator just before the end record gives the ZIP64 end record */
        if (at < 20 || le(m + at - 20, 4) != 0x07064b50) return 0;
        uint64_t z = le(m + at - 20 + 8, 8);
        if (n < 56 || z > n - 56 || le(m + z, 4) != 0x06064b50) return 0;
        *cd_count = le(m + z + 32, 8);
        *cd_off = le(m + z + 48, 8);
        return 1;
    }
    return 0;
}

/* the ZIP64 extra field of a central directory entry: the 64-bit values of the fields saturated at 2^32-1 */
static void zip64_extra(const uint8_t *x, size_t xn, uint64_t *usize, uint64_t *csize, uint64_t *loff) {
    for (size_t at = 0; at + 4 <= xn;) {
        size_t id = (size_t)le(x + at, 2), len = (size_t)le(x + at + 2, 2);
        if (len > xn - at - 4) return;
        if (id == 1) {
            const uint8_t *p = x + at + 4;
            size_t k = 0;
            uint64_t *fields[3] = { usize, csize, loff };
            for (int i = 0; i < 3; i++)
                if (*fields[i] == 0xffffffff && k + 8 <= len) {
                    *fields[i] = le(p + k, 8);
                    k += 8;
                }
            return;
        }
        at += 4 + len;
    }
}

static int name_cmp(const char *a, size_t an, const char *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

static int entry_cmp(const void *x, const void *y) {
    const pt_zip_entry *a = x, *b = y;
    return name_cmp(a->name, a->name_len, b->name, b->name_len);
}

vc_status pt_zip_read(const char *path, const uint8_t *m, size_t n, pt_zip_entry **out, int *count) {
    *out = NULL;
    *count = 0;
    uint64_t off = 0, cnt = 0;
    if (!find_directory(m, n, &off, &cnt))
        return vc_fail(VC_ERR_FORMAT, "%s: no ZIP directory (not a PyTorch checkpoint, or truncated)", path);
    if (cnt > MAX_ENTRIES || off > n || cnt > (n - off) / 46)
        return vc_fail(VC_ERR_FORMAT, "%s: ZIP directory of %llu entries at offset %llu beyond the file", path,
                       (unsigned long long)cnt, (unsigned long long)off);
    pt_zip_entry *e = vc_calloc(cnt ? (size_t)cnt : 1, sizeof *e);
    if (!e) return VC_ERR_NOMEM;
    const uint8_t *p = m + off, *end = m + n;
    for (uint64_t i = 0; i < cnt; i++) {
        if (end - p < 46 || le(p, 4) != 0x02014b50) goto bad;
        size_t nl = (size_t)le(p + 28, 2), xl = (size_t)le(p + 30, 2), cl = (size_t)le(p + 32, 2);
        if ((size_t)(end - p) < 46 + nl + xl + cl) goto bad;
        uint64_t csize = le(p + 20, 4), usize = le(p + 24, 4), loff = le(p + 42, 4);
        zip64_extra(p + 46 + nl, xl, &usize, &csize, &loff);
        e[i].name = (const char *)p + 46;
        e[i].name_len = nl;
        e[i].method = (int)le(p + 10, 2);
        e[i].size = usize;
        if (loff > n - 30 || le(m + loff, 4) != 0x04034b50) goto bad;
        uint64_t data = loff + 30 + le(m + loff + 26, 2) + le(m + loff + 28, 2);
        if (data > n || csize > n - data || (e[i].method == 0 && csize != usize)) goto bad;
        e[i].offset = data;
        p += 46 + nl + xl + cl;
    }
    qsort(e, (size_t)cnt, sizeof *e, entry_cmp);
    *out = e;
    *count = (int)cnt;
    return VC_OK;
bad:
    free(e);
    return vc_fail(VC_ERR_FORMAT, "%s: ZIP directory entry malformed or pointing outside the file", path);
}

const pt_zip_entry *pt_zip_find(const pt_zip_entry *e, int count, const char *name) {
    size_t n = strlen(name);
    int lo = 0, hi = count - 1;
    while (lo <= hi) { /* entries are sorted by name */
        int mid = lo + (hi - lo) / 2, c = name_cmp(e[mid].name, e[mid].name_len, name, n);
        if (!c) return &e[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}
