// Work-group reductions (sum, max). Needs WG_SIZE (the work group's invocation count,
// a power of two). With USE_SUBGROUP (GL_KHR_shader_subgroup, enabled by the
// kernel that includes this) each subgroup reduces in registers and only the
// subgroup partials go through shared memory; otherwise a shared-memory tree.
// Every invocation of the group must call these (they contain barriers), and
// every invocation gets the result. Each barrier has memoryBarrierShared()
// before it: without it Mesa's llvmpipe let one SIMD group's write of the
// next reduction land before another group had read this one's result.

// RED_PARTIAL: the includer's shared float[WG_SIZE] to use (else an array
// of their own; with USE_SUBGROUP one slot a subgroup is used).
#ifndef RED_PARTIAL
shared float red_partial[WG_SIZE];
#define RED_PARTIAL red_partial
#endif

#ifdef USE_SUBGROUP
float wg_reduce_sum(float v)
{
    float s = subgroupAdd(v);
    uint n_sub = (uint(WG_SIZE) + gl_SubgroupSize - 1u) / gl_SubgroupSize;
    if (subgroupElect())
        RED_PARTIAL[gl_SubgroupID] = s;
    memoryBarrierShared();
    barrier();
    float total = 0.0;
    for (uint i = 0u; i < n_sub; i++)
        total += RED_PARTIAL[i];
    memoryBarrierShared();
    barrier();
    return total;
}

float wg_reduce_max(float v)
{
    float s = subgroupMax(v);
    uint n_sub = (uint(WG_SIZE) + gl_SubgroupSize - 1u) / gl_SubgroupSize;
    if (subgroupElect())
        RED_PARTIAL[gl_SubgroupID] = s;
    memoryBarrierShared();
    barrier();
    float total = RED_PARTIAL[0];
    for (uint i = 1u; i < n_sub; i++)
        total = max(total, RED_PARTIAL[i]);
    memoryBarrierShared();
    barrier();
    return total;
}
#else
float wg_reduce_sum(float v)
{
    uint t = gl_LocalInvocationIndex;
    RED_PARTIAL[t] = v;
    memoryBarrierShared();
    barrier();
    for (uint s = uint(WG_SIZE) / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            RED_PARTIAL[t] += RED_PARTIAL[t + s];
        memoryBarrierShared();
        barrier();
    }
    float total = RED_PARTIAL[0];
    memoryBarrierShared();
    barrier();
    return total;
}

float wg_reduce_max(float v)
{
    uint t = gl_LocalInvocationIndex;
    RED_PARTIAL[t] = v;
    memoryBarrierShared();
    barrier();
    for (uint s = uint(WG_SIZE) / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            RED_PARTIAL[t] = max(RED_PARTIAL[t], RED_PARTIAL[t + s]);
        memoryBarrierShared();
        barrier();
    }
    float total = RED_PARTIAL[0];
    memoryBarrierShared();
    barrier();
    return total;
}
#endif
