/* CPU reference dequantization of the GGUF block formats: plain loops that
 * follow each block's definition in quant.h, the oracle for the GPU kernels. */
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

float quant_half_to_float(ggml_half h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13); /* inf, nan */
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant) { /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            mant <<= 1;
        } while (!(mant & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    } else {
        bits = sign;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

ggml_half quant_float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff)
        return (ggml_half)(sign | 0x7c00 | (mant ? 0x200 : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f)
        return (ggml_half)(sign | 0x7c00);
    if (e <= 0) { /* subnormal or zero */
        if (e < -10)
            return (ggml_half)sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1)))
            half++;
        return (ggml_half)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent: that is the correct rounding */
    return (ggml_half)half;
}

static float h2f(ggml_half h) { return quant_half_to_float(h); }

static void deq_q4_0(const block_q4_0 *b, float *y)
{
    float d = h2f(b->d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        y[j] = ((b->qs[j] & 0xf) - 8) * d;
        y[j + QK4_0 / 2] = ((b->qs[j] >> 4) - 8) * d;
    }
}

static void deq_q4_1(const block_q4_1 *b, float *y)
{
    float d = h2f(b->d), m = h2f(b->m);
    for (int j = 0; j < QK4_1 / 2; j++) {
        y[j] = (b->qs[j] & 0xf) * d + m;
        y[j + QK4_1 / 2] = (b->qs[j] >> 4) * d + m;
    }
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void deq_q5(const uint8_t *qh4, const uint8_t *qs, float d, float m, int offset, float *y)
{
    uint32_t qh = le32(qh4);
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0xf) | (int)(((qh >> j) & 1) << 4);
        int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        y[j] = (lo - offset) * d + m;
        y[j + 16] = (hi - offset) * d + m;
    }
}

static void deq_q8_0(const block_q8_0 *b, float *y)
{
    float d = h2f(b->d);
    for (int j = 0; j < QK8_0; j++)
        y[j] = b->qs[j] * d;
}

static void deq_q2_K(const block_q2_K *b, float *y)
{
    float d = h2f(b->d), dmin = h2f(b->dmin);
    const uint8_t *q = b->qs;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128, q += 32) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int half = 0; half < 2; half++) {
                uint8_t sc = b->scales[is++];
                float dl = d * (sc & 0xf), ml = dmin * (sc >> 4);
                for (int l = 0; l < 16; l++)
                    *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
            }
        }
    }
}

/* The sixteen 6-bit Q3_K scales, as signed values (stored + 32 biased). */
static void q3_K_scales(const uint8_t *s, int8_t out[16])
{
    for (int i = 0; i < 16; i++) {
        int low = i < 8 ? (s[i] & 0xf) : (s[i - 8] >> 4);
        int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        out[i] = (int8_t)((low | high << 4) - 32);
    }
}

static void deq_q3_K(const block_q3_K *b, float *y)
{
    float d = h2f(b->d);
    int8_t sc[16];
    q3_K_scales(b->scales, sc);
    const uint8_t *q = b->qs;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < QK_K; n += 128, q += 32) {
        for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
            for (int half = 0; half < 2; half++) {
                float dl = d * sc[is++];
                for (int l = 16 * half; l < 16 * half + 16; l++)
                    *y++ = dl * (((q[l] >> shift) & 3) - ((b->hmask[l] & m) ? 0 : 4));
            }
        }
    }
}

/* Scale and min j (0..7) of a Q4_K/Q5_K block: 6 bits each in 12 bytes. */
static void k4_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m)
{
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void deq_q4_K(const block_q4_K *b, float *y)
{
    float d = h2f(b->d), dmin = h2f(b->dmin);
    const uint8_t *q = b->qs;
    for (int is = 0; is < 8; is += 2, q += 32) {
        uint8_t s1, m1, s2, m2;
        k4_scale_min(is, b->scales, &s1, &m1);
        k4_scale_min(is + 1, b->scales, &s2, &m2);
        for (int l = 0; l < 32; l++)
            *y++ = d * s1 * (q[l] & 0xf) - dmin * m1;
        for (int l = 0; l < 32; l++)
            *y++ = d * s2 * (q[l] >> 4) - dmin * m2;
    }
}

static void deq_q5_K(const block_q5_K *b, float *y)
{
    float d = h2f(b->d), dmin = h2f(b->dmin);
    const uint8_t *q = b->qs;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, q += 32, u1 <<= 2, u2 <<= 2) {
        uint8_t s1, m1, s2, m2;
        k4_scale_min(is, b->scales, &s1, &m1);
        k4_scale_min(is + 1, b->scales, &s2, &m2);
        for (int l = 0; l < 32; l++)
            *y++ = d * s1 * ((q[l] & 0xf) + ((b->qh[l] & u1) ? 16 : 0)) - dmin * m1;
        for (int l = 0; l < 32; l++)
            *y++ = d * s2 * ((q[l] >> 4) + ((b->qh[l] & u2) ? 16 : 0)) - dmin * m2;
    }
}

static void deq_q6_K(const block_q6_K *b, float *y)
{
    float d = h2f(b->d);
    const uint8_t *ql = b->ql, *qh = b->qh;
    const int8_t *sc = b->scales;
    for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = (int)((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
            int q2 = (int)((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
            int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
            int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
            y[l] = d * sc[is] * q1;
            y[l + 32] = d * sc[is + 2] * q2;
            y[l + 64] = d * sc[is + 4] * q3;
            y[l + 96] = d * sc[is + 6] * q4;
        }
    }
}

int quant_supported(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16:
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q8_0: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        return 1;
    }
    return 0;
}

glesllm_status quant_dequantize(uint32_t type, const void *src, float *y, size_t n)
{
    uint32_t bs = ggml_block_size(type), ts = ggml_type_size(type);
    if (!quant_supported(type))
        return err_set(GLESLLM_ERR_UNSUPPORTED, "tensor type %s cannot be dequantized yet",
                       ggml_type_name(type) ? ggml_type_name(type) : "(unknown)");
    if (n % bs)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "%zu values are not whole %s blocks of %u", n,
                       ggml_type_name(type), bs);
    const uint8_t *p = src;
    for (size_t i = 0; i < n / bs; i++, p += ts, y += bs) {
        switch (type) {
        case GGML_TYPE_F32: memcpy(y, p, 4); break;
        case GGML_TYPE_F16: *y = h2f((ggml_half)(p[0] | p[1] << 8)); break;
        case GGML_TYPE_BF16: {
            uint32_t bits = (uint32_t)(p[0] | p[1] << 8) << 16;
            memcpy(y, &bits, 4);
            break;
        }
        case GGML_TYPE_Q4_0: deq_q4_0((const block_q4_0 *)p, y); break;
        case GGML_TYPE_Q4_1: deq_q4_1((const block_q4_1 *)p, y); break;
        case GGML_TYPE_Q5_0: {
            const block_q5_0 *b = (const block_q5_0 *)p;
            deq_q5(b->qh, b->qs, h2f(b->d), 0.0f, 16, y);
            break;
        }
        case GGML_TYPE_Q5_1: {
            const block_q5_1 *b = (const block_q5_1 *)p;
            deq_q5(b->qh, b->qs, h2f(b->d), h2f(b->m), 0, y);
            break;
        }
        case GGML_TYPE_Q8_0: deq_q8_0((const block_q8_0 *)p, y); break;
        case GGML_TYPE_Q2_K: deq_q2_K((const block_q2_K *)p, y); break;
        case GGML_TYPE_Q3_K: deq_q3_K((const block_q3_K *)p, y); break;
        case GGML_TYPE_Q4_K: deq_q4_K((const block_q4_K *)p, y); break;
        case GGML_TYPE_Q5_K: deq_q5_K((const block_q5_K *)p, y); break;
        case GGML_TYPE_Q6_K: deq_q6_K((const block_q6_K *)p, y); break;
        }
    }
    return GLESLLM_OK;
}
