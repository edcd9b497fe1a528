/* The ggml tensor types a GGUF file may name, with their block geometry
 * (values as in ggml's type traits: elements per block, bytes per block). */
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "gguf/gguf.h"

typedef struct type_info {
    const char *name;
    uint32_t block, size;
} type_info;

static const type_info types[GGML_TYPE_MAX_ID] = {
    [GGML_TYPE_F32] = { "F32", 1, 4 },         [GGML_TYPE_F16] = { "F16", 1, 2 },
    [GGML_TYPE_Q4_0] = { "Q4_0", 32, 18 },     [GGML_TYPE_Q4_1] = { "Q4_1", 32, 20 },
    [GGML_TYPE_Q5_0] = { "Q5_0", 32, 22 },     [GGML_TYPE_Q5_1] = { "Q5_1", 32, 24 },
    [GGML_TYPE_Q8_0] = { "Q8_0", 32, 34 },     [GGML_TYPE_Q8_1] = { "Q8_1", 32, 36 },
    [GGML_TYPE_Q2_K] = { "Q2_K", 256, 84 },    [GGML_TYPE_Q3_K] = { "Q3_K", 256, 110 },
    [GGML_TYPE_Q4_K] = { "Q4_K", 256, 144 },   [GGML_TYPE_Q5_K] = { "Q5_K", 256, 176 },
    [GGML_TYPE_Q6_K] = { "Q6_K", 256, 210 },   [GGML_TYPE_Q8_K] = { "Q8_K", 256, 292 },
    [GGML_TYPE_IQ2_XXS] = { "IQ2_XXS", 256, 66 }, [GGML_TYPE_IQ2_XS] = { "IQ2_XS", 256, 74 },
    [GGML_TYPE_IQ3_XXS] = { "IQ3_XXS", 256, 98 }, [GGML_TYPE_IQ1_S] = { "IQ1_S", 256, 50 },
    [GGML_TYPE_IQ4_NL] = { "IQ4_NL", 32, 18 }, [GGML_TYPE_IQ3_S] = { "IQ3_S", 256, 110 },
    [GGML_TYPE_IQ2_S] = { "IQ2_S", 256, 82 },  [GGML_TYPE_IQ4_XS] = { "IQ4_XS", 256, 136 },
    [GGML_TYPE_I8] = { "I8", 1, 1 },           [GGML_TYPE_I16] = { "I16", 1, 2 },
    [GGML_TYPE_I32] = { "I32", 1, 4 },         [GGML_TYPE_I64] = { "I64", 1, 8 },
    [GGML_TYPE_F64] = { "F64", 1, 8 },         [GGML_TYPE_IQ1_M] = { "IQ1_M", 256, 56 },
    [GGML_TYPE_BF16] = { "BF16", 1, 2 },       [GGML_TYPE_TQ1_0] = { "TQ1_0", 256, 54 },
    [GGML_TYPE_TQ2_0] = { "TQ2_0", 256, 66 },  [GGML_TYPE_MXFP4] = { "MXFP4", 32, 17 },
};

const char *ggml_type_name(uint32_t type) { return type < GGML_TYPE_MAX_ID ? types[type].name : NULL; }
uint32_t ggml_block_size(uint32_t type) { return type < GGML_TYPE_MAX_ID ? types[type].block : 0; }
uint32_t ggml_type_size(uint32_t type) { return type < GGML_TYPE_MAX_ID ? types[type].size : 0; }

int ggml_type_from_name(const char *name)
{
    for (int t = 0; t < GGML_TYPE_MAX_ID; t++)
        if (types[t].name && strcasecmp(types[t].name, name) == 0)
            return t;
    return -1;
}

const char *gguf_type_name(uint32_t type)
{
    static const char *const names[GGUF_TYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64",
    };
    return type < GGUF_TYPE_COUNT ? names[type] : "unknown";
}

glesllm_status ggml_tensor_bytes(uint32_t type, uint32_t n_dims, const uint64_t *ne, uint64_t *bytes)
{
    *bytes = 0;
    uint32_t block = ggml_block_size(type), size = ggml_type_size(type);
    if (!block)
        return err_set(GLESLLM_ERR_FORMAT, "unknown tensor type id %u", type);
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS)
        return err_set(GLESLLM_ERR_FORMAT, "%u dimensions (1 to %d allowed)", n_dims, GGUF_MAX_DIMS);
    if (ne[0] % block)
        return err_set(GLESLLM_ERR_FORMAT,
                       "row length %llu is not a multiple of the %s block size %u",
                       (unsigned long long)ne[0], ggml_type_name(type), block);
    uint64_t rows = 1;
    for (uint32_t i = 1; i < n_dims; i++) {
        if (ne[i] && rows > UINT64_MAX / ne[i])
            return err_set(GLESLLM_ERR_FORMAT, "the dimensions' product overflows 64 bits");
        rows *= ne[i];
    }
    uint64_t row_bytes = ne[0] / block * size;
    if (ne[0] / block > UINT64_MAX / size || (row_bytes && rows > (UINT64_MAX >> 1) / row_bytes))
        return err_set(GLESLLM_ERR_FORMAT, "the tensor's byte size overflows");
    *bytes = row_bytes * rows;
    return GLESLLM_OK;
}

int gguf_value_size(uint32_t type)
{
    switch (type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    }
    return 0;
}
