// Work-group reductions (sum, max). Needs WG_SIZE (the work group's invocation count,
// a power of two). With USE_SUBGROUP (GL_KHR_shader_subgroup, enabled by the
// kernel that includes this) each subgroup reduces in registers and only the
// subgroup partials go through shared memory; otherwise a shared-memory tree.
// Every invocation of the group must call these (they contain barriers), and
// every invocation gets the result. Each barrier has memoryBarrierShared()
// before it: without it Mesa's llvmpipe let one SIMD group's write of the
// next reduction land before another group had read this one's result.

#ifdef USE_SUBGROUP
shared float red_partial[WG_SIZE];  // one slot per subgroup is used

float wg_reduce_sum(float v)
{
    float s = subgroupAdd(v);
    uint n_sub = (uint(WG_SIZE) + gl_SubgroupSize - 1u) / gl_SubgroupSize;
    if (subgroupElect())
        red_partial[gl_SubgroupID] = s;
    memoryBarrierShared();
    barrier();
    float total = 0.0;
    for (uint i = 0u; i < n_sub; i++)
        total += red_partial[i];
    memoryBarrierShared();
    barrier();
    return total;
}

float wg_reduce_max(float v)
{
    float s = subgroupMax(v);
    uint n_sub = (uint(WG_SIZE) + gl_SubgroupSize - 1u) / gl_SubgroupSize;
    if (subgroupElect())
        red_partial[gl_SubgroupID] = s;
    memoryBarrierShared();
    barrier();
    float total = red_partial[0];
    for (uint i = 1u; i < n_sub; i++)
        total = max(total, red_partial[i]);
    memoryBarrierShared();
    barrier();
    return total;
}
#else
shared float red_partial[WG_SIZE];

float wg_reduce_sum(float v)
{
    uint t = gl_LocalInvocationIndex;
    red_partial[t] = v;
    memoryBarrierShared();
    barrier();
    for (uint s = uint(WG_SIZE) / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            red_partial[t] += red_partial[t + s];
        memoryBarrierShared();
        barrier();
    }
    float total = red_partial[0];
    memoryBarrierShared();
    barrier();
    return total;
}

float wg_reduce_max(float v)
{
    uint t = gl_LocalInvocationIndex;
    red_partial[t] = v;
    memoryBarrierShared();
    barrier();
    for (uint s = uint(WG_SIZE) / 2u; s > 0u; s >>= 1u) {
        if (t < s)
            red_partial[t] = max(red_partial[t], red_partial[t + s]);
        memoryBarrierShared();
        barrier();
    }
    float total = red_partial[0];
    memoryBarrierShared();
    barrier();
    return total;
}
#endif
