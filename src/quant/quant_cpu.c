/* CPU quantizers: f32 rows into GGUF blocks (quant.h), for `glesllm quantize`
 * and the bench generators.
 *
 * The simple formats round to the nearest level of a scale chosen from the
 * block's extremes. The K formats fit each sub-block's scale (and min) by a
 * small search that minimises the squared error, then quantize those scales
 * to 6 or 8 bits against the super-block's f16 scale and round every value
 * again with the scales actually stored. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

static ggml_half f2h(float f) { return quant_float_to_half(f); }

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* the value of largest magnitude, with its sign */
static float signed_absmax(const float *x, int n)
{
    float m = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > fabsf(m))
            m = x[i];
    return m;
}

/* Q4_0 / Q5_0: the extreme value maps to the lowest level -2^(bits-1), so
 * the opposite side keeps one level less (as GGUF's producers do). */
static float sym_scale(const float *x, int levels_half, uint8_t *q, int n)
{
    float m = signed_absmax(x, n);
    float d = m / -(float)levels_half, id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < n; j++)
        q[j] = (uint8_t)clampi((int)floorf(x[j] * id + (float)levels_half + 0.5f), 0,
                               2 * levels_half - 1);
    return d;
}

/* Q4_1 / Q5_1: the range [min, max] over the levels */
static void affine_scale(const float *x, int levels, uint8_t *q, int n, float *d, float *m)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
    }
    *d = (hi - lo) / (float)(levels - 1);
    *m = lo;
    /* round with the stored (f16) scale and min */
    float dh = quant_half_to_float(f2h(*d)), mh = quant_half_to_float(f2h(lo));
    float id = dh ? 1.0f / dh : 0.0f;
    for (int j = 0; j < n; j++)
        q[j] = (uint8_t)clampi((int)lroundf((x[j] - mh) * id), 0, levels - 1);
}

static void quant_q4_0(const float *x, block_q4_0 *b)
{
    uint8_t q[32];
    b->d = f2h(sym_scale(x, 8, q, 32));
    for (int j = 0; j < 16; j++)
        b->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

static void quant_q4_1(const float *x, block_q4_1 *b)
{
    uint8_t q[32];
    float d, m;
    affine_scale(x, 16, q, 32, &d, &m);
    b->d = f2h(d);
    b->m = f2h(m);
    for (int j = 0; j < 16; j++)
        b->qs[j] = (uint8_t)(q[j] | q[j + 16] << 4);
}

/* low nibbles into qs as Q4_0 does, the fifth bits into qh */
static void pack_q5(const uint8_t *q, uint8_t *qs, uint8_t *qh)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0xf) | (q[j + 16] & 0xf) << 4);
        h |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    for (int i = 0; i < 4; i++)
        qh[i] = (uint8_t)(h >> (8 * i));
}

static void quant_q5_0(const float *x, block_q5_0 *b)
{
    uint8_t q[32];
    b->d = f2h(sym_scale(x, 16, q, 32));
    pack_q5(q, b->qs, b->qh);
}

static void quant_q5_1(const float *x, block_q5_1 *b)
{
    uint8_t q[32];
    float d, m;
    affine_scale(x, 32, q, 32, &d, &m);
    b->d = f2h(d);
    b->m = f2h(m);
    pack_q5(q, b->qs, b->qh);
}

static void quant_q8_0(const float *x, block_q8_0 *b)
{
    float amax = fabsf(signed_absmax(x, 32));
    float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    b->d = f2h(d);
    for (int j = 0; j < 32; j++)
        b->qs[j] = (int8_t)clampi((int)lroundf(x[j] * id), -127, 127);
}

/* Fits x ~ a * q - m with q in 0..nmax, a >= 0, m >= 0, minimising the
 * squared error: candidate scales around (max - min) / nmax, each assignment
 * followed by the least-squares (a, m) for it. */
static void fit_affine(const float *x, int n, int nmax, float *a_out, float *m_out)
{
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    if (lo > 0.0f)
        lo = 0.0f;
    if (hi <= lo) {
        *a_out = 0.0f;
        *m_out = -lo;
        return;
    }
    float best_a = (hi - lo) / (float)nmax, best_b = lo;
    double best_err = DBL_MAX;
    for (int step = -20; step <= 20; step++) {
        float iscale = ((float)nmax + 0.05f * (float)step) / (hi - lo);
        double sl = 0, sll = 0, sx = 0, slx = 0;
        int q[QK_K];
        for (int i = 0; i < n; i++) {
            q[i] = clampi((int)lroundf(iscale * (x[i] - lo)), 0, nmax);
            sl += q[i];
            sll += (double)q[i] * q[i];
            sx += x[i];
            slx += (double)q[i] * x[i];
        }
        double det = n * sll - sl * sl, a, b;
        if (det <= 0)
            continue;
        a = (n * slx - sl * sx) / det;
        b = (sll * sx - sl * slx) / det;
        if (b > 0) { /* the offset must stay <= 0 */
            b = 0;
            a = sll > 0 ? slx / sll : 0;
        }
        if (a < 0)
            continue;
        double err = 0;
        for (int i = 0; i < n; i++) {
            double e = a * q[i] + b - x[i];
            err += e * e;
        }
        if (err < best_err) {
            best_err = err;
            best_a = (float)a;
            best_b = (float)b;
        }
    }
    *a_out = best_a;
    *m_out = -best_b;
}

/* Fits x ~ s * q with q in -nmax..nmax-1 (symmetric around the extreme). */
static float fit_symmetric(const float *x, int n, int nmax)
{
    float m = signed_absmax(x, n);
    if (m == 0.0f)
        return 0.0f;
    float best = m / -(float)nmax;
    double best_err = DBL_MAX;
    for (int step = -12; step <= 12; step++) {
        float iscale = -((float)nmax + 0.05f * (float)step) / m;
        double sqx = 0, sqq = 0;
        int q[QK_K];
        for (int i = 0; i < n; i++) {
            q[i] = clampi((int)lroundf(iscale * x[i]), -nmax, nmax - 1);
            sqx += (double)q[i] * x[i];
            sqq += (double)q[i] * q[i];
        }
        if (sqq <= 0)
            continue;
        double s = sqx / sqq, err = 0;
        for (int i = 0; i < n; i++) {
            double e = s * q[i] - x[i];
            err += e * e;
        }
        if (err < best_err) {
            best_err = err;
            best = (float)s;
        }
    }
    return best;
}

/* 6-bit scale/min j of a Q4_K/Q5_K block, the inverse of quant_ref.c's reader */
static void k4_pack_scales(const uint8_t ls[8], const uint8_t lm[8], uint8_t out[12])
{
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t)((ls[j] & 63) | (ls[j + 4] >> 4) << 6);
        out[j + 4] = (uint8_t)((lm[j] & 63) | (lm[j + 4] >> 4) << 6);
        out[j + 8] = (uint8_t)((ls[j + 4] & 0xf) | (lm[j + 4] & 0xf) << 4);
    }
}

/* A Q4_K or Q5_K block's scales, mins and levels (0..nmax: 15 or 31): the
 * two formats differ only in how the levels are stored. */
static void k_affine_block(const float *x, int nmax, ggml_half *d_out, ggml_half *dmin_out,
                           uint8_t scales[12], uint8_t q[QK_K])
{
    float sc[8], mn[8], max_sc = 0, max_mn = 0;
    for (int s = 0; s < 8; s++) {
        fit_affine(x + 32 * s, 32, nmax, &sc[s], &mn[s]);
        max_sc = fmaxf(max_sc, sc[s]);
        max_mn = fmaxf(max_mn, mn[s]);
    }
    float d = max_sc / 63.0f, dmin = max_mn / 63.0f;
    *d_out = f2h(d);
    *dmin_out = f2h(dmin);
    float dh = quant_half_to_float(*d_out), mh = quant_half_to_float(*dmin_out);
    uint8_t ls[8], lm[8];
    for (int s = 0; s < 8; s++) {
        ls[s] = (uint8_t)(dh > 0 ? clampi((int)lroundf(sc[s] / dh), 0, 63) : 0);
        lm[s] = (uint8_t)(mh > 0 ? clampi((int)lroundf(mn[s] / mh), 0, 63) : 0);
        /* the 6-bit neighbours of the rounded pair may fit better */
        double best = DBL_MAX;
        int bs = ls[s], bm = lm[s];
        for (int ds = -1; ds <= 1; ds++)
            for (int dm = -1; dm <= 1; dm++) {
                int cs = ls[s] + ds, cm = lm[s] + dm;
                if (cs < 0 || cs > 63 || cm < 0 || cm > 63)
                    continue;
                float step = dh * cs, off = mh * cm;
                double err = 0;
                for (int i = 0; i < 32; i++) {
                    float v = x[32 * s + i];
                    int qi = step > 0 ? clampi((int)lroundf((v + off) / step), 0, nmax) : 0;
                    double e = step * qi - off - v;
                    err += e * e;
                }
                if (err < best) {
                    best = err;
                    bs = cs;
                    bm = cm;
                }
            }
        ls[s] = (uint8_t)bs;
        lm[s] = (uint8_t)bm;
    }
    k4_pack_scales(ls, lm, scales);
    for (int s = 0; s < 8; s++) {
        float step = dh * ls[s], off = mh * lm[s];
        for (int i = 0; i < 32; i++)
            q[32 * s + i] =
                (uint8_t)(step > 0 ? clampi((int)lroundf((x[32 * s + i] + off) / step), 0, nmax) : 0);
    }
}

static void quant_q4_K(const float *x, block_q4_K *b)
{
    uint8_t q[QK_K];
    k_affine_block(x, 15, &b->d, &b->dmin, b->scales, q);
    /* chunk c of 32 bytes: values 64c.. in the low nibbles, 64c+32.. high */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | q[64 * c + 32 + l] << 4);
}

static void quant_q5_K(const float *x, block_q5_K *b)
{
    uint8_t q[QK_K];
    k_affine_block(x, 31, &b->d, &b->dmin, b->scales, q);
    /* Q4_K's nibbles of the low 4 bits; the fifth bit of value 64c + l in
     * bit 2c of qh[l], of value 64c + 32 + l in bit 2c + 1 */
    memset(b->qh, 0, sizeof b->qh);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            uint8_t lo = q[64 * c + l], hi = q[64 * c + 32 + l];
            b->qs[32 * c + l] = (uint8_t)((lo & 15) | (hi & 15) << 4);
            b->qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
        }
}

static void quant_q6_K(const float *x, block_q6_K *b)
{
    float sc[16], max_sc = 0;
    for (int s = 0; s < 16; s++) {
        sc[s] = fit_symmetric(x + 16 * s, 16, 32);
        if (fabsf(sc[s]) > fabsf(max_sc))
            max_sc = sc[s];
    }
    /* int8 scales: the extreme maps to -128 */
    float iscale = max_sc ? -128.0f / max_sc : 0.0f;
    b->d = f2h(iscale ? 1.0f / iscale : 0.0f);
    float dh = quant_half_to_float(b->d);
    int8_t q[QK_K];
    for (int s = 0; s < 16; s++) {
        int r = clampi((int)lroundf(iscale * sc[s]), -128, 127), pick = r;
        double best = DBL_MAX;
        for (int c = r - 1; c <= r + 1; c++) { /* the rounded scale or a neighbour */
            if (c < -128 || c > 127)
                continue;
            float step = dh * c;
            double err = 0;
            for (int i = 0; i < 16; i++) {
                float v = x[16 * s + i];
                int qv = step ? clampi((int)lroundf(v / step), -32, 31) : 0;
                double e = step * qv - v;
                err += e * e;
            }
            if (err < best) {
                best = err;
                pick = c;
            }
        }
        b->scales[s] = (int8_t)pick;
        float step = dh * b->scales[s];
        for (int i = 0; i < 16; i++)
            q[16 * s + i] =
                (int8_t)(step ? clampi((int)lroundf(x[16 * s + i] / step), -32, 31) : 0);
    }
    /* half h of 128 values: ql[64h+l] low = v(l), ql[64h+l+32] low = v(l+32),
     * high nibbles v(l+64), v(l+96); qh[32h+l] holds their top two bits */
    for (int h = 0; h < 2; h++) {
        const int8_t *v = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            int q1 = v[l] + 32, q2 = v[l + 32] + 32, q3 = v[l + 64] + 32, q4 = v[l + 96] + 32;
            b->ql[64 * h + l] = (uint8_t)((q1 & 0xf) | (q3 & 0xf) << 4);
            b->ql[64 * h + l + 32] = (uint8_t)((q2 & 0xf) | (q4 & 0xf) << 4);
            b->qh[32 * h + l] = (uint8_t)((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
        }
    }
}

int quant_can_quantize(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16:
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q8_0: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        return 1;
    }
    return 0;
}

static uint16_t f2bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((u >> 16) | 64); /* quiet nan */
    return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

glesllm_status quant_quantize(uint32_t type, const float *x, void *dst, size_t n)
{
    uint32_t bs = ggml_block_size(type), ts = ggml_type_size(type);
    if (!quant_can_quantize(type))
        return err_set(GLESLLM_ERR_UNSUPPORTED, "no quantizer for %s",
                       ggml_type_name(type) ? ggml_type_name(type) : "(unknown type)");
    if (n % bs)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "%zu values are not whole %s blocks of %u", n,
                       ggml_type_name(type), bs);
    uint8_t *p = dst;
    for (size_t i = 0; i < n / bs; i++, p += ts, x += bs) {
        switch (type) {
        case GGML_TYPE_F32: memcpy(p, x, 4); break;
        case GGML_TYPE_F16: {
            ggml_half h = f2h(*x);
            memcpy(p, &h, 2);
            break;
        }
        case GGML_TYPE_BF16: {
            uint16_t h = f2bf16(*x);
            memcpy(p, &h, 2);
            break;
        }
        case GGML_TYPE_Q4_0: quant_q4_0(x, (block_q4_0 *)p); break;
        case GGML_TYPE_Q4_1: quant_q4_1(x, (block_q4_1 *)p); break;
        case GGML_TYPE_Q5_0: quant_q5_0(x, (block_q5_0 *)p); break;
        case GGML_TYPE_Q5_1: quant_q5_1(x, (block_q5_1 *)p); break;
        case GGML_TYPE_Q8_0: quant_q8_0(x, (block_q8_0 *)p); break;
        case GGML_TYPE_Q4_K: quant_q4_K(x, (block_q4_K *)p); break;
        case GGML_TYPE_Q5_K: quant_q5_K(x, (block_q5_K *)p); break;
        case GGML_TYPE_Q6_K: quant_q6_K(x, (block_q6_K *)p); break;
        }
    }
    return GLESLLM_OK;
}
