/* A GGUF vocabulary (tokenizer.ggml.*): token texts, scores and types, BPE
 * merges, special tokens and the flags that steer tokenization, loaded and
 * checked once, owned by the vocab (the file may be closed afterwards).
 *
 * Three tokenizer models, as llama.cpp names them: "llama" (SentencePiece:
 * score-driven merges, byte fallback <0xXX>, a leading space), "gpt2"
 * (byte-level BPE: merge ranks over GPT-2's byte alphabet, after a
 * pre-tokenizer chosen by tokenizer.ggml.pre) and "rwkv" (RWKV World: each
 * token a byte string, written with \xNN, \t, \n, \r and \-escapes; text
 * cut greedily into the longest token at each point). Text to ids:
 * tokenizer.h. */
#ifndef GLESLLM_TEXT_VOCAB_H
#define GLESLLM_TEXT_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"

typedef enum vocab_kind { VOCAB_SPM, VOCAB_BPE, VOCAB_RWKV } vocab_kind;

/* tokenizer.ggml.token_type values */
enum {
    TOKEN_UNDEFINED = 0,
    TOKEN_NORMAL = 1,
    TOKEN_UNKNOWN = 2,
    TOKEN_CONTROL = 3,
    TOKEN_USER_DEFINED = 4,
    TOKEN_UNUSED = 5,
    TOKEN_BYTE = 6
};

typedef struct vocab vocab;

/* Reads and checks the vocabulary of f. Malformed metadata (a missing or
 * short array, an id out of range, a merge without its space) is an error
 * naming the key. */
glesllm_status vocab_load(const gguf_file *f, vocab **out);
void vocab_free(vocab *v);

vocab_kind vocab_kind_of(const vocab *v);
uint32_t vocab_size(const vocab *v);
/* Warnings of the load (an unknown pre-tokenizer, ...), "" when none. */
const char *vocab_warnings(const vocab *v);
/* The pre-tokenizer in use ("default" when none was named). */
const char *vocab_pre_name(const vocab *v);

/* Text of token id as stored (NUL-terminated), "" for an id out of range. */
const char *vocab_text(const vocab *v, int32_t id, size_t *len);
int vocab_type(const vocab *v, int32_t id);
float vocab_score(const vocab *v, int32_t id);
/* The id whose text is s[0..n), -1 if none. */
int32_t vocab_find(const vocab *v, const char *s, size_t n);

int32_t vocab_bos(const vocab *v); /* -1 when the vocabulary has none */
int32_t vocab_eos(const vocab *v);
int32_t vocab_eot(const vocab *v);
int32_t vocab_unk(const vocab *v);
bool vocab_adds_bos(const vocab *v);
bool vocab_adds_eos(const vocab *v);
/* Where two vocabularies differ (a draft model must share its target's):
 * -1 when they have the same kind, size, BOS/EOS and token texts; else the
 * first id whose text differs (the smaller size when only the sizes do), or
 * -2 for a different kind or BOS/EOS. */
int64_t vocab_difference(const vocab *a, const vocab *b);

/* End of generation: EOS, EOT and the end-of-turn tokens found by text. */
bool vocab_is_eog(const vocab *v, int32_t id);

/* The bytes token id stands for, into buf (room for n); returns how many it
 * needs, which may exceed n (then buf holds the first n). Control and unknown
 * tokens give nothing unless `special` (then their text). An SPM "▁" is a
 * space, <0xXX> its byte, a GPT-2 character its byte; an RWKV token its
 * unescaped bytes. */
size_t vocab_piece(const vocab *v, int32_t id, bool special, char *buf, size_t n);

/* ---- for the tokenizer ---- */
/* Rank of the BPE merge "left right", -1 if none. */
int32_t vocab_merge_rank(const vocab *v, const char *left, size_t nl, const char *right, size_t nr);
/* RWKV: the longest token whose bytes begin s[0..n) (a later token of the
 * same bytes over an earlier one), its length in *len; -1 if none. */
int32_t vocab_longest_bytes(const vocab *v, const char *s, size_t n, size_t *len);
/* SPM byte-fallback token of byte b (<0xXX>), -1 if none. */
int32_t vocab_byte_token(const vocab *v, unsigned char b);
bool vocab_adds_space_prefix(const vocab *v);
bool vocab_ignores_merges(const vocab *v);
bool vocab_cleans_spaces(const vocab *v);
struct pretok;
const struct pretok *vocab_pretok(const vocab *v);
/* Tokens matched in text before tokenizing, longest first: with
 * parse_special all control/user-defined/unknown ones, else user-defined. */
const int32_t *vocab_specials(const vocab *v, size_t *n);
/* Whitespace next to a special token is swallowed on that side. */
bool vocab_lstrip(const vocab *v, int32_t id);
bool vocab_rstrip(const vocab *v, int32_t id);

#endif
