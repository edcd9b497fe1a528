/* ops/: reading a weight into the GPU's L2 cache beside the kernel before it
 * (glsl/prefetch.comp), so that the next kernel finds it there. It pays only
 * where the cache is large (discrete GPUs) and the matrix large enough to
 * outweigh a dispatch (bench/RESULTS.md "Prefetching the FFN down matrix"). */
#ifndef GLESLLM_OPS_PREFETCH_H
#define GLESLLM_OPS_PREFETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "ops/weight.h"

#define PREFETCH_MIN (8ull << 20) /* matrices of fewer bytes are not worth it */

typedef struct prefetch_kernel {
    gpu_program prog;
    gpu_buffer sink; /* declared read, never written: no barrier before the next kernel */
    uint32_t wg;
} prefetch_kernel;

/* Whether to prefetch a matrix of `bytes` and why:
 * set > 0 on, < 0 off, 0 by the GPU (dedicated memory: a discrete GPU with a
 * large cache) and the size. */
void prefetch_choose(gpu_context *ctx, int set, uint64_t bytes, bool *out, const char **why);

glesllm_status prefetch_build(gpu_context *ctx, prefetch_kernel *out);
void prefetch_destroy(prefetch_kernel *k);
/* The first bytes of a down matrix to read beside a gate/up matvec of
 * gate_type: `mib` MiB where set (GLESLLM_PREFETCH_MIB), else as many as that
 * matvec leaves memory time for, measured on an H200: Q4_0's kernel, the
 * fastest, leaves the least (bench/RESULTS.md "Prefetching the FFN down
 * matrix"). */
uint64_t prefetch_bytes(uint32_t gate_type, uint32_t mib);
/* The first bytes of the next layer's Q/K/V matrix (qkv_bytes in all) to
 * read beside the down matvec, which finds its first bytes in L2 and leaves
 * memory idle: `mib` MiB where set (>= 0, GLESLLM_PREFETCH_QKV_MIB; 0 none),
 * else 8 MiB where gate/up is Q4_0 (its 20 MiB of down leave room in L2) and
 * the matrix holds 8 MiB or more; none otherwise (bench/RESULTS.md
 * "Prefetching the FFN down matrix"). */
uint64_t prefetch_qkv_bytes(uint32_t gate_type, uint64_t qkv_bytes, int mib);
/* Dispatches reading w's first `bytes` (at most), without a barrier */
glesllm_status prefetch_record(gpu_queue *q, const prefetch_kernel *k, const gpu_weight *w,
                               uint64_t bytes);

#endif
