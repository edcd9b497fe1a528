/* UTF-8 well-formedness and text safe for a terminal: what the error
 * messages, the descriptions of files and the tokenizers share. */
#ifndef GLESLLM_COMMON_UTF8_H
#define GLESLLM_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the well-formed sequence s[0..n) starts, 0 if none (RFC 3629:
 * no overlong forms, no surrogates, nothing past U+10FFFF). */
static inline size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t k = c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
    if (!k || k > n)
        return 0;
    for (size_t j = 1; j < k; j++)
        if ((s[j] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) || (c == 0xf0 && s[1] < 0x90) ||
        (c == 0xf4 && s[1] >= 0x90))
        return 0;
    return k;
}

/* Whether the sequence p[0..k) (k from utf8_seq) is a C1 control, U+0080 to
 * U+009F: JSON allows them raw, a terminal acts on them (CSI, OSC...). */
static inline bool utf8_is_c1(const unsigned char *p, size_t k)
{
    return k == 2 && p[0] == 0xc2 && p[1] < 0xa0;
}

/* s[0..n) for a terminal, into out (cap bytes, NUL-terminated, cut at a
 * whole character): control characters (C0 but, with newlines, '\n' and
 * '\t'; DEL; C1, which can move the cursor or retitle the window) and
 * bytes of no well-formed character as \xNN. Returns the length written. */
size_t term_escape(const char *s, size_t n, bool newlines, char *out, size_t cap);

#endif
