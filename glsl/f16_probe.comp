// Whether the driver keeps f16 subnormals through the arithmetic of
// matvec.comp's F16_SUBN levels (gpu_context_f16_subnormals): an unpacked
// pair of subnormal halves, their product with x's scale (normal results)
// and a multiply-add whose result stays subnormal. F16: in f16 types
// (GL_NV_gpu_shader5), else in f32 from unpackHalf2x16 (F16_DOT_F32's way).
// Binding 0: uint v[6]; v[0] the packed halves, v[1] the scale's float
// bits; writes the four results' float bits to v[2..5].
#ifdef F16
#extension GL_NV_gpu_shader5 : require
#define P16 f16vec2
#define UNPACK2 unpackFloat2x16
#else
#define P16 vec2
#define UNPACK2 unpackHalf2x16
#endif
layout(local_size_x = 1) in;
layout(std430, binding = 0) restrict buffer V { uint v[]; };

void main()
{
    P16 a = UNPACK2(v[0]);
    P16 p = a * P16(uintBitsToFloat(v[1]));
    P16 s = a * P16(0.5) + a;
    vec2 pf = vec2(p), sf = vec2(s);
    v[2] = floatBitsToUint(pf.x);
    v[3] = floatBitsToUint(pf.y);
    v[4] = floatBitsToUint(sf.x);
    v[5] = floatBitsToUint(sf.y);
}
