// Shared by every kernel: precision, and the per-dispatch parameters.
// u_params is set by gpu_queue_dispatch (src/gpu/gpu_queue.c) from
// gpu_dispatch.params; floats travel as their bit pattern (gpu_f2u).
precision highp float;
precision highp int;

uniform uint u_params[32];

#define PARAM_U(i) u_params[i]
#define PARAM_I(i) int(u_params[i])
#define PARAM_F(i) uintBitsToFloat(u_params[i])
// The kernels whose result goes to y (matvec.comp, matvec_multi.comp,
// matmul.comp) write y = W x, or y += W x (the residual add) where param 20
// is not 0: a uniform's branch, so that the two are one program.
#define Y_ADD (PARAM_U(20) != 0u)

// x's factors for Q2_K's and Q3_K's levels read in place (weights.glsl
// W_TWO_IN_PLACE: level x 2^bit), pair k of a unit's low and high half:
// matvec.comp x_half's W_XL and W_XH, and x_prep.comp's under XP_TWO.
#define TWO_XL(k) (((k) & 1) != 0 ? 0.0625 : 1.0)
#define TWO_XH(k) (((k) & 1) != 0 ? 0.015625 : 0.25)

// The GLU epilogue's activation of the gate: SiLU, or (GLU_GELU) GELU's tanh
// form (Gemma).
#ifdef GLU_GELU
#define GLU_ACT(a) (0.5 * (a) * (1.0 + tanh(0.7978845608 * ((a) + 0.044715 * (a) * (a) * (a)))))
#else
#define GLU_ACT(a) ((a) / (1.0 + exp(-(a))))
#endif

// The KV cache is a pool of pages of KV_PAGE positions (a power of two). The
// page table lies at the start of the activations, KV_PPS entries a
// sequence (uint bits; entry i: the page of its positions i KV_PAGE ..), so
// that sequences take pages as they grow and share the pages of a common
// start. KV_ROW is the cache row of position pos of sequence seq; the
// kernel defines ACT_AT(i), its read of float i of the activations.
#define KV_ROW(seq, pos)                                                            \
    (floatBitsToUint(ACT_AT((seq) * uint(KV_PPS) + (pos) / uint(KV_PAGE))) * uint(KV_PAGE) + \
     (pos) % uint(KV_PAGE))
