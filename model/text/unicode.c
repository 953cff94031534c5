/*
 * unicode.c - lookups in the generated tables of unicode_classes.c, unicode_lower.c, unicode_nfd.c (see
 * unicode.h): binary searches, and Hangul syllables decomposed by the
 * formula of the Unicode standard (section 3.12).
 */
#include "model/text/unicode.h"

unsigned clf_uni_class(uint32_t cp)
{
    size_t lo = 0, hi = clf_uni_n_classes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < clf_uni_classes[mid].lo)
            hi = mid;
        else if (cp > clf_uni_classes[mid].hi)
            lo = mid + 1;
        else
            return clf_uni_classes[mid].bits;
    }
    return 0;
}

static const clf_uni_map *find(const clf_uni_map *t, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < t[mid].cp)
            hi = mid;
        else if (cp > t[mid].cp)
            lo = mid + 1;
        else
            return &t[mid];
    }
    return NULL;
}

static int copy_map(const clf_uni_map *e, uint32_t cp, uint32_t out[4])
{
    if (e == NULL) {
        out[0] = cp;
        return 1;
    }
    for (uint32_t i = 0; i < e->n; i++)
        out[i] = e->to[i];
    return (int)e->n;
}

int clf_uni_tolower(uint32_t cp, uint32_t out[4])
{
    if (cp < 0x80) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    return copy_map(find(clf_uni_lower, clf_uni_lower_n, cp), cp, out);
}

int clf_uni_decompose(uint32_t cp, uint32_t out[4])
{
    enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7 };
    enum { VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = 19 * NCOUNT };
    if (cp < 0xC0) {
        out[0] = cp;
        return 1;
    }
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        out[0] = LBASE + s / NCOUNT;
        out[1] = VBASE + (s % NCOUNT) / TCOUNT;
        if (s % TCOUNT == 0)
            return 2;
        out[2] = TBASE + s % TCOUNT;
        return 3;
    }
    return copy_map(find(clf_uni_nfd, clf_uni_nfd_n, cp), cp, out);
}
