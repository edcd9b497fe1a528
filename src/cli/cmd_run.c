/* glesllm run: load a model (or the built-in demo) and generate, streaming
 * the text to stdout and the timings to stderr. Flags follow llama.cpp's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/util.h"
#include "engine/generate.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "model/demo_model.h"
#include "model/gpu_model.h"
#include "model/model.h"
#include "model/session.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/vocab.h"

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
            "  -m, --model FILE        the GGUF model (llama and qwen2 architectures)\n"
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
            GEN_DRAFT_MAX_DEFAULT);
}

typedef struct run_args {
    const char *model, *prompt, *prompt_file, *prompt_ids, *prompt_cache, *draft;
    long n_predict, n_ctx, n_batch, draft_max, draft_min;
    sampler_params sp;
    long long seed;
    bool ignore_eos, print_ids, special;
} run_args;

/* 0 parsed, else an exit code */
static int parse_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof *a);
    a->n_predict = 128;
    a->draft_max = GEN_DRAFT_MAX_DEFAULT;
    a->sp = sampler_defaults();
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
        if (i + 1 >= argc || o[0] != '-') {
            fprintf(stderr, "glesllm run: %s '%s'; see 'glesllm run --help'\n",
                    o[0] == '-' ? "missing value after" : "unexpected argument", o);
            return 2;
        }
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
            ok = cli_parse_long(v, 1, GEN_DRAFT_MAX_LIMIT, &a->draft_max);
        else if (strcmp(o, "--draft-min") == 0)
            ok = cli_parse_long(v, 0, GEN_DRAFT_MAX_LIMIT, &a->draft_min);
        else if (strcmp(o, "-n") == 0 || strcmp(o, "--n-predict") == 0)
            ok = cli_parse_long(v, -1, 1L << 30, &a->n_predict);
        else if (strcmp(o, "-c") == 0 || strcmp(o, "--ctx-size") == 0)
            ok = cli_parse_long(v, 0, 1L << 24, &a->n_ctx);
        else if (strcmp(o, "-b") == 0 || strcmp(o, "--batch-size") == 0)
            ok = cli_parse_long(v, 1, 1L << 16, &a->n_batch);
        else if (strcmp(o, "--temp") == 0)
            ok = cli_parse_float(v, -1e9f, 1e9f, &a->sp.temp);
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
    if (!a->draft && (a->draft_min || a->draft_max != GEN_DRAFT_MAX_DEFAULT))
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
    const vocab *v;
    bool ids;
    utf8_stream u;
    uint32_t count;
} printer;

static bool print_token(void *ud, int32_t id)
{
    printer *p = ud;
    if (p->ids) {
        printf("%s%d", p->count++ ? " " : "", id);
    } else {
        char piece[256], out[3 * sizeof piece + 3], *big = NULL;
        const char *src = piece;
        size_t n = vocab_piece(p->v, id, false, piece, sizeof piece);
        if (n > sizeof piece) { /* a long piece (a user-defined token): in parts */
            if ((big = malloc(n))) {
                vocab_piece(p->v, id, false, big, n);
                src = big;
            } else {
                n = sizeof piece;
            }
        }
        for (size_t at = 0; at < n; at += sizeof piece) {
            size_t part = n - at < sizeof piece ? n - at : sizeof piece;
            fwrite(out, 1, utf8_stream_push(&p->u, src + at, part, out), stdout);
        }
        free(big);
    }
    fflush(stdout);
    return true;
}

static uint64_t random_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid()) & 0xffffffffu;
}

static const char *stop_text(gen_stop s)
{
    switch (s) {
    case GEN_STOP_EOS: return "end-of-generation token";
    case GEN_STOP_CONTEXT: return "context full";
    case GEN_STOP_REQUESTED: return "interrupted";
    default: return "token limit";
    }
}

/* Opens --draft and checks that it shares the target's vocabulary. */
static int open_draft(const run_args *a, const model *m, const vocab *voc, cli_model *dm)
{
    int rc = cli_model_open(a->draft, voc ? CLI_NEED_VOCAB : 0, dm);
    if (rc)
        return rc;
    int64_t d = voc ? vocab_difference(voc, dm->voc) : -1;
    if (dm->m.hp.n_vocab != m->hp.n_vocab || d != -1) {
        if (d >= 0 && dm->m.hp.n_vocab == m->hp.n_vocab)
            fprintf(stderr, "glesllm run: --draft %s: its vocabulary differs from the model's at "
                            "token %lld; a draft must share the model's vocabulary\n",
                    a->draft, (long long)d);
        else
            fprintf(stderr, "glesllm run: --draft %s: its vocabulary (%u tokens) is not the "
                            "model's (%u tokens%s); a draft must share the model's vocabulary\n",
                    a->draft, dm->m.hp.n_vocab, m->hp.n_vocab,
                    d == -2 ? ", other BOS/EOS or tokenizer" : "");
        return 2;
    }
    return 0;
}

/* --prompt-cache: the prompt's longest prefix the file holds goes into the
 * cache (a missing file is written after this run). */
static int load_prompt_cache(const char *path, gpu_model *gm, const int32_t *ids, uint32_t n,
                             uint32_t *n_cached)
{
    *n_cached = 0;
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
    glesllm_status st = session_load(gm, path, ids, n, n_cached);
    if (st)
        return cli_fail("--prompt-cache", st);
    fprintf(stderr, "glesllm: prompt cache %s: %u of the prompt's %u tokens reused\n", path,
            *n_cached, n);
    return 0;
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
    cli_model cm, dm;
    memset(&dm, 0, sizeof dm);
    gpu_context *ctx = NULL;
    vocab *voc = NULL;
    int32_t *ids = NULL;
    uint32_t n_ids = 0;
    glesllm_status st;
    if ((rc = cli_model_open(a.model, 0, &cm)))
        goto out;
    rc = 1;
    const model *m = &cm.m;
    bool text_prompt = a.prompt || a.prompt_file;
    if ((st = vocab_load(cm.f, &voc))) {
        if (!a.print_ids || text_prompt) {
            cli_fail(text_prompt ? "the model's vocabulary"
                                 : "the model's vocabulary (--print-ids prints ids without it)", st);
            goto out;
        }
        voc = NULL;
    } else if (*vocab_warnings(voc)) {
        fprintf(stderr, "glesllm: warning: %s\n", vocab_warnings(voc));
    }
    if (text_prompt) {
        tok_ids t = { 0 };
        const char *text = a.prompt ? a.prompt : file_text;
        size_t len = a.prompt ? strlen(a.prompt) : file_len;
        st = tok_encode(voc, text, len, TOK_ADD_SPECIAL | (a.special ? TOK_PARSE_SPECIAL : 0), &t);
        if (st) {
            tok_ids_free(&t);
            cli_fail("tokenizing the prompt", st);
            goto out;
        }
        if (!t.n) {
            tok_ids_free(&t);
            fprintf(stderr, "glesllm run: the prompt is empty (no tokens, and the model's "
                            "vocabulary adds no BOS)\n");
            rc = 2;
            goto out;
        }
        ids = t.ids;
        n_ids = (uint32_t)t.n;
    } else if (a.prompt_ids) {
        if ((rc = parse_ids(a.prompt_ids, &ids, &n_ids)))
            goto out;
        rc = 1;
        for (uint32_t i = 0; i < n_ids; i++)
            if ((uint32_t)ids[i] >= m->hp.n_vocab) {
                fprintf(stderr, "glesllm run: --prompt-ids: token %d is outside the model's "
                                "vocabulary of %u\n", ids[i], m->hp.n_vocab);
                rc = 2;
                goto out;
            }
    } else {
        ids = malloc(sizeof *ids);
        if (!ids)
            goto out;
        ids[0] = m->hp.bos >= 0 ? m->hp.bos : 0;
        n_ids = 1;
    }
    uint32_t n_ctx = (uint32_t)a.n_ctx;
    if (!n_ctx)
        n_ctx = m->hp.n_ctx_train && m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (n_ids > n_ctx) {
        fprintf(stderr, "glesllm run: the prompt has %u tokens, more than the context of %u; "
                        "use a larger -c\n", n_ids, n_ctx);
        rc = 2;
        goto out;
    }
    if (a.draft && (rc = open_draft(&a, m, voc, &dm)))
        goto out;
    rc = 1;
    int32_t n_small = a.draft && a.draft_max + 1 > GPU_SMALL_BATCH ? (int32_t)a.draft_max + 1 : 0;
    if (cli_open_gpu(&ctx) || cli_model_upload(&cm, ctx, n_ctx, (uint32_t)a.n_batch, n_small) ||
        (a.draft && cli_model_upload(&dm, ctx, n_ctx, (uint32_t)a.n_batch, 0)))
        goto out;
    gpu_model *gm = cm.gm;
    double load_s = cm.load_s;
    fprintf(stderr, "glesllm: %s: %s, %u layers, %.0f MiB on %s; context %u, KV cache in %s "
                    "buffers; loaded in %.2f s\n",
            a.model ? a.model : "demo", m->hp.arch_name, m->hp.n_layer,
            gpu_model_weight_bytes(gm) / 1048576.0, gpu_context_string(ctx, 0x1F01 /* GL_RENDERER */),
            n_ctx, kv_placement_name(gpu_model_kv(gm)), load_s);
    if (a.sp.temp > 0.0f)
        fprintf(stderr, "glesllm: sampling: temp %.2f, top-k %d, top-p %.2f, min-p %.2f, repeat "
                        "penalty %.2f over %d, seed %llu\n",
                a.sp.temp, a.sp.top_k, a.sp.top_p, a.sp.min_p, a.sp.repeat_penalty,
                a.sp.repeat_last_n, (unsigned long long)a.sp.seed);
    uint32_t n_cached = 0;
    if (a.prompt_cache && (rc = load_prompt_cache(a.prompt_cache, gm, ids, n_ids, &n_cached)))
        goto out;
    rc = 1;
    printer pr = { voc, a.print_ids, { { 0 }, 0 }, 0 };
    cli_catch_signals();
    gen_options go2 = { ids, n_ids, (int32_t)a.n_predict, a.sp, a.ignore_eos, voc,
                        &cli_interrupted, print_token, &pr, n_cached, dm.gm,
                        (uint32_t)a.draft_max, (uint32_t)a.draft_min };
    gen_stats gs;
    st = engine_generate(gm, &go2, &gs);
    cli_release_signals();
    /* the prompt's positions are in the cache whatever happened after it */
    uint32_t n_save = n_ids < gpu_model_n_past(gm) ? n_ids : gpu_model_n_past(gm);
    glesllm_status sst = GLESLLM_OK;
    if (a.prompt_cache && gs.n_prompt && n_save > n_cached)
        sst = session_save(gm, a.prompt_cache, ids, n_save);
    if (!a.print_ids) {
        char tail[4];
        fwrite(tail, 1, utf8_stream_flush(&pr.u, tail), stdout);
    }
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
    uint32_t n_run = gs.n_prompt - (n_cached < gs.n_prompt ? n_cached : gs.n_prompt - 1);
    fprintf(stderr, "glesllm: prompt: %u tokens (%u from the prompt cache) in %.3f s (%.1f "
                    "tokens/s)\n", gs.n_prompt, gs.n_prompt - n_run, gs.prompt_s,
            gs.prompt_s > 0 ? n_run / gs.prompt_s : 0.0);
    if (a.prompt_cache && n_save > n_cached)
        fprintf(stderr, "glesllm: prompt cache %s: wrote %u tokens\n", a.prompt_cache, n_save);
    fprintf(stderr, "glesllm: generation: %u tokens in %.3f s (%.1f tokens/s), %u dispatches "
                    "per %s; stopped: %s\n",
            gs.n_gen, gs.gen_s, gs.gen_s > 0 ? (gs.n_gen > 1 ? gs.n_gen - 1 : 0) / gs.gen_s : 0.0,
            gs.dispatches_per_token, a.draft ? "verification" : "token", stop_text(gs.stop));
    if (a.draft)
        fprintf(stderr, "glesllm: speculative: %u rounds, drafted %u, accepted %u (%.1f%%), "
                        "%.2f tokens a round, %u tokens by plain steps, effective %.1f "
                        "tokens/s (drafting %.3f s, verifying and plain steps %.3f s)\n",
                gs.n_rounds, gs.n_drafted, gs.n_accepted,
                gs.n_drafted ? 100.0 * gs.n_accepted / gs.n_drafted : 0.0,
                gs.n_rounds ? 1.0 + (double)gs.n_accepted / gs.n_rounds : 0.0, gs.n_plain,
                gs.gen_s > 0 ? gs.n_gen / gs.gen_s : 0.0, gs.draft_s, gs.verify_s);
    if (gs.stop == GEN_STOP_CONTEXT)
        fprintf(stderr, "glesllm: the context of %u tokens is full; use a larger -c to generate "
                        "more\n", n_ctx);
    rc = gs.stop == GEN_STOP_REQUESTED && cli_interrupted ? 130 : 0;
out:
    cli_model_close(&dm);
    cli_model_close(&cm);
    gpu_context_destroy(ctx);
    vocab_free(voc);
    free(ids);
    free(file_text);
    return rc;
}
