// Shared by every kernel: precision, and the per-dispatch parameters.
// u_params is set by gpu_queue_dispatch (src/gpu/gpu_queue.c) from
// gpu_dispatch.params; floats travel as their bit pattern (gpu_f2u).
precision highp float;
precision highp int;

uniform uint u_params[20];

#define PARAM_U(i) u_params[i]
#define PARAM_I(i) int(u_params[i])
#define PARAM_F(i) uintBitsToFloat(u_params[i])
