// The index of the largest logit in one dispatch: every work group finds
// the largest of its slice (the lowest index on ties) and writes (value,
// float(index)); the last of a row's groups to finish (counted with an
// atomic) reduces those and writes the token id. Indices travel as floats:
// exact below 2^24.
// Bindings: 0 activations (float[]: logits and partials),
//           1 token ids (uint[], write),
//           2 a counter a row (uint[], 0 between dispatches: the reducing
//             group puts it back).
// Params: 0 logits a row, 1 logits float offset, 2 partials float offset,
//         3 values a group, 4 index in the token ids of row 0's id,
//         5 floats between rows of logits.
// Several rows at once: work group row gl_WorkGroupID.y takes logits row y,
// its own partials (2 x groups floats further each) and counter, and writes
// token index param 4 + y.
// Defines: WG_SIZE (a power of two).
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

// coherent: the reducing group reads the other groups' partials
layout(std430, binding = 0) coherent restrict buffer A { float act[]; };
layout(std430, binding = 1) writeonly restrict buffer T { uint tokens[]; };
layout(std430, binding = 2) coherent restrict buffer C { uint counter[]; };

shared float sv[WG_SIZE];
shared uint si[WG_SIZE];
shared bool reduce_here;

// The largest of the work group's (best, bi) pairs into sv[0], si[0] (the
// lowest index on ties); every invocation calls it (it holds barriers).
void group_best(uint t, float best, uint bi)
{
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
}

// The best of this row's n partial pairs: this invocation's share.
void partials_best(uint t, uint n, inout float best, inout uint bi)
{
    for (uint i = t; i < n; i += uint(WG_SIZE)) {
        uint pi = PARAM_U(2) + 2u * (gl_WorkGroupID.y * n + i);
        float v = act[pi];
        uint idx = uint(act[pi + 1u]);
        if (v > best || (v == best && idx < bi)) {
            best = v;
            bi = idx;
        }
    }
}

void main()
{
    uint t = gl_LocalInvocationIndex, n = PARAM_U(0);
    float best = -3.4e38;
    uint bi = 0xffffffffu;
    uint i0 = gl_WorkGroupID.x * PARAM_U(3), i1 = min(i0 + PARAM_U(3), n);
    for (uint i = i0 + t; i < i1; i += uint(WG_SIZE)) {
        float v = act[PARAM_U(1) + gl_WorkGroupID.y * PARAM_U(5) + i];
        if (v > best) {  // i rises: the first of equals stays
            best = v;
            bi = i;
        }
    }
    group_best(t, best, bi);
    uint groups = gl_NumWorkGroups.x;
    if (groups == 1u) {  // the group's best is the row's
        if (t == 0u)
            tokens[PARAM_U(4) + gl_WorkGroupID.y] = si[0];
        return;
    }
    if (t == 0u) {
        uint pi = PARAM_U(2) + 2u * (gl_WorkGroupID.y * groups + gl_WorkGroupID.x);
        act[pi] = sv[0];
        act[pi + 1u] = float(si[0]);
        memoryBarrierBuffer();  // the pair visible before the count
        reduce_here = atomicAdd(counter[gl_WorkGroupID.y], 1u) == groups - 1u;
    }
    barrier();
    if (!reduce_here)
        return;  // the whole work group
    memoryBarrierBuffer();
    best = -3.4e38;
    bi = 0xffffffffu;
    partials_best(t, groups, best, bi);
    group_best(t, best, bi);
    if (t == 0u) {
        tokens[PARAM_U(4) + gl_WorkGroupID.y] = si[0];
        counter[gl_WorkGroupID.y] = 0u;
    }
}
