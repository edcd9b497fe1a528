/* The pre-tokenizers of byte-level BPE vocabularies: the regular expressions
 * that cut text into words before merges apply, selected by the GGUF key
 * tokenizer.ggml.pre as llama.cpp selects them.
 *
 * Each pre-tokenizer is a list of expressions applied in turn: every
 * expression cuts each piece the previous one left into its matches and the
 * unmatched runs between them (both kept). The expressions are Perl-style
 * with Unicode classes (\p{L}, \p{N}, \p{P}, \s) and run on PCRE2 with UTF
 * and UCP (third_party_notes/pcre2.md says why PCRE2). */
#ifndef GLESLLM_TEXT_PRETOKENIZE_H
#define GLESLLM_TEXT_PRETOKENIZE_H

#include <stdbool.h>
#include <stddef.h>

#include "glesllm.h"

typedef struct pretok pretok;

typedef struct pretok_span {
    size_t off, len;
} pretok_span;

/* Compiles the pre-tokenizer called `name` (NULL or "": the default). An
 * unknown name compiles the default and sets *known to false. */
glesllm_status pretok_create(const char *name, pretok **out, bool *known);
void pretok_destroy(pretok *p);

/* llama.cpp applies merges to whole words that are already tokens by
 * skipping the merges (llama 3 family). */
bool pretok_ignores_merges(const pretok *p);
/* The family adds BOS unless the file says otherwise (llama 3). */
bool pretok_adds_bos(const pretok *p);

/* Decoded text gets llama.cpp's clean-up of spaces before punctuation
 * (most BPE families; not deepseek, qwen2, command-r, smollm). */
bool pretok_cleans_spaces(const pretok *p);

/* Cuts text[0..n) (well-formed UTF-8) into words, appended to *spans (a
 * growable array of *cap entries, *count used). */
glesllm_status pretok_split(const pretok *p, const char *text, size_t n, pretok_span **spans,
                            size_t *count, size_t *cap);

#endif
