/* Token pieces to bytes. See vocab.h. */
#include "text/vocab.h"

#include <string.h>

#include "common/error.h"

glesllm_status vocab_open(const gguf_file *f, vocab *v)
{
    memset(v, 0, sizeof *v);
    gguf_str model;
    if (!gguf_find(f, "tokenizer.ggml.model") ||
        gguf_get_str(f, "tokenizer.ggml.model", &model) != GLESLLM_OK)
        return err_set(GLESLLM_ERR_FORMAT, "the model has no tokenizer.ggml.model");
    if (gguf_str_eq(model, "llama"))
        v->kind = VOCAB_SPM;
    else if (gguf_str_eq(model, "gpt2"))
        v->kind = VOCAB_GPT2;
    else {
        char name[64];
        return err_set(GLESLLM_ERR_UNSUPPORTED, "tokenizer '%s' is not supported (llama, gpt2)",
                       gguf_str_copy(model, name, sizeof name));
    }
    glesllm_status st =
        gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &v->tokens);
    if (st)
        return st;
    v->n = (uint32_t)v->tokens->v.arr.count;
    if (gguf_find(f, "tokenizer.ggml.token_type") &&
        gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &v->types) != GLESLLM_OK)
        v->types = NULL;
    if (v->types && v->types->v.arr.count != v->n)
        return err_set(GLESLLM_ERR_FORMAT, "tokenizer.ggml.token_type has %llu entries for %u tokens",
                       (unsigned long long)v->types->v.arr.count, v->n);
    v->eos = gguf_get_id_or_none(f, "tokenizer.ggml.eos_token_id");
    v->eot = gguf_get_id_or_none(f, "tokenizer.ggml.eot_token_id");
    return GLESLLM_OK;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* GPT-2's byte-to-character map sends the printable bytes to themselves and
 * the 68 others, in order, to U+0100..U+0143. */
static int gpt2_byte(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp < 256 || cp >= 256 + 68)
        return -1;
    uint32_t k = cp - 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        if (!printable && k-- == 0)
            return b;
    }
    return -1;
}

size_t vocab_piece(const vocab *v, int32_t id, char *buf, size_t n)
{
    if (id < 0 || (uint32_t)id >= v->n || !n)
        return 0;
    int32_t type = v->types ? (int32_t)gguf_array_number(v->types, (uint64_t)id) : 1;
    if (type == 3 || type == 2) /* control, unknown */
        return 0;
    gguf_str s = gguf_array_string(v->tokens, (uint64_t)id);
    const unsigned char *p = (const unsigned char *)s.data;
    size_t len = (size_t)s.len, o = 0;
    if (v->kind == VOCAB_SPM) {
        if (type == 6 && len == 6 && p[0] == '<' && p[1] == '0' && p[2] == 'x' && p[5] == '>' &&
            hexval((char)p[3]) >= 0 && hexval((char)p[4]) >= 0) {
            buf[0] = (char)(hexval((char)p[3]) * 16 + hexval((char)p[4]));
            return 1;
        }
        for (size_t i = 0; i < len && o < n; i++) {
            if (i + 2 < len && p[i] == 0xe2 && p[i + 1] == 0x96 && p[i + 2] == 0x81) {
                buf[o++] = ' ';
                i += 2;
            } else {
                buf[o++] = (char)p[i];
            }
        }
        return o;
    }
    for (size_t i = 0; i < len && o < n;) { /* GPT-2: each UTF-8 character is a byte */
        uint32_t cp = p[i];
        size_t k = cp < 0x80 ? 1 : cp < 0xe0 ? 2 : cp < 0xf0 ? 3 : 4;
        if (k > 1) {
            cp &= 0xffu >> (k + 1);
            for (size_t j = 1; j < k && i + j < len; j++)
                cp = cp << 6 | (p[i + j] & 0x3f);
        }
        int b = gpt2_byte(cp);
        if (b < 0) /* not a byte character (a special token's text): as is */
            for (size_t j = 0; j < k && i + j < len && o < n; j++)
                buf[o++] = (char)p[i + j];
        else
            buf[o++] = (char)b;
        i += k;
    }
    return o;
}

/* length of the UTF-8 sequence a lead byte starts, 0 if it cannot */
static size_t utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c >= 0xc2 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3
                                                 : c >= 0xf0 && c < 0xf5 ? 4 : 0;
}

static size_t put_replacement(char *out)
{
    memcpy(out, "\xef\xbf\xbd", 3);
    return 3;
}

size_t utf8_stream_push(utf8_stream *s, const char *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)in[i];
        if (s->n_pending) {
            if ((c & 0xc0) == 0x80) {
                s->pending[s->n_pending++] = c;
                if (s->n_pending == utf8_len(s->pending[0])) {
                    memcpy(out + o, s->pending, s->n_pending);
                    o += s->n_pending;
                    s->n_pending = 0;
                }
                continue;
            }
            o += put_replacement(out + o); /* cut short by a non-continuation byte */
            s->n_pending = 0;
        }
        size_t k = utf8_len(c);
        if (k == 1)
            out[o++] = (char)c;
        else if (k == 0)
            o += put_replacement(out + o);
        else
            s->pending[s->n_pending++] = c;
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
