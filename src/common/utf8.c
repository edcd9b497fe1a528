#include "common/utf8.h"

#include <stdio.h>
#include <string.h>

size_t term_escape(const char *s, size_t n, bool newlines, char *out, size_t cap)
{
    size_t o = 0;
    if (!cap)
        return 0;
    for (size_t i = 0; i < n;) {
        const unsigned char *p = (const unsigned char *)s + i;
        size_t k = utf8_seq(p, n - i);
        bool keep = newlines && (p[0] == '\n' || p[0] == '\t');
        if (!keep && (p[0] < 0x20 || p[0] == 0x7f || !k || utf8_is_c1(p, k))) {
            if (o + 4 >= cap)
                break;
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[0]);
            i++;
            continue;
        }
        if (o + k >= cap)
            break;
        memcpy(out + o, p, k);
        o += k;
        i += k;
    }
    out[o] = '\0';
    return o;
}
