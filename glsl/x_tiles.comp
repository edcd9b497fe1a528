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
#include "common.glsl"

layout(local_size_x = WG_SIZE) in;

layout(std430, binding = 1) readonly restrict buffer X { vec4 xv[]; };
layout(std430, binding = 3) writeonly restrict buffer T { uint xt[]; };

#define NQ (4u * uint(BN))

void main()
{
    uint U = PARAM_U(0), cols = PARAM_U(1), n_tok = PARAM_U(4);
    // invocation i: tile i / (4 BN), pair p, values 4 k4 .. 4 k4 + 3
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * uint(WG_SIZE);
    uint tile = i / NQ, r = i % NQ, p = r / 8u, k4 = r % 8u;
    uint b = tile / U, u = tile % U;
    if (b * uint(BN) >= n_tok)
        return;  // past the last tile
    vec4 v[2];
    for (int e = 0; e < 2; e++) {
        uint tok = b * uint(BN) + 2u * p + uint(e);
        v[e] = vec4(0.0);
        if (tok < n_tok) {
            v[e] = xv[PARAM_U(2) + tok * U * 8u + u * 8u + k4];
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
