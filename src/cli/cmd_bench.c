/* glesllm bench: prompt processing (pp) and generation (tg) speed, in the
 * manner of llama-bench: every model x every -p and -n value, untimed
 * warm-up runs (WARM_UP_S), then -r repetitions; mean and standard
 * deviation of tokens/s in a markdown table, JSON or CSV on stdout.
 * Progress goes to stderr. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_LIST 16
#define LIST_MOST (1L << 20) /* the most tokens in -p and -n */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm bench [-m MODEL.gguf]... [-p N[,N...]] [-n N[,N...]] [-d N[,N...]]\n"
            "                     [-r N] [-b N] [-o md|json|csv]\n"
            "\n"
            "Measures prompt processing (ppN: N prompt tokens as one batched prefill) and\n"
            "generation (tgN: N greedy tokens one step at a time, each read back; as in\n"
            "glesllm run --temp 0, each step is submitted before the one before it is\n"
            "waited for) in tokens/s, like llama-bench. Without -m it measures the\n"
            "built-in demo model.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE       a model; repeat, or separate with commas, for several\n"
            "  -p, --n-prompt N,...   prompt lengths (default 512; 0: none)\n"
            "  -n, --n-gen N,...      generation lengths (default 128; 0: none)\n"
            "  -d, --n-depth N,...    run each test after a prompt of N tokens already in the\n"
            "                         context, not timed (default 0): ppN @ dD, tgN @ dD\n"
            "  -np, --parallel N,...  also each generation test with N sequences at once, a\n"
            "                         token of each a pass (glesllm_decode_batch), tokens/s of\n"
            "                         all together: tgN @ npN (default 1: none)\n"
            "  -r, --repetitions N    runs of each test after a second of untimed warm-up runs\n"
            "                         (default 5)\n"
            "  -b, --batch-size N     prefill batch (default 512)\n"
            "  -o, --output FORMAT    md (default), json or csv\n");
}

typedef enum out_format { OUT_MD, OUT_JSON, OUT_CSV } out_format;

typedef struct bench_args {
    const char *models[MAX_LIST];
    uint32_t n_models;
    long pp[MAX_LIST], tg[MAX_LIST], depth[MAX_LIST], par[MAX_LIST];
    uint32_t n_pp, n_tg, n_depth, n_par;
    long reps, n_batch;
    out_format fmt;
} bench_args;

/* "a,b,c" appended to list; false on a bad value */
static bool parse_list(const char *s, long *list, uint32_t *n, bool *cleared)
{
    if (!*cleared) {
        *n = 0;
        *cleared = true;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n == MAX_LIST || !cli_parse_long(tok, 0, LIST_MOST, &list[*n]))
            return false;
        (*n)++;
    }
    return true;
}

/* the options that take a value */
static const char *const value_options[] = {
    "-m", "--model", "-p", "--n-prompt", "-n", "--n-gen", "-d", "--n-depth", "-np", "--parallel",
    "-r", "--repetitions", "-b",
    "--batch-size", "-o", "--output", NULL
};

static int parse_args(int argc, char **argv, bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->pp[0] = 512;
    a->tg[0] = 128;
    a->n_pp = a->n_tg = a->n_depth = a->n_par = 1;
    a->par[0] = 1;
    a->reps = 5;
    a->n_batch = 512;
    bool pp_set = false, tg_set = false, depth_set = false, par_set = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            usage(stdout);
            return -1;
        }
        if (cli_option_value("bench", argc, argv, i, value_options))
            return 2;
        char *v = argv[++i];
        bool ok = true;
        const char *want = ""; /* what a bad value should have been */
        char buf[96];
        if (strcmp(o, "-m") == 0 || strcmp(o, "--model") == 0) {
            /* (counted first: the paths are cut out of v in place) */
            uint32_t n = 1;
            for (const char *c = v; *c; c++)
                n += *c == ',';
            snprintf(buf, sizeof buf, " (at most %d models in all)", MAX_LIST);
            want = buf;
            ok = a->n_models + n <= MAX_LIST;
            if (ok)
                for (char *save = NULL, *tok = strtok_r(v, ",", &save); tok;
                     tok = strtok_r(NULL, ",", &save))
                    a->models[a->n_models++] = tok;
        } else if (strcmp(o, "-p") == 0 || strcmp(o, "--n-prompt") == 0 || strcmp(o, "-n") == 0 ||
                   strcmp(o, "--n-gen") == 0) {
            bool pp = strcmp(o, "-p") == 0 || strcmp(o, "--n-prompt") == 0;
            ok = parse_list(v, pp ? a->pp : a->tg, pp ? &a->n_pp : &a->n_tg,
                            pp ? &pp_set : &tg_set);
            snprintf(buf, sizeof buf, " (at most %d comma-separated whole numbers from 0 to %ld)",
                     MAX_LIST, LIST_MOST);
            want = buf;
        } else if (strcmp(o, "-d") == 0 || strcmp(o, "--n-depth") == 0) {
            ok = parse_list(v, a->depth, &a->n_depth, &depth_set);
            snprintf(buf, sizeof buf, " (at most %d comma-separated whole numbers from 0 to %ld)",
                     MAX_LIST, LIST_MOST);
            want = buf;
        } else if (strcmp(o, "-np") == 0 || strcmp(o, "--parallel") == 0) {
            ok = parse_list(v, a->par, &a->n_par, &par_set);
            for (uint32_t j = 0; ok && j < a->n_par; j++)
                ok = a->par[j] >= 1 && a->par[j] <= 256;
            snprintf(buf, sizeof buf, " (at most %d comma-separated whole numbers from 1 to 256)",
                     MAX_LIST);
            want = buf;
        } else if (strcmp(o, "-r") == 0 || strcmp(o, "--repetitions") == 0) {
            ok = cli_parse_long(v, 1, 1000, &a->reps);
            want = cli_parse_want();
        } else if (strcmp(o, "-b") == 0 || strcmp(o, "--batch-size") == 0) {
            ok = cli_parse_long(v, 1, 1L << 16, &a->n_batch);
            want = cli_parse_want();
        } else if (strcmp(o, "-o") == 0 || strcmp(o, "--output") == 0) {
            want = " (md, json or csv)";
            if (strcmp(v, "md") == 0)
                a->fmt = OUT_MD;
            else if (strcmp(v, "json") == 0)
                a->fmt = OUT_JSON;
            else if (strcmp(v, "csv") == 0)
                a->fmt = OUT_CSV;
            else
                ok = false;
        } else {
            fprintf(stderr, "glesllm bench: unknown option '%s'; see 'glesllm bench --help'\n", o);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "glesllm bench: invalid value '%s' for %s%s\n", v, o, want);
            return 2;
        }
    }
    return 0;
}

/* What a row of the table says about its model. */
typedef struct model_desc {
    char name[128], quant[64], gpu[128];
    uint64_t bytes, params;
} model_desc;

static void describe(const char *path, glesllm_model *m, glesllm_backend *b, model_desc *d)
{
    memset(d, 0, sizeof *d);
    const char *name = path ? path : "demo";
    const char *base = strrchr(name, '/');
    snprintf(d->name, sizeof d->name, "%s", base ? base + 1 : name);
    snprintf(d->gpu, sizeof d->gpu, "%s", glesllm_backend_renderer(b));
    d->bytes = glesllm_model_size(m);
    d->params = glesllm_model_n_params(m);
    glesllm_model_formats(m, d->quant, sizeof d->quant);
}

typedef struct result {
    char test[48];
    uint32_t n_prompt, n_gen, n_depth, n_par;
    double avg, sd;
    double samples[1000];
    uint32_t n;
} result;

/* The samples' mean (sum / n) and standard deviation into r. */
static void sample_stats(result *r, double sum)
{
    r->avg = sum / r->n;
    double v = 0.0;
    for (uint32_t i = 0; i < r->n; i++)
        v += (r->samples[i] - r->avg) * (r->samples[i] - r->avg);
    r->sd = r->n > 1 ? sqrt(v / (r->n - 1)) : 0.0;
}

/* n random ids into ids */
static void random_ids(int32_t *ids, uint32_t n, uint32_t nv, uint64_t *rng)
{
    for (uint32_t i = 0; i < n; i++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((*rng >> 33) % nv);
    }
}

/* One run of a test after the depth's ids[0..depth), which the context
 * keeps from run to run (run_test puts them there): seconds. */
static glesllm_status run_once(glesllm_context *c, uint32_t depth, uint32_t n_prompt,
                               uint32_t n_gen, uint64_t *rng, int32_t *ids, double *secs)
{
    uint32_t nv = glesllm_model_n_vocab(glesllm_context_model(c));
    random_ids(ids + depth, n_prompt ? n_prompt : 1, nv, rng);
    glesllm_status st = glesllm_truncate(c, depth);
    if (st)
        return st;
    if (n_prompt) {
        double t0 = cli_now();
        st = glesllm_decode(c, ids + depth, n_prompt, depth, 0);
        *secs = cli_now() - t0;
        return st;
    }
    /* generation after one more token, each token the argmax of the step
     * before, the steps pipelined as `run` does: the seconds from the first
     * token on, n_gen steps (the depth is in the cache: only the one token
     * runs before them) */
    glesllm_generate_params gp = { (int32_t)n_gen + 1, 1, 0 };
    glesllm_generate_result r;
    st = glesllm_generate_tokens(c, ids, depth + 1, &gp, NULL, NULL, &r);
    *secs = r.gen_s;
    return st;
}

/* Untimed runs before a test's samples: one, then more until this many
 * seconds have passed since the first began. A GPU left idle (while kernels
 * compile, while a file loads) runs at its idle clock until some hundred
 * milliseconds of work raise it (an H200: 345 MHz to 1,980 in about 0.3 s),
 * and one short run is not that (bench/RESULTS.md "Current figures"). */
#define WARM_UP_S 1.0

static glesllm_status run_test(glesllm_context *c, uint32_t depth, uint32_t n_prompt,
                               uint32_t n_gen, uint32_t reps, int32_t *ids, result *r)
{
    memset(r, 0, sizeof *r);
    r->n_prompt = n_prompt;
    r->n_gen = n_gen;
    r->n_depth = depth;
    int k = snprintf(r->test, sizeof r->test, n_prompt ? "pp%u" : "tg%u",
                     n_prompt ? n_prompt : n_gen);
    if (depth)
        snprintf(r->test + k, sizeof r->test - (size_t)k, " @ d%u", depth);
    uint64_t rng = 12345 + n_prompt * 31 + n_gen;
    /* the depth: once a test, not timed */
    glesllm_status st = glesllm_truncate(c, 0);
    if (!st && depth) {
        random_ids(ids, depth, glesllm_model_n_vocab(glesllm_context_model(c)), &rng);
        st = glesllm_decode(c, ids, depth, 0, 0);
    }
    double s, sum = 0.0, t_warm = cli_now();
    do /* (warm-up) */
        st = st ? st : run_once(c, depth, n_prompt, n_gen, &rng, ids, &s);
    while (!st && cli_now() - t_warm < WARM_UP_S && !cli_interrupted);
    for (uint32_t i = 0; st == GLESLLM_OK && i < reps && !cli_interrupted; i++) {
        if ((st = run_once(c, depth, n_prompt, n_gen, &rng, ids, &s)))
            break;
        r->samples[r->n] = (n_prompt + n_gen) / s;
        sum += r->samples[r->n++];
    }
    if (st || !r->n)
        return st;
    sample_stats(r, sum);
    return GLESLLM_OK;
}

/* Generation in n_par sequences of one cache at once, a token of each a
 * pass: the seconds of n_gen passes after a one-token prompt each. */
static glesllm_status run_parallel_once(glesllm_context **seq, uint32_t n_par, uint32_t n_gen,
                                        uint64_t *rng, double *secs)
{
    uint32_t nv = glesllm_model_n_vocab(glesllm_context_model(seq[0]));
    uint32_t most = glesllm_decode_batch_max(seq[0]);
    int32_t tok[256];
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = 0; !st && i < n_par; i++) {
        random_ids(&tok[i], 1, nv, rng);
        if (!(st = glesllm_truncate(seq[i], 0)) && !(st = glesllm_decode(seq[i], &tok[i], 1, 0, 0)))
            st = glesllm_next_token(seq[i], &tok[i]);
    }
    double t0 = cli_now();
    for (uint32_t step = 0; !st && step < n_gen && !cli_interrupted; step++)
        for (uint32_t i0 = 0; !st && i0 < n_par; i0 += most ? most : 1) {
            uint32_t cnt = most ? (n_par - i0 < most ? n_par - i0 : most) : 1;
            st = most ? glesllm_decode_batch(seq + i0, cnt, tok + i0)
                      : glesllm_decode(seq[i0], &tok[i0], 1, glesllm_context_n_past(seq[i0]), 0);
            for (uint32_t i = i0; !st && i < i0 + cnt; i++)
                st = glesllm_next_token(seq[i], &tok[i]);
        }
    *secs = cli_now() - t0;
    return st;
}

static glesllm_status run_parallel(glesllm_model *m, uint32_t n_par, uint32_t n_gen, uint32_t reps,
                                   result *r)
{
    memset(r, 0, sizeof *r);
    r->n_gen = n_gen;
    r->n_par = n_par;
    snprintf(r->test, sizeof r->test, "tg%u @ np%u", n_gen, n_par);
    glesllm_context *seq[256];
    glesllm_context_params cp = { n_gen + 2, 0, 0 };
    glesllm_status st = glesllm_context_create_seqs(m, &cp, n_par, seq);
    if (st)
        return st;
    uint64_t rng = 777 + n_par;
    double s, sum = 0.0, t_warm = cli_now();
    do /* (warm-up) */
        st = run_parallel_once(seq, n_par, n_gen, &rng, &s);
    while (!st && cli_now() - t_warm < WARM_UP_S && !cli_interrupted);
    for (uint32_t i = 0; !st && i < reps && !cli_interrupted; i++) {
        if ((st = run_parallel_once(seq, n_par, n_gen, &rng, &s)))
            break;
        r->samples[r->n] = (double)n_par * n_gen / s;
        sum += r->samples[r->n++];
    }
    for (uint32_t i = 0; i < n_par; i++)
        glesllm_context_free(seq[i]);
    if (st || !r->n)
        return st;
    sample_stats(r, sum);
    return GLESLLM_OK;
}

/* Samples more than 10% apart (slowest to fastest, over their mean) are
 * said on stderr: the mean of such a set says little (bench/RESULTS.md
 * "Current figures": whole runs of small-model prefill at a fraction of
 * their speed). */
static void warn_spread(const result *r)
{
    if (r->n < 2 || !(r->avg > 0.0))
        return;
    double lo = r->samples[0], hi = r->samples[0];
    for (uint32_t i = 1; i < r->n; i++) {
        lo = r->samples[i] < lo ? r->samples[i] : lo;
        hi = r->samples[i] > hi ? r->samples[i] : hi;
    }
    if ((hi - lo) / r->avg > 0.10)
        fprintf(stderr, "glesllm: %s: the %u samples disagree by %.0f%% of their mean (%.2f to "
                "%.2f tokens/s): something else used the GPU, or its clocks changed; run "
                "again, or with more -r\n", r->test, r->n, 100.0 * (hi - lo) / r->avg, lo, hi);
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_row(out_format fmt, const model_desc *d, uint32_t n_batch, const result *r,
                      bool first)
{
    double ms = r->avg > 0 ? (r->n_prompt + (double)r->n_gen * (r->n_par ? r->n_par : 1)) /
                                 r->avg * 1e3
                           : 0.0;
    if (fmt == OUT_MD) {
        char size[32], params[32], ts[48];
        snprintf(size, sizeof size, "%.2f %s", d->bytes >= (1ull << 30) ? d->bytes / 1073741824.0
                                                                      : d->bytes / 1048576.0,
                 d->bytes >= (1ull << 30) ? "GiB" : "MiB");
        snprintf(params, sizeof params, "%.2f %s",
                 d->params >= 1000000000ull ? d->params / 1e9 : d->params / 1e6,
                 d->params >= 1000000000ull ? "B" : "M");
        snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg, r->sd);
        printf("| %-30s | %10s | %10s | %-12s | %-24.24s | %14s | %20s |\n", d->name, size, params,
               d->quant, d->gpu, r->test, ts);
    } else if (fmt == OUT_CSV) {
        printf("\"%s\",%llu,%llu,\"%s\",\"%s\",%u,%u,%u,%u,\"%s\",%.3f,%.3f,%.3f\n", d->name,
               (unsigned long long)d->bytes, (unsigned long long)d->params, d->quant, d->gpu,
               n_batch, r->n_prompt, r->n_gen, r->n_depth, r->test, ms, r->avg, r->sd);
    } else {
        printf("%s  {\"model_filename\": ", first ? "" : ",\n");
        json_string(d->name);
        printf(", \"model_size\": %llu, \"model_n_params\": %llu, \"quant\": ",
               (unsigned long long)d->bytes, (unsigned long long)d->params);
        json_string(d->quant);
        printf(", \"gpu_info\": ");
        json_string(d->gpu);
        printf(", \"n_batch\": %u, \"n_prompt\": %u, \"n_gen\": %u, \"n_depth\": %u, "
               "\"n_parallel\": %u, \"test\": \"%s\", \"avg_ms\": %.3f, \"avg_ts\": %.3f, "
               "\"stddev_ts\": %.3f, \"samples_ts\": [",
               n_batch, r->n_prompt, r->n_gen, r->n_depth, r->n_par ? r->n_par : 1, r->test, ms,
               r->avg, r->sd);
        for (uint32_t i = 0; i < r->n; i++)
            printf("%s%.3f", i ? ", " : "", r->samples[i]);
        printf("]}");
    }
    fflush(stdout);
}

/* A test's row, and its samples' spread where it is wide. */
static void emit_row(out_format fmt, const model_desc *d, uint32_t n_batch, const result *r,
                     bool *first)
{
    print_row(fmt, d, n_batch, r, *first);
    *first = false;
    warn_spread(r);
}

int cmd_bench(int argc, char **argv)
{
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    uint32_t n_tests = 0;
    long need_ctx = 1, max_depth = 0;
    for (uint32_t i = 0; i < a.n_depth; i++)
        max_depth = a.depth[i] > max_depth ? a.depth[i] : max_depth;
    for (uint32_t i = 0; i < a.n_pp; i++)
        if (a.pp[i]) {
            n_tests++;
            need_ctx = max_depth + a.pp[i] > need_ctx ? max_depth + a.pp[i] : need_ctx;
        }
    for (uint32_t i = 0; i < a.n_tg; i++)
        if (a.tg[i]) {
            n_tests++;
            /* (and its first token) */
            need_ctx = max_depth + a.tg[i] + 1 > need_ctx ? max_depth + a.tg[i] + 1 : need_ctx;
        }
    if (!n_tests) {
        fprintf(stderr, "glesllm bench: nothing to measure: every -p and -n value is 0\n");
        return 2;
    }
    if (!a.n_models)
        a.models[a.n_models++] = NULL; /* the demo */
    for (uint32_t i = 0; i < a.n_models; i++) { /* every file readable before the table starts */
        FILE *f = a.models[i] ? fopen(a.models[i], "rb") : NULL;
        if (a.models[i] && !f) {
            fprintf(stderr, "glesllm bench: cannot open '%s': %s\n", a.models[i], strerror(errno));
            return 1;
        }
        if (f)
            fclose(f);
    }
    glesllm_backend *b = NULL;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)need_ctx);
    if (!ids)
        return cli_fail("bench", GLESLLM_ERR_NO_MEMORY);
    if ((rc = cli_open_backend(&b))) {
        free(ids);
        return rc;
    }
    static result r;
    bool first = true;
    if (a.fmt == OUT_MD) {
        printf("| %-30s | %10s | %10s | %-12s | %-24s | %14s | %20s |\n", "model", "size", "params",
               "quant", "gpu", "test", "t/s");
        printf("| ------------------------------ | ---------: | ---------: | ------------ | "
               "------------------------ | -------------: | -------------------: |\n");
    } else if (a.fmt == OUT_CSV) {
        printf("model_filename,model_size,model_n_params,quant,gpu_info,n_batch,n_prompt,n_gen,"
               "n_depth,test,avg_ms,avg_ts,stddev_ts\n");
    } else {
        printf("[\n");
    }
    fflush(stdout);
    for (uint32_t mi = 0; mi < a.n_models && !rc && !cli_interrupted; mi++) {
        glesllm_model *m = NULL;
        glesllm_context *c = NULL;
        const char *name = a.models[mi] ? a.models[mi] : "demo";
        double t0 = cli_now();
        if ((rc = cli_open_model(b, a.models[mi], &m)) ||
            (rc = cli_make_context(m, name, (uint32_t)need_ctx, (uint32_t)a.n_batch, 0, &c))) {
            glesllm_model_close(m);
            break;
        }
        model_desc d;
        describe(a.models[mi], m, b, &d);
        glesllm_context_info ci;
        glesllm_context_get_info(c, &ci);
        fprintf(stderr, "glesllm: %s loaded in %.2f s\n", name, cli_now() - t0);
        cli_catch_signals(c);
        uint32_t n_kinds = a.n_pp + a.n_tg;
        for (uint32_t k = 0; k < n_kinds * a.n_depth && !rc && !cli_interrupted; k++) {
            uint32_t kind = k % n_kinds, depth = (uint32_t)a.depth[k / n_kinds];
            uint32_t np = kind < a.n_pp ? (uint32_t)a.pp[kind] : 0;
            uint32_t ng = kind < a.n_pp ? 0 : (uint32_t)a.tg[kind - a.n_pp];
            if (!np && !ng)
                continue;
            glesllm_status st = run_test(c, depth, np, ng, (uint32_t)a.reps, ids, &r);
            if (st == GLESLLM_ERR_CANCELLED && cli_interrupted)
                break; /* (a long prompt stopped between its passes: exit 130 below) */
            if (st) {
                rc = cli_fail(name, st);
                break;
            }
            if (r.n) {
                emit_row(a.fmt, &d, ci.n_batch, &r, &first);
                /* (decode reads the weights once a token: their bandwidth) */
                uint64_t sb = glesllm_context_step_bytes(c);
                if (ng && sb)
                    fprintf(stderr, "glesllm: %s: a token reads %.1f MiB of weights (of %.1f MiB "
                            "on the GPU): %.1f GB/s at %.2f tokens/s\n", r.test,
                            sb / 1048576.0, ci.weight_bytes / 1048576.0, sb * r.avg / 1e9, r.avg);
            }
        }
        /* generation in several sequences at once */
        for (uint32_t pi = 0; pi < a.n_par && !rc && !cli_interrupted; pi++)
            for (uint32_t k = 0; a.par[pi] > 1 && k < a.n_tg && !rc && !cli_interrupted; k++) {
                if (!a.tg[k])
                    continue;
                glesllm_status st = run_parallel(m, (uint32_t)a.par[pi], (uint32_t)a.tg[k],
                                                 (uint32_t)a.reps, &r);
                if (st) {
                    rc = cli_fail(name, st);
                    break;
                }
                if (r.n)
                    emit_row(a.fmt, &d, ci.n_batch, &r, &first);
            }
        cli_release_signals();
        glesllm_context_free(c);
        glesllm_model_close(m);
    }
    if (a.fmt == OUT_JSON)
        printf("%s]\n", first ? "" : "\n");
    glesllm_backend_close(b);
    free(ids);
    if (!rc && cli_interrupted)
        rc = 130;
    return rc;
}
