/* CPU reference dequantization: binary16 conversions, hand-built blocks with
 * values worked out from each format's definition, and llama.cpp's own
 * quantized models against the F32 model they came from. */
#include <math.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

static void test_half_conversions(void)
{
    TEST_ASSERT_FLOAT_WITHIN(0.0, 1.0, quant_half_to_float(0x3c00));
    TEST_ASSERT_FLOAT_WITHIN(0.0, -2.0, quant_half_to_float(0xc000));
    TEST_ASSERT_FLOAT_WITHIN(0.0, 65504.0, quant_half_to_float(0x7bff));
    TEST_ASSERT_FLOAT_WITHIN(0.0, ldexp(1.0, -24), quant_half_to_float(0x0001)); /* smallest subnormal */
    TEST_ASSERT_FLOAT_WITHIN(0.0, ldexp(1023.0, -24), quant_half_to_float(0x03ff));
    TEST_ASSERT_TRUE(isinf(quant_half_to_float(0x7c00)));
    TEST_ASSERT_TRUE(isnan(quant_half_to_float(0x7e00)));
    /* every finite half survives half -> float -> half exactly */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        TEST_ASSERT_EQUAL_HEX32(h, quant_float_to_half(quant_half_to_float((ggml_half)h)));
    }
    /* round to nearest even between 1 and 1 + 2^-10 */
    TEST_ASSERT_EQUAL_HEX32(0x3c00, quant_float_to_half(1.0f + ldexpf(1.0f, -11)));
    TEST_ASSERT_EQUAL_HEX32(0x3c02, quant_float_to_half(1.0f + 3 * ldexpf(1.0f, -11)));
    TEST_ASSERT_EQUAL_HEX32(0x7c00, quant_float_to_half(70000.0f));
}

static float out[256];

static void deq(uint32_t type, const void *block, size_t n)
{
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, quant_dequantize(type, block, out, n), glesllm_last_error());
}

static void test_hand_built_blocks(void)
{
    /* values derived by hand from the layouts in quant.h; exact in f32 */
    block_q4_1 q41 = { 0x3800 /* 0.5 */, 0xbc00 /* -1 */, { 0 } };
    memset(q41.qs, 0x21, sizeof q41.qs);
    deq(GGML_TYPE_Q4_1, &q41, 32);
    TEST_ASSERT_FLOAT_WITHIN(0.0, -0.5, out[0]); /* 1 * 0.5 - 1 */
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.0, out[16]); /* 2 * 0.5 - 1 */

    block_q5_0 q50 = { 0x3c00, { 0x01, 0x00, 0x01, 0x00 }, { 0 } }; /* qh bits 0 and 16 */
    deq(GGML_TYPE_Q5_0, &q50, 32);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.0, out[0]);    /* (0 | 16) - 16 */
    TEST_ASSERT_FLOAT_WITHIN(0.0, -16.0, out[1]);  /* 0 - 16 */
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.0, out[16]);
    TEST_ASSERT_FLOAT_WITHIN(0.0, -16.0, out[31]);

    block_q5_1 q51 = { 0x4000 /* 2 */, 0x3800 /* 0.5 */, { 0x08, 0, 0, 0 }, { 0 } };
    q51.qs[3] = 0x0f;
    deq(GGML_TYPE_Q5_1, &q51, 32);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 62.5, out[3]); /* (15 + 16) * 2 + 0.5 */
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.5, out[19]);

    block_q2_K q2;
    memset(&q2, 0, sizeof q2);
    q2.d = 0x3c00;
    q2.dmin = 0x3800;    /* 0.5 */
    q2.scales[0] = 0x21; /* scale 1, min 2 */
    q2.scales[1] = 0x03; /* scale 3, min 0 */
    q2.scales[2] = 0x15; /* scale 5, min 1 */
    q2.qs[0] = 0xe4;     /* 2-bit fields 0, 1, 2, 3 */
    q2.qs[16] = 0x02;
    deq(GGML_TYPE_Q2_K, &q2, 256);
    TEST_ASSERT_FLOAT_WITHIN(0.0, -1.0, out[0]);  /* 1 * 0 - 2 * 0.5 */
    TEST_ASSERT_FLOAT_WITHIN(0.0, 6.0, out[16]);  /* 3 * 2 - 0 */
    TEST_ASSERT_FLOAT_WITHIN(0.0, 4.5, out[32]);  /* 5 * 1 - 1 * 0.5 (bits 2-3 of qs[0]) */

    block_q3_K q3;
    memset(&q3, 0, sizeof q3);
    q3.d = 0x3c00;
    q3.scales[0] = 0x02; /* scale 0: low 4 bits 2 */
    q3.scales[8] = 0x02; /* scale 0: high 2 bits 2 -> 34 - 32 = +2 */
    q3.hmask[0] = 0x01;  /* value 0 has its third bit: no -4 */
    q3.qs[0] = 0x03;
    deq(GGML_TYPE_Q3_K, &q3, 256);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 6.0, out[0]);   /* 2 * (3 - 0) */
    TEST_ASSERT_FLOAT_WITHIN(0.0, -8.0, out[1]);  /* 2 * (0 - 4) */
    TEST_ASSERT_FLOAT_WITHIN(0.0, 128.0, out[16]); /* scale 1 = 0 - 32: -32 * (0 - 4) */

    block_q5_K q5;
    memset(&q5, 0, sizeof q5);
    q5.d = 0x3c00;
    q5.dmin = 0x3c00;
    q5.scales[0] = 3; /* sub-block 0: scale 3 */
    q5.scales[4] = 1; /*               min 1 */
    q5.scales[1] = 2; /* sub-block 1: scale 2, min 0 */
    q5.qs[0] = 0x75;
    q5.qh[0] = 0x01;
    deq(GGML_TYPE_Q5_K, &q5, 256);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 62.0, out[0]);  /* 3 * (5 + 16) - 1 */
    TEST_ASSERT_FLOAT_WITHIN(0.0, 14.0, out[32]); /* 2 * 7 */
    TEST_ASSERT_FLOAT_WITHIN(0.0, -1.0, out[1]);

    uint8_t f16[2] = { 0x55, 0x35 }, bf16[4] = { 0x80, 0x3f, 0x40, 0xc0 };
    deq(GGML_TYPE_F16, f16, 1);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 0.333251953125, out[0]);
    deq(GGML_TYPE_BF16, bf16, 2);
    TEST_ASSERT_FLOAT_WITHIN(0.0, 1.0, out[0]);
    TEST_ASSERT_FLOAT_WITHIN(0.0, -3.0, out[1]);

    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_UNSUPPORTED, quant_dequantize(GGML_TYPE_IQ2_XXS, &q3, out, 256));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "IQ2_XXS"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, quant_dequantize(GGML_TYPE_Q4_0, &q41, out, 31));
}

/* llama.cpp's quantized files against the F32 file they were made from. The
 * relative RMS error of each tensor must stay within its format's noise
 * (measured on these files: Q8_0 0.54%, Q6_K 1.78%, Q4_K 7.2%, Q4_0 8.6%);
 * a misread layout gives errors near 100%. */
static double max_error_for(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_Q8_0: return 0.008;
    case GGML_TYPE_Q6_K: return 0.025;
    case GGML_TYPE_Q4_K: return 0.09;
    case GGML_TYPE_Q4_0: return 0.10;
    }
    return 0.0;
}

static void test_llama_cpp_quantized_models(void)
{
    TEST_NEEDS_SHARED(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-spm-f32.gguf", dir);
    gguf_file *ref;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(path, &ref), glesllm_last_error());
    const char *names[] = { "q8_0", "q6_k", "q4_k_m", "q4_0" };
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/models/tiny-spm-%s.gguf", dir, names[k]);
        gguf_file *f;
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(path, &f), glesllm_last_error());
        int checked = 0;
        for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i), *r = gguf_find_tensor(ref, t->name);
            TEST_ASSERT_NOT_NULL(r);
            TEST_ASSERT_EQUAL_UINT64(r->n_elements, t->n_elements);
            if (t->type == GGML_TYPE_F32)
                continue;
            float *y = malloc((size_t)t->n_elements * sizeof *y);
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_dequantize(t->type, t->data, y, (size_t)t->n_elements));
            double rel = rel_rms_error(r->data, y, (size_t)t->n_elements);
            double bound = max_error_for(t->type);
            free(y);
            char msg[200];
            snprintf(msg, sizeof msg, "%s %s (%s): relative RMS error %.4f, bound %.3f", names[k],
                     t->name, ggml_type_name(t->type), rel, bound);
            TEST_ASSERT_TRUE_MESSAGE(bound > 0.0 && rel < bound, msg);
            checked++;
        }
        TEST_ASSERT_GREATER_THAN_INT(20, checked);
        gguf_close(f);
    }
    gguf_close(ref);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_half_conversions);
    RUN_TEST(test_hand_built_blocks);
    RUN_TEST(test_llama_cpp_quantized_models);
    return test_exit_code(UNITY_END());
}
