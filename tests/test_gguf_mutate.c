/* Thousands of mutated and truncated copies of real GGUF files through the
 * reader: each is either read (and then every value and tensor edge is
 * touched) or refused with a message, never a crash. Run under ASan/UBSan in
 * CI, this is where out-of-bounds reads would show. */
#include <stdio.h>
#include <string.h>

#include "gguf_samples.h"
#include "model/model_info.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

#define MUTATIONS_PER_SOURCE 1500

static void mutate_and_read(const uint8_t *orig, size_t n, uint64_t seed, const char *what)
{
    test_rng rng = { seed };
    uint8_t *buf = malloc(n);
    unsigned accepted = 0, refused = 0;
    for (int it = 0; it < MUTATIONS_PER_SOURCE; it++) {
        memcpy(buf, orig, n);
        size_t len = n;
        int kind = (int)(rng_next(&rng) % 4);
        /* most of a file's structure is in its first bytes: aim there */
        size_t span = n < 4096 ? n : 4096;
        if (kind == 0) { /* truncate */
            len = (size_t)(rng_next(&rng) % n);
        } else if (kind == 1) { /* random bytes */
            int k = 1 + (int)(rng_next(&rng) % 8);
            for (int j = 0; j < k; j++)
                buf[rng_next(&rng) % span] = (uint8_t)rng_next(&rng);
        } else if (kind == 2) { /* a length or count set near 2^64 or to 0 */
            size_t at = (size_t)(rng_next(&rng) % (span > 8 ? span - 8 : 1));
            uint64_t v = (rng_next(&rng) & 1) ? UINT64_MAX - (rng_next(&rng) % 16) : rng_next(&rng) % 4;
            memcpy(buf + at, &v, 8);
        } else { /* flip bits anywhere, then maybe truncate */
            for (int j = 0; j < 4; j++)
                buf[rng_next(&rng) % n] ^= (uint8_t)(1u << (rng_next(&rng) % 8));
            if (rng_next(&rng) & 1)
                len = n - (size_t)(rng_next(&rng) % (n / 4 + 1));
        }
        gguf_file *f = NULL;
        glesllm_status st = gguf_open_memory(buf, len, &f);
        if (st == GLESLLM_OK) {
            accepted++;
            (void)gguf_walk(f);
            model_info mi;
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, model_info_read(f, &mi));
            gguf_close(f);
        } else {
            refused++;
            TEST_ASSERT_NULL(f);
            TEST_ASSERT_TRUE_MESSAGE(strlen(glesllm_last_error()) > 10, "an error without a message");
        }
    }
    char msg[160];
    snprintf(msg, sizeof msg, "%s: %u mutated copies read, %u refused with a message", what,
             accepted, refused);
    TEST_MESSAGE(msg);
    TEST_ASSERT_GREATER_THAN_INT(0, refused);
    free(buf);
}

static void test_mutated_writer_files(void)
{
    for (int k = 0; k < 4; k++) {
        uint8_t *data;
        size_t n;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_sample(k, &data, &n));
        mutate_and_read(data, n, 100 + (uint64_t)k, "writer sample");
        free(data);
    }
}

static void test_mutated_shared_files(void)
{
    TEST_NEEDS_SHARED(dir);
    const char *files[] = { "models/aidreams260K-f32.gguf", "tokenizer/ggml-vocab-llama-spm.gguf",
                            "tokenizer/ggml-vocab-gpt-2.gguf" };
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        FILE *fp = fopen(path, "rb");
        TEST_ASSERT_NOT_NULL(fp);
        fseek(fp, 0, SEEK_END);
        size_t n = (size_t)ftell(fp);
        fseek(fp, 0, SEEK_SET);
        uint8_t *data = malloc(n);
        TEST_ASSERT_EQUAL_size_t(n, fread(data, 1, n, fp));
        fclose(fp);
        mutate_and_read(data, n, 200 + k, files[k]);
        free(data);
    }
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_mutated_writer_files);
    RUN_TEST(test_mutated_shared_files);
    return test_exit_code(UNITY_END());
}
