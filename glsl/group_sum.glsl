// The sum over runs of n invocations (n a power of two dividing WG_SIZE;
// with USE_SUBGROUP a multiple of the subgroup size) of each invocation's v,
// in every invocation of the run: with USE_SUBGROUP each subgroup's
// subgroupAdd, then those in order from 0 (one subgroup a run: its sum as it
// is); else a shared-memory tree, the upper half of each step onto the lower.
// The includer declares `shared float red[WG_SIZE]`. Every invocation calls it
// (it holds barriers). The one-token matvecs add a slot's lanes and the
// split norm's partial sums so (matvec.comp slot_sum, NORM_SCALE), and the
// several-token ones (XG) and x_prep.comp add theirs in the same order, so
// that a verifying pass's sums are a decode step's to the bit.
float group_sum(float v, uint n)
{
    uint t = gl_LocalInvocationIndex;
#ifdef USE_SUBGROUP
    float s = subgroupAdd(v);
    if (n == gl_SubgroupSize)
        return s;
    if (subgroupElect())
        red[gl_SubgroupID] = s;
    barrier();
    uint per = n / gl_SubgroupSize, first = (t / n) * per;
    float total = 0.0;
    for (uint i = 0u; i < per; i++)
        total += red[first + i];
    barrier();
    return total;
#else
    uint lane = t % n;
    red[t] = v;
    barrier();
    for (uint s = n / 2u; s > 0u; s >>= 1u) {
        if (lane < s)
            red[t] += red[t + s];
        barrier();
    }
    float total = red[t - lane];
    barrier();
    return total;
#endif
}
