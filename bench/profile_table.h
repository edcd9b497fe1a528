/* The GPU profiler's per-dispatch table, printed by the benchmarks that take
 * --profile (bench_decode, bench_verify). */
#ifndef GLESLLM_BENCH_PROFILE_TABLE_H
#define GLESLLM_BENCH_PROFILE_TABLE_H

#include "gpu/gpu.h"

/* The queue's profile (GPU_PROFILE_DISPATCHES), largest first, per `steps`
 * (tokens or passes: "what" names the run, "per" one step), to stdout. */
void print_profile_table(gpu_queue *q, double steps, const char *what, const char *per);

#endif
