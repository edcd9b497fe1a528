#if defined(F16_DOT_F32)
// F16_DOT's code with f32 pairs, for a driver without f16 types (the
// default there, ops/matvec.c f16_dot_choice: its several-token kernels sum as
// its one-token kernels do, to the bit)
#define F16_DOT 1
#define f16vec2 vec2
#define unpackFloat2x16 unpackHalf2x16
#define packFloat2x16 packHalf2x16
#elif defined(F16_LEVELS) || defined(F16_DOT)
#extension GL_NV_gpu_shader5 : require
#endif
#ifdef USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
// Q6_K and Q3_K without NVIDIA's fast-math rewrites: with them, the driver
// compiled their one-token and several-token kernels' f32 sums (from the
// same source) into other roundings, 1.8-1.9e-7 of the largest output apart,
// so a verifying pass could part from a decode step at a near-tie; without,
// the sums are the same bits, and decode is level. The other formats'
// kernels agree to the bit either way and keep them: off for every format,
// decode was slower (bench/RESULTS.md "Verifying drafted tokens"). (Other drivers ignore the
// pragma.)
#if defined(WTYPE_Q6_K) || defined(WTYPE_Q3_K)
#pragma optionNV(fastmath off)
#endif
#include "common.glsl"
#include "weights.glsl"
// F16_SUBN (with F16_DOT; ops/matvec.c f16_subn_choice): the levels come as f16
// subnormals, level x 2^-24 (weights.glsl NIB_PAIR_D, BYTE_PAIR_H), so x's
// pairs are scaled to at most SUBN_X = 2^15 instead of 1 (below f16's
// 65504; a product is at most 255 x 2^-9, a half unit's sum of 16 at most 8)
// and their scale m becomes m x SUBN_M = m x 2^24 / SUBN_X.
#ifdef F16_SUBN
#define SUBN_X 32768.0
#define SUBN_M 512.0
#else
#define SUBN_X 1.0
#define SUBN_M 1.0
#endif

layout(local_size_x = WG_SIZE) in;
