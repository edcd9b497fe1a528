/* libFuzzer target for the GGUF reader: any bytes either parse (and then
 * every value and tensor edge is touched, the model summary computed, and the
 * vocabulary, when the file holds one that loads, tokenizes a mixed string
 * and decodes it) or are refused with a message. Built by -DGLESLLM_FUZZ=ON with clang; .ci/run
 * runs it under ASan + UBSan on the seed corpus from make_fuzz_seeds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf_samples.h"
#include "model/model_info.h"
#include "text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file *f = NULL;
    if (gguf_open_memory(data, size, &f) != GLESLLM_OK) {
        if (f || strlen(glesllm_last_error()) == 0)
            __builtin_trap(); /* a refusal must come with a message and no file */
        return 0;
    }
    volatile uint64_t sum = gguf_walk(f);
    (void)sum;
    model_info mi;
    model_info_read(f, &mi);
    (void)model_info_memory(&mi, 4096);
    vocab *v = NULL;
    if (vocab_load(f, &v) == GLESLLM_OK) {
        static const char text[] = "Hello <s>world</s> \xc3\xa9\xf0\x9f\xa6\x99 123\n\xff";
        tok_ids t = { 0 };
        if (tok_encode(v, text, sizeof text - 1, TOK_ADD_SPECIAL | TOK_PARSE_SPECIAL, &t) == GLESLLM_OK) {
            char *back = NULL;
            size_t n;
            if (tok_decode(v, t.ids, t.n, TOK_UNPARSE_SPECIAL, &back, &n) == GLESLLM_OK)
                free(back);
        }
        tok_ids_free(&t);
        vocab_free(v);
    } else if (strlen(glesllm_last_error()) == 0) {
        __builtin_trap();
    }
    gguf_close(f);
    return 0;
}
