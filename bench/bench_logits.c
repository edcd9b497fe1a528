/* bench_logits: where a greedy continuation is a near-tie. Prefills the
 * prompt ids in one pass, then takes N greedy steps one token at a time, and
 * for every step prints the chosen id, the two largest logits and their gap
 * (absolute and relative to the largest). Two builds whose greedy ids part
 * can be compared at the step where they part: a gap within the rounding
 * of the f16 sums means a near-tie, not a wrong kernel.
 *
 *   bench_logits -m MODEL.gguf --prompt-ids 1,2,3 [-n 64]
 *
 * The ids and the table go to stdout; the path the steps take is the one
 * `glesllm run --temp 0 --ignore-eos` takes (same prefill, then one-token
 * steps), but the logits are read back every step (slow).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "bench_logits"
#include "bench_model.h"
#include "bench_util.h"

#define MAX_PROMPT 4096

/* the two largest logits (ties: the lower id first, as the GPU argmax) */
static void top2(const float *l, uint32_t n, int32_t *id0, float *v0, float *v1)
{
    uint32_t a = 0, b = n > 1 ? 1 : 0;
    if (n > 1 && l[1] > l[0])
        a = 1, b = 0;
    for (uint32_t i = 2; i < n; i++) {
        if (l[i] > l[a])
            b = a, a = i;
        else if (l[i] > l[b])
            b = i;
    }
    *id0 = (int32_t)a;
    *v0 = l[a];
    *v1 = l[b];
}

int main(int argc, char **argv)
{
    const char *path = NULL, *ids_arg = NULL;
    int n = 64;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "--prompt-ids"))
            ids_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-n"))
            n = atoi(argv[i + 1]);
        else
            path = NULL, i = argc;
    }
    if (!path || !ids_arg || n < 1 || argc % 2 == 0) {
        fprintf(stderr, "usage: bench_logits -m MODEL.gguf --prompt-ids I,J,... [-n 64]\n");
        return 2;
    }
    static int32_t ids[MAX_PROMPT];
    uint32_t n_ids = 0;
    for (char *p = (char *)ids_arg; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || n_ids == MAX_PROMPT) {
            fprintf(stderr, "bench_logits: --prompt-ids: at most %d non-negative ids, comma-separated\n",
                    MAX_PROMPT);
            return 2;
        }
        ids[n_ids++] = (int32_t)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            fprintf(stderr, "bench_logits: --prompt-ids: '%s' is not a number\n", end);
            return 2;
        }
    }
    bench_model b;
    gpu_model_options mo = { n_ids + (uint32_t)n + 1 };
    bench_model_open(BENCH_NAME, path, &mo, &b);
    gpu_model *gm = b.gm;
    uint32_t n_vocab = b.m.hp.n_vocab;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits)
        return 1;
    for (uint32_t i = 0; i < n_ids; i++)
        if (gpu_model_set_token(gm, i, ids[i]))
            die("the prompt");
    if (gpu_model_prefill(gm, 0, n_ids, GPU_STEP_LOGITS) || gpu_model_wait(gm))
        die("the prefill");
    printf("%5s %7s %12s %12s %10s %10s\n", "step", "id", "top1", "top2", "gap", "gap/top1");
    uint32_t pos = n_ids;
    for (int s = 0; s < n; s++) {
        if (gpu_model_read_logits(gm, logits))
            die("the logits");
        int32_t id;
        float v0, v1;
        top2(logits, n_vocab, &id, &v0, &v1);
        printf("%5d %7d %12.6f %12.6f %10.3e %10.3e\n", s, id, v0, v1, v0 - v1,
               (v0 - v1) / fabsf(v0));
        if (s + 1 == n)
            break;
        if (gpu_model_set_token(gm, pos, id) || gpu_model_step(gm, pos, GPU_STEP_LOGITS) ||
            gpu_model_wait(gm))
            die("a step");
        pos++;
    }
    free(logits);
    bench_model_close(&b);
    return 0;
}
