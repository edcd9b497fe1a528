// dst[i] = src[i] over n uvec4 (16-byte) elements: the reference for memory
// bandwidth (bench/bench_matvec.c) and a plain buffer copy.
// Bindings: 0 src (read), 1 dst (write). Params: 0 n.
// Work groups: any number; each invocation strides the whole range.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 0) readonly restrict buffer Src { uvec4 src[]; };
layout(std430, binding = 1) writeonly restrict buffer Dst { uvec4 dst[]; };

void main()
{
    uint n = PARAM_U(0);
    uint stride = gl_NumWorkGroups.x * uint(WG_SIZE);
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride)
        dst[i] = src[i];
}
