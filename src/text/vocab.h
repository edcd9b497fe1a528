/* The token pieces of a GGUF vocabulary and their bytes, for streaming
 * generated text. Decoding only: SentencePiece pieces (U+2581 is a space,
 * <0xXX> a byte, control tokens print nothing) and GPT-2 byte-level pieces
 * (each character one byte). Text to ids is the tokenizer's job. */
#ifndef GLESLLM_TEXT_VOCAB_H
#define GLESLLM_TEXT_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef enum vocab_kind { VOCAB_SPM, VOCAB_GPT2 } vocab_kind;

typedef struct vocab {
    vocab_kind kind;
    uint32_t n;
    const gguf_value *tokens;  /* the string array, inside the file */
    const gguf_value *types;   /* token types, or NULL */
    int32_t eos, eot;          /* -1 when absent */
} vocab;

glesllm_status vocab_open(const gguf_file *f, vocab *out);

/* The bytes of token id into buf (at most n); returns how many, or 0 for
 * tokens that print nothing. */
size_t vocab_piece(const vocab *v, int32_t id, char *buf, size_t n);

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
