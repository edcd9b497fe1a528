/* libglesllm through glesllm.h alone, as a program on a board uses it:
 * greedy ids against llama.cpp's, two contexts on one model, state saved and
 * loaded, cancelling, two threads, and misuse that must get a status, not a
 * crash. The models: the built-in demo, and the shared test models where
 * GLESLLM_SHARED_DIR points at them. */
#include <glesllm.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "reference_jsonl.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

static glesllm_backend *backend;

#define OK(call) TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, (call), glesllm_last_error())

static glesllm_model *open_demo(void)
{
    glesllm_model *m = NULL;
    OK(glesllm_model_open_demo(backend, NULL, &m));
    return m;
}

static glesllm_context *make_context(glesllm_model *m, uint32_t n_ctx)
{
    glesllm_context_params p = { n_ctx, 0, 0 };
    glesllm_context *c = NULL;
    OK(glesllm_context_create(m, &p, &c));
    return c;
}

/* the ids a generate streams */
typedef struct collected {
    int32_t ids[512];
    uint32_t n;
    glesllm_context *cancel_at_c; /* glesllm_cancel(c) once cancel_at tokens came */
    uint32_t cancel_at;
} collected;

static int collect(void *ud, int32_t token, const char *text, size_t len)
{
    (void)text;
    (void)len;
    collected *s = ud;
    if (token >= 0 && s->n < 512)
        s->ids[s->n++] = token;
    if (s->cancel_at_c && s->n == s->cancel_at)
        glesllm_cancel(s->cancel_at_c);
    return 0;
}

static void greedy_run(glesllm_context *c, const int32_t *prompt, uint32_t n_prompt, int32_t n,
                       collected *out)
{
    memset(out, 0, sizeof *out);
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = n;
    gp.ignore_eos = 1;
    OK(glesllm_set_sampling(c, NULL));
    glesllm_generate_result r;
    OK(glesllm_generate_tokens(c, prompt, n_prompt, &gp, collect, out, &r));
    TEST_ASSERT_EQUAL_UINT32(out->n, r.n_gen);
}

static const int32_t prompt8[] = { 1, 17, 300, 42, 999, 5, 1234, 77 };

/* ---- misuse ------------------------------------------------------------------------------ */

static void test_null_handles_get_a_status(void)
{
    int32_t ids[4], tok;
    size_t n;
    float logits[4];
    glesllm_context *c = NULL;
    glesllm_model *m = NULL;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_backend_open(NULL, NULL));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, glesllm_backend_close(NULL));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_model_open(backend, NULL, NULL, &m));
    TEST_ASSERT_NULL(m);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_IO,
                          glesllm_model_open(backend, "/nonexistent/model.gguf", NULL, &m));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "/nonexistent/model.gguf"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_context_create(NULL, NULL, &c));
    TEST_ASSERT_NULL(c);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_tokenize(NULL, "a", 1, 0, ids, 4, &n));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_decode(NULL, ids, 1, 0, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_next_token(NULL, &tok));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_get_logits(NULL, -1, logits));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_generate(NULL, "a", NULL, NULL, NULL, NULL));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_truncate(NULL, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_state_save_file(NULL, "/tmp/x"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_set_draft(NULL, NULL, 1, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_set_sampling(NULL, NULL));
    glesllm_cancel(NULL);
    glesllm_context_free(NULL);
    glesllm_model_close(NULL);
    TEST_ASSERT_EQUAL_UINT32(0, glesllm_model_n_vocab(NULL));
    TEST_ASSERT_EQUAL_INT(-1, glesllm_model_meta(NULL, "general.name", NULL, 0));
    TEST_ASSERT_EQUAL_STRING("", glesllm_backend_renderer(NULL));
    /* a handle of another kind */
    m = open_demo();
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_decode((glesllm_context *)m, ids, 1, 0, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_context_create((glesllm_model *)backend, NULL, &c));
    /* a backend with a model open */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_BUSY, glesllm_backend_close(backend));
    glesllm_model_close(m);
}

static void test_bad_positions_and_tokens_get_a_status(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *c = make_context(m, 64);
    int32_t ids[4] = { 1, 2, 3, 4 }, bad = (int32_t)glesllm_model_n_vocab(m), tok;
    float *logits = malloc(sizeof(float) * glesllm_model_n_vocab(m));
    /* nothing decoded: no logits, no next token */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_next_token(c, &tok));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_get_logits(c, -1, logits));
    /* a position past what the cache holds, past the context, a token outside the vocabulary */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_decode(c, ids, 1, 1, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_decode(c, ids, 4, 62, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_decode(c, &bad, 1, 0, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_decode(c, ids, 0, 0, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_truncate(c, 1));
    OK(glesllm_decode(c, ids, 4, 0, 0));
    TEST_ASSERT_EQUAL_UINT32(4, glesllm_context_n_past(c));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_get_logits(c, 0, logits));
    OK(glesllm_get_logits(c, -1, logits));
    OK(glesllm_next_token(c, &tok));
    /* the greedy token is the logits' argmax */
    uint32_t best = 0;
    for (uint32_t i = 1; i < glesllm_model_n_vocab(m); i++)
        best = logits[i] > logits[best] ? i : best;
    TEST_ASSERT_EQUAL_INT32((int32_t)best, tok);
    TEST_ASSERT_EQUAL_INT32(3, glesllm_context_token(c, 2));
    TEST_ASSERT_EQUAL_INT32(-1, glesllm_context_token(c, 4));
    /* a prompt longer than the context */
    int32_t *longp = calloc(65, sizeof *longp);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_generate_tokens(c, longp, 65, NULL, NULL, NULL, NULL));
    free(longp);
    /* the tokenizer's buffer too small */
    size_t n = 0;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_SMALL_BUFFER,
                          glesllm_tokenize(m, "hello world, once more", 22, 1, ids, 1, &n));
    TEST_ASSERT_TRUE(n > 1);
    free(logits);
    glesllm_context_free(c);
    glesllm_model_close(m);
}

static void test_a_closed_models_context_fails_until_freed(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *c = make_context(m, 64);
    glesllm_model_close(m);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_decode(c, prompt8, 1, 0, 0));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "closed"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_generate(c, "x", NULL, NULL, NULL, NULL));
    glesllm_context_free(c);
}

/* ---- contexts and state ----------------------------------------------------------------- */

static void test_decode_steps_give_generates_ids(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *c = make_context(m, 128);
    collected g;
    greedy_run(c, prompt8, 8, 24, &g);
    /* the same by hand: the prompt as one batch, then a token at a time */
    OK(glesllm_truncate(c, 0));
    OK(glesllm_decode(c, prompt8, 8, 0, 0));
    for (uint32_t i = 0; i < g.n; i++) {
        int32_t tok;
        OK(glesllm_next_token(c, &tok));
        TEST_ASSERT_EQUAL_INT32_MESSAGE(g.ids[i], tok, "decode + next_token vs generate");
        if (i + 1 < g.n)
            OK(glesllm_decode(c, &tok, 1, 8 + i, 0));
    }
    glesllm_context_free(c);
    glesllm_model_close(m);
}

static void test_two_contexts_on_one_model_give_one_contexts_ids(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *a = make_context(m, 128), *b = make_context(m, 96);
    collected alone, ga, gb, ga2;
    greedy_run(a, prompt8, 8, 32, &alone);
    OK(glesllm_truncate(a, 0));
    greedy_run(b, prompt8, 8, 32, &gb);
    greedy_run(a, prompt8, 8, 32, &ga);
    TEST_ASSERT_EQUAL_INT32_ARRAY(alone.ids, gb.ids, 32);
    TEST_ASSERT_EQUAL_INT32_ARRAY(alone.ids, ga.ids, 32);
    /* the first context freed: the second keeps its weights */
    glesllm_context_free(a);
    OK(glesllm_truncate(b, 0));
    greedy_run(b, prompt8, 8, 32, &ga2);
    TEST_ASSERT_EQUAL_INT32_ARRAY(alone.ids, ga2.ids, 32);
    glesllm_context_free(b);
    glesllm_model_close(m);
}

/* Sequences of one cache: each alone gives an ordinary context's ids, and
 * stepped together (glesllm_decode_batch) each gives its own greedy ids
 * (the prompts of other lengths, the sequences in another order each step,
 * one of them picking from its row on the CPU). */
static void test_sequences_share_one_cache(void)
{
    enum { N = 3, STEPS = 16 };
    glesllm_model *m = open_demo();
    glesllm_context *plain = make_context(m, 128), *s[N];
    glesllm_context_params p = { 128, 0, 0 };
    OK(glesllm_context_create_seqs(m, &p, N, s));
    TEST_ASSERT_TRUE(glesllm_decode_batch_max(s[0]) >= N);
    TEST_ASSERT_EQUAL_UINT32(0, glesllm_decode_batch_max(plain));
    static const uint32_t len[N] = { 8, 5, 7 };
    collected want[N], got;
    for (uint32_t i = 0; i < N; i++) {
        OK(glesllm_truncate(plain, 0));
        greedy_run(plain, prompt8, len[i], STEPS + 2, &want[i]);
        greedy_run(s[i], prompt8, len[i], STEPS + 2, &got); /* alone */
        TEST_ASSERT_EQUAL_INT32_ARRAY(want[i].ids, got.ids, STEPS + 2);
    }
    /* together: each prompt decoded alone, then a token of each a pass */
    int32_t tok[N];
    for (uint32_t i = 0; i < N; i++) {
        OK(glesllm_truncate(s[i], 0));
        OK(glesllm_decode(s[i], prompt8, len[i], 0, 0));
        OK(glesllm_next_token(s[i], &tok[i]));
        TEST_ASSERT_EQUAL_INT32(want[i].ids[0], tok[i]);
    }
    for (uint32_t step = 1; step <= STEPS; step++) {
        glesllm_context *order[N];
        int32_t toks[N];
        for (uint32_t i = 0; i < N; i++) { /* another order each step */
            uint32_t j = (i + step) % N;
            order[i] = s[j];
            toks[i] = tok[j];
        }
        OK(glesllm_decode_batch(order, N, toks));
        for (uint32_t j = 0; j < N; j++) {
            if (j == 1) { /* its pick from its row of logits, on the CPU */
                float *l = malloc(sizeof(float) * glesllm_model_n_vocab(m));
                OK(glesllm_get_logits(s[j], -1, l));
                uint32_t best = 0;
                for (uint32_t v = 1; v < glesllm_model_n_vocab(m); v++)
                    best = l[v] > l[best] ? v : best;
                free(l);
                tok[j] = (int32_t)best;
            } else {
                OK(glesllm_next_token(s[j], &tok[j]));
            }
            char msg[96];
            snprintf(msg, sizeof msg, "sequence %u, step %u", j, step);
            TEST_ASSERT_EQUAL_INT32_MESSAGE(want[j].ids[step], tok[j], msg);
            TEST_ASSERT_EQUAL_UINT32(len[j] + step, glesllm_context_n_past(s[j]));
        }
    }
    /* a prompt in the pass of a generating sequence
     * (glesllm_decode_batch_tokens): sequence 2 again from the start, its
     * whole prompt beside sequence 0's next token; the logits of each one's
     * last token */
    OK(glesllm_truncate(s[2], 0));
    glesllm_context *mix[2] = { s[2], s[0] };
    int32_t mix_toks[1 + 8];
    memcpy(mix_toks, prompt8, sizeof(int32_t) * len[2]);
    mix_toks[len[2]] = tok[0];
    uint32_t mix_n[2] = { len[2], 1 };
    OK(glesllm_decode_batch_tokens(mix, 2, mix_toks, mix_n));
    OK(glesllm_next_token(s[2], &tok[2]));
    TEST_ASSERT_EQUAL_INT32(want[2].ids[0], tok[2]);
    TEST_ASSERT_EQUAL_UINT32(len[2], glesllm_context_n_past(s[2]));
    OK(glesllm_next_token(s[0], &tok[0]));
    TEST_ASSERT_EQUAL_INT32(want[0].ids[STEPS + 1], tok[0]);
    /* a sequence without tokens, more tokens than a pass holds */
    mix_n[1] = 0;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_decode_batch_tokens(mix, 2, mix_toks, mix_n));
    mix_n[1] = glesllm_decode_batch_max(s[0]);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_decode_batch_tokens(mix, 2, mix_toks, mix_n));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_decode_batch_tokens(mix, 2, mix_toks, NULL));
    /* misuse: another cache's context, a sequence twice, too many, logits
     * another sequence's pass took */
    glesllm_context *two[2] = { s[0], plain };
    int32_t t2[2] = { 1, 2 };
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_decode_batch(two, 2, t2));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_UNSUPPORTED, glesllm_decode_batch(&plain, 1, t2));
    two[1] = s[0];
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_decode_batch(two, 2, t2));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          glesllm_decode_batch(s, glesllm_decode_batch_max(s[0]) + 1, t2));
    OK(glesllm_decode(s[0], &tok[0], 1, glesllm_context_n_past(s[0]), 0));
    int32_t x;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_next_token(s[2], &x));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "another sequence"));
    OK(glesllm_next_token(s[0], &x));
    /* freed in any order: the cache goes with the last */
    glesllm_context_free(s[1]);
    glesllm_context_free(plain);
    OK(glesllm_decode(s[2], prompt8, 3, 0, 0));
    glesllm_context_free(s[0]);
    OK(glesllm_next_token(s[2], &x));
    glesllm_context_free(s[2]);
    glesllm_model_close(m);
}

/* glesllm_copy_seq: a sequence takes another's prompt start and goes on as
 * if it had run it (the cache reused, none of it run again). */
static void test_a_sequence_copies_anothers_prompt(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *plain = make_context(m, 128), *s[2];
    glesllm_context_params p = { 128, 0, 0 };
    OK(glesllm_context_create_seqs(m, &p, 2, s));
    collected want, a, b;
    greedy_run(plain, prompt8, 8, 16, &want);
    greedy_run(s[0], prompt8, 8, 16, &a); /* s[0] holds the prompt and 15 more */
    TEST_ASSERT_EQUAL_INT32_ARRAY(want.ids, a.ids, 16);
    OK(glesllm_copy_seq(s[1], s[0], 8));
    TEST_ASSERT_EQUAL_UINT32(8, glesllm_context_n_past(s[1]));
    for (uint32_t i = 0; i < 8; i++)
        TEST_ASSERT_EQUAL_INT32(prompt8[i], glesllm_context_token(s[1], i));
    memset(&b, 0, sizeof b);
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = 16;
    gp.ignore_eos = 1;
    glesllm_generate_result r;
    OK(glesllm_generate_tokens(s[1], prompt8, 8, &gp, collect, &b, &r));
    TEST_ASSERT_EQUAL_UINT32(7, r.n_reused); /* (the last prompt token runs for its logits) */
    TEST_ASSERT_EQUAL_INT32_ARRAY(want.ids, b.ids, 16);
    /* the source unchanged by it */
    TEST_ASSERT_EQUAL_UINT32(8 + 15, glesllm_context_n_past(s[0]));
    /* misuse: more than the source holds, itself, a context of no cache */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_copy_seq(s[1], s[0], 24));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_copy_seq(s[0], s[0], 4));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_copy_seq(plain, s[0], 4));
    glesllm_context_free(s[0]);
    glesllm_context_free(s[1]);
    glesllm_context_free(plain);
    glesllm_model_close(m);
}

static void test_state_saved_and_loaded_continues_as_uninterrupted(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *c = make_context(m, 128);
    collected first, rest_here, rest_there;
    greedy_run(c, prompt8, 8, 16, &first);
    int32_t cont[8 + 16];
    memcpy(cont, prompt8, sizeof prompt8);
    memcpy(cont + 8, first.ids, sizeof(int32_t) * 16);
    uint32_t past = glesllm_context_n_past(c);
    TEST_ASSERT_EQUAL_UINT32(8 + 15, past); /* the last token's step is not run */
    for (uint32_t i = 0; i < past; i++)
        TEST_ASSERT_EQUAL_INT32(cont[i], glesllm_context_token(c, i));
    char path[64];
    snprintf(path, sizeof path, "/tmp/glesllm_test_api_%d.state", (int)getpid());
    OK(glesllm_state_save_file(c, path));
    size_t size = 0;
    OK(glesllm_state_save(c, NULL, 0, &size));
    unsigned char *buf = malloc(size);
    size_t got = 0;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_SMALL_BUFFER, glesllm_state_save(c, buf, size - 1, &got));
    OK(glesllm_state_save(c, buf, size, &got));
    TEST_ASSERT_EQUAL_size_t(size, got);
    /* uninterrupted: the same context goes on (the cached prefix is reused) */
    glesllm_generate_result r;
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = 16;
    gp.ignore_eos = 1;
    memset(&rest_here, 0, sizeof rest_here);
    OK(glesllm_generate_tokens(c, cont, 24, &gp, collect, &rest_here, &r));
    TEST_ASSERT_EQUAL_UINT32(23, r.n_reused);
    /* a fresh context from the file, and another from memory */
    for (int from_file = 1; from_file >= 0; from_file--) {
        glesllm_context *d = make_context(m, 128);
        uint32_t n_loaded = 0;
        if (from_file)
            OK(glesllm_state_load_file(d, path, NULL, 0, &n_loaded));
        else
            OK(glesllm_state_load(d, buf, size));
        TEST_ASSERT_EQUAL_UINT32(past, glesllm_context_n_past(d));
        memset(&rest_there, 0, sizeof rest_there);
        OK(glesllm_generate_tokens(d, cont, 24, &gp, collect, &rest_there, &r));
        TEST_ASSERT_EQUAL_UINT32(23, r.n_reused);
        TEST_ASSERT_EQUAL_INT32_ARRAY(rest_here.ids, rest_there.ids, 16);
        /* a cut state is refused and leaves the context empty */
        TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_STATE_MISMATCH, glesllm_state_load(d, buf, size - 7));
        TEST_ASSERT_EQUAL_UINT32(0, glesllm_context_n_past(d));
        TEST_ASSERT_NOT_EQUAL(GLESLLM_OK, glesllm_state_load(d, buf, 20));
        glesllm_context_free(d);
    }
    /* a file that is no state */
    FILE *f = fopen(path, "wb");
    fputs("not a state", f);
    fclose(f);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, glesllm_state_load_file(c, path, NULL, 0, NULL));
    unlink(path);
    free(buf);
    glesllm_context_free(c);
    glesllm_model_close(m);
}

static void test_cancel_and_callback_stop_generation(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *c = make_context(m, 256);
    collected g;
    memset(&g, 0, sizeof g);
    g.cancel_at_c = c;
    g.cancel_at = 5;
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = -1;
    gp.ignore_eos = 1;
    glesllm_generate_result r;
    OK(glesllm_generate_tokens(c, prompt8, 8, &gp, collect, &g, &r));
    TEST_ASSERT_EQUAL_INT(GLESLLM_STOP_CANCELLED, r.stop);
    TEST_ASSERT_TRUE(r.n_gen >= 5 && r.n_gen < 20);
    /* the cancel was taken: the next runs to its count */
    memset(&g, 0, sizeof g);
    gp.n_predict = 12;
    OK(glesllm_generate_tokens(c, prompt8, 8, &gp, collect, &g, &r));
    TEST_ASSERT_EQUAL_INT(GLESLLM_STOP_N_PREDICT, r.stop);
    TEST_ASSERT_EQUAL_UINT32(12, r.n_gen);
    glesllm_context_free(c);
    glesllm_model_close(m);
}

/* ---- threads ------------------------------------------------------------------------- */

typedef struct canceller {
    glesllm_context *c;
    volatile uint32_t seen; /* tokens streamed so far */
} canceller;

static int count_piece(void *ud, int32_t token, const char *text, size_t len)
{
    (void)text;
    (void)len;
    canceller *k = ud;
    if (token >= 0)
        k->seen++;
    return 0;
}

static void *cancel_after_some(void *ud)
{
    canceller *k = ud;
    while (k->seen < 4)
        usleep(1000);
    glesllm_cancel(k->c);
    return NULL;
}

static void test_cancel_from_another_thread(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *c = make_context(m, 512);
    canceller k = { c, 0 };
    pthread_t t;
    pthread_create(&t, NULL, cancel_after_some, &k);
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = -1; /* to the end of the context, unless cancelled */
    gp.ignore_eos = 1;
    glesllm_generate_result r;
    OK(glesllm_generate_tokens(c, prompt8, 8, &gp, count_piece, &k, &r));
    pthread_join(t, NULL);
    TEST_ASSERT_EQUAL_INT(GLESLLM_STOP_CANCELLED, r.stop);
    TEST_ASSERT_TRUE(r.n_gen >= 4 && r.n_gen < 500);
    glesllm_context_free(c);
    glesllm_model_close(m);
}


typedef struct other_call {
    glesllm_context *c;
    glesllm_status st;
} other_call;

static void *decode_elsewhere(void *ud)
{
    other_call *o = ud;
    o->st = glesllm_decode(o->c, prompt8, 1, 0, 0);
    return NULL;
}

typedef struct busy_probe {
    glesllm_context *other;
    other_call result;
    int done;
} busy_probe;

static int probe_while_busy(void *ud, int32_t token, const char *text, size_t len)
{
    (void)token;
    (void)text;
    (void)len;
    busy_probe *p = ud;
    if (!p->done) { /* inside a call on this backend: another thread is refused */
        pthread_t t;
        p->result.c = p->other;
        pthread_create(&t, NULL, decode_elsewhere, &p->result);
        pthread_join(t, NULL);
        p->done = 1;
    }
    return 0;
}

static void test_a_second_thread_is_refused_while_a_call_runs(void)
{
    glesllm_model *m = open_demo();
    glesllm_context *a = make_context(m, 64), *b = make_context(m, 64);
    busy_probe p;
    memset(&p, 0, sizeof p);
    p.other = b;
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = 3;
    OK(glesllm_generate_tokens(a, prompt8, 8, &gp, probe_while_busy, &p, NULL));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_BUSY, p.result.st);
    /* after the call, the other thread may use the backend */
    other_call o = { b, GLESLLM_ERR_IO };
    pthread_t t;
    pthread_create(&t, NULL, decode_elsewhere, &o);
    pthread_join(t, NULL);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, o.st, glesllm_last_error());
    glesllm_context_free(a);
    glesllm_context_free(b);
    glesllm_model_close(m);
}

/* ---- the shared models: llama.cpp's ids ------------------------------------------------- */

static void test_greedy_ids_match_llama_cpp(void)
{
    TEST_NEEDS_SHARED(dir);
    static const char *const names[] = { "tiny-spm-q8_0", "tiny-bpe-f32" };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/reference/%s.jsonl", dir, names[k]);
        static ref_case cases[4];
        int n_cases = ref_read(path, cases, 4);
        TEST_ASSERT_TRUE_MESSAGE(n_cases > 0, path);
        snprintf(path, sizeof path, "%s/models/%s.gguf", dir, names[k]);
        glesllm_model *m = NULL;
        OK(glesllm_model_open(backend, path, NULL, &m));
        glesllm_context *c = make_context(m, 256);
        int checked = 0, total = 0;
        for (int k2 = 0; k2 < n_cases; k2++) {
            const ref_case *rc = &cases[k2];
            /* the prompt's text gives llama.cpp's ids */
            int32_t ids[REF_MAX];
            size_t n = 0;
            OK(glesllm_tokenize(m, rc->prompt, strlen(rc->prompt), GLESLLM_TOKENIZE_ADD_SPECIAL,
                                ids, REF_MAX, &n));
            TEST_ASSERT_EQUAL_size_t((size_t)rc->n_prompt, n);
            for (size_t i = 0; i < n; i++)
                TEST_ASSERT_EQUAL_INT32(rc->prompt_ids[i], ids[i]);
            collected g;
            greedy_run(c, ids, (uint32_t)n, rc->n_greedy, &g);
            /* every token up to the first near-tie (logits within 0.05:
             * llama.cpp rounds activations to 8 bits for quantized products) */
            double tie = strstr(names[k], "f32") ? 1e-3 : 0.05;
            for (int i = 0; i < rc->n_greedy && i < rc->n_margin && rc->margin[i] > tie; i++) {
                TEST_ASSERT_EQUAL_INT32_MESSAGE(rc->greedy[i], g.ids[i], names[k]);
                checked++;
            }
            total += rc->n_greedy;
        }
        printf("%s: %d of %d greedy ids checked against llama.cpp's\n", names[k], checked, total);
        TEST_ASSERT_TRUE(checked >= 4);
        glesllm_context_free(c);
        glesllm_model_close(m);
    }
}

static void test_another_models_state_and_draft_are_refused(void)
{
    TEST_NEEDS_SHARED(dir);
    char pa[1024], pb[1024], state[64];
    snprintf(pa, sizeof pa, "%s/models/tiny-spm-q8_0.gguf", dir);
    snprintf(pb, sizeof pb, "%s/models/tiny-spm-q4_0.gguf", dir);
    glesllm_model *a = NULL, *b = NULL, *demo = open_demo();
    OK(glesllm_model_open(backend, pa, NULL, &a));
    OK(glesllm_model_open(backend, pb, NULL, &b));
    glesllm_context *ca = make_context(a, 64), *cb = make_context(b, 64),
                    *cd = make_context(demo, 64);
    collected g;
    greedy_run(ca, prompt8, 8, 4, &g);
    snprintf(state, sizeof state, "/tmp/glesllm_test_api_other_%d.state", (int)getpid());
    OK(glesllm_state_save_file(ca, state));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_STATE_MISMATCH,
                          glesllm_state_load_file(cb, state, NULL, 0, NULL));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "another model"));
    TEST_ASSERT_EQUAL_UINT32(0, glesllm_context_n_past(cb));
    unlink(state);
    /* a draft of another vocabulary; the same vocabulary is accepted */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_set_draft(ca, cd, 4, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_set_draft(ca, ca, 4, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, glesllm_set_draft(ca, cb, 40, 0));
    OK(glesllm_set_draft(ca, cb, 4, 0));
    collected gs;
    greedy_run(ca, prompt8, 8, 4, &gs); /* (greedy: the target's ids) */
    TEST_ASSERT_EQUAL_INT32_ARRAY(g.ids, gs.ids, 4);
    OK(glesllm_set_draft(ca, NULL, 0, 0));
    glesllm_context_free(ca);
    glesllm_context_free(cb);
    glesllm_context_free(cd);
    glesllm_model_close(a);
    glesllm_model_close(b);
    glesllm_model_close(demo);
}

int main(void)
{
    UNITY_BEGIN();
    glesllm_backend_params p;
    if (glesllm_backend_params_from_env(&p) || glesllm_backend_open(&p, &backend)) {
        printf("cannot open the GPU: %s\n", glesllm_last_error());
        return 1;
    }
    RUN_TEST(test_null_handles_get_a_status);
    RUN_TEST(test_bad_positions_and_tokens_get_a_status);
    RUN_TEST(test_a_closed_models_context_fails_until_freed);
    RUN_TEST(test_decode_steps_give_generates_ids);
    RUN_TEST(test_two_contexts_on_one_model_give_one_contexts_ids);
    RUN_TEST(test_sequences_share_one_cache);
    RUN_TEST(test_a_sequence_copies_anothers_prompt);
    RUN_TEST(test_state_saved_and_loaded_continues_as_uninterrupted);
    RUN_TEST(test_cancel_and_callback_stop_generation);
    RUN_TEST(test_cancel_from_another_thread);
    RUN_TEST(test_a_second_thread_is_refused_while_a_call_runs);
    RUN_TEST(test_greedy_ids_match_llama_cpp);
    RUN_TEST(test_another_models_state_and_draft_are_refused);
    int failures = UNITY_END();
    /* every test freed what it made: the backend closes */
    if (!failures && glesllm_backend_close(backend) != GLESLLM_OK) {
        printf("closing the backend: %s\n", glesllm_last_error());
        failures = 1;
    }
    return test_exit_code(failures);
}
