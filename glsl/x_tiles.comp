// The tokens' x of a matmul with f16 tiles (matmul.comp F16_TILES), made
// once for the whole product instead of by each of its row blocks: f16
// pairs in the layout the work groups copy into shared memory as they are.
// Bindings: 1 x (vec4[]), 3 the tiles (uint[], written).
// Params: 0 units a row (U; token t's x at param 2 + t * U * 8 vec4, as
//         matmul.comp reads it), 1 columns (values past them read as 0),
//         2 vec4 offset of token 0's x, 4 N tokens.
// Defines: BN tokens a tile (a work group's), WG_SIZE.
// Tile (b, u), tokens b BN .. b BN + BN - 1 of unit u (values 32 u ..
// 32 u + 31), is NQ = 4 BN uvec4 at uvec4 (b U + u) NQ. Its word w = k BN /
// 2 + p holds value k of tokens 2 p and 2 p + 1 as packHalf2x16 (matmul.comp
// copies the tile as it is: a thread's pairs of a value are consecutive
// words). Tokens past N are zeros.
// EXPERT (ops/moe.c): the tiles of the entries grouped by expert
// (moe.comp GROUP), tile b of expert e's run at its tile slot: param 5 float
// offset of the counts (count of e at + e, its first entry at + param 7 +
// e, its first tile at + 2 param 7 + e, the count of tiles at + 3 param 7),
// param 6 of the list (then each tile's expert at + param 8), param 7
// experts, param 8 entries, param 9 entries a token's x serves (x row of
// entry i: i / param 9); param 4 unused. Entries past the expert's count
// are zeros.
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 1) readonly restrict buffer X { vec4 xv[]; };
float x_at(uint i) { return xv[i >> 2][i & 3u]; }
layout(std430, binding = 3) writeonly restrict buffer T { uint xt[]; };

#define NQ (4u * uint(BN))

void main()
{
    uint U = PARAM_U(0), cols = PARAM_U(1), n_tok = PARAM_U(4);
    // invocation i: tile i / (4 BN), pair p, values 4 k4 .. 4 k4 + 3
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * uint(WG_SIZE);
    uint tile = i / NQ, r = i % NQ, p = r / 8u, k4 = r % 8u;
    uint b = tile / U, u = tile % U;
#ifdef EXPERT
    uint g = PARAM_U(5), ne = PARAM_U(7);
    if (b >= uint(x_at(g + 3u * ne)))
        return;  // past the last tile
    uint ex = uint(x_at(PARAM_U(6) + PARAM_U(8) + b));
    uint t0 = (b - uint(x_at(g + 2u * ne + ex))) * uint(BN);  // the tile's first of the run
    uint run = uint(x_at(g + ne + ex));
    n_tok = uint(x_at(g + ex));
#else
    if (b * uint(BN) >= n_tok)
        return;  // past the last tile
    uint t0 = b * uint(BN);
#endif
    vec4 v[2];
    for (int e = 0; e < 2; e++) {
        uint tok = t0 + 2u * p + uint(e);
        v[e] = vec4(0.0);
        if (tok < n_tok) {
#ifdef EXPERT
            uint row = uint(x_at(PARAM_U(6) + run + tok)) / PARAM_U(9);
#else
            uint row = tok;
#endif
            v[e] = xv[PARAM_U(2) + row * U * 8u + u * 8u + k4];
            uvec4 idx = u * 32u + k4 * 4u + uvec4(0u, 1u, 2u, 3u);
            v[e] = mix(vec4(0.0), v[e], lessThan(idx, uvec4(cols)));
        }
    }
    uint base = tile * NQ * 4u;
    for (int c = 0; c < 4; c++) {
        uint w = (k4 * 4u + uint(c)) * (uint(BN) / 2u) + p;
        xt[base + w] = packHalf2x16(vec2(v[0][c], v[1][c]));
    }
}
