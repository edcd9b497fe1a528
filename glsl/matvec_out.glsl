// The epilogue of row `row` (counted from this dispatch's first) of token t:
// one row (y = W x, or y += W x: Y_ADD, common.glsl), or with GLU/QKV the
// pair (row, row + 1) as (a, b).
#if defined(GLU) || defined(QKV)
void put_pair(uint row, uint t, float a, float b)
{
    uint g = PARAM_U(1) + row;
#ifdef GLU
    y[g / 2u + t * PARAM_U(6)] = GLU_ACT(a) * b;
#else
#ifdef QKV_BIAS
    a += x_at(PARAM_U(7) + g);
    b += x_at(PARAM_U(7) + g + 1u);
#endif
    // token t's RoPE row and K/V slot: t after the dispatch's first, or from
    // its entry (seq << 24 | position) in a batch over sequences (param 21
    // the positions a sequence, entries from param 22)
    uint prow = t, kslot = t;
    if (PARAM_U(21) != 0u) {
        uint e = PARAM_U(22u + t);
        prow = e & 0xffffffu;
        kslot = (e >> 24) * PARAM_U(21) + prow;
    }
    if (g < uint(Q_DIM + KV_DIM)) {
        uint cs = PARAM_U(5) + prow * uint(HEAD_DIM) + (g % uint(HEAD_DIM));  // pair j at 2j: cos, sin
        float c = x_at(cs), s = x_at(cs + 1u);
        float a2 = a * c - b * s;
        b = a * s + b * c;
        a = a2;
    }
    uint kv = kslot * uint(KV_DIM / 2);
    if (g < uint(Q_DIM)) {
#if NT > 1
        uint i = PARAM_U(6) + t * ((uint(Q_DIM) + 31u) / 32u * 32u) + g;  // even
        if ((i & 2u) == 0u)
            xv[i >> 2].xy = vec2(a, b);
        else
            xv[i >> 2].zw = vec2(a, b);
#else
        yu[g] = floatBitsToUint(a);
        yu[g + 1u] = floatBitsToUint(b);
#endif
    } else if (g < uint(Q_DIM + KV_DIM)) {
        yu[PARAM_U(14) + kv + (g - uint(Q_DIM)) / 2u] = packHalf2x16(vec2(a, b));
    } else {
        yu[PARAM_U(15) + kv + (g - uint(Q_DIM + KV_DIM)) / 2u] = packHalf2x16(vec2(a, b));
    }
#endif
}
#else
void put_one(uint row, uint t, float v)
{
    uint o = PARAM_U(1) + row + t * PARAM_U(6);
    if (Y_ADD)
        y[o] += v;
    else
        y[o] = v;
}
#endif
