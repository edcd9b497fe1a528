/* glesllm run: load a model (or the built-in demo) and generate, streaming
 * the text to stdout and the timings to stderr. Flags follow llama.cpp's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* tokens drafted a round by default (--draft-max) */
#define DRAFT_MAX_DEFAULT 8

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm run [-m MODEL.gguf] [-p TEXT | -f FILE | --prompt-ids 1,2,3] [-n N]\n"
            "                   [options]\n"
            "\n"
            "Generates text from a prompt on the GPU, streaming it to stdout; load time and\n"
            "tokens/s go to stderr. Without -m it runs a small built-in demo model (random\n"
            "weights: the text means nothing) to show the engine works on this machine.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE        the GGUF model (llama, qwen2/3, their MoE, olmoe, phi3,\n"
            "                          smollm3)\n"
            "  -p, --prompt TEXT       the prompt (BOS added when the model's vocabulary asks)\n"
            "  -f, --file FILE         the prompt from a file\n"
            "  --special               special-token text in the prompt (<s>, <|im_end|>, ...)\n"
            "                          becomes that token; else it is plain text\n"
            "  --prompt-ids I,J,...    the prompt as token ids, BOS included as given\n"
            "                          (default without a prompt: the model's BOS token)\n"
            "  -n, --n-predict N       tokens to generate (default 128; -1: until the end of\n"
            "                          the context or an end-of-generation token)\n"
            "  -c, --ctx-size N        context size (default: the model's, at most 4096)\n"
            "  -b, --batch-size N      prompt tokens per batched pass (default 512)\n"
            "  --temp T                temperature (default 0.8; 0: greedy)\n"
            "  --top-k N               keep the N most likely tokens (default 40; 0: off)\n"
            "  --top-p P               keep the smallest set of probability P (default 0.95)\n"
            "  --min-p P               drop tokens below P times the best (default 0.05)\n"
            "  --repeat-penalty F      penalise the last tokens' logits (default 1.0: off)\n"
            "  --repeat-last-n N       tokens the penalty looks at (default 64; -1: context)\n"
            "  -s, --seed N            sampling seed (default -1: a random one, printed)\n"
            "  --ignore-eos            keep generating past end-of-generation tokens\n"
            "  --print-ids             print the generated ids, space-separated, not text\n"
            "  --prompt-cache FILE     keep the prompt's KV cache in FILE: a later run whose\n"
            "                          prompt starts with the same tokens skips their prefill\n"
            "  --draft FILE            speculative decoding: a small model with the same\n"
            "                          vocabulary drafts tokens that the model checks in one\n"
            "                          pass (greedy: the same text as without it)\n"
            "  --draft-max N           most tokens drafted a round (default %d)\n"
            "  --draft-min N           fewest tokens drafted a round (default 0: greedy,\n"
            "                          plain steps where drafting does not pay)\n",
            DRAFT_MAX_DEFAULT);
}

typedef struct run_args {
    const char *model, *prompt, *prompt_file, *prompt_ids, *prompt_cache, *draft;
    long n_predict, n_ctx, n_batch, draft_max, draft_min;
    glesllm_sampling sp;
    long long seed;
    bool ignore_eos, print_ids, special;
} run_args;

/* the options that take a value */
static const char *const value_options[] = {
    "-m", "--model", "-p", "--prompt", "-f", "--file", "--prompt-ids", "--prompt-cache",
    "--draft", "-md", "--model-draft", "--draft-max", "--draft-min", "-n", "--n-predict", "-c",
    "--ctx-size", "-b", "--batch-size", "--temp", "--top-k", "--top-p", "--min-p",
    "--repeat-penalty", "--repeat-last-n", "-s", "--seed", NULL
};

/* 0 parsed, else an exit code */
static int parse_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof *a);
    a->n_predict = 128;
    a->draft_max = DRAFT_MAX_DEFAULT;
    a->sp = glesllm_sampling_default();
    a->seed = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            usage(stdout);
            return -1;
        }
        if (strcmp(o, "--ignore-eos") == 0) {
            a->ignore_eos = true;
            continue;
        }
        if (strcmp(o, "--print-ids") == 0) {
            a->print_ids = true;
            continue;
        }
        if (strcmp(o, "--special") == 0) {
            a->special = true;
            continue;
        }
        if (cli_option_value("run", argc, argv, i, value_options))
            return 2;
        const char *v = argv[++i];
        long l;
        bool ok = true;
        const char *want = NULL; /* what a bad value should have been (NULL: cli_parse_want's) */
        if (strcmp(o, "-m") == 0 || strcmp(o, "--model") == 0)
            a->model = v;
        else if (strcmp(o, "-p") == 0 || strcmp(o, "--prompt") == 0)
            a->prompt = v;
        else if (strcmp(o, "-f") == 0 || strcmp(o, "--file") == 0)
            a->prompt_file = v;
        else if (strcmp(o, "--prompt-ids") == 0)
            a->prompt_ids = v;
        else if (strcmp(o, "--prompt-cache") == 0)
            a->prompt_cache = v;
        else if (strcmp(o, "--draft") == 0 || strcmp(o, "-md") == 0 ||
                 strcmp(o, "--model-draft") == 0)
            a->draft = v;
        else if (strcmp(o, "--draft-max") == 0)
            ok = cli_parse_long(v, 1, GLESLLM_DRAFT_MAX, &a->draft_max);
        else if (strcmp(o, "--draft-min") == 0)
            ok = cli_parse_long(v, 0, GLESLLM_DRAFT_MAX, &a->draft_min);
        else if (strcmp(o, "-n") == 0 || strcmp(o, "--n-predict") == 0)
            ok = cli_parse_long(v, -1, 1L << 30, &a->n_predict);
        else if (strcmp(o, "-c") == 0 || strcmp(o, "--ctx-size") == 0)
            ok = cli_parse_long(v, 0, 1L << 24, &a->n_ctx);
        else if (strcmp(o, "-b") == 0 || strcmp(o, "--batch-size") == 0)
            ok = cli_parse_long(v, 1, 1L << 16, &a->n_batch);
        else if (strcmp(o, "--temp") == 0)
            ok = cli_parse_float(v, 0.0f, 1e9f, &a->sp.temp); /* (0: greedy) */
        else if (strcmp(o, "--top-k") == 0)
            ok = cli_parse_long(v, -1, 1L << 30, &l) && ((a->sp.top_k = (int32_t)l), true);
        else if (strcmp(o, "--top-p") == 0)
            ok = cli_parse_float(v, 0.0f, 1.0f, &a->sp.top_p);
        else if (strcmp(o, "--min-p") == 0)
            ok = cli_parse_float(v, 0.0f, 1.0f, &a->sp.min_p);
        else if (strcmp(o, "--repeat-penalty") == 0)
            ok = cli_parse_float(v, 1e-6f, 1e6f, &a->sp.repeat_penalty);
        else if (strcmp(o, "--repeat-last-n") == 0)
            ok = cli_parse_long(v, -1, 1L << 24, &l) && ((a->sp.repeat_last_n = (int32_t)l), true);
        else if (strcmp(o, "-s") == 0 || strcmp(o, "--seed") == 0) {
            char *end;
            errno = 0;
            a->seed = strtoll(v, &end, 10);
            ok = !errno && end != v && !*end && a->seed >= -1;
            want = " (-1 for a random one, or a whole number from 0)";
        } else {
            fprintf(stderr, "glesllm run: unknown option '%s'; see 'glesllm run --help'\n", o);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "glesllm run: invalid value '%s' for %s%s\n", v, o,
                    want ? want : cli_parse_want());
            return 2;
        }
    }
    if ((a->prompt != NULL) + (a->prompt_file != NULL) + (a->prompt_ids != NULL) > 1) {
        fprintf(stderr, "glesllm run: give the prompt one way: -p, -f or --prompt-ids\n");
        return 2;
    }
    if (a->draft_min > a->draft_max) {
        fprintf(stderr, "glesllm run: --draft-min %ld is more than --draft-max %ld\n",
                a->draft_min, a->draft_max);
        return 2;
    }
    if (!a->draft && (a->draft_min || a->draft_max != DRAFT_MAX_DEFAULT))
        fprintf(stderr, "glesllm run: warning: --draft-max/--draft-min do nothing without "
                        "--draft\n");
    return 0;
}

/* "1,2,3" -> ids; 0 on success, else an exit code */
static int parse_ids(const char *s, int32_t **ids, uint32_t *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    *ids = malloc(cap * sizeof **ids);
    if (!*ids)
        return 1;
    *n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr,
                    "glesllm run: --prompt-ids '%s': expected token ids separated by commas\n", s);
            free(*ids);
            *ids = NULL;
            return 2;
        }
        (*ids)[(*n)++] = (int32_t)v;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

typedef struct printer {
    bool ids;
    uint32_t count;
} printer;

static int print_piece(void *ud, int32_t token, const char *text, size_t len)
{
    printer *p = ud;
    if (p->ids) {
        if (token >= 0)
            printf("%s%d", p->count++ ? " " : "", token);
    } else {
        fwrite(text, 1, len, stdout);
    }
    fflush(stdout);
    return 0;
}

static uint64_t random_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()) & 0xffffffffu;
}

static const char *stop_text(glesllm_stop s)
{
    switch (s) {
    case GLESLLM_STOP_EOG: return "end-of-generation token";
    case GLESLLM_STOP_CONTEXT: return "context full";
    case GLESLLM_STOP_CANCELLED: return "interrupted";
    case GLESLLM_STOP_CALLBACK: return "stopped";
    default: return "token limit";
    }
}

/* --prompt-cache: the prompt's longest prefix the file holds goes into the
 * cache (a missing file, or one that cannot be used, is written after this
 * run). */
static int load_prompt_cache(const char *path, glesllm_context *c, const int32_t *ids, uint32_t n,
                             uint32_t *n_cached)
{
    *n_cached = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "glesllm: --prompt-cache %s is a folder; give the path of a file (in it, "
                        "say)\n", path);
        return 2;
    }
    if (access(path, F_OK) != 0) {
        /* checked now, not after the whole generation: the folder it goes in */
        char dir[4096];
        const char *slash = strrchr(path, '/');
        size_t dl = slash ? (size_t)(slash - path) + (slash == path) : 1;
        if (dl >= sizeof dir)
            dl = sizeof dir - 1;
        memcpy(dir, slash ? path : ".", dl);
        dir[dl] = '\0';
        if (access(dir, W_OK | X_OK) != 0) {
            fprintf(stderr, "glesllm: --prompt-cache %s: cannot write a file in '%s': %s; "
                            "give a path in a folder that exists and is writable\n", path, dir,
                    strerror(errno));
            return 1;
        }
        fprintf(stderr, "glesllm: prompt cache %s: not there yet; it is written after the "
                        "prompt\n", path);
        return 0;
    }
    glesllm_status st = glesllm_state_load_file(c, path, ids, n, n_cached);
    if (st == GLESLLM_ERR_STATE_MISMATCH) {
        /* a cache of ours that cannot be used: said, and written anew, so
         * that the next run has one (a file that is no cache is left alone) */
        fprintf(stderr, "glesllm: warning: --prompt-cache: %s; running without it, and it is "
                        "written anew after the prompt\n", glesllm_last_error());
        *n_cached = 0;
        return 0;
    }
    if (st)
        return cli_fail("--prompt-cache", st);
    fprintf(stderr, "glesllm: prompt cache %s: %u of the prompt's %u tokens reused\n", path,
            *n_cached, n);
    return 0;
}

/* The prompt's ids: the text tokenized, --prompt-ids, or the model's BOS.
 * 0, or an exit code after saying why. */
static int prompt_ids(const run_args *a, const char *file_text, size_t file_len, glesllm_model *m,
                      int32_t **ids, uint32_t *n_ids)
{
    uint32_t n_vocab = glesllm_model_n_vocab(m);
    if (a->prompt || a->prompt_file) {
        const char *text = a->prompt ? a->prompt : file_text;
        size_t len = a->prompt ? strlen(a->prompt) : file_len, n = 0;
        unsigned flags = GLESLLM_TOKENIZE_ADD_SPECIAL |
                         (a->special ? GLESLLM_TOKENIZE_PARSE_SPECIAL : 0);
        glesllm_status st = cli_tokenize(m, text, len, flags, ids, &n);
        if (st)
            return cli_fail("tokenizing the prompt", st);
        if (!n) {
            fprintf(stderr, "glesllm run: the prompt is empty (no tokens, and the model's "
                            "vocabulary adds no BOS)\n");
            return 2;
        }
        *n_ids = (uint32_t)n;
        return 0;
    }
    if (a->prompt_ids) {
        int rc = parse_ids(a->prompt_ids, ids, n_ids);
        for (uint32_t i = 0; !rc && i < *n_ids; i++)
            if ((uint32_t)(*ids)[i] >= n_vocab) {
                fprintf(stderr, "glesllm run: --prompt-ids: token %d is outside the model's "
                                "vocabulary of %u\n", (*ids)[i], n_vocab);
                rc = 2;
            }
        return rc;
    }
    if (!(*ids = malloc(sizeof **ids)))
        return 1;
    int32_t bos = glesllm_token_bos(m);
    (*ids)[0] = bos >= 0 ? bos : 0;
    *n_ids = 1;
    return 0;
}

/* Opens --draft and makes its context beside the target's. */
static int open_draft(const run_args *a, glesllm_backend *b, glesllm_context *target,
                      glesllm_model **dm, glesllm_context **dc)
{
    int rc = cli_open_model(b, a->draft, dm);
    if (!rc)
        rc = cli_make_context(*dm, a->draft, glesllm_context_n_ctx(target), (uint32_t)a->n_batch,
                              0, dc);
    if (rc)
        return rc;
    glesllm_status st = glesllm_set_draft(target, *dc, (uint32_t)a->draft_max,
                                          (uint32_t)a->draft_min);
    if (st) {
        fprintf(stderr, "glesllm run: --draft %s: %s\n", a->draft, glesllm_last_error());
        return 2;
    }
    return 0;
}

static void print_stats(const run_args *a, const glesllm_generate_result *g, uint32_t n_ctx,
                        uint32_t n_save, uint32_t n_cached, uint32_t dispatches)
{
    uint32_t n_run = g->n_prompt - g->n_reused;
    fprintf(stderr, "glesllm: prompt: %u tokens (%u from the prompt cache) in %.3f s (%.1f "
                    "tokens/s)\n", g->n_prompt, g->n_reused, g->prompt_s,
            g->prompt_s > 0 ? n_run / g->prompt_s : 0.0);
    if (a->prompt_cache && n_save > n_cached)
        fprintf(stderr, "glesllm: prompt cache %s: wrote %u tokens\n", a->prompt_cache, n_save);
    fprintf(stderr, "glesllm: generation: %u tokens in %.3f s (%.1f tokens/s), %u dispatches "
                    "per %s; stopped: %s\n",
            g->n_gen, g->gen_s, g->gen_s > 0 ? (g->n_gen > 1 ? g->n_gen - 1 : 0) / g->gen_s : 0.0,
            dispatches, a->draft ? "verification" : "token", stop_text(g->stop));
    if (a->draft)
        fprintf(stderr, "glesllm: speculative: %u rounds, drafted %u, accepted %u (%.1f%%), "
                        "%.2f tokens a round, %u tokens by plain steps, effective %.1f "
                        "tokens/s (drafting %.3f s, verifying and plain steps %.3f s)\n",
                g->n_rounds, g->n_drafted, g->n_accepted,
                g->n_drafted ? 100.0 * g->n_accepted / g->n_drafted : 0.0,
                g->n_rounds ? 1.0 + (double)g->n_accepted / g->n_rounds : 0.0, g->n_plain,
                g->gen_s > 0 ? g->n_gen / g->gen_s : 0.0, g->draft_s, g->verify_s);
    if (g->stop == GLESLLM_STOP_CONTEXT)
        fprintf(stderr, "glesllm: the context of %u tokens is full; use a larger -c to generate "
                        "more\n", n_ctx);
}

int cmd_run(int argc, char **argv)
{
    run_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *file_text = NULL;
    size_t file_len = 0;
    if (a.prompt_file && (rc = cli_read_text(a.prompt_file, &file_text, &file_len)))
        return rc;
    a.sp.seed = a.seed < 0 ? random_seed() : (uint64_t)a.seed;
    glesllm_backend *b = NULL;
    glesllm_model *m = NULL, *dm = NULL;
    glesllm_context *c = NULL, *dc = NULL;
    int32_t *ids = NULL;
    uint32_t n_ids = 0;
    glesllm_status st;
    double t0 = cli_now();
    if ((rc = cli_open_backend(&b)) || (rc = cli_open_model(b, a.model, &m)))
        goto out;
    bool text_prompt = a.prompt || a.prompt_file;
    size_t none;
    if (!text_prompt && !a.print_ids &&
        (st = glesllm_tokenize(m, "", 0, 0, NULL, 0, &none)) != GLESLLM_OK) {
        /* (ids print without a vocabulary; text does not) */
        rc = cli_fail("the model's vocabulary (--print-ids prints ids without it)", st);
        goto out;
    }
    if ((rc = prompt_ids(&a, file_text, file_len, m, &ids, &n_ids)))
        goto out;
    const char *name = a.model ? a.model : "demo";
    if ((rc = cli_make_context(m, name, (uint32_t)a.n_ctx, (uint32_t)a.n_batch,
                               a.draft ? (uint32_t)a.draft_max : 0, &c)))
        goto out;
    uint32_t n_ctx = glesllm_context_n_ctx(c);
    if (n_ids > n_ctx) {
        fprintf(stderr, "glesllm run: the prompt has %u tokens, more than the context of %u; "
                        "use a larger -c\n", n_ids, n_ctx);
        rc = 2;
        goto out;
    }
    if (a.draft && (rc = open_draft(&a, b, c, &dm, &dc)))
        goto out;
    rc = 1;
    glesllm_context_info ci;
    glesllm_context_get_info(c, &ci);
    char memory[64];
    if (ci.state_bytes)
        snprintf(memory, sizeof memory, "recurrent state %.1f MiB", ci.state_bytes / 1048576.0);
    else
        snprintf(memory, sizeof memory, "KV cache %.1f MiB in %s buffers",
                 ci.kv_bytes / 1048576.0, ci.kv_placement);
    fprintf(stderr, "glesllm: %s: %s, %u layers, %.0f MiB on %s; context %u, %s; loaded in %.2f s\n",
            name, glesllm_model_arch(m), glesllm_model_n_layer(m), ci.weight_bytes / 1048576.0,
            glesllm_backend_renderer(b), n_ctx, memory, cli_now() - t0);
    if (a.sp.temp > 0.0f)
        fprintf(stderr, "glesllm: sampling: temp %.2f, top-k %d, top-p %.2f, min-p %.2f, repeat "
                        "penalty %.2f over %d, seed %llu\n",
                a.sp.temp, a.sp.top_k, a.sp.top_p, a.sp.min_p, a.sp.repeat_penalty,
                a.sp.repeat_last_n, (unsigned long long)a.sp.seed);
    if ((st = glesllm_set_sampling(c, &a.sp))) {
        cli_fail("sampling", st);
        goto out;
    }
    uint32_t n_cached = 0;
    if (a.prompt_cache && (rc = load_prompt_cache(a.prompt_cache, c, ids, n_ids, &n_cached)))
        goto out;
    rc = 1;
    printer pr = { a.print_ids, 0 };
    glesllm_generate_params gp = { (int32_t)a.n_predict, a.ignore_eos, 0 };
    glesllm_generate_result g;
    cli_catch_signals(c);
    st = glesllm_generate_tokens(c, ids, n_ids, &gp, print_piece, &pr, &g);
    cli_release_signals();
    /* the prompt's positions are in the cache whatever happened after it */
    uint32_t past = glesllm_context_n_past(c), n_save = n_ids < past ? n_ids : past;
    glesllm_status sst = GLESLLM_OK;
    if (a.prompt_cache && g.n_prompt && n_save > n_cached &&
        !(sst = glesllm_truncate(c, n_save)))
        sst = glesllm_state_save_file(c, a.prompt_cache);
    printf("\n");
    fflush(stdout);
    if (st) {
        cli_fail("generating", st);
        goto out;
    }
    if (sst) {
        cli_fail("writing the prompt cache", sst);
        goto out;
    }
    glesllm_context_get_info(c, &ci);
    print_stats(&a, &g, n_ctx, n_save, n_cached, ci.dispatches);
    rc = g.stop == GLESLLM_STOP_CANCELLED && cli_interrupted ? 130 : 0;
out:
    glesllm_context_free(dc);
    glesllm_context_free(c);
    glesllm_model_close(dm);
    glesllm_model_close(m);
    glesllm_backend_close(b);
    free(ids);
    free(file_text);
    return rc;
}
