/* The CPU references of the GPU operations. See ref_ops.h. */
#include "ops/ref_ops.h"

#include <math.h>

void ref_rms_norm(float *y, const float *x, const float *w, size_t rows, size_t n, float eps)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double ss = 0.0; /* double: the reference should be the more exact side */
        for (size_t i = 0; i < n; i++)
            ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
        for (size_t i = 0; i < n; i++)
            y[r * n + i] = xr[i] * scale * w[i];
    }
}

double ref_dot(const float *w, const float *x, size_t n)
{
    double s = 0.0;
    for (size_t c = 0; c < n; c++)
        s += (double)w[c] * x[c];
    return s;
}

void ref_rope(float *v, const float *cos_sin, uint32_t n_heads, uint32_t head_dim, bool neox)
{
    uint32_t hd = head_dim, half = hd / 2;
    for (uint32_t h = 0; h < n_heads; h++) {
        float *vh = v + (size_t)h * hd;
        for (uint32_t i = 0; i < half; i++) {
            uint32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            float c = cos_sin[2 * i], s = cos_sin[2 * i + 1], x0 = vh[a], x1 = vh[b];
            vh[a] = x0 * c - x1 * s;
            vh[b] = x0 * s + x1 * c;
        }
    }
}

void ref_attention(float *out, const float *q, const float *k, const float *v, uint32_t len,
                   uint32_t window, uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim,
                   float score_scale, float softcap, float *scores)
{
    size_t kv_dim = (size_t)n_head_kv * head_dim;
    uint32_t hd = head_dim, group = n_head / n_head_kv;
    float scale = score_scale > 0.0f ? score_scale : 1.0f / sqrtf((float)hd);
    uint32_t lo = window && len > window ? len - window : 0;
    for (uint32_t h = 0; h < n_head; h++) {
        const float *qh = q + (size_t)h * hd;
        size_t ko = (size_t)(h / group) * hd;
        float mx = -INFINITY;
        for (uint32_t p = lo; p < len; p++) {
            double s = 0.0;
            for (uint32_t d = 0; d < hd; d++)
                s += (double)qh[d] * k[p * kv_dim + ko + d];
            scores[p] = (float)s * scale;
            if (softcap > 0.0f)
                scores[p] = softcap * tanhf(scores[p] / softcap);
            mx = scores[p] > mx ? scores[p] : mx;
        }
        double sum = 0.0;
        for (uint32_t p = lo; p < len; p++) {
            scores[p] = expf(scores[p] - mx);
            sum += scores[p];
        }
        for (uint32_t d = 0; d < hd; d++) {
            double acc = 0.0;
            for (uint32_t p = lo; p < len; p++)
                acc += (double)scores[p] * v[p * kv_dim + ko + d];
            out[(size_t)h * hd + d] = (float)(acc / sum);
        }
    }
}

void ref_silu_mul(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void ref_moe_route(const float *logits, uint32_t n_expert, uint32_t k, bool norm, float scale,
                   uint32_t *ids, float *weights)
{
    float p[256]; /* (MODEL_MAX_EXPERTS) */
    uint32_t order[256];
    float mx = logits[0];
    for (uint32_t e = 1; e < n_expert; e++)
        mx = logits[e] > mx ? logits[e] : mx;
    double sum = 0.0;
    for (uint32_t e = 0; e < n_expert; e++) {
        p[e] = expf(logits[e] - mx);
        sum += p[e];
        order[e] = e;
    }
    for (uint32_t e = 0; e < n_expert; e++)
        p[e] = (float)(p[e] / sum);
    /* slot j: swap in every later entry that is strictly larger */
    for (uint32_t j = 0; j < k; j++)
        for (uint32_t i = j + 1; i < n_expert; i++)
            if (p[order[j]] < p[order[i]]) {
                uint32_t t = order[j];
                order[j] = order[i];
                order[i] = t;
            }
    double wsum = 0.0;
    for (uint32_t j = 0; j < k; j++) {
        ids[j] = order[j];
        weights[j] = p[order[j]];
        wsum += weights[j];
    }
    for (uint32_t j = 0; j < k; j++)
        weights[j] = (float)((norm ? weights[j] / wsum : weights[j]) * scale);
}

static float silu(float v) { return v / (1.0f + expf(-v)); }

void ref_ssm_conv(float *out, float *state, const float *x, const float *w, const float *b,
                  uint32_t d_inner, uint32_t d_conv)
{
    for (uint32_t c = 0; c < d_inner; c++) {
        float s = 0.0f;
        for (uint32_t k = 0; k + 1 < d_conv; k++)
            s += w[(size_t)c * d_conv + k] * state[(size_t)k * d_inner + c];
        s += w[(size_t)c * d_conv + d_conv - 1] * x[c];
        out[c] = silu(s + b[c]);
        for (uint32_t k = 0; k + 2 < d_conv; k++)
            state[(size_t)k * d_inner + c] = state[(size_t)(k + 1) * d_inner + c];
        state[(size_t)(d_conv - 2) * d_inner + c] = x[c];
    }
}

void ref_ssm_scan(float *y, float *h, const float *x, const float *dt, const float *a,
                  const float *bc, const float *d, const float *z, uint32_t d_inner,
                  uint32_t d_state)
{
    const float *B = bc, *C = bc + d_state;
    for (uint32_t c = 0; c < d_inner; c++) {
        /* softplus, as llama.cpp takes it (the identity above 20) */
        float step = dt[c] <= 20.0f ? log1pf(expf(dt[c])) : dt[c];
        float *hc = h + (size_t)c * d_state, s = 0.0f;
        for (uint32_t i = 0; i < d_state; i++) {
            hc[i] = hc[i] * expf(step * a[(size_t)c * d_state + i]) + B[i] * x[c] * step;
            s += hc[i] * C[i];
        }
        y[c] = (s + d[c] * x[c]) * silu(z[c]);
    }
}

void ref_ssm_scan2(float *y, float *h, const float *x, const float *dt, const float *a,
                   const float *bc, const float *d, const float *z, uint32_t d_inner,
                   uint32_t d_state, uint32_t n_head, uint32_t n_group)
{
    uint32_t hd = d_inner / n_head;
    for (uint32_t hh = 0; hh < n_head; hh++) {
        float step = dt[hh] <= 20.0f ? log1pf(expf(dt[hh])) : dt[hh];
        float decay = expf(step * a[hh]);
        const float *B = bc + (size_t)(hh % n_group) * d_state;
        const float *C = bc + (size_t)(n_group + hh % n_group) * d_state;
        for (uint32_t p = 0; p < hd; p++) {
            uint32_t c = hh * hd + p;
            float *hc = h + (size_t)c * d_state, s = 0.0f;
            for (uint32_t i = 0; i < d_state; i++) {
                hc[i] = hc[i] * decay + B[i] * x[c] * step;
                s += hc[i] * C[i];
            }
            y[c] = (s + d[hh] * x[c]) * silu(z[c]);
        }
    }
}

void ref_gelu_mul(float *gate, const float *up, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = 0.5f * g * (1.0f + tanhf(0.7978845608f * (g + 0.044715f * g * g * g))) * up[i];
    }
}

void ref_layer_norm(float *y, const float *x, const float *w, const float *b, size_t rows,
                    size_t n, float eps)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double sum = 0.0, ss = 0.0;
        for (size_t i = 0; i < n; i++)
            sum += xr[i];
        double mean = sum / (double)n;
        for (size_t i = 0; i < n; i++)
            ss += (xr[i] - mean) * (xr[i] - mean);
        float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
        for (size_t i = 0; i < n; i++)
            y[r * n + i] = (float)(xr[i] - mean) * scale * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
}

void ref_wkv7(float *y, float *state, const float *r, const float *w, const float *k,
              const float *v, const float *a, const float *b, uint32_t n_head, uint32_t hs)
{
    for (uint32_t h = 0; h < n_head; h++) {
        size_t o = (size_t)h * hs;
        for (uint32_t i = 0; i < hs; i++) {
            float *s = state + ((size_t)h * hs + i) * hs;
            double sa = 0.0, out = 0.0;
            for (uint32_t j = 0; j < hs; j++)
                sa += (double)s[j] * a[o + j];
            for (uint32_t j = 0; j < hs; j++) {
                s[j] = s[j] * w[o + j] + v[o + i] * k[o + j] + (float)sa * b[o + j];
                out += (double)s[j] * r[o + j];
            }
            y[o + i] = (float)out;
        }
    }
}

static float ref_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

void ref_rwkv7_mix(float *y, float *state, const float *r, const float *w, float *k, float *v,
                   const float *a, const float *vr, const float *g, float *first, bool first_layer,
                   const ref_rwkv7_par *p, uint32_t n_embd, uint32_t hs, float *tmp)
{
    uint32_t d = n_embd, nh = d / hs;
    float *decay = tmp, *rate = tmp + d, *kk = tmp + 2 * d, *b = tmp + 3 * d;
    for (uint32_t i = 0; i < d; i++) {
        decay[i] = expf(-0.606531f * ref_sigmoid(p->w0[i] + w[i]));
        rate[i] = ref_sigmoid(p->a0[i] + a[i]);
        if (first_layer)
            first[i] = v[i];
        else
            v[i] += (first[i] - v[i]) * ref_sigmoid(p->v0[i] + vr[i]);
        kk[i] = k[i] * p->k_k[i];
    }
    for (uint32_t h = 0; h < nh; h++) {
        double ss = 0.0;
        for (uint32_t j = 0; j < hs; j++)
            ss += (double)kk[h * hs + j] * kk[h * hs + j];
        float n = sqrtf((float)ss);
        float inv = 1.0f / (n > 1e-12f ? n : 1e-12f);
        for (uint32_t j = 0; j < hs; j++)
            kk[h * hs + j] *= inv;
    }
    for (uint32_t i = 0; i < d; i++) {
        float ka = k[i] * p->k_a[i];
        k[i] += rate[i] * ka - ka;
        b[i] = kk[i] * rate[i];
        kk[i] = -kk[i];
    }
    ref_wkv7(y, state, r, decay, k, v, kk, b, nh, hs);
    ref_layer_norm(y, y, NULL, NULL, nh, hs, 64e-5f);
    for (uint32_t h = 0; h < nh; h++) {
        double sum = 0.0;
        for (uint32_t j = 0; j < hs; j++)
            sum += (double)k[h * hs + j] * r[h * hs + j] * p->r_k[h * hs + j];
        for (uint32_t j = 0; j < hs; j++) {
            uint32_t i = h * hs + j;
            y[i] = (y[i] * p->ln_w[i] + p->ln_b[i] + v[i] * (float)sum) * g[i];
        }
    }
}
