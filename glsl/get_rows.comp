// Rows of a weight tensor dequantized to f32: the embedding lookup.
// Bindings: 0 weights (weights.glsl), 1 ids (uint[], read), 2 y (float[], write).
// Params: 0 ids to look up, 1 index of the first id in `ids`,
//         2 index in y of the first output row, 3 y row stride (floats),
//         4 first row held by this weight buffer, 5 rows it holds,
//         6 1 when it holds the tensor's last row, 7 a scale of the rows
//         (float bits; 0: none);
//         8..13 the weight planes (weights.glsl).
// Work groups: one per id; an id outside this buffer's rows is left to the
// dispatch of the buffer that holds it (split tensors), and an id past the
// tensor's last row reads the last row (the host checks ids before).
#include "common.glsl"
#include "weights.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 1) readonly restrict buffer Ids { uint ids[]; };
layout(std430, binding = 2) writeonly restrict buffer Y { float y[]; };

void main()
{
    uint i = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (i >= PARAM_U(0))
        return;
    uint id = ids[PARAM_U(1) + i], first = PARAM_U(4), n = PARAM_U(5);
    if (id < first)
        return;
    uint row = id - first;
    if (row >= n) {
        if (PARAM_U(6) == 0u)
            return;
        row = n - 1u;
    }
    uint out_base = PARAM_U(2) + i * PARAM_U(3);
    uint cols = W_COLS;
    for (uint u = gl_LocalInvocationIndex; u < W_UNITS; u += uint(WG_SIZE)) {
        vec4 v[8];
        w_unit_values(row, u, v);
        for (int k = 0; k < 8; k++) {
            uint c = u * 32u + uint((k & 3) * 4 + (k >> 2) * 16);
            for (int j = 0; j < 4; j++)
                if (c + uint(j) < cols)
                    y[out_base + c + uint(j)] = PARAM_U(7) != 0u ? v[k][j] * PARAM_F(7) : v[k][j];
        }
    }
}
