// Soft-capped values (Gemma 2's logits): v = CAP tanh(v / CAP), in place.
// Bindings: 0 the rows (read and written).
// Params: 0 values a row, 1 floats from one row to the next, 2 float offset
//   of row 0, 3 the cap (float bits).
// Work groups: x the values of a row, WG_SIZE a group; y rows.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) restrict buffer V { float v[]; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    if (i >= PARAM_U(0))
        return;
    uint k = PARAM_U(2) + gl_WorkGroupID.y * PARAM_U(1) + i;
    float cap = PARAM_F(3);
    v[k] = cap * tanh(v[k] / cap);
}
