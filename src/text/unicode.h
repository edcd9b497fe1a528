/* UTF-8 and the GPT-2 byte-to-character map: what the tokenizers and the
 * streaming detokenizer share. */
#ifndef GLESLLM_TEXT_UNICODE_H
#define GLESLLM_TEXT_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of the character a lead byte starts, judged by its top four bits as
 * the tokenizers of llama.cpp do (a stray continuation byte counts as one). */
static inline size_t utf8_char_len(unsigned char c)
{
    static const unsigned char len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return len[c >> 4];
}

/* Writes code point cp as UTF-8 (1..4 bytes) and returns the length. */
size_t utf8_put(uint32_t cp, char *out);

/* Decodes one character at s[*i] (n bytes in all) and advances *i. A lead
 * byte without its continuation bytes yields U+FFFD and advances by one. */
uint32_t utf8_next(const char *s, size_t n, size_t *i);

/* True when s[0..n) is well-formed UTF-8. */
bool utf8_valid(const char *s, size_t n);

/* GPT-2's byte-level alphabet: every byte is a printable character. The
 * printable bytes map to themselves, the 68 others in order to U+0100..U+0143. */
uint32_t gpt2_byte_to_cp(unsigned char b);
/* The byte a character stands for, -1 if it is none. */
int gpt2_cp_to_byte(uint32_t cp);

/* Holds back the bytes of an unfinished UTF-8 character between tokens and
 * replaces invalid sequences with U+FFFD. */
typedef struct utf8_stream {
    unsigned char pending[4];
    size_t n_pending;
} utf8_stream;

/* Appends in[0..n) and writes what is complete to out (room for 3 * n + 3
 * bytes: each invalid byte becomes three); returns the bytes written. */
size_t utf8_stream_push(utf8_stream *s, const char *in, size_t n, char *out);
/* What is left at the end (an unfinished character becomes U+FFFD). */
size_t utf8_stream_flush(utf8_stream *s, char *out);

#endif
