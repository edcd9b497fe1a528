/* Text to token ids and back, as llama.cpp does for the same vocabulary.
 *
 * Encoding: special-token texts are cut out first (user-defined tokens
 * always; control tokens only with TOK_PARSE_SPECIAL), then each run of plain
 * text is tokenized by the vocabulary's model: SentencePiece (a leading space
 * at the start and after each special token, U+2581 for spaces, the
 * highest-scoring adjacent pair merged first, bytes <0xXX> for characters
 * without a token) or byte-level BPE (the pre-tokenizer's words, each byte
 * as a GPT-2 character, the lowest-ranked merge first) or RWKV's (the
 * longest token at each point, over the tokens' bytes). */
#ifndef GLESLLM_TEXT_TOKENIZER_H
#define GLESLLM_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "text/vocab.h"

/* A growable list of ids; zero-initialise, free with tok_ids_free. */
typedef struct tok_ids {
    int32_t *ids;
    size_t n, cap;
} tok_ids;

void tok_ids_free(tok_ids *t);

enum {
    TOK_ADD_SPECIAL = 1,   /* BOS/EOS as the vocabulary asks (add_bos_token, ...) */
    TOK_PARSE_SPECIAL = 2  /* control-token text in the input becomes that token */
};

/* Appends the ids of text[0..n) to out. */
glesllm_status tok_encode(const vocab *v, const char *text, size_t n, unsigned flags, tok_ids *out);

enum {
    TOK_REMOVE_SPECIAL = 1,  /* drop the BOS/EOS that encoding added */
    TOK_UNPARSE_SPECIAL = 2  /* control tokens print their text */
};

/* The text of ids (malloc'd, NUL-terminated, *len bytes before the NUL):
 * the pieces joined, the leading space SentencePiece added taken off, and
 * for BPE vocabularies that ask for it the spaces before punctuation and
 * contractions taken out as llama.cpp does ("Hello , world" -> "Hello,
 * world"). Invalid UTF-8 is left as the model made it. */
glesllm_status tok_decode(const vocab *v, const int32_t *ids, size_t n, unsigned flags, char **text,
                          size_t *len);

#endif
