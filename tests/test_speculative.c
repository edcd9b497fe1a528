/* KV-cache rollback, session files and speculative decoding: rolling back
 * and running again gives the logits of never having gone past; a session
 * file restores the cache; greedy speculative output equals the target's
 * alone (the same model as draft, another quantization of it, the shared
 * llama.cpp models); speculative sampling follows the target's distribution. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/generate.h"
#include "model/session.h"
#include "ops/attention.h"
#include "model_fixture.h"
#include "quant/quant.h"
#include "reference_jsonl.h"
#include "test_gpu.h"
#include "unity.h"

static gpu_context *ctx;

void setUp(void) {}
void tearDown(void) {}

static void load(const demo_spec *s, uint32_t n_ctx, int32_t n_small, loaded *L)
{
    gpu_model_options opt = { n_ctx };
    opt.n_small = n_small;
    fixture_load_demo(ctx, s, &opt, false, L);
}

static int32_t token_at(uint32_t pos, uint32_t nv) { return (int32_t)((pos * 53u + 11u) % nv); }

/* Steps pos0 .. pos1 - 1 with token_at(pos + shift); the logits of the last. */
static void run_steps(gpu_model *gm, uint32_t pos0, uint32_t pos1, uint32_t shift, float *logits)
{
    uint32_t nv = gpu_model_n_vocab(gm);
    for (uint32_t p = pos0; p < pos1; p++) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_set_token(gm, p, token_at(p + shift, nv)));
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                      gpu_model_step(gm, p, p + 1 == pos1 ? GPU_STEP_LOGITS : 0),
                                      glesllm_last_error());
    }
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_read_logits(gm, logits));
}

static void test_rollback_then_reappend_gives_the_same_logits(void)
{
    demo_spec s = fixture_small_spec("llama", GGML_TYPE_Q8_0);
    loaded L;
    load(&s, 32, 0, &L);
    uint32_t nv = L.m.hp.n_vocab;
    float *want = malloc(nv * sizeof(float)), *got = malloc(nv * sizeof(float));
    run_steps(L.gm, 0, 10, 0, want); /* logits of position 9 */
    TEST_ASSERT_EQUAL_UINT(10, gpu_model_n_past(L.gm));
    /* past it with other tokens, back to 7, other tokens again, back to 7 */
    run_steps(L.gm, 10, 16, 100, got);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(L.gm, 7));
    TEST_ASSERT_EQUAL_UINT(7, gpu_model_n_past(L.gm));
    run_steps(L.gm, 7, 12, 31, got);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(L.gm, 7));
    /* re-append the first tokens: as a small batch, then step by step */
    for (uint32_t p = 7; p < 10; p++)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_set_token(L.gm, p, token_at(p, nv)));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_prefill(L.gm, 7, 3, GPU_STEP_LOGITS));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_read_logits(L.gm, got));
    double e1 = fixture_rel_diff(got, want, nv);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(L.gm, 7));
    run_steps(L.gm, 7, 10, 0, got);
    double e2 = fixture_rel_diff(got, want, nv);
    printf("rollback: re-appended logits off by %.3g (small batch), %.3g (steps)\n", e1, e2);
    /* the same weights, K/V and positions: the steps give the very same
     * values; the batch sums in another order (f32), within 1e-5 */
    TEST_ASSERT_TRUE_MESSAGE(e2 == 0.0, "steps after a rollback differ from the first run");
    TEST_ASSERT_TRUE_MESSAGE(e1 < 1e-5, "a batch after a rollback differs from the first run");
    /* no holes: a step past the cache, a truncate past it */
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_model_step(L.gm, 11, GPU_STEP_LOGITS));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_model_prefill(L.gm, 12, 2, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_model_truncate(L.gm, 11));
    TEST_ASSERT_EQUAL_UINT(10, gpu_model_n_past(L.gm));
    free(want);
    free(got);
    fixture_unload(&L);
}

static char *temp_path(const char *name)
{
    static char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/glesllm_%ld_%s", dir && *dir ? dir : "/tmp", (long)getpid(),
             name);
    return path;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* Gemma 2 with a window of 5 in chunks of 16: its window layers keep their
 * K/V in a ring of the last positions, and a session file holds theirs from
 * the ring's first (version 3). Loaded whole, it gives the writer's logits
 * to the bit; a shorter prefix, or a model without a ring (larger chunks),
 * loads nothing; a file saved after a rollback the ring could not hold
 * runs the start again first. */
static void test_session_file_of_a_ring(void)
{
    demo_spec s = fixture_gemma_spec("gemma2", 4);
    gpu_model_options opt = { 200 };
    opt.n_batch = 16;
    opt.n_small = 8;
    loaded A, B;
    fixture_load_demo(ctx, &s, &opt, false, &A);
    fixture_load_demo(ctx, &s, &opt, false, &B);
    uint32_t ring, used;
    gpu_model_kv_ring(A.gm, &ring, &used);
    TEST_ASSERT_TRUE_MESSAGE(ring > 0, "the window layers have a ring");
    uint32_t nv = A.m.hp.n_vocab;
    float *want = malloc(nv * sizeof(float)), *got = malloc(nv * sizeof(float));
    int32_t ids[128];
    for (uint32_t p = 0; p < 128; p++)
        ids[p] = token_at(p, nv);
    char path[512];
    snprintf(path, sizeof path, "%s", temp_path("ring.bin"));
    float *at119 = malloc(nv * sizeof(float));
    run_steps(A.gm, 0, 120, 0, at119);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, session_save(A.gm, path, ids, 120),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT64((long)session_bytes(A.gm, 120), file_size(path));
    run_steps(A.gm, 120, 124, 0, want);
    uint32_t n = 0;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, session_load(B.gm, path, ids, 120, &n),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT(120, n);
    run_steps(B.gm, 120, 124, 0, got);
    TEST_ASSERT_TRUE_MESSAGE(fixture_rel_diff(got, want, nv) == 0.0,
                             "the restored ring gives other logits");
    /* a prompt that parts from the file at 115: the window before it is in
     * the file (from 64: the ring of the step at 119, in pages of 32) */
    int32_t prompt[120];
    memcpy(prompt, ids, sizeof prompt);
    prompt[115] = (prompt[115] + 1) % (int32_t)nv;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, session_load(B.gm, path, prompt, 120, &n));
    TEST_ASSERT_EQUAL_UINT(115, n);
    run_steps(B.gm, 115, 120, 0, got);
    TEST_ASSERT_TRUE_MESSAGE(fixture_rel_diff(got, at119, nv) == 0.0,
                             "a prefix of the restored ring gives other logits");
    /* one that parts at 100: the window before it is not */
    memcpy(prompt, ids, sizeof prompt);
    prompt[100] = (prompt[100] + 1) % (int32_t)nv;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, session_load(B.gm, path, prompt, 120, &n));
    TEST_ASSERT_EQUAL_UINT(0, n);
    TEST_ASSERT_EQUAL_UINT(0, gpu_model_n_past(B.gm));
    /* a model that keeps every position of its window layers (chunks of
     * the whole context) */
    loaded C;
    opt.n_batch = 0;
    fixture_load_demo(ctx, &s, &opt, false, &C);
    gpu_model_kv_ring(C.gm, &ring, &used);
    TEST_ASSERT_EQUAL_UINT(0, ring);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, session_load(C.gm, path, ids, 120, &n));
    TEST_ASSERT_EQUAL_UINT(0, n);
    /* saved after a rollback to 60: the start runs again before it is read
     * (in chunks, after which the ring holds every position) */
    uint64_t r0 = gpu_model_replayed(A.gm);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(A.gm, 60));
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, session_save(A.gm, path, ids, 60),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT64(r0 + 60, gpu_model_replayed(A.gm));
    run_steps(A.gm, 60, 64, 0, want);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, session_load(B.gm, path, ids, 60, &n));
    TEST_ASSERT_EQUAL_UINT(60, n);
    run_steps(B.gm, 60, 64, 0, got);
    TEST_ASSERT_TRUE_MESSAGE(fixture_rel_diff(got, want, nv) == 0.0,
                             "the ring saved after a rollback gives other logits");
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, session_load(C.gm, path, ids, 60, &n));
    TEST_ASSERT_EQUAL_UINT(60, n);
    run_steps(C.gm, 60, 64, 0, got);
    TEST_ASSERT_TRUE_MESSAGE(fixture_rel_diff(got, want, nv) == 0.0,
                             "a whole file into a model without a ring gives other logits");
    remove(path);
    fixture_unload(&C);
    fixture_unload(&B);
    fixture_unload(&A);
    free(want);
    free(got);
    free(at119);
}

static void test_session_file_restores_the_cache(void)
{
    demo_spec s = fixture_small_spec("qwen2", GGML_TYPE_Q4_0);
    loaded A, B;
    load(&s, 32, 0, &A);
    uint32_t nv = A.m.hp.n_vocab;
    float *want = malloc(nv * sizeof(float)), *got = malloc(nv * sizeof(float));
    int32_t ids[12];
    for (uint32_t p = 0; p < 12; p++)
        ids[p] = token_at(p, nv);
    run_steps(A.gm, 0, 12, 0, want);
    char path[512];
    snprintf(path, sizeof path, "%s", temp_path("session.bin"));
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, session_save(A.gm, path, ids, 12),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, session_save(A.gm, path, ids, 13));

    /* another upload of the same model; the prompt shares the first 9 tokens */
    load(&s, 32, 0, &B);
    int32_t prompt[12];
    memcpy(prompt, ids, sizeof prompt);
    prompt[9] = (prompt[9] + 1) % (int32_t)nv;
    uint32_t n = 0;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, session_load(B.gm, path, prompt, 12, &n),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT(9, n);
    TEST_ASSERT_EQUAL_UINT(9, gpu_model_n_past(B.gm));
    run_steps(B.gm, 9, 12, 0, got);
    double e = fixture_rel_diff(got, want, nv);
    printf("session: logits after a restored cache off by %.3g\n", e);
    /* the cache holds the very bytes the first run wrote */
    TEST_ASSERT_TRUE_MESSAGE(e == 0.0, "the restored cache gives other logits");
    /* the whole prompt: every position loaded */
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, session_load(B.gm, path, ids, 12, &n));
    TEST_ASSERT_EQUAL_UINT(12, n);
    fixture_unload(&B);

    /* another model (other weights, same shapes) is refused by its fingerprint */
    demo_spec other = s;
    other.seed = 8;
    load(&other, 32, 0, &B);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_STATE_MISMATCH, session_load(B.gm, path, ids, 12, &n));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "another model"));
    TEST_ASSERT_EQUAL_UINT(0, n);
    /* one byte of its K/V payload changed (other ids, silently, without
     * the checksum), then a file cut short, and one that is not a session
     * file */
    long size = file_size(path);
    FILE *f = fopen(path, "r+b");
    TEST_ASSERT_NOT_NULL(f);
    TEST_ASSERT_EQUAL_INT(0, fseek(f, size - 100, SEEK_SET));
    int byte = fgetc(f);
    TEST_ASSERT_EQUAL_INT(0, fseek(f, size - 100, SEEK_SET));
    fputc(byte ^ 0x10, f);
    fclose(f);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_STATE_MISMATCH, session_load(A.gm, path, ids, 12, &n));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "damaged"));
    TEST_ASSERT_EQUAL_UINT(0, n);
    TEST_ASSERT_EQUAL_INT(0, truncate(path, size - 7));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_STATE_MISMATCH, session_load(A.gm, path, ids, 12, &n));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "cut short"));
    f = fopen(path, "wb");
    TEST_ASSERT_NOT_NULL(f);
    fputs("GGUF and then some text that is no session", f);
    fclose(f);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_FORMAT, session_load(A.gm, path, ids, 12, &n));
    remove(path);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_IO, session_load(A.gm, path, ids, 12, &n));
    /* a folder that does not exist: an error, no file left behind */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/nope/session.bin", temp_path("missing"));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_IO, session_save(A.gm, bad, ids, 12));
    TEST_ASSERT_EQUAL_INT(-1, file_size(bad));
    free(want);
    free(got);
    fixture_unload(&B);
    fixture_unload(&A);
}

typedef struct collected {
    int32_t ids[256];
    uint32_t n;
    uint32_t stop_after; /* on_token says stop at this many (0: never) */
} collected;

static bool collect(void *ud, int32_t id)
{
    collected *c = ud;
    if (c->n < 256)
        c->ids[c->n++] = id;
    return c->n != c->stop_after;
}

/* engine_generate with or without a draft (draft_min .. draft_max tokens a
 * round); the ids into *out */
static gen_stats generate(gpu_model *gm, gpu_model *draft, const int32_t *prompt, uint32_t n,
                          int32_t n_predict, uint32_t draft_min, uint32_t draft_max,
                          const sampler_params *sp, collected *out)
{
    gen_options o;
    memset(&o, 0, sizeof o);
    o.prompt = prompt;
    o.n_prompt = n;
    o.n_predict = n_predict;
    o.sampling = *sp;
    o.ignore_eos = true;
    o.on_token = collect;
    o.ud = out;
    o.draft = draft;
    o.draft_max = draft_max;
    o.draft_min = draft_min;
    out->n = 0;
    out->stop_after = 0;
    gen_stats gs;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, engine_generate(gm, &o, &gs), glesllm_last_error());
    return gs;
}

static sampler_params greedy(void)
{
    sampler_params sp = sampler_defaults();
    sp.temp = 0.0f;
    return sp;
}

/* Greedy ids with each draft equal the target's alone, for several prompts
 * and draft lengths (each fixed, so that every round drafts and rolls back,
 * then the lengths draft_length_pick chooses from the timings). With the
 * length free, the prompt's prefill makes the first token, two plain steps
 * the next two, and the first round drafts the most; the target as its own
 * draft (`all_kept`: every drafted
 * token kept) then runs plain steps, since a drafted token costs about what
 * a plain step does and a pass over two tokens costs more than one step. */
static void check_greedy(gpu_model *target, gpu_model *draft, bool all_kept, const int32_t *prompt,
                         uint32_t n_prompt, int32_t n_predict, const char *what)
{
    sampler_params sp = greedy();
    collected plain, spec;
    generate(target, NULL, prompt, n_prompt, n_predict, 0, 0, &sp, &plain);
    const uint32_t lengths[][2] = { { 1, 1 }, { 3, 3 }, { 8, 8 }, { 0, 8 } };
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        gen_stats gs = generate(target, draft, prompt, n_prompt, n_predict, lengths[i][0],
                                lengths[i][1], &sp, &spec);
        char msg[200];
        snprintf(msg, sizeof msg, "%s, prompt of %u, draft length %u..%u: ids differ", what,
                 n_prompt, lengths[i][0], lengths[i][1]);
        TEST_ASSERT_EQUAL_UINT_MESSAGE(plain.n, spec.n, msg);
        TEST_ASSERT_EQUAL_MEMORY_MESSAGE(plain.ids, spec.ids, plain.n * sizeof(int32_t), msg);
        printf("%s, prompt %u, draft length %u..%u: %u tokens in %u rounds and %u plain steps, "
               "%u of %u drafted kept\n", what, n_prompt, lengths[i][0], lengths[i][1], spec.n,
               gs.n_rounds, gs.n_plain, gs.n_accepted, gs.n_drafted);
        if (lengths[i][0])
            TEST_ASSERT_EQUAL_UINT_MESSAGE(0, gs.n_plain, msg);
        else /* the second and third tokens by plain steps */
            TEST_ASSERT_EQUAL_UINT_MESSAGE(2, gs.n_plain > 2 ? 2 : gs.n_plain, msg);
        if (!lengths[i][0] && all_kept && spec.n > lengths[i][1] + 4)
            TEST_ASSERT_TRUE_MESSAGE(gs.n_plain > 2, msg); /* (see above) */
        TEST_ASSERT_TRUE(gs.n_drafted > 0);
        if (all_kept)
            TEST_ASSERT_EQUAL_UINT_MESSAGE(gs.n_drafted, gs.n_accepted, msg);
        /* the count: the prompt's argmax, then rounds (each its kept drafted
         * tokens and one of the target's) and plain steps */
        TEST_ASSERT_EQUAL_UINT_MESSAGE(gs.n_gen, 1 + gs.n_accepted + gs.n_rounds + gs.n_plain,
                                       msg);
    }
}

/* Greedy generation submits the step at pos + 1 before it waits for the one
 * at pos (generate.c): the same ids as stepping and waiting one at a time,
 * and the cache ends where it would have (the step run ahead of a stop is
 * dropped), whether n_predict, the caller or the context end stops it. */
static void test_pipelined_greedy_equals_one_step_at_a_time(void)
{
    demo_spec s = fixture_small_spec("llama", GGML_TYPE_Q8_0);
    loaded L;
    load(&s, 40, 0, &L);
    uint32_t nv = L.m.hp.n_vocab;
    int32_t prompt[6];
    for (uint32_t i = 0; i < 6; i++)
        prompt[i] = token_at(i, nv);
    /* one step at a time: 34 ids, to the context's end */
    int32_t want[40];
    for (uint32_t i = 0; i < 6; i++)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_set_token(L.gm, i, prompt[i]));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_prefill(L.gm, 0, 6, GPU_STEP_ARGMAX));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_wait(L.gm));
    want[0] = gpu_model_get_token(L.gm, 6);
    for (uint32_t pos = 6; pos < 40; pos++) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_step(L.gm, pos, GPU_STEP_ARGMAX));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_wait(L.gm));
        want[pos - 5] = gpu_model_get_token(L.gm, pos + 1);
    }
    sampler_params sp = greedy();
    const struct {
        int32_t n_predict;
        uint32_t stop_after, n, n_past;
    } runs[] = {
        { 12, 0, 12, 6 + 11 },  /* n_predict: the last id's step never runs */
        { 1, 0, 1, 6 },
        { 2, 0, 2, 7 },
        { 30, 5, 5, 6 + 4 },    /* the caller stops after 5 */
        { -1, 0, 35, 40 },      /* the context's end: every slot's step ran */
        { -1, 35, 35, 40 },
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        collected got;
        memset(&got, 0, sizeof got);
        gen_options o;
        memset(&o, 0, sizeof o);
        o.prompt = prompt;
        o.n_prompt = 6;
        o.n_predict = runs[r].n_predict;
        o.sampling = sp;
        o.ignore_eos = true;
        o.on_token = collect;
        o.ud = &got;
        got.stop_after = runs[r].stop_after;
        gen_stats gs;
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, engine_generate(L.gm, &o, &gs),
                                      glesllm_last_error());
        char msg[120];
        snprintf(msg, sizeof msg, "run %zu (n_predict %d, stop after %u)", r, runs[r].n_predict,
                 runs[r].stop_after);
        TEST_ASSERT_EQUAL_UINT_MESSAGE(runs[r].n, got.n, msg);
        TEST_ASSERT_EQUAL_MEMORY_MESSAGE(want, got.ids, got.n * sizeof(int32_t), msg);
        TEST_ASSERT_EQUAL_UINT_MESSAGE(runs[r].n_past, gpu_model_n_past(L.gm), msg);
    }
    fixture_unload(&L);
}

static void test_greedy_speculative_equals_target_alone(void)
{
    demo_spec s = fixture_small_spec("llama", GGML_TYPE_Q8_0);
    s.n_vocab = 64; /* a small vocabulary: the drafts agree often enough */
    demo_spec q4 = s;
    q4.type = q4.embd_type = q4.out_type = GGML_TYPE_Q4_0;
    loaded T, D, Q;
    load(&s, 40, 9, &T); /* 8 drafted tokens and the last kept one */
    load(&s, 40, 0, &D);
    load(&q4, 40, 0, &Q);
    int32_t p1[] = { 1, 17, 33, 5 }, p2[] = { 3 }, p3[20];
    for (uint32_t i = 0; i < 20; i++)
        p3[i] = token_at(i, 64);
    check_greedy(T.gm, D.gm, true, p1, 4, 30, "same model");
    check_greedy(T.gm, Q.gm, false, p1, 4, 30, "Q4_0 draft");
    check_greedy(T.gm, Q.gm, false, p2, 1, 25, "Q4_0 draft");
    /* to the end of the context (40): it stops there, the same */
    check_greedy(T.gm, Q.gm, false, p3, 20, -1, "Q4_0 draft, context end");
    check_greedy(T.gm, D.gm, true, p3, 20, -1, "same model, context end");
    fixture_unload(&Q);
    fixture_unload(&D);
    fixture_unload(&T);
}

/* The rollback and session checks of a recurrent model of spec s, loaded
 * into *pl and *pb (both left loaded; pb holds a restored session's state). */
static void check_recurrent_rollback(const demo_spec *spec, loaded *pl, loaded *pb)
{
    demo_spec s = *spec;
    load(&s, 40, 9, pl);
    uint32_t nv = pl->m.hp.n_vocab;
    float *want = malloc(nv * sizeof(float)), *got = malloc(nv * sizeof(float));
    run_steps(pl->gm, 0, 10, 0, want);
    /* one position back (the slot before), four back after other tokens
     * (from the start again), then as a pass over several */
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(pl->gm, 9));
    run_steps(pl->gm, 9, 10, 0, got);
    TEST_ASSERT_TRUE_MESSAGE(fixture_rel_diff(got, want, nv) == 0.0, "one back");
    run_steps(pl->gm, 10, 16, 100, got);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(pl->gm, 7));
    run_steps(pl->gm, 7, 10, 0, got);
    double e1 = fixture_rel_diff(got, want, nv);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(pl->gm, 5));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_prefill(pl->gm, 5, 5, GPU_STEP_LOGITS));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_read_logits(pl->gm, got));
    double e2 = fixture_rel_diff(got, want, nv);
    printf("recurrent rollback: logits off by %.3g (steps after running 0..6 again), %.3g (a "
           "pass)\n", e1, e2);
    /* (the tokens run again go as one small batch: another order of sums) */
    TEST_ASSERT_TRUE_MESSAGE(e1 < 1e-5, "steps after a rollback differ from the first run");
    TEST_ASSERT_TRUE_MESSAGE(e2 < 1e-5, "a pass after a rollback differs from the first run");
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, gpu_model_step(pl->gm, 11, 0));

    /* a session file of 10 tokens, after the state moved on */
    run_steps(pl->gm, 0, 14, 0, got);
    int32_t ids[10];
    for (uint32_t p = 0; p < 10; p++)
        ids[p] = token_at(p, nv);
    char path[512];
    snprintf(path, sizeof path, "%s", temp_path("recurrent.bin"));
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, session_save(pl->gm, path, ids, 10),
                                  glesllm_last_error());
    load(&s, 40, 9, pb);
    uint32_t n = 0;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, session_load(pb->gm, path, ids, 10, &n),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT(10, n);
    /* the last token run again from the state before it, as a prompt whose
     * every token is cached is */
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(pb->gm, 9));
    run_steps(pb->gm, 9, 10, 0, got);
    TEST_ASSERT_TRUE_MESSAGE(fixture_rel_diff(got, want, nv) == 0.0, "a restored state");
    int32_t other[10];
    memcpy(other, ids, sizeof other);
    other[6] = (other[6] + 1) % (int32_t)nv;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, session_load(pb->gm, path, other, 10, &n));
    TEST_ASSERT_EQUAL_UINT(0, n);
    TEST_ASSERT_EQUAL_UINT(0, gpu_model_n_past(pb->gm));
    remove(path);
    free(want);
    free(got);
}

/* A recurrent model (Mamba) keeps no past positions, only the state after
 * them: the state before and after the last pass, and running the tokens
 * again from there (or from the start) for a rollback further back. Rolled
 * back and run again it gives the logits of never having gone past; a
 * session file restores its state (the whole prompt, or nothing of a
 * prompt that parts from the file's); greedy speculative decoding, with
 * Mamba as the target and as the draft, gives the target's ids alone. The
 * same of Jamba, whose attention layers keep a KV cache beside, and of
 * RWKV-7. */
static void test_recurrent_state_rolls_back(void)
{
    demo_spec s = fixture_small_spec("mamba", GGML_TYPE_Q8_0);
    s.n_vocab = 64;
    loaded L, B, Q;
    check_recurrent_rollback(&s, &L, &B);
    /* the same model as the draft, and a Q4_0 one */
    demo_spec q4 = s;
    q4.type = q4.embd_type = q4.out_type = GGML_TYPE_Q4_0;
    load(&q4, 40, 0, &Q);
    int32_t p1[] = { 1, 17, 33, 5 };
    check_greedy(L.gm, B.gm, true, p1, 4, 30, "mamba, same model");
    check_greedy(L.gm, Q.gm, false, p1, 4, 30, "mamba, Q4_0 draft");
    /* a drafting round: back to 6 (from the start: 6 tokens again), 8 steps,
     * back to 9: from the state at the round's start (the anchor), 3 tokens
     * again, not 9 */
    float *lg = malloc(64 * sizeof(float));
    TEST_ASSERT_NOT_NULL(lg);
    run_steps(Q.gm, 0, 10, 0, lg);
    uint64_t r0 = gpu_model_replayed(Q.gm);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(Q.gm, 6));
    run_steps(Q.gm, 6, 14, 0, lg);
    TEST_ASSERT_EQUAL_UINT64(6, gpu_model_replayed(Q.gm) - r0);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(Q.gm, 9));
    run_steps(Q.gm, 9, 10, 0, lg);
    TEST_ASSERT_EQUAL_UINT64(6 + 3, gpu_model_replayed(Q.gm) - r0);
    free(lg);
    fixture_unload(&Q);
    fixture_unload(&B);
    fixture_unload(&L);
    /* Jamba: the KV cache of its attention layers and the states of the
     * others roll back together */
    demo_spec j = fixture_small_spec("jamba", GGML_TYPE_Q8_0);
    j.n_vocab = 64;
    j.n_embd = 64;
    j.n_layer = 3;
    check_recurrent_rollback(&j, &L, &B);
    fixture_unload(&B);
    fixture_unload(&L);
    /* RWKV-7: its token shifts and WKV states; greedy with itself as the
     * draft */
    demo_spec r = fixture_small_spec("rwkv7", GGML_TYPE_Q8_0);
    r.n_vocab = 64;
    r.n_embd = 64;
    r.head_dim = 32;
    check_recurrent_rollback(&r, &L, &B);
    check_greedy(L.gm, B.gm, true, p1, 4, 30, "rwkv7, same model");
    fixture_unload(&B);
    fixture_unload(&L);
}

static void test_draft_must_fit_the_target(void)
{
    demo_spec s = fixture_small_spec("llama", GGML_TYPE_Q8_0), o = s;
    o.n_vocab = 301;
    loaded T, D;
    load(&s, 16, 0, &T);
    load(&o, 16, 0, &D);
    gen_options go;
    memset(&go, 0, sizeof go);
    int32_t prompt[] = { 1, 2 };
    go.prompt = prompt;
    go.n_prompt = 2;
    go.n_predict = 4;
    go.draft = D.gm;
    gen_stats gs;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT, engine_generate(T.gm, &go, &gs));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "vocabulary"));
    fixture_unload(&D);
    fixture_unload(&T);
}

/* gpu_model_read_act (bench_logits' probe): what a step leaves of the last
 * layer, and what a small prefill leaves for each of its tokens, are the same
 * values for the same token at the same position (within 1e-5: the default
 * kernels give the same bits, GLESLLM_F16_DOT=0's f32 products sum a batch in
 * another order); a row past the batch is an error. */
static void test_read_act_step_and_small(void)
{
    demo_spec s = fixture_small_spec("llama", GGML_TYPE_Q8_0);
    loaded L;
    load(&s, 32, 9, &L);
    const model_hparams *hp = &L.m.hp;
    size_t len[3] = { (size_t)hp->n_head * hp->head_dim, hp->n_ff, hp->n_embd };
    const gpu_act_kind kinds[3] = { GPU_ACT_ATTN, GPU_ACT_HIDDEN, GPU_ACT_X };
    size_t most = len[0] > len[1] ? len[0] : len[1];
    most = most > len[2] ? most : len[2];
    float *a = malloc(most * sizeof(float)), *b = malloc(most * sizeof(float));
    float *logits = malloc(hp->n_vocab * sizeof(float));
    TEST_ASSERT_TRUE(a && b && logits);
    run_steps(L.gm, 0, 6, 0, logits);
    for (int k = 0; k < 3; k++) {
        uint32_t n = 0, m = 0;
        /* the step at position 5, then positions 4 and 5 again as a batch */
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_read_act(L.gm, kinds[k], false, 0, a, &n));
        TEST_ASSERT_EQUAL_UINT((uint32_t)len[k], n);
        /* (a step at 4 first, so that the step's rows no longer hold 5's) */
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(L.gm, 4));
        run_steps(L.gm, 4, 5, 0, logits);
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(L.gm, 4));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_prefill(L.gm, 4, 2, 0));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_read_act(L.gm, kinds[k], true, 1, b, &m));
        TEST_ASSERT_EQUAL_UINT(n, m);
        double d = 0.0, mag = 0.0;
        for (uint32_t i = 0; i < n; i++) {
            d = fmax(d, fabs((double)a[i] - b[i]));
            mag = fmax(mag, fabs((double)a[i]));
        }
        TEST_ASSERT_TRUE(mag > 0.0);
        TEST_ASSERT_TRUE_MESSAGE(d <= 1e-5 * mag, "a batch's activations are not the step's");
        run_steps(L.gm, 5, 6, 0, logits); /* the step again, for the next kind */
    }
    uint32_t n;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          gpu_model_read_act(L.gm, GPU_ACT_X, true, 9, a, &n));
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_INVALID_ARGUMENT,
                          gpu_model_read_act(L.gm, GPU_ACT_X, false, 1, a, &n));
    free(a);
    free(b);
    free(logits);
    fixture_unload(&L);
}

/* Room for n K (k[i]) and V (v[i]) values twice, freed by kv_free */
static void kv_alloc(size_t n, uint16_t *k[2], uint16_t *v[2])
{
    for (int i = 0; i < 2; i++) {
        k[i] = malloc(n * 2);
        v[i] = malloc(n * 2);
        TEST_ASSERT_TRUE(k[i] && v[i]);
    }
}

static void kv_free(uint16_t *k[2], uint16_t *v[2])
{
    for (int i = 0; i < 2; i++) {
        free(k[i]);
        free(v[i]);
    }
}

/* A verifying pass's logits and K/V are a decode step's to the bit with the
 * default matvecs (f16 products; f32 pairs on a driver without f16 types, as
 * here: matvec.c f16_dot_choice), whose several-token kernels read x made
 * ready (XG): the same lanes a row and units a lane as the one-token kernels,
 * their sums added in the same order (the subgroups' or the tree's), the
 * norm's sum of squares as the step splits it, each query's attention in the
 * step's chunks (past ATTN_ONE_CHUNK positions here). So greedy ids with
 * --draft are the target's alone, near-ties too. Every format whose kernels
 * agree so on NVIDIA too (bench/RESULTS.md "Verifying drafted tokens"). */
static void pass_equals_steps(uint32_t type)
{
    demo_spec s = fixture_small_spec("llama", type);
    loaded L;
    const uint32_t p0 = ATTN_ONE_CHUNK + 6, n = 9;
    load(&s, p0 + 26, n, &L);
    const uint32_t nv = L.m.hp.n_vocab;
    float *step = malloc((size_t)n * nv * sizeof(float));
    float *pass = malloc((size_t)n * nv * sizeof(float));
    size_t kvn = (size_t)L.m.hp.n_head_kv * L.m.hp.head_dim * n;
    uint16_t *k[2], *v[2];
    kv_alloc(kvn, k, v);
    TEST_ASSERT_TRUE(step && pass);
    run_steps(L.gm, 0, p0, 0, step);
    for (uint32_t i = 0; i < n; i++)
        run_steps(L.gm, p0 + i, p0 + i + 1, 0, step + (size_t)i * nv);
    uint32_t last = L.m.hp.n_layer - 1;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_kv_io(L.gm, last, p0, n, k[0], v[0], false));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(L.gm, p0));
    for (uint32_t i = 0; i < n; i++)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_set_token(L.gm, p0 + i, token_at(p0 + i, nv)));
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gpu_model_prefill(L.gm, p0, n, GPU_STEP_ALL_LOGITS),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_read_logits_all(L.gm, 0, n, pass));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_kv_io(L.gm, last, p0, n, k[1], v[1], false));
    TEST_ASSERT_EQUAL_MEMORY_MESSAGE(k[0], k[1], kvn * 2, "a pass's K: not the steps'");
    TEST_ASSERT_EQUAL_MEMORY_MESSAGE(v[0], v[1], kvn * 2, "a pass's V: not the steps'");
    TEST_ASSERT_EQUAL_MEMORY_MESSAGE(step, pass, (size_t)n * nv * sizeof(float),
                                     "a pass's logits: not the steps'");
    /* shorter passes, each through another set of kernels (model/kernels.c
     * multi_small_sets: 2, 3, 5 tokens and the 9 of n_small, the last two
     * with fewer tokens than the set's; matvec.c xg_token_group loads
     * their units of x in groups of tokens): the first steps', to the bit */
    static const uint32_t shorter[] = { 2, 3, 4, 7 };
    size_t per_pos = kvn / n;
    for (size_t j = 0; j < sizeof shorter / sizeof shorter[0]; j++) {
        uint32_t m = shorter[j];
        char what[64];
        snprintf(what, sizeof what, "a pass of %u tokens: not the steps'", m);
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_truncate(L.gm, p0));
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK,
                                      gpu_model_prefill(L.gm, p0, m, GPU_STEP_ALL_LOGITS),
                                      glesllm_last_error());
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_read_logits_all(L.gm, 0, m, pass));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_kv_io(L.gm, last, p0, m, k[1], v[1], false));
        TEST_ASSERT_EQUAL_MEMORY_MESSAGE(k[0], k[1], per_pos * m * 2, what);
        TEST_ASSERT_EQUAL_MEMORY_MESSAGE(v[0], v[1], per_pos * m * 2, what);
        TEST_ASSERT_EQUAL_MEMORY_MESSAGE(step, pass, (size_t)m * nv * sizeof(float), what);
    }
    kv_free(k, v);
    free(step);
    free(pass);
    fixture_unload(&L);
}

static void test_pass_equals_steps_to_the_bit(void)
{
    /* (the formats a demo model can be quantized to; bench_agree compares
     * every format's kernels on a GPU) */
    pass_equals_steps(GGML_TYPE_Q4_0);
    pass_equals_steps(GGML_TYPE_Q8_0);
    pass_equals_steps(GGML_TYPE_Q4_K);
    pass_equals_steps(GGML_TYPE_Q6_K);
}

/* Greedy ids of a target loaded with small batches of n_small tokens (and
 * a draft) against one loaded with the default, from a prompt of n_prompt
 * tokens; then the prompt's K/V in both, every layer, bit for bit. */
static void prompt_as_without_the_draft(uint32_t n_small, uint32_t n_prompt)
{
    demo_spec s = fixture_small_spec("llama", GGML_TYPE_Q8_0);
    loaded P, T, D;
    load(&s, 48, 0, &P);                 /* as `glesllm run` without --draft */
    load(&s, 48, (int32_t)n_small, &T); /* as with --draft-max n_small - 1 */
    load(&s, 48, 0, &D);
    TEST_ASSERT_TRUE(gpu_model_n_small(P.gm) < n_prompt && gpu_model_n_small(T.gm) >= n_prompt);
    int32_t prompt[32];
    for (uint32_t i = 0; i < n_prompt; i++)
        prompt[i] = token_at(i, P.m.hp.n_vocab);
    sampler_params sp = greedy();
    collected plain, spec;
    generate(P.gm, NULL, prompt, n_prompt, 6, 0, 0, &sp, &plain);
    generate(T.gm, D.gm, prompt, n_prompt, 6, 4, 4, &sp, &spec);
    TEST_ASSERT_EQUAL_UINT(plain.n, spec.n);
    TEST_ASSERT_EQUAL_MEMORY(plain.ids, spec.ids, plain.n * sizeof(int32_t));
    size_t kvn = (size_t)P.m.hp.n_head_kv * P.m.hp.head_dim * n_prompt;
    uint16_t *k[2], *v[2];
    kv_alloc(kvn, k, v);
    for (uint32_t l = 0; l < P.m.hp.n_layer; l++) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_kv_io(P.gm, l, 0, n_prompt, k[0], v[0], false));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_kv_io(T.gm, l, 0, n_prompt, k[1], v[1], false));
        TEST_ASSERT_EQUAL_MEMORY_MESSAGE(k[0], k[1], kvn * 2, "the prompt's K: not plain's");
        TEST_ASSERT_EQUAL_MEMORY_MESSAGE(v[0], v[1], kvn * 2, "the prompt's V: not plain's");
    }
    kv_free(k, v);
    fixture_unload(&D);
    fixture_unload(&T);
    fixture_unload(&P);
}

/* With --draft the target is loaded with small batches raised for its
 * verifying passes (cmd_run: draft_max + 1 tokens); a prompt no longer than
 * that would then run through them instead of the tiled prefill that a run
 * without --draft takes, and its K/V would round otherwise; so would a
 * prompt of more than 16 tokens take the few-token attention. The prompt
 * runs as plain decoding runs it (GPU_STEP_PLAIN): its K/V are the very same
 * bits. */
static void test_prompt_runs_as_without_the_draft(void)
{
    prompt_as_without_the_draft(17, 12); /* the small batches */
    prompt_as_without_the_draft(33, 20); /* and the attention */
}

/* The shared llama.cpp-quantized model as draft of the F32 one, on the
 * reference prompts: the same greedy ids as the F32 model alone. */
static void test_shared_models_speculative(void)
{
    TEST_NEEDS_SHARED(dir);
    char tpath[1024], dpath[1024], rpath[1024];
    snprintf(tpath, sizeof tpath, "%s/models/tiny-spm-f32.gguf", dir);
    snprintf(dpath, sizeof dpath, "%s/models/tiny-spm-q4_0.gguf", dir);
    snprintf(rpath, sizeof rpath, "%s/reference/tiny-spm-f32.jsonl", dir);
    gguf_file *tf, *df;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(tpath, &tf), glesllm_last_error());
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(dpath, &df), glesllm_last_error());
    loaded T, D;
    memset(&T, 0, sizeof T);
    memset(&D, 0, sizeof D);
    gpu_model_options to = { 128 }, dopt = { 128 };
    to.n_small = 9;
    fixture_load_file(ctx, tf, &to, false, &T);
    fixture_load_file(ctx, df, &dopt, false, &D);
    ref_case *cases = calloc(3, sizeof *cases);
    TEST_ASSERT_NOT_NULL(cases);
    int n_cases = ref_read(rpath, cases, 3);
    TEST_ASSERT_TRUE_MESSAGE(n_cases > 0, "no cases in the reference file");
    for (int c = 0; c < n_cases; c++)
        check_greedy(T.gm, D.gm, false, (const int32_t *)cases[c].prompt_ids,
                     (uint32_t)cases[c].n_prompt, 24, "tiny-spm Q4_0 draft of F32");
    free(cases);
    fixture_unload(&D);
    fixture_unload(&T);
}

/* ---- sampling ------------------------------------------------------------------ */

static sampler_dist make_dist(const int32_t *ids, const double *w, uint32_t n)
{
    sampler_dist d;
    double t = 0.0;
    for (uint32_t i = 0; i < n; i++)
        t += w[i];
    d.n = n;
    for (uint32_t i = 0; i < n; i++) {
        d.ids[i] = ids[i];
        d.p[i] = w[i] / t;
    }
    return d;
}

/* chi-square of counts against probabilities (bins expecting fewer than 5
 * merged into one); *df its degrees of freedom */
static double chi_square(const uint32_t *count, const double *p, uint32_t bins, uint32_t n,
                         uint32_t *df)
{
    double chi = 0.0, rest_e = 0.0, rest_o = 0.0;
    uint32_t used = 0;
    for (uint32_t i = 0; i < bins; i++) {
        double e = p[i] * n;
        if (e < 5.0) {
            rest_e += e;
            rest_o += count[i];
            continue;
        }
        chi += (count[i] - e) * (count[i] - e) / e;
        used++;
    }
    if (rest_e > 0.0) {
        chi += (rest_o - rest_e) * (rest_o - rest_e) / fmax(rest_e, 1e-9);
        used++;
    } else if (rest_o > 0.0) {
        chi += 1e9; /* drawn where the target gives no probability at all */
    }
    *df = used > 1 ? used - 1 : 1;
    return chi;
}

/* far above the chi-square's df +- sqrt(2 df) spread: p < 1e-6 or so */
static double chi_limit(uint32_t df) { return df + 7.0 * sqrt(2.0 * df) + 10.0; }

/* The acceptance rule alone: drafts drawn from q, kept or replaced by
 * sampler_speculative, come out distributed as p (q has a token p lacks and
 * misses one p has). */
static void test_acceptance_rule_gives_the_target_distribution(void)
{
    const int32_t pid[] = { 4, 7, 9, 2, 5 }, qid[] = { 7, 4, 2, 11 };
    const double pw[] = { 0.30, 0.25, 0.20, 0.15, 0.10 }, qw[] = { 0.50, 0.10, 0.30, 0.10 };
    sampler_dist p = make_dist(pid, pw, 5), q = make_dist(qid, qw, 4);
    sampler_params sp = sampler_defaults();
    sp.seed = 1234;
    sampler draw, rule;
    sampler_init(&draw, &sp);
    sp.seed = 99;
    sampler_init(&rule, &sp);
    uint32_t count[12] = { 0 }, kept = 0, n = 200000;
    for (uint32_t i = 0; i < n; i++) {
        int32_t d = sampler_draw(&draw, &q), out;
        bool k = sampler_speculative(&rule, &p, &q, d, &out);
        TEST_ASSERT_TRUE(out >= 0 && out < 12);
        TEST_ASSERT_TRUE(!k || out == d);
        kept += k;
        count[out]++;
    }
    double want[12] = { 0 }, overlap = 0.0;
    for (uint32_t i = 0; i < p.n; i++) {
        want[p.ids[i]] = p.p[i];
        overlap += fmin(p.p[i], sampler_dist_prob(&q, p.ids[i]));
    }
    uint32_t df;
    double chi = chi_square(count, want, 12, n, &df);
    printf("acceptance rule: chi-square %.2f (df %u, limit %.1f), kept %.4f (expected %.4f)\n",
           chi, df, chi_limit(df), (double)kept / n, overlap);
    TEST_ASSERT_TRUE_MESSAGE(chi < chi_limit(df), "the output does not follow the target");
    TEST_ASSERT_EQUAL_UINT(0, count[11]); /* the draft's token the target never picks */
    /* kept with probability sum min(p, q): 5 sigma of a binomial */
    TEST_ASSERT_TRUE_MESSAGE(fabs((double)kept / n - overlap) < 5.0 * sqrt(overlap * (1 - overlap) / n),
                             "drafts kept more or less often than sum min(p, q)");
}

/* The target's distribution of the token after `prompt` (a plain step's
 * candidates through the sampler). */
static void target_distribution(gpu_model *gm, const int32_t *prompt, uint32_t n,
                                const sampler_params *sp, double *p, uint32_t nv)
{
    for (uint32_t i = 0; i < n; i++)
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_set_token(gm, i, prompt[i]));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_set_sampling(gm, sampler_candidates(sp), 1.0f, 64));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_prefill(gm, 0, n, GPU_STEP_CANDIDATES));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_model_wait(gm));
    float vals[GPU_MAX_CANDIDATES], gmax, gsum;
    int32_t ids[GPU_MAX_CANDIDATES];
    uint32_t k = gpu_model_candidates(gm, vals, ids, &gmax, &gsum);
    sampler_dist d;
    sampler_dist_make(sp, vals, ids, k, gmax, gsum, &d);
    memset(p, 0, nv * sizeof *p);
    for (uint32_t i = 0; i < d.n; i++)
        p[d.ids[i]] = d.p[i];
}

/* Whole-engine check on a vocabulary of 24 tokens: a draft with other
 * weights (seed) proposes, the target decides; over many seeds the first
 * generated token follows the target's distribution after the prompt, and
 * the second, given the most frequent first, the target's after that. */
static void test_speculative_sampling_follows_the_target(void)
{
    const uint32_t nv = 24, runs = 500; /* (the limit is loose: gross errors fail at 500) */
    demo_spec s = fixture_small_spec("llama", GGML_TYPE_F32), o;
    s.n_vocab = nv;
    s.n_layer = 1;
    s.n_embd = 64;
    s.n_head = 2;
    s.n_head_kv = 1;
    s.n_ff = 96;
    o = s;
    o.seed = 99;
    loaded T, D;
    load(&s, 16, 0, &T);
    load(&o, 16, 0, &D);
    sampler_params sp = sampler_defaults();
    sp.temp = 1.5f; /* flat: many tokens in play */
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    const int32_t prompt[3] = { 1, 5, 9 };
    uint32_t first[24] = { 0 }, second[24][24];
    memset(second, 0, sizeof second);
    uint64_t drafted = 0, kept = 0;
    for (uint32_t r = 0; r < runs; r++) {
        collected out;
        sp.seed = 1000 + r;
        gen_stats gs = generate(T.gm, D.gm, prompt, 3, 2, 0, 4, &sp, &out);
        TEST_ASSERT_EQUAL_UINT(2, out.n);
        first[out.ids[0]]++;
        second[out.ids[0]][out.ids[1]]++;
        drafted += gs.n_drafted;
        kept += gs.n_accepted;
    }
    double p[24];
    target_distribution(T.gm, prompt, 3, &sp, p, nv);
    uint32_t df, mode = 0;
    double chi = chi_square(first, p, nv, runs, &df);
    printf("speculative sampling: first token chi-square %.2f (df %u, limit %.1f); %llu of %llu "
           "drafted kept\n", chi, df, chi_limit(df), (unsigned long long)kept,
           (unsigned long long)drafted);
    TEST_ASSERT_TRUE_MESSAGE(drafted > 0 && kept > 0 && kept < drafted,
                             "the draft should be kept sometimes and rejected sometimes");
    TEST_ASSERT_TRUE_MESSAGE(chi < chi_limit(df), "the first token does not follow the target");
    for (uint32_t i = 1; i < nv; i++)
        mode = first[i] > first[mode] ? i : mode;
    const int32_t longer[4] = { 1, 5, 9, (int32_t)mode };
    target_distribution(T.gm, longer, 4, &sp, p, nv);
    chi = chi_square(second[mode], p, nv, first[mode], &df);
    printf("speculative sampling: second token after %u (%u runs) chi-square %.2f (df %u, "
           "limit %.1f)\n", mode, first[mode], chi, df, chi_limit(df));
    TEST_ASSERT_TRUE_MESSAGE(chi < chi_limit(df), "the second token does not follow the target");

    /* the target's own weights as draft: p and q agree at every drafted
     * position (the target's logits row a is the draft's step a), so every
     * drafted token is kept, up to rounding of p / q */
    loaded S;
    load(&s, 16, 0, &S);
    drafted = kept = 0;
    for (uint32_t r = 0; r < 20; r++) {
        collected out;
        sp.seed = 7 + r;
        gen_stats gs = generate(T.gm, S.gm, prompt, 3, 12, 0, 4, &sp, &out);
        /* sampling: every token from a round (no plain steps, the first
         * drawn in the first round) */
        TEST_ASSERT_EQUAL_UINT(0, gs.n_plain);
        TEST_ASSERT_EQUAL_UINT(gs.n_gen, gs.n_accepted + gs.n_rounds);
        drafted += gs.n_drafted;
        kept += gs.n_accepted;
    }
    printf("speculative sampling, the model as its own draft: %llu of %llu drafted kept\n",
           (unsigned long long)kept, (unsigned long long)drafted);
    TEST_ASSERT_TRUE(drafted >= 20 * 4);
    TEST_ASSERT_EQUAL_UINT64(drafted, kept);
    fixture_unload(&S);
    fixture_unload(&D);
    fixture_unload(&T);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_acceptance_rule_gives_the_target_distribution);
    /* the matvecs users run (the default tuning): a batch's sums are the
     * steps' to the bit (test_pass_equals_steps_to_the_bit) */
    ctx = test_open_gpu();
    if (!ctx)
        return 1;
    RUN_TEST(test_rollback_then_reappend_gives_the_same_logits);
    RUN_TEST(test_session_file_restores_the_cache);
    RUN_TEST(test_session_file_of_a_ring);
    RUN_TEST(test_pipelined_greedy_equals_one_step_at_a_time);
    RUN_TEST(test_greedy_speculative_equals_target_alone);
    RUN_TEST(test_prompt_runs_as_without_the_draft);
    RUN_TEST(test_read_act_step_and_small);
    RUN_TEST(test_pass_equals_steps_to_the_bit);
    RUN_TEST(test_draft_must_fit_the_target);
    RUN_TEST(test_recurrent_state_rolls_back);
    RUN_TEST(test_speculative_sampling_follows_the_target);
    RUN_TEST(test_shared_models_speculative);
    gpu_context_destroy(ctx);
    return test_exit_code(UNITY_END());
}
