/* bench_logits: where a greedy continuation is a near-tie. Prefills the
 * prompt ids in one pass, then takes N greedy steps one token at a time, and
 * for every step prints the chosen id, the two largest logits and their gap
 * (absolute, and over the largest magnitude). Two builds whose greedy ids
 * part can be compared at the step where they part: a gap within the rounding
 * of the f16 sums means a near-tie, not a wrong kernel.
 *
 *   bench_logits -m MODEL.gguf --prompt-ids 1,2,3 [-n 64]
 *
 * The ids and the table go to stdout; the path the steps take is the one
 * `glesllm run --temp 0 --ignore-eos` takes (same prefill, then one-token
 * steps), but the logits are read back every step (slow).
 *
 * --batch K: then the cache is rolled back to the prompt and the same ids run
 * again as small batches of K tokens (speculative decoding's verifying
 * passes: the multi-token kernels), and each step's logits from the batch are
 * compared with the step's: the largest difference over the vocabulary, over
 * the largest magnitude, and whether the batch's argmax differs. The summary
 * gives the worst difference and how many steps had a gap within 1, 2, 4 and
 * 8 times it (the near-ties a verifying pass may not decide as the steps
 * do). After each batch its last position runs again as a step over the K/V
 * the batches wrote before it, and its difference from the steps' logits is
 * printed too (how far a step over a pass's K/V is from plain decoding); and
 * how many of the K and V values the batches wrote in the first and the last
 * layer differ from the steps', and how far the last layer's attention
 * output, FFN hidden values and residual are (gpu_model_read_act: with one
 * layer, where in it a difference enters). --ref 1: both also against the CPU reference
 * (model/ref_model.c: one token at a time in f32; slow on large models).
 * bench/RESULTS.md session 49 has what these showed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "bench_logits"
#include "bench_model.h"
#include "model/ref_model.h"
#include "quant/quant.h"
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

/* the largest magnitude of n values */
static float max_abs(const float *l, uint32_t n)
{
    float m = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        m = fmaxf(m, fabsf(l[i]));
    return m;
}

/* the largest |a - b| over n values */
static float max_diff(const float *a, const float *b, uint32_t n)
{
    float d = 0.0f;
    for (uint32_t i = 0; i < n; i++)
        d = fmaxf(d, fabsf(a[i] - b[i]));
    return d;
}

/* the last layer's attention output, FFN hidden values and residual after
 * it (gpu_model_read_act), one after the other */
static void read_acts(gpu_model *gm, bool small, uint32_t row, float *out)
{
    static const gpu_act_kind kinds[] = { GPU_ACT_ATTN, GPU_ACT_HIDDEN, GPU_ACT_X };
    uint32_t n = 0;
    for (int k = 0; k < 3; k++, out += n)
        if (gpu_model_read_act(gm, kinds[k], small, row, out, &n))
            die("reading activations");
}

int main(int argc, char **argv)
{
    const char *path = NULL, *ids_arg = NULL;
    int n = 64, batch = 0, ref = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m"))
            path = argv[i + 1];
        else if (!strcmp(argv[i], "--prompt-ids"))
            ids_arg = argv[i + 1];
        else if (!strcmp(argv[i], "-n"))
            n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch"))
            batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ref"))
            ref = atoi(argv[i + 1]);
        else
            path = NULL, i = argc;
    }
    if (!path || !ids_arg || n < 1 || n > 100000 || batch < 0 || batch > 64 || argc % 2 == 0) {
        fprintf(stderr, "usage: bench_logits -m MODEL.gguf --prompt-ids I,J,... [-n 64] "
                        "[--batch K (2..64) [--ref 1]]\n");
        return 2;
    }
    if (batch == 1 || (batch && n < 2)) {
        fprintf(stderr, "bench_logits: --batch: 2 to 64 tokens a batch, and -n 2 or more\n");
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
    if (batch)
        mo.n_small = batch;
    bench_model_open(BENCH_NAME, path, &mo, &b);
    gpu_model *gm = b.gm;
    uint32_t n_vocab = b.m.hp.n_vocab;
    /* --batch: every step's logits and id kept */
    size_t rows = batch ? (size_t)n : 1;
    float *logits = malloc(rows * n_vocab * sizeof *logits);
    float *brows = batch ? malloc((size_t)batch * n_vocab * sizeof *brows) : NULL;
    int32_t *gen = malloc((size_t)n * sizeof *gen);
    float *gap = malloc((size_t)n * sizeof *gap);
    if (!logits || (batch && !brows) || !gen || !gap)
        die("memory");
    /* --batch: the last layer's attention output, FFN hidden values and
     * residual after each step (gpu_model_read_act), a row of acts a step */
    const model_hparams *hp = &b.m.hp;
    size_t act_n = (size_t)hp->n_head * hp->head_dim + hp->n_ff + hp->n_embd;
    float *acts = batch ? malloc((size_t)n * act_n * sizeof *acts) : NULL;
    float *bact = batch ? malloc(act_n * sizeof *bact) : NULL;
    if (batch && (!acts || !bact))
        die("memory");
    for (uint32_t i = 0; i < n_ids; i++)
        if (gpu_model_set_token(gm, i, ids[i]))
            die("the prompt");
    if (gpu_model_prefill(gm, 0, n_ids, GPU_STEP_LOGITS) || gpu_model_wait(gm))
        die("the prefill");
    printf("%5s %7s %12s %12s %10s %10s\n", "step", "id", "top1", "top2", "gap", "gap/max");
    uint32_t pos = n_ids;
    for (int s = 0; s < n; s++) {
        float *row = logits + (batch ? (size_t)s * n_vocab : 0);
        if (gpu_model_read_logits(gm, row))
            die("the logits");
        int32_t id;
        float v0, v1;
        top2(row, n_vocab, &id, &v0, &v1);
        gen[s] = id;
        gap[s] = (v0 - v1) / fmaxf(max_abs(row, n_vocab), 1e-30f);
        printf("%5d %7d %12.6f %12.6f %10.3e %10.3e\n", s, id, v0, v1, v0 - v1, gap[s]);
        if (s + 1 == n)
            break;
        if (gpu_model_set_token(gm, pos, id) || gpu_model_step(gm, pos, GPU_STEP_LOGITS) ||
            gpu_model_wait(gm))
            die("a step");
        if (batch)
            read_acts(gm, false, 0, acts + (size_t)(s + 1) * act_n);
        pos++;
    }
    /* --batch: the K and V the steps wrote (layer 0 and the last), to set
     * beside the batches' */
    size_t kvn = (size_t)hp->n_head_kv * hp->head_dim, kvpos = (size_t)n - 1;
    /* layer 0's K, its V, the last layer's K, its V; kv_b: one position's */
    uint16_t *kv_step = batch ? malloc(4 * kvpos * kvn * 2) : NULL;
    uint16_t *kv_b = batch ? malloc(2 * kvn * 2) : NULL;
    uint32_t layers[2] = { 0, hp->n_layer - 1 };
    if (batch && (!kv_step || !kv_b))
        die("memory");
    for (int l = 0; batch && l < 2; l++)
        if (gpu_model_kv_io(gm, layers[l], n_ids, (uint32_t)kvpos, kv_step + (2 * l) * kvpos * kvn,
                            kv_step + (2 * l + 1) * kvpos * kvn, false))
            die("reading K/V");
    size_t kv_differ[2] = { 0 }, kv_all = 0; /* (kv_all: values a layer) */
    float kv_worst[2] = { 0 };
    /* --ref 1: the CPU reference's logits of every step (the same ids, one
     * token at a time, f32), to tell which of the steps and the batches is
     * nearer the exact products */
    float *cpu = NULL;
    if (batch && ref) {
        ref_model *rm;
        cpu = malloc((size_t)n * n_vocab * sizeof *cpu);
        if (!cpu || ref_model_create(&b.m, n_ids + (uint32_t)n + 1, &rm))
            die("the CPU reference");
        for (uint32_t i = 0; i < n_ids; i++)
            if (ref_model_forward(rm, ids[i], i, cpu))
                die("the CPU reference");
        for (int s = 1; s < n; s++)
            if (ref_model_forward(rm, gen[s - 1], n_ids + (uint32_t)s - 1,
                                  cpu + (size_t)s * n_vocab))
                die("the CPU reference");
        ref_model_destroy(rm);
        float ws = 0.0f;
        for (int s = 1; s < n; s++) {
            const float *c = cpu + (size_t)s * n_vocab;
            ws = fmaxf(ws, max_diff(c, logits + (size_t)s * n_vocab, n_vocab) /
                               fmaxf(max_abs(c, n_vocab), 1e-30f));
        }
        printf("steps against the CPU reference: worst logit difference %.3e of the largest\n", ws);
    }
    float worst_ref = 0.0f;
    if (batch) {
        /* steps 1 .. n-1 again: their tokens (the ids of steps 0 .. n-2) in
         * batches of `batch` from the end of the prompt */
        if (gpu_model_prepare_small(gm) || gpu_model_truncate(gm, n_ids))
            die("rolling back");
        printf("\nthe same ids in batches of %d against the steps\n%5s %12s %8s\n", batch, "step",
               "diff/max", "argmax");
        float worst = 0.0f, worst_step = 0.0f, act_worst[3] = { 0 };
        const uint32_t act_len[3] = { hp->n_head * hp->head_dim, hp->n_ff, hp->n_embd };
        int parted = 0;
        for (int s0 = 1; s0 < n; s0 += batch) {
            uint32_t c = (uint32_t)(n - s0 < batch ? n - s0 : batch);
            for (uint32_t j = 0; j < c; j++)
                if (gpu_model_set_token(gm, n_ids + s0 - 1 + j, gen[s0 - 1 + (int)j]))
                    die("a batch's tokens");
            if (gpu_model_prefill(gm, n_ids + s0 - 1, c, GPU_STEP_ALL_LOGITS) ||
                gpu_model_read_logits_all(gm, 0, c, brows) || gpu_model_wait(gm))
                die("a batch");
            /* the K/V the batch wrote against the steps': how many of the
             * f16 values differ, and by how much at most (relative) */
            for (uint32_t j = 0; j < c; j++) {
                uint32_t p = n_ids + (uint32_t)s0 - 1 + j;
                for (int l = 0; l < 2; l++) {
                    if (gpu_model_kv_io(gm, layers[l], p, 1, kv_b, kv_b + kvn, false))
                        die("reading K/V");
                    const uint16_t *want = kv_step + (2 * l) * kvpos * kvn;
                    for (int h = 0; h < 2; h++, want += kvpos * kvn)
                        for (size_t e = 0; e < kvn; e++) {
                            uint16_t a = want[(p - n_ids) * kvn + e], g = kv_b[h * kvn + e];
                            if (a != g) {
                                float fa = quant_half_to_float(a), fg = quant_half_to_float(g);
                                kv_differ[l]++;
                                kv_worst[l] = fmaxf(kv_worst[l],
                                                    fabsf(fa - fg) / fmaxf(fabsf(fa), 1e-30f));
                            }
                        }
                }
                kv_all += 2 * kvn;
            }
            for (uint32_t j = 0; j < c; j++) {
                read_acts(gm, true, j, bact);
                const float *sa = acts + (size_t)(s0 + (int)j) * act_n;
                for (int k = 0, o = 0; k < 3; o += act_len[k], k++) {
                    float d = max_diff(sa + o, bact + o, act_len[k]);
                    d /= fmaxf(max_abs(sa + o, act_len[k]), 1e-30f);
                    act_worst[k] = fmaxf(act_worst[k], d);
                }
            }
            for (uint32_t j = 0; j < c; j++) {
                int s = s0 + (int)j;
                const float *want = logits + (size_t)s * n_vocab;
                const float *got = brows + (size_t)j * n_vocab;
                int32_t id;
                float v0, v1;
                top2(got, n_vocab, &id, &v0, &v1);
                float d = max_diff(want, got, n_vocab) / fmaxf(max_abs(want, n_vocab), 1e-30f);
                worst = fmaxf(worst, d);
                if (cpu) {
                    const float *cr = cpu + (size_t)s * n_vocab;
                    worst_ref = fmaxf(worst_ref, max_diff(cr, got, n_vocab) /
                                                     fmaxf(max_abs(cr, n_vocab), 1e-30f));
                }
                parted += id != gen[s];
                printf("%5d %12.3e %8s\n", s, d, id == gen[s] ? "same" : "PARTS");
            }
            /* the batch's last position again as a step, over the K/V the
             * batches wrote before it */
            int s = s0 + (int)c - 1;
            if (gpu_model_step(gm, n_ids + (uint32_t)s - 1, GPU_STEP_LOGITS) ||
                gpu_model_read_logits(gm, brows))
                die("a step after a batch");
            const float *want = logits + (size_t)s * n_vocab;
            float d = max_diff(want, brows, n_vocab) / fmaxf(max_abs(want, n_vocab), 1e-30f);
            worst_step = fmaxf(worst_step, d);
            printf("%5d %12.3e (a step after the batches)\n", s, d);
        }
        int within[4] = { 0 };
        for (int s = 1; s < n; s++)
            for (int k = 0; k < 4; k++)
                within[k] += gap[s] <= worst * (float)(1 << k);
        printf("batches of %d: worst logit difference %.3e of the largest; argmax parted at %d "
               "of %d steps; steps with a gap within 1/2/4/8x that: %d/%d/%d/%d\n",
               batch, worst, parted, n - 1, within[0], within[1], within[2], within[3]);
        printf("a step after batches of %d: worst logit difference %.3e of the largest\n", batch,
               worst_step);
        if (cpu)
            printf("batches against the CPU reference: worst logit difference %.3e of the "
                   "largest\n", worst_ref);
        printf("the last layer's attention output, FFN hidden values, residual after it: worst "
               "differences %.3e, %.3e, %.3e of their largest\n", act_worst[0], act_worst[1],
               act_worst[2]);
        printf("K/V the batches wrote: layer 0 %zu of %zu f16 values differ from the steps' (at "
               "most %.3e relative), layer %u %zu (%.3e)\n", kv_differ[0], kv_all, kv_worst[0],
               layers[1], kv_differ[1], kv_worst[1]);
    }
    free(cpu);
    free(acts);
    free(bact);
    free(kv_step);
    free(kv_b);
    free(gap);
    free(gen);
    free(brows);
    free(logits);
    bench_model_close(&b);
    return 0;
}
