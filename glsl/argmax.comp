// The index of the largest logit, in two dispatches: every work group of
// the first finds the largest of its slice (the lowest index on ties) and
// writes (value, float(index)); the second (FINAL) reduces those and writes
// the token id. Indices travel as floats: exact below 2^24.
// Bindings: 0 activations (float[]: logits and partials),
//           1 FINAL: token ids (uint[], write).
// Params: 0 values to reduce (logits, or partial pairs with FINAL),
//         1 logits float offset, 2 partials float offset, 3 values per group,
//         4 FINAL: index in the token ids to write.
//         5 (first pass) floats between rows of logits.
// Several rows at once: work group row gl_WorkGroupID.y takes logits row y
// and its own partials (2 x groups floats further each); FINAL writes token
// index param 4 + y.
// Defines: WG_SIZE (a power of two), FINAL.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) restrict buffer A { float act[]; };
#ifdef FINAL
layout(std430, binding = 1) writeonly restrict buffer T { uint tokens[]; };
#endif

shared float sv[WG_SIZE];
shared uint si[WG_SIZE];

void main()
{
    uint t = gl_LocalInvocationIndex, n = PARAM_U(0);
    float best = -3.4e38;
    uint bi = 0xffffffffu;
#ifdef FINAL
    for (uint i = t; i < n; i += uint(WG_SIZE)) {
        uint pi = PARAM_U(2) + 2u * (gl_WorkGroupID.y * n + i);
        float v = act[pi];
        uint idx = uint(act[pi + 1u]);
        if (v > best || (v == best && idx < bi)) {
            best = v;
            bi = idx;
        }
    }
#else
    uint i0 = gl_WorkGroupID.x * PARAM_U(3), i1 = min(i0 + PARAM_U(3), n);
    for (uint i = i0 + t; i < i1; i += uint(WG_SIZE)) {
        float v = act[PARAM_U(1) + gl_WorkGroupID.y * PARAM_U(5) + i];
        if (v > best) {  // i rises: the first of equals stays
            best = v;
            bi = i;
        }
    }
#endif
    sv[t] = best;
    si[t] = bi;
    barrier();
    for (uint s = uint(WG_SIZE) / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
            float v = sv[t + s];
            uint idx = si[t + s];
            if (v > sv[t] || (v == sv[t] && idx < si[t])) {
                sv[t] = v;
                si[t] = idx;
            }
        }
        barrier();
    }
    if (t == 0u) {
#ifdef FINAL
        tokens[PARAM_U(4) + gl_WorkGroupID.y] = si[0];
#else
        uint pi = PARAM_U(2) + 2u * (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
        act[pi] = sv[0];
        act[pi + 1u] = float(si[0]);
#endif
    }
}
