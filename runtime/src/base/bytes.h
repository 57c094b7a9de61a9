/* Copies and compares of a few bytes (a message key, a short string) inline: memcpy and
 * memcmp with a length known only at run time are calls of their own, about 15 instructions
 * for a one-byte key and a fifth of a cached string lookup. */
#ifndef SMARM_BYTES_H
#define SMARM_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t bytes_load8(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint32_t bytes_load4(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint16_t bytes_load2(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Whether a and b hold the same n bytes: words from the front and one that ends at the n-th
 * byte, never a byte past it (meant for short runs: a word per 8 bytes). */
static inline int bytes_eq(const void *a, const void *b, size_t n)
{
    const char *x = a, *y = b;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if (bytes_load8(x + i) != bytes_load8(y + i))
                return 0;
        return bytes_load8(x + n - 8) == bytes_load8(y + n - 8);
    }
    if (n >= 4)
        return bytes_load4(x) == bytes_load4(y) && bytes_load4(x + n - 4) == bytes_load4(y + n - 4);
    if (n >= 2)
        return bytes_load2(x) == bytes_load2(y) && bytes_load2(x + n - 2) == bytes_load2(y + n - 2);
    return n == 0 || x[0] == y[0];
}

/* n bytes from src to dst: a loop up to 16, memcpy beyond. */
static inline void bytes_copy_short(void *dst, const void *src, size_t n)
{
    if (n > 16) {
        memcpy(dst, src, n);
        return;
    }
    char *d = dst;
    const char *s = src;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i];
}

#endif
