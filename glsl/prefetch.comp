// Reads a range of a buffer so that it sits in the GPU's L2 cache when the
// next kernel reads it: dispatched without a barrier beside a kernel that
// leaves memory bandwidth unused (a decode step's small kernels and the
// tails of its matvecs), it brings the next matvec's weights in early.
// Bindings: 0 the buffer (read), 1 a sink: written only if the words an
// invocation loads XOR to one 128-bit constant (so that the compiler keeps
// the loads), which nothing reads.
// Params: 0 uvec4 to read; each invocation reads PER of them, WG_SIZE apart.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer Src { uvec4 src[]; };
layout(std430, binding = 1) writeonly restrict buffer Sink { uint sink[]; };

void main()
{
    uint n = PARAM_U(0);
    uint i = gl_WorkGroupID.x * uint(WG_SIZE * PER) + gl_LocalInvocationID.x;
    uvec4 a = uvec4(0u);
    for (int k = 0; k < PER; k++, i += uint(WG_SIZE))
        if (i < n)
            a ^= src[i] + uvec4(uint(k));
    if (all(equal(a, uvec4(0x9E3779B9u, 0x7F4A7C15u, 0xF39CC060u, 0x5CEDC834u))))
        sink[0] = a.x;
}
