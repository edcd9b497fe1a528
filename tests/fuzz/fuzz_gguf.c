/* libFuzzer target for the GGUF reader: any bytes either parse (and then
 * every value and tensor edge is touched, and the model summary computed) or
 * are refused with a message. Built by -DGLESLLM_FUZZ=ON with clang; .ci/run
 * runs it under ASan + UBSan on the seed corpus from make_fuzz_seeds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gguf_samples.h"
#include "model/model_info.h"

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
    gguf_close(f);
    return 0;
}
