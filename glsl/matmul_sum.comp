// y = (or +=) the sum of a sliced product's slices (matmul.comp's SLICES,
// ops/matmul.h matmul_slices), or GLU of the sums of a gate/up pair.
// Output r of token t: the sum over the slices s of part[s stride + t
// tstride + first + r] (GLU: a of row first + 2 r, b of the next, and
// GLU_ACT(a) b), into y[y0 + t ys + r].
// Bindings: 0 the slices, 1 y.
// Params: 0 outputs a token, 1 slices, 2 floats from one slice to the next,
//   3 float offset y0 of token 0's first output, 4 y floats a token (ys), 5
//   0 store, 1 add to y, 2 GLU, 6 part floats a token (tstride), 7 its first
//   row (first).
// Work groups: x the outputs, WG_SIZE a group; y the tokens.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer P { float part[]; };
layout(std430, binding = 1) restrict buffer Y { float y[]; };

void main()
{
    uint r = gl_GlobalInvocationID.x, t = gl_WorkGroupID.y;
    if (r >= PARAM_U(0))
        return;
    bool glu = PARAM_U(5) == 2u;
    uint at = t * PARAM_U(6) + PARAM_U(7) + (glu ? 2u * r : r);
    float a = 0.0, b = 0.0;
    for (uint s = 0u; s < PARAM_U(1); s++) {
        a += part[s * PARAM_U(2) + at];
        if (glu)
            b += part[s * PARAM_U(2) + at + 1u];
    }
    uint o = PARAM_U(3) + t * PARAM_U(4) + r;
    y[o] = glu ? GLU_ACT(a) * b : PARAM_U(5) == 1u ? y[o] + a : a;
}
