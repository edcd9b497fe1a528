/* UTF-8 helpers and the GPT-2 byte map. See unicode.h. */
#include "text/unicode.h"

#include <string.h>

#include "common/utf8.h"

size_t utf8_put(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | ((cp >> 18) & 0x07));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

uint32_t utf8_next(const char *str, size_t n, size_t *i)
{
    const unsigned char *s = (const unsigned char *)str + *i;
    size_t k = utf8_seq(s, n - *i);
    if (!k) {
        *i += 1;
        return 0xfffd;
    }
    *i += k;
    if (k == 1)
        return s[0];
    uint32_t cp = s[0] & (0x7fu >> k);
    for (size_t j = 1; j < k; j++)
        cp = cp << 6 | (s[j] & 0x3f);
    return cp;
}

bool utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq((const unsigned char *)s + i, n - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

static bool gpt2_printable(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

/* The 68 non-printable bytes, in order: 0..32, 127..160, 173. */
uint32_t gpt2_byte_to_cp(unsigned char b)
{
    if (gpt2_printable(b))
        return b;
    return b <= 32 ? 256u + b : b <= 160 ? 256u + 33 + (b - 127u) : 256u + 67;
}

int gpt2_cp_to_byte(uint32_t cp)
{
    if (cp < 256)
        return gpt2_printable(cp) ? (int)cp : -1;
    uint32_t k = cp - 256;
    return k < 33 ? (int)k : k < 67 ? (int)(127 + k - 33) : k == 67 ? 173 : -1;
}

static size_t put_replacement(char *out)
{
    memcpy(out, "\xef\xbf\xbd", 3);
    return 3;
}

/* whether held[0..n) (n >= 2) can still begin a well-formed character */
static bool utf8_prefix_ok(const unsigned char *held, size_t n, size_t k)
{
    unsigned char probe[4] = { 0x80, 0x80, 0x80, 0x80 };
    memcpy(probe, held, n);
    return utf8_seq(probe, k) == k;
}

size_t utf8_stream_push(utf8_stream *s, const char *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (s->n_pending) {
            unsigned char lead = s->pending[0];
            size_t k = lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
            s->pending[s->n_pending] = c;
            if (utf8_prefix_ok(s->pending, s->n_pending + 1, k)) {
                if (++s->n_pending == k) {
                    memcpy(out + o, s->pending, k);
                    o += k;
                    s->n_pending = 0;
                }
                continue;
            }
            /* cut short: what was held is one invalid sequence; c starts afresh */
            o += put_replacement(out + o);
            s->n_pending = 0;
        }
        if (c < 0x80)
            out[o++] = (char)c;
        else if (c >= 0xc2 && c < 0xf5)
            s->pending[s->n_pending++] = c;
        else
            o += put_replacement(out + o);
    }
    return o;
}

size_t utf8_stream_flush(utf8_stream *s, char *out)
{
    if (!s->n_pending)
        return 0;
    s->n_pending = 0;
    return put_replacement(out);
}
