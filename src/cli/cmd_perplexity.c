/* glesllm perplexity: the perplexity of a text under a model, computed as
 * llama.cpp's perplexity tool does (engine/perplexity.h), and the
 * KL-divergence of a run's token distributions from a saved run's, as
 * llama-perplexity's --kl-divergence-base / --kl-divergence. Progress on
 * stderr, the figures on stdout. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm perplexity -m MODEL.gguf [-f TEXT.txt] [-c N] [-b N] [--chunks N]\n"
            "\n"
            "Perplexity of a text (from -f, else standard input) as llama.cpp's perplexity\n"
            "computes it: windows of -c tokens, each from an empty cache starting with BOS,\n"
            "the second half of each window scored. Progress goes to stderr; the final\n"
            "'PPL = X +/- E' line to stdout.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE     the GGUF model\n"
            "  -f, --file FILE      the text (default: standard input)\n"
            "  -c, --ctx-size N     window length in tokens (default 512)\n"
            "  -b, --batch-size N   tokens per batched pass (default 512)\n"
            "  --chunks N           score at most N windows (default: all)\n"
            "  --kl-divergence-base FILE\n"
            "                       save every scored position's log-probabilities to FILE\n"
            "                       (2 bytes a vocabulary entry and position)\n"
            "  --kl-divergence      with --kl-divergence-base: compare this run with FILE's\n"
            "                       instead (mean, median and largest KL-divergence, how often\n"
            "                       the top token is the same, both perplexities)\n");
}

/* what the callbacks share */
typedef struct ppl_ud {
    double t0;
    struct kld_run *k;
} ppl_ud;

/* ---- KL-divergence -------------------------------------------------------------- */

/* The base file: a header, then a record a scored position: the next
 * token's log-probability (float, for the base's perplexity) and each
 * vocabulary entry's lp as round(-lp / KLD_RANGE * 65535) (lp below
 * -KLD_RANGE as -KLD_RANGE: a probability under 4e-18). The rounding
 * (±3e-4 in lp) is unbiased: it moves a mean KLD by about 1e-8. */
#define KLD_MAGIC "GLESKLD2"
#define KLD_RANGE 40.0
typedef struct kld_header {
    char magic[8];
    uint32_t n_vocab, n_ctx, n_tokens, n_scored;
    uint64_t tokens_hash; /* FNV-1a of the text's ids: the same text */
} kld_header;

typedef struct kld_run {
    char tmp[4096]; /* the base being written, renamed into place at the end */
    bool compare;
    FILE *f;
    kld_header h;
    uint16_t *rec;
    double *lp;
    /* compare: sums */
    double kld, kld2, nll_base, nll, same_top;
    double *klds; /* each position's, for the median and the largest */
    uint32_t n;
    char err[256];
} kld_run;

static uint64_t fnv1a(const int32_t *ids, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char *p = (const unsigned char *)ids;
    for (size_t i = 0; i < n * sizeof *ids; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* log softmax of logits into lp; returns the argmax */
static uint32_t log_softmax(const float *logits, uint32_t nv, double *lp)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < nv; i++)
        best = logits[i] > logits[best] ? i : best;
    double sum = 0.0;
    for (uint32_t i = 0; i < nv; i++)
        sum += exp((double)logits[i] - logits[best]);
    double lse = logits[best] + log(sum);
    for (uint32_t i = 0; i < nv; i++)
        lp[i] = logits[i] - lse;
    return best;
}

static int kld_logits(void *ud, uint32_t index, const float *logits, uint32_t nv, int32_t next)
{
    kld_run *k = ((ppl_ud *)ud)->k;
    uint32_t top = log_softmax(logits, nv, k->lp);
    if (!k->compare) {
        for (uint32_t i = 0; i < nv; i++) {
            double q = -k->lp[i] / KLD_RANGE * 65535.0;
            k->rec[i] = (uint16_t)(q > 65535.0 ? 65535 : q < 0 ? 0 : lround(q));
        }
        float next_lp = (float)k->lp[next];
        if (fwrite(&next_lp, sizeof next_lp, 1, k->f) != 1 ||
            fwrite(k->rec, sizeof *k->rec, nv, k->f) != nv) {
            snprintf(k->err, sizeof k->err, "writing the base: %s", strerror(errno));
            return 1;
        }
        k->n = index + 1;
        return 0;
    }
    if (index >= k->h.n_scored) {
        snprintf(k->err, sizeof k->err,
                 "the base holds %u scored positions and this run scores more: run it with the "
                 "same -c and --chunks as the base", k->h.n_scored);
        return 1;
    }
    float base_next;
    if (fread(&base_next, sizeof base_next, 1, k->f) != 1 ||
        fread(k->rec, sizeof *k->rec, nv, k->f) != nv) {
        snprintf(k->err, sizeof k->err, "the base ends early (at position %u): it is damaged",
                 index);
        return 1;
    }
    /* the base's distribution, renormalised after the rounding */
    double sum = 0.0, best = -1.0;
    uint32_t base_top = 0;
    for (uint32_t i = 0; i < nv; i++) {
        double p = exp(-(double)k->rec[i] / 65535.0 * KLD_RANGE);
        sum += p;
        if (p > best)
            best = p, base_top = i;
    }
    double kl = 0.0, lsum = log(sum);
    for (uint32_t i = 0; i < nv; i++) {
        double lb = -(double)k->rec[i] / 65535.0 * KLD_RANGE - lsum;
        kl += exp(lb) * (lb - k->lp[i]);
    }
    kl = kl < 0.0 ? 0.0 : kl;
    k->kld += kl;
    k->kld2 += kl * kl;
    k->klds[index] = kl;
    k->same_top += base_top == top;
    k->nll_base -= base_next;
    k->nll -= k->lp[next];
    k->n = index + 1;
    return 0;
}

/* Opens the base to write (through a temporary file) or to compare with;
 * 0, or 1 after saying why. */
static int kld_open(kld_run *k, const char *path, bool compare, uint32_t nv, uint32_t n_ctx,
                    const int32_t *ids, size_t n_tok)
{
    k->compare = compare;
    k->rec = malloc(sizeof *k->rec * nv);
    k->lp = malloc(sizeof *k->lp * nv);
    if (!k->rec || !k->lp) {
        fprintf(stderr, "glesllm perplexity: out of memory\n");
        return 1;
    }
    kld_header want = { KLD_MAGIC, nv, n_ctx, (uint32_t)n_tok, 0, fnv1a(ids, n_tok) };
    if (!compare) {
        snprintf(k->tmp, sizeof k->tmp, "%s.tmp.%ld", path, (long)getpid());
        if (!(k->f = fopen(k->tmp, "wb")) || fwrite(&want, sizeof want, 1, k->f) != 1) {
            fprintf(stderr, "glesllm perplexity: cannot write %s: %s\n", path, strerror(errno));
            return 1;
        }
        k->h = want;
        return 0;
    }
    if (!(k->f = fopen(path, "rb"))) {
        fprintf(stderr, "glesllm perplexity: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (fread(&k->h, sizeof k->h, 1, k->f) != 1 || memcmp(k->h.magic, KLD_MAGIC, 8)) {
        fprintf(stderr, "glesllm perplexity: %s is no KL-divergence base (one that "
                        "'glesllm perplexity --kl-divergence-base FILE' writes)\n", path);
        return 1;
    }
    if (k->h.n_vocab != nv || k->h.n_ctx != n_ctx || k->h.n_tokens != want.n_tokens ||
        k->h.tokens_hash != want.tokens_hash) {
        fprintf(stderr, "glesllm perplexity: %s was saved from another run (vocabulary %u, -c "
                        "%u, a text of %u tokens; this run: %u, %u, %u%s): compare runs of one "
                        "text, vocabulary and -c\n", path, k->h.n_vocab, k->h.n_ctx,
                k->h.n_tokens, nv, n_ctx, want.n_tokens,
                k->h.tokens_hash != want.tokens_hash && k->h.n_tokens == want.n_tokens
                    ? ", other tokens"
                    : "");
        return 1;
    }
    if (!k->h.n_scored || !(k->klds = malloc(sizeof *k->klds * k->h.n_scored))) {
        fprintf(stderr, "glesllm perplexity: %s holds no positions\n", path);
        return 1;
    }
    return 0;
}

/* The written base's count into its header, then the file into place. */
static int kld_finish(kld_run *k, const char *path)
{
    k->h.n_scored = k->n;
    if (fseek(k->f, 0, SEEK_SET) || fwrite(&k->h, sizeof k->h, 1, k->f) != 1 ||
        fclose(k->f) != 0) {
        k->f = NULL;
        fprintf(stderr, "glesllm perplexity: writing %s failed: %s\n", path, strerror(errno));
        return 1;
    }
    k->f = NULL;
    if (rename(k->tmp, path)) {
        fprintf(stderr, "glesllm perplexity: cannot rename %s to %s: %s\n", k->tmp, path,
                strerror(errno));
        return 1;
    }
    k->tmp[0] = '\0';
    return 0;
}

/* Frees k; a base not finished is removed. */
static void kld_close(kld_run *k)
{
    if (k->f)
        fclose(k->f);
    k->f = NULL;
    if (k->tmp[0])
        remove(k->tmp);
    k->tmp[0] = '\0';
    free(k->rec);
    free(k->lp);
    free(k->klds);
    k->rec = NULL;
    k->lp = NULL;
    k->klds = NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void kld_report(const kld_run *k)
{
    double n = k->n;
    double mean = k->kld / n, var = k->kld2 / n - mean * mean;
    double same = k->same_top / n;
    qsort(k->klds, k->n, sizeof *k->klds, cmp_double);
    printf("Mean PPL(Q)    : %10.6f\n", exp(k->nll / n));
    printf("Mean PPL(base) : %10.6f\n", exp(k->nll_base / n));
    printf("PPL ratio      : %10.6f\n", exp((k->nll - k->nll_base) / n));
    printf("Mean    KLD: %10.6f +/- %10.6f\n", mean, k->n > 1 && var > 0 ? sqrt(var / (n - 1)) : 0.0);
    printf("Median  KLD: %10.6f\n", k->klds[k->n / 2]);
    printf("99.0%%   KLD: %10.6f\n", k->klds[(size_t)(0.99 * (k->n - 1))]);
    printf("Maximum KLD: %10.6f\n", k->klds[k->n - 1]);
    printf("Same top p : %7.3f +/- %5.3f %%\n", 100.0 * same,
           k->n > 1 ? 100.0 * sqrt(same * (1.0 - same) / (n - 1)) : 0.0);
}

static void progress(void *ud, uint32_t chunk, uint32_t n_chunks, double ppl)
{
    double *t0 = &((ppl_ud *)ud)->t0;
    if (chunk == 1) {
        double per = cli_now() - *t0;
        fprintf(stderr, "glesllm: %.2f s per window, about %.1f s for %u windows\n", per,
                per * n_chunks, n_chunks);
    }
    fprintf(stderr, "[%u]%.4f,%s", chunk, ppl, chunk == n_chunks ? "\n" : "");
}

/* the options that take a value */
static const char *const value_options[] = {
    "-m", "--model", "-f", "--file", "-c", "--ctx-size", "-b", "--batch-size", "--chunks",
    "--kl-divergence-base", NULL
};

int cmd_perplexity(int argc, char **argv)
{
    const char *model_path = NULL, *file = NULL, *kld_path = NULL;
    kld_run k = { 0 };
    long n_ctx = 512, n_batch = 512, chunks = 0;
    bool kld_compare = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(o, "--kl-divergence") == 0) {
            kld_compare = true;
            continue;
        }
        if (cli_option_value("perplexity", argc, argv, i, value_options))
            return 2;
        const char *v = argv[++i];
        bool ok = true;
        if (strcmp(o, "-m") == 0 || strcmp(o, "--model") == 0)
            model_path = v;
        else if (strcmp(o, "-f") == 0 || strcmp(o, "--file") == 0)
            file = v;
        else if (strcmp(o, "-c") == 0 || strcmp(o, "--ctx-size") == 0)
            ok = cli_parse_long(v, 2, 1L << 20, &n_ctx);
        else if (strcmp(o, "-b") == 0 || strcmp(o, "--batch-size") == 0)
            ok = cli_parse_long(v, 1, 1L << 16, &n_batch);
        else if (strcmp(o, "--chunks") == 0)
            ok = cli_parse_long(v, 0, 1L << 30, &chunks);
        else if (strcmp(o, "--kl-divergence-base") == 0)
            kld_path = v;
        else {
            fprintf(stderr, "glesllm perplexity: unknown option '%s'; see 'glesllm perplexity "
                            "--help'\n", o);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "glesllm perplexity: invalid value '%s' for %s%s\n", v, o,
                    cli_parse_want());
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "glesllm perplexity: no model: give one with -m MODEL.gguf\n");
        return 2;
    }
    if (kld_compare && !kld_path) {
        fprintf(stderr, "glesllm perplexity: --kl-divergence compares with a saved run: give "
                        "its file with --kl-divergence-base FILE\n");
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = cli_read_text(file, &text, &len);
    if (rc)
        return rc;
    glesllm_backend *b = NULL;
    glesllm_model *m = NULL;
    glesllm_context *c = NULL;
    glesllm_status st;
    size_t n_tok = 0;
    int32_t *ids = NULL;
    if ((rc = cli_open_backend(&b)) || (rc = cli_open_model(b, model_path, &m)))
        goto out;
    rc = 1;
    if ((st = cli_tokenize(m, text, len, GLESLLM_TOKENIZE_ADD_SPECIAL, &ids, &n_tok))) {
        cli_fail("tokenizing the text", st);
        goto out;
    }
    if (n_tok < 2 * (size_t)n_ctx) {
        fprintf(stderr, "glesllm perplexity: the text has %zu tokens; a context of %ld needs at "
                        "least %ld: give a longer text or a smaller -c\n", n_tok, n_ctx, 2 * n_ctx);
        rc = 2;
        goto out;
    }
    if ((rc = cli_make_context(m, model_path, (uint32_t)n_ctx, (uint32_t)n_batch, 0, &c)))
        goto out;
    rc = 1;
    glesllm_context_info ci;
    glesllm_context_get_info(c, &ci);
    fprintf(stderr, "glesllm: %s: %zu tokens, %zu windows of %ld; batch %u\n", model_path, n_tok,
            n_tok / (size_t)n_ctx, n_ctx, ci.n_batch);
    if (kld_path && kld_open(&k, kld_path, kld_compare, glesllm_model_n_vocab(m),
                             (uint32_t)n_ctx, ids, n_tok))
        goto out;
    ppl_ud ud = { cli_now(), kld_path ? &k : NULL };
    double t0 = ud.t0;
    glesllm_perplexity_result r;
    cli_catch_signals(c);
    st = glesllm_perplexity_logits(c, ids, n_tok, (uint32_t)chunks, progress,
                                   kld_path ? kld_logits : NULL, &ud, &r);
    cli_release_signals();
    if (st) {
        if (k.err[0])
            fprintf(stderr, "glesllm perplexity: KL-divergence: %s\n", k.err);
        else
            cli_fail("perplexity", st);
        goto out;
    }
    /* (a base is kept only whole: an interrupted run's is removed) */
    if (kld_path && !kld_compare && !r.cancelled && kld_finish(&k, kld_path))
        goto out;
    double s = cli_now() - t0;
    fprintf(stderr, "glesllm: %u windows, %u tokens scored in %.2f s (%.1f tokens/s evaluated)\n",
            r.n_chunks, r.n_scored, s, s > 0 ? r.n_chunks * (double)n_ctx / s : 0.0);
    if (r.cancelled && !r.n_chunks) {
        fprintf(stderr, "glesllm: interrupted inside the first window: no figures\n");
        rc = 130;
        goto out;
    }
    if (r.cancelled) {
        fprintf(stderr, "glesllm: interrupted after %u windows: PPL so far %.4f\n", r.n_chunks,
                r.ppl);
        rc = 130;
        goto out;
    }
    printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    if (kld_compare)
        kld_report(&k);
    else if (kld_path)
        fprintf(stderr, "glesllm: %u positions' log-probabilities saved to %s\n", k.n, kld_path);
    rc = 0;
out:
    kld_close(&k);
    glesllm_context_free(c);
    glesllm_model_close(m);
    glesllm_backend_close(b);
    free(ids);
    free(text);
    return rc;
}
