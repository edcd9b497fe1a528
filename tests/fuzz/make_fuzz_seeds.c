/* Writes the fuzzer's seed corpus: the writer's sample files, and truncated
 * copies of them, into the folder given. */
#include <stdio.h>

#include "gguf_samples.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_fuzz_seeds DIR\n");
        return 2;
    }
    for (int k = 0; k < 4; k++) {
        uint8_t *data;
        size_t n;
        if (gguf_sample(k, &data, &n) != GLESLLM_OK) {
            fprintf(stderr, "make_fuzz_seeds: %s\n", glesllm_last_error());
            return 1;
        }
        size_t cuts[3] = { n, n / 2, 200 };
        for (int c = 0; c < 3; c++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/sample%d-%d.gguf", argv[1], k, c);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(data, 1, cuts[c] < n ? cuts[c] : n, f) != (cuts[c] < n ? cuts[c] : n)) {
                fprintf(stderr, "make_fuzz_seeds: cannot write %s\n", path);
                return 1;
            }
            fclose(f);
        }
        free(data);
    }
    return 0;
}
