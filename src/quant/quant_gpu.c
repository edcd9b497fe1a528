/* Repacking GGUF rows into the GPU layouts of quant_gpu.h (twin of
 * glsl/weights.glsl). Each block is first unpacked to its integer levels in
 * natural order, then written in the unit encodings. */
#include <string.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/quant_gpu.h"

static const quant_gpu_layout layouts[] = {
    { GGML_TYPE_F32, 32, 1, { 128 } },
    { GGML_TYPE_F16, 32, 1, { 64 } },
    { GGML_TYPE_BF16, 32, 1, { 64 } },
    { GGML_TYPE_Q4_0, 32, 2, { 16, 2 } },
    { GGML_TYPE_Q4_1, 32, 2, { 16, 4 } },
    { GGML_TYPE_Q5_0, 32, 3, { 16, 4, 2 } },
    { GGML_TYPE_Q5_1, 32, 3, { 16, 4, 4 } },
    { GGML_TYPE_Q8_0, 32, 2, { 32, 2 } },
    { GGML_TYPE_Q2_K, 256, 3, { 64, 16, 4 } },
    { GGML_TYPE_Q3_K, 256, 3, { 64, 32, 16 } },
    { GGML_TYPE_Q4_K, 256, 2, { 128, 16 } },
    { GGML_TYPE_Q5_K, 256, 3, { 128, 32, 16 } },
    { GGML_TYPE_Q6_K, 256, 4, { 128, 64, 16, 2 } },
};

const quant_gpu_layout *quant_gpu_layout_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].type == type)
            return &layouts[i];
    return NULL;
}

bool quant_gpu_is_float(uint32_t type)
{
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
}

static uint64_t round16(uint64_t v) { return (v + 15) / 16 * 16; }

glesllm_status quant_gpu_plan_make(uint32_t type, uint64_t rows, uint64_t cols,
                                   quant_gpu_plan *out)
{
    const quant_gpu_layout *L = quant_gpu_layout_of(type);
    memset(out, 0, sizeof *out);
    if (!L)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "tensor type %s has no GPU layout",
                       ggml_type_name(type) ? ggml_type_name(type) : "(unknown)");
    if (!cols || !rows)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "empty tensor (%llu x %llu)",
                       (unsigned long long)rows, (unsigned long long)cols);
    if (!quant_gpu_is_float(type) && cols % L->block)
        return err_set(GLESLLM_ERR_FORMAT, "rows of %llu values are not whole %s blocks of %u",
                       (unsigned long long)cols, ggml_type_name(type), L->block);
    out->type = type;
    out->rows = rows;
    out->cols = cols;
    out->blocks_per_row = (cols + L->block - 1) / L->block;
    uint64_t off = 0;
    for (uint32_t p = 0; p < L->n_planes; p++) {
        out->plane_offset[p] = off;
        uint64_t blocks = rows * out->blocks_per_row;
        if (blocks / rows != out->blocks_per_row || blocks > UINT64_MAX / 256)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "tensor too large");
        off += round16(blocks * L->plane_bytes[p]);
    }
    out->bytes = off;
    return GLESLLM_OK;
}

uint64_t quant_gpu_rows_within(uint32_t type, uint64_t cols, uint64_t max_bytes)
{
    quant_gpu_plan plan;
    if (quant_gpu_plan_make(type, 1, cols, &plan) != GLESLLM_OK || plan.bytes > max_bytes)
        return 0;
    const quant_gpu_layout *L = quant_gpu_layout_of(type);
    uint64_t per_row = 0;
    for (uint32_t p = 0; p < L->n_planes; p++)
        per_row += plan.blocks_per_row * L->plane_bytes[p];
    /* an upper bound, then down past the planes' rounding to 16 bytes */
    uint64_t rows = max_bytes / per_row;
    while (rows > 1 && (quant_gpu_plan_make(type, rows, cols, &plan) != GLESLLM_OK ||
                        plan.bytes > max_bytes))
        rows--;
    return rows;
}

/* ---- unit encodings (quant_gpu.h) ---------------------------------------- */

static void put_nib(uint8_t *dst, const uint8_t *q)
{
    for (int j = 0; j < 16; j++)
        dst[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
}

/* BIT: bit 8b + k of the word is one bit of q[4k + b], bit 8b + 4 + k of
 * q[16 + 4k + b] (k = 0..3): a shift and a mask give the bits of 4 values,
 * one in each byte */
static void put_bit(uint8_t *dst, const uint8_t *q, int bit)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 4; b++) {
            v |= (uint32_t)((q[4 * k + b] >> bit) & 1) << (8 * b + k);
            v |= (uint32_t)((q[16 + 4 * k + b] >> bit) & 1) << (8 * b + 4 + k);
        }
    for (int i = 0; i < 4; i++)
        dst[i] = (uint8_t)(v >> (8 * i));
}

/* TWO: word m (0, 1) holds k = 2m and 2m + 1; bits 8b + 4(k & 1) .. +1 of
 * it hold two bits of q[4k + b], bits 8b + 4(k & 1) + 2 .. +3 of
 * q[16 + 4k + b] (the bits from `shift` up) */
static void put_two(uint8_t *dst, const uint8_t *q, int shift)
{
    uint32_t w[2] = { 0, 0 };
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 4; b++) {
            int at = 8 * b + 4 * (k & 1);
            w[k >> 1] |= (uint32_t)((q[4 * k + b] >> shift) & 3) << at;
            w[k >> 1] |= (uint32_t)((q[16 + 4 * k + b] >> shift) & 3) << (at + 2);
        }
    for (int i = 0; i < 8; i++)
        dst[i] = (uint8_t)(w[i >> 2] >> (8 * (i & 3)));
}

/* ---- GGUF blocks to levels in natural order ------------------------------ */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* q4 (and the low nibble of q5) of the 32-value blocks */
static void levels_q4(const uint8_t *qs, uint8_t *q)
{
    for (int j = 0; j < 16; j++) {
        q[j] = qs[j] & 15;
        q[j + 16] = qs[j] >> 4;
    }
}

static void levels_q5(const uint8_t *qh4, const uint8_t *qs, uint8_t *q)
{
    uint32_t qh = le32(qh4);
    levels_q4(qs, q);
    for (int j = 0; j < 32; j++)
        q[j] |= (uint8_t)(((qh >> j) & 1) << 4);
}

/* Q2_K / Q3_K low two bits: value v of chunk n (128) is byte 32n + v % 32,
 * bits 2 * ((v % 128) / 32) */
static void levels_k2(const uint8_t *qs, uint8_t *q)
{
    for (int v = 0; v < 256; v++)
        q[v] = (qs[32 * (v / 128) + v % 32] >> (2 * ((v % 128) / 32))) & 3;
}

/* Q4_K / Q5_K nibbles: chunk c of 32 bytes holds values 64c.. low, 64c+32.. high */
static void levels_k4(const uint8_t *qs, uint8_t *q)
{
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = qs[32 * c + l] >> 4;
        }
}

static void put_u32(uint8_t *dst, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        dst[i] = (uint8_t)(v >> (8 * i));
}

/* Q4_K/Q5_K: d, dmin, then the eight 6-bit scales and mins regrouped so a
 * kernel reads unit j's with shifts only: low nibbles of the scales (nibble
 * j), low nibbles of the mins, and the high two bits of both (bits 2j and
 * 16 + 2j). GGUF packs them in 12 bytes too (quant_ref.c reads that). */
static void k4_scales(const uint8_t *src16, uint8_t *dst16)
{
    const uint8_t *q = src16 + 4;
    uint32_t ls = 0, lm = 0, hi = 0;
    for (int j = 0; j < 8; j++) {
        uint32_t d, m;
        if (j < 4) {
            d = q[j] & 63;
            m = q[j + 4] & 63;
        } else {
            d = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
            m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
        ls |= (d & 15) << (4 * j);
        lm |= (m & 15) << (4 * j);
        hi |= (d >> 4) << (2 * j) | (m >> 4) << (16 + 2 * j);
    }
    memcpy(dst16, src16, 4);
    put_u32(dst16 + 4, ls);
    put_u32(dst16 + 8, lm);
    put_u32(dst16 + 12, hi);
}

/* Q2_K: the sixteen 4-bit scales and mins (GGUF byte i: scale i | min i <<
 * 4) regrouped four sub-blocks a word: word w holds scale 4w + i at bit 4i
 * and min 4w + i at bit 16 + 4i, so that one shift and one mask give a
 * sub-block's (scale, min) as the two halves of a word (weights.glsl
 * k23_map). */
static void q2k_scales(const uint8_t *s, uint8_t *dst16)
{
    for (int w = 0; w < 4; w++) {
        uint32_t v = 0;
        for (int i = 0; i < 4; i++) {
            uint32_t b = s[4 * w + i];
            v |= (b & 15) << (4 * i) | (b >> 4) << (16 + 4 * i);
        }
        put_u32(dst16 + 4 * w, v);
    }
}

/* Q3_K: the sixteen 6-bit scales (biased by 32, as stored) regrouped: low
 * nibbles of scales 0..7, of 8..15, the high two bits (bits 2i), then d. */
static void k3_scales(const uint8_t *s, ggml_half d, uint8_t *dst16)
{
    uint32_t lo[2] = { 0, 0 }, hi = 0;
    for (int i = 0; i < 16; i++) {
        uint32_t low = i < 8 ? (s[i] & 0xf) : (s[i - 8] >> 4);
        uint32_t high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        lo[i / 8] |= low << (4 * (i % 8));
        hi |= high << (2 * i);
    }
    put_u32(dst16, lo[0]);
    put_u32(dst16 + 4, lo[1]);
    put_u32(dst16 + 8, hi);
    put_u32(dst16 + 12, d);
}

static void repack_block(uint32_t type, const uint8_t *src, uint8_t *const dst[QGPU_MAX_PLANES])
{
    uint8_t q[256];
    switch (type) {
    case GGML_TYPE_Q4_0:
        levels_q4(src + 2, q);
        put_nib(dst[0], q);
        memcpy(dst[1], src, 2);
        break;
    case GGML_TYPE_Q4_1:
        levels_q4(src + 4, q);
        put_nib(dst[0], q);
        memcpy(dst[1], src, 4);
        break;
    case GGML_TYPE_Q5_0:
        levels_q5(src + 2, src + 6, q);
        put_nib(dst[0], q);
        put_bit(dst[1], q, 4);
        memcpy(dst[2], src, 2);
        break;
    case GGML_TYPE_Q5_1:
        levels_q5(src + 4, src + 8, q);
        put_nib(dst[0], q);
        put_bit(dst[1], q, 4);
        memcpy(dst[2], src, 4);
        break;
    case GGML_TYPE_Q8_0:
        memcpy(dst[0], src + 2, 32);
        memcpy(dst[1], src, 2);
        break;
    case GGML_TYPE_Q2_K: {
        const block_q2_K *b = (const block_q2_K *)src;
        levels_k2(b->qs, q);
        for (int u = 0; u < 8; u++)
            put_two(dst[0] + 8 * u, q + 32 * u, 0);
        q2k_scales(b->scales, dst[1]);
        memcpy(dst[2], &b->d, 2);
        memcpy(dst[2] + 2, &b->dmin, 2);
        break;
    }
    case GGML_TYPE_Q3_K: {
        const block_q3_K *b = (const block_q3_K *)src;
        levels_k2(b->qs, q);
        /* the high bit of value v: bit 4 * (v / 128) + (v % 128) / 32 of hmask[v % 32] */
        for (int v = 0; v < 256; v++)
            q[v] |= (uint8_t)(((b->hmask[v % 32] >> (4 * (v / 128) + (v % 128) / 32)) & 1) << 2);
        for (int u = 0; u < 8; u++) {
            put_two(dst[0] + 8 * u, q + 32 * u, 0);
            put_bit(dst[1] + 4 * u, q + 32 * u, 2);
        }
        k3_scales(b->scales, b->d, dst[2]);
        break;
    }
    case GGML_TYPE_Q4_K: {
        const block_q4_K *b = (const block_q4_K *)src;
        levels_k4(b->qs, q);
        for (int u = 0; u < 8; u++)
            put_nib(dst[0] + 16 * u, q + 32 * u);
        k4_scales(src, dst[1]);
        break;
    }
    case GGML_TYPE_Q5_K: {
        const block_q5_K *b = (const block_q5_K *)src;
        levels_k4(b->qs, q);
        for (int v = 0; v < 256; v++)
            q[v] |= (uint8_t)(((b->qh[v % 32] >> (v / 32)) & 1) << 4);
        for (int u = 0; u < 8; u++) {
            put_nib(dst[0] + 16 * u, q + 32 * u);
            put_bit(dst[1] + 4 * u, q + 32 * u, 4);
        }
        k4_scales(src, dst[2]);
        break;
    }
    case GGML_TYPE_Q6_K: {
        const block_q6_K *b = (const block_q6_K *)src;
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l++) {
                const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
                uint8_t *o = q + 128 * h;
                o[l] = (uint8_t)((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4);
                o[l + 32] = (uint8_t)((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
                o[l + 64] = (uint8_t)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
                o[l + 96] = (uint8_t)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
            }
        for (int u = 0; u < 8; u++) {
            put_nib(dst[0] + 16 * u, q + 32 * u);
            put_two(dst[1] + 8 * u, q + 32 * u, 4);
        }
        memcpy(dst[2], b->scales, 16);
        memcpy(dst[3], &b->d, 2);
        break;
    }
    }
}

glesllm_status quant_gpu_repack(const quant_gpu_plan *plan, const void *src, void *dst)
{
    const quant_gpu_layout *L = quant_gpu_layout_of(plan->type);
    if (!L)
        return err_set(GLESLLM_ERR_UNSUPPORTED, "tensor type has no GPU layout");
    uint8_t *out = dst;
    memset(out, 0, (size_t)plan->bytes);
    const uint8_t *in = src;
    uint64_t nb = plan->blocks_per_row;
    if (quant_gpu_is_float(plan->type)) {
        /* plane 0: each row padded to nb * 32 values */
        uint32_t es = plan->type == GGML_TYPE_F32 ? 4 : 2;
        for (uint64_t r = 0; r < plan->rows; r++)
            memcpy(out + r * nb * L->plane_bytes[0], in + r * plan->cols * es,
                   (size_t)(plan->cols * es));
        return GLESLLM_OK;
    }
    uint32_t ts = ggml_type_size(plan->type);
    uint64_t blocks = plan->rows * nb;
    for (uint64_t i = 0; i < blocks; i++) {
        uint8_t *d[QGPU_MAX_PLANES] = { 0 };
        for (uint32_t p = 0; p < L->n_planes; p++)
            d[p] = out + plan->plane_offset[p] + i * L->plane_bytes[p];
        repack_block(plan->type, in + i * ts, d);
    }
    return GLESLLM_OK;
}
