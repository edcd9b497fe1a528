/* ops/: the CPU references of the GPU operations, in f32 with double sums:
 * the oracle the kernels are tested against (tests/, model/ref_model.c).
 * Plain loops, written for clarity, not speed. */
#ifndef GLESLLM_OPS_REF_OPS_H
#define GLESLLM_OPS_REF_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* y[r][i] = x[r][i] * w[i] / sqrt(mean_i(x[r][i]^2) + eps), for rows r. */
void ref_rms_norm(float *y, const float *x, const float *w, size_t rows, size_t n, float eps);

/* sum_c w[c] x[c], in double. */
double ref_dot(const float *w, const float *x, size_t n);

/* RoPE on n_heads heads of head_dim values at v: pair i (2i, 2i+1, or i and
 * i + head_dim/2 with neox) rotated by cos_sin[2i], cos_sin[2i + 1]. */
void ref_rope(float *v, const float *cos_sin, uint32_t n_heads, uint32_t head_dim, bool neox);

/* Attention of the query at position len - 1 over the positions it sees
 * (scores q . k times score_scale, 0: 1 / sqrt(head_dim); softcap > 0: then
 * softcap tanh(score / softcap))
 * for every head: all of 0..len-1, or with a window (> 0) its own and the
 * window - 1 before it. q (n_head x head_dim), k and v rows of kv_dim
 * (n_head_kv x head_dim) values a position, n_head / n_head_kv query heads to
 * a K/V head; out (n_head x head_dim); scores: room for len floats. */
void ref_attention(float *out, const float *q, const float *k, const float *v, uint32_t len,
                   uint32_t window, uint32_t n_head, uint32_t n_head_kv, uint32_t head_dim,
                   float score_scale, float softcap, float *scores);

/* gate[i] = silu(gate[i]) * up[i] */
void ref_silu_mul(float *gate, const float *up, size_t n);
/* gate[i] = gelu(gate[i]) * up[i], GELU's tanh form (Gemma's) */
void ref_gelu_mul(float *gate, const float *up, size_t n);

/* A token's experts from its router's n_expert logits: their softmax, the k
 * largest probabilities in llama.cpp's order (below), renormalised to sum 1
 * where `norm`, times `scale`: ids[j], weights[j] for j < k. The order, and
 * so which of equal probabilities is chosen, is that of llama.cpp's argsort
 * on the CPU: slot j takes the first largest of the entries j.. in an order
 * where each slot's pick swapped places with the entry it displaced. */
void ref_moe_route(const float *logits, uint32_t n_expert, uint32_t k, bool norm, float scale,
                   uint32_t *ids, float *weights);

/* A Mamba block's causal convolution for one token: out[c] = silu(w[c] .
 * (the d_conv - 1 inputs before, x[c]) + b[c]) for each of d_inner
 * channels; w: d_conv taps a channel, the oldest input's first; state: the
 * inputs before, oldest first, d_inner a row, shifted by x. */
void ref_ssm_conv(float *out, float *state, const float *x, const float *w, const float *b,
                  uint32_t d_inner, uint32_t d_conv);

/* Its selective scan for one token, channel c: step = softplus(dt[c]),
 * h[c][i] = h[c][i] exp(step a[c][i]) + B[i] x[c] step, y[c] = (sum_i
 * h[c][i] C[i] + d[c] x[c]) silu(z[c]); bc: B then C (d_state each); h:
 * d_state values a channel, updated. */
void ref_ssm_scan(float *y, float *h, const float *x, const float *dt, const float *a,
                  const float *bc, const float *d, const float *z, uint32_t d_inner,
                  uint32_t d_state);

/* Mamba-2's scan for one token: head hh (its d_inner / n_head channels)
 * with step = softplus(dt[hh]) and one decay exp(step a[hh]); channel c of
 * the head: h[c][i] = h[c][i] decay + B[i] x[c] step, y[c] = (sum_i h[c][i]
 * C[i] + d[hh] x[c]) silu(z[c]); bc: n_group B then n_group C (d_state
 * each), head hh taking group hh % n_group. */
void ref_ssm_scan2(float *y, float *h, const float *x, const float *dt, const float *a,
                   const float *bc, const float *d, const float *z, uint32_t d_inner,
                   uint32_t d_state, uint32_t n_head, uint32_t n_group);

/* LayerNorm: y[r][i] = (x[r][i] - mean) / sqrt(var + eps) * w[i] + b[i] for
 * rows r of n (w, b NULL: 1 and 0). */
void ref_layer_norm(float *y, const float *x, const float *w, const float *b, size_t rows,
                    size_t n, float eps);

/* RWKV-7's time-mix state update for one token, every head h of hs values
 * (vectors of n_head x hs, the head's part at h x hs): its state S (hs rows
 * of hs, row i for value i) becomes S[i][j] w[j] + v[i] k[j] + (S a)[i]
 * b[j], and y[i] = (S r)[i] after the update. */
void ref_wkv7(float *y, float *state, const float *r, const float *w, const float *k,
              const float *v, const float *a, const float *b, uint32_t n_head, uint32_t hs);

/* RWKV-7's time mix between its projections, one token of n_embd channels
 * in heads of hs: from the decay's, learning rate's and value residual's
 * low-rank outputs w, a, vr (before their vectors w0, a0, v0) and r, k, v
 * (the raw value) and g, the decay exp(-0.606531 sigmoid(w0 + w)), the rate
 * sigmoid(a0 + a), v toward `first` by sigmoid(v0 + vr) (first_layer: v
 * written to first instead), kk = k k_k normalised a head, k scaled by 1 +
 * (rate - 1) k_a; the state update (ref_wkv7, its a and b -kk and kk rate);
 * y's LayerNorm a head (epsilon 64e-5) times ln_w plus ln_b, plus v (k . r
 * r_k a head), times g. k and v are changed; tmp: room for 4 n_embd. */
typedef struct ref_rwkv7_par {
    const float *w0, *a0, *v0, *k_k, *k_a, *r_k, *ln_w, *ln_b;
} ref_rwkv7_par;
void ref_rwkv7_mix(float *y, float *state, const float *r, const float *w, float *k, float *v,
                   const float *a, const float *vr, const float *g, float *first, bool first_layer,
                   const ref_rwkv7_par *p, uint32_t n_embd, uint32_t hs, float *tmp);

#endif
