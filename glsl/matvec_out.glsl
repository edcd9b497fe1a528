// The epilogue of row `row` (counted from this dispatch's first) of token t:
// one row (y = W x, or y += W x: Y_ADD, common.glsl), or with GLU/QKV the
// pair (row, row + 1) as (a, b).
#if defined(GLU) || defined(QKV)
#define ACT_AT(i) x_at(i)  // (common.glsl KV_ROW: the page table in x's buffer)
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
    // token t's RoPE row and K/V cache row, by param 21: 0 t after the
    // dispatch's first (params 5, 14 and 15 token 0's); 1 from its entry
    // (seq << 24 | position) at param 22 + t, a batch over sequences (params
    // 5, 14 and 15 the RoPE table's and the cache's start); 2 its row t after
    // param 5's, its cache row that of entry param 22 + t (a run of one
    // sequence's positions; 14 and 15 the cache's start)
    uint prow = t;
    if (PARAM_U(21) == 1u)
        prow = PARAM_U(22u + t) & 0xffffffu;
    if (g < uint(Q_DIM + KV_DIM)) {
        uint cs = PARAM_U(5) + prow * uint(HEAD_DIM) + (g % uint(HEAD_DIM));  // pair j at 2j: cos, sin
        float c = x_at(cs), s = x_at(cs + 1u);
        float a2 = a * c - b * s;
        b = a * s + b * c;
        a = a2;
    }
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
    } else {
        // (the page table read for K's and V's rows only)
        uint kslot = t;
#ifdef KV_PAGE
        if (PARAM_U(21) != 0u) {
            uint e = PARAM_U(21) == 1u ? PARAM_U(22u + t) : PARAM_U(22) + t;
            kslot = KV_ROW(e >> 24, e & 0xffffffu);
        }
#endif
        uint kv = kslot * uint(KV_DIM / 2);
        if (g < uint(Q_DIM + KV_DIM))
            yu[PARAM_U(14) + kv + (g - uint(Q_DIM)) / 2u] = packHalf2x16(vec2(a, b));
        else
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
