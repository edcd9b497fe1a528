// In what order subgroupAdd adds (gpu_context_subgroup_order): each
// subgroup's subgroupAdd of its values, as its elected invocation holds it
// (group_sum.glsl's), to the end of the buffer. WG_SIZE a multiple of the
// subgroup size.
// Binding 0: float v[]: the values (one a global invocation), then the sums
// (one a subgroup, in order).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;
layout(std430, binding = 0) restrict buffer V { float v[]; };

void main()
{
    uint i = gl_GlobalInvocationID.x;
    float s = subgroupAdd(v[i]);
    if (subgroupElect())
        v[gl_NumWorkGroups.x * uint(WG_SIZE) + i / gl_SubgroupSize] = s;
}
