/* The CPU quantizers and `glesllm quantize`'s model conversion: our error
 * against llama.cpp's on the same tensors, the tensor types of each mix
 * against llama.cpp's own files, the row-length fallback, metadata, and an
 * interrupted run leaving no file behind. */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/demo_model.h"
#include "model/model.h"
#include "quant/quant.h"
#include "quant/quantize_model.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

/* relative RMS error of quantize -> dequantize of x as `type` */
static double our_error(uint32_t type, const float *x, size_t n)
{
    uint64_t ne[1] = { n }, bytes;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, ggml_tensor_bytes(type, 1, ne, &bytes));
    void *q = malloc((size_t)bytes);
    float *y = malloc(n * sizeof *y);
    TEST_ASSERT_TRUE(q && y);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, quant_quantize(type, x, q, n), glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_dequantize(type, q, y, n));
    double e = rel_rms_error(x, y, n);
    free(q);
    free(y);
    return e;
}

/* Every tensor llama.cpp quantized in its files: our quantizer of the same
 * type on the same F32 tensor has no larger relative RMS error. */
static void test_error_no_worse_than_llama_cpp(void)
{
    TEST_NEEDS_SHARED(dir);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/tiny-spm-f32.gguf", dir);
    gguf_file *ref;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(path, &ref), glesllm_last_error());
    const char *names[] = { "q8_0", "q6_k", "q4_k_m", "q4_0" };
    int checked[GGML_TYPE_MAX_ID] = { 0 };
    double worst_ratio[GGML_TYPE_MAX_ID] = { 0 };
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/models/tiny-spm-%s.gguf", dir, names[k]);
        gguf_file *f;
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(path, &f), glesllm_last_error());
        for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
            const gguf_tensor *t = gguf_tensor_at(f, i), *r = gguf_find_tensor(ref, t->name);
            if (t->type == GGML_TYPE_F32 || !quant_can_quantize(t->type))
                continue;
            size_t n = (size_t)t->n_elements;
            float *y = malloc(n * sizeof *y);
            TEST_ASSERT_NOT_NULL(y);
            TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_dequantize(t->type, t->data, y, n));
            double theirs = rel_rms_error(r->data, y, n), ours = our_error(t->type, r->data, n);
            free(y);
            char msg[200];
            snprintf(msg, sizeof msg, "%s %s (%s): ours %.5f, llama.cpp %.5f", names[k], t->name,
                     ggml_type_name(t->type), ours, theirs);
            TEST_ASSERT_TRUE_MESSAGE(ours <= theirs, msg);
            checked[t->type]++;
            if (ours / theirs > worst_ratio[t->type])
                worst_ratio[t->type] = ours / theirs;
        }
        gguf_close(f);
    }
    gguf_close(ref);
    const uint32_t types[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };
    for (int i = 0; i < 4; i++) {
        printf("%s: %d tensors, worst ours/llama.cpp error ratio %.3f\n", ggml_type_name(types[i]),
               checked[types[i]], worst_ratio[types[i]]);
        TEST_ASSERT_GREATER_THAN_INT(3, checked[types[i]]);
    }
}

/* The formats no shared file holds: error against a bound on random
 * normal-ish data (levels: 15 and 31 steps over the block's range). */
static void test_other_quantizers_round_trip(void)
{
    enum { N = 256 * 64 };
    static float x[N];
    test_rng rng = { 5 };
    for (int i = 0; i < N; i++) /* sum of uniforms: roughly normal */
        x[i] = rng_float(&rng, -1, 1) + rng_float(&rng, -1, 1) + rng_float(&rng, -1, 1);
    const struct { uint32_t type; double bound; } cases[] = {
        { GGML_TYPE_F16, 0.0005 }, { GGML_TYPE_BF16, 0.004 }, { GGML_TYPE_Q4_1, 0.09 },
        { GGML_TYPE_Q5_0, 0.05 },  { GGML_TYPE_Q5_1, 0.045 }, { GGML_TYPE_Q8_0, 0.006 },
        { GGML_TYPE_Q4_0, 0.10 },  { GGML_TYPE_Q4_K, 0.09 },  { GGML_TYPE_Q6_K, 0.025 },
        { GGML_TYPE_Q5_K, 0.045 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double e = our_error(cases[i].type, x, N);
        char msg[120];
        snprintf(msg, sizeof msg, "%s: relative RMS error %.5f, bound %.4f",
                 ggml_type_name(cases[i].type), e, cases[i].bound);
        TEST_ASSERT_TRUE_MESSAGE(e < cases[i].bound, msg);
    }
    /* a constant block and an all-zero block survive */
    float c[256], z[256] = { 0 }, y[256];
    for (int i = 0; i < 256; i++)
        c[i] = 0.25f;
    uint8_t buf[512];
    const uint32_t all[] = { GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                             GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_quantize(all[i], z, buf, 256));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_dequantize(all[i], buf, y, 256));
        for (int j = 0; j < 256; j++)
            TEST_ASSERT_FLOAT_WITHIN(0.0, 0.0, y[j]);
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_quantize(all[i], c, buf, 256));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_dequantize(all[i], buf, y, 256));
        for (int j = 0; j < 256; j++)
            TEST_ASSERT_FLOAT_WITHIN(0.01, 0.25, y[j]);
    }
}

static char notes[4096];
static void collect_note(void *ctx, const char *msg)
{
    (void)ctx;
    strncat(notes, msg, sizeof notes - strlen(notes) - 2);
    strcat(notes, "\n");
}

static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/glesllm-test-quantize-%ld-%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (long)getpid(), name);
}

/* Each mix gives exactly the tensor types of llama.cpp's file of that mix,
 * and the metadata of the input plus file_type / quantization_version. */
static void test_mixes_match_llama_cpp_files(void)
{
    TEST_NEEDS_SHARED(dir);
    char in[1024], ref[1024], out[1024];
    snprintf(in, sizeof in, "%s/models/tiny-spm-f32.gguf", dir);
    const struct { const char *type, *file; } mixes[] = {
        { "Q4_0", "q4_0" }, { "Q8_0", "q8_0" }, { "Q6_K", "q6_k" }, { "Q4_K_M", "q4_k_m" }
    };
    gguf_file *src;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_open(in, &src));
    for (int k = 0; k < 4; k++) {
        snprintf(ref, sizeof ref, "%s/models/tiny-spm-%s.gguf", dir, mixes[k].file);
        tmp_path(out, sizeof out, mixes[k].file);
        quant_model_callbacks cb = { NULL, collect_note, NULL, NULL, 2 };
        int ft = quant_ftype_from_name(mixes[k].type);
        TEST_ASSERT_TRUE(ft >= 0);
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, quant_model(in, out, (quant_ftype)ft, &cb),
                                      glesllm_last_error());
        gguf_file *a, *b;
        TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(out, &a), glesllm_last_error());
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_open(ref, &b));
        TEST_ASSERT_EQUAL_UINT64(gguf_tensor_count(b), gguf_tensor_count(a));
        for (uint64_t i = 0; i < gguf_tensor_count(b); i++) { /* by name: the order differs */
            const gguf_tensor *tb = gguf_tensor_at(b, i), *ta = gguf_find_tensor(a, tb->name);
            TEST_ASSERT_NOT_NULL_MESSAGE(ta, tb->name);
            char msg[160];
            snprintf(msg, sizeof msg, "%s %s: ours %s, llama.cpp %s", mixes[k].type, tb->name,
                     ggml_type_name(ta->type), ggml_type_name(tb->type));
            TEST_ASSERT_EQUAL_STRING(tb->name, ta->name);
            TEST_ASSERT_EQUAL_UINT32_MESSAGE(tb->type, ta->type, msg);
        }
        uint32_t fa, fb;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u32(a, "general.file_type", &fa));
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_get_u32(b, "general.file_type", &fb));
        TEST_ASSERT_EQUAL_UINT32(fb, fa);
        /* every key of the input is there */
        for (uint64_t i = 0; i < gguf_kv_count(src); i++) {
            char key[256];
            gguf_str_copy(gguf_kv_at(src, i)->key, key, sizeof key);
            TEST_ASSERT_NOT_NULL_MESSAGE(gguf_find(a, key), key);
        }
        gguf_close(a);
        gguf_close(b);
        unlink(out);
    }
    gguf_close(src);
}

static glesllm_status fill_pattern(void *ctx, void *buf, uint64_t off, size_t n)
{
    (void)ctx;
    float *f = buf;
    for (size_t i = 0; i < n / 4; i++)
        f[i] = (float)sin((double)(off / 4 + i) * 0.37);
    return GLESLLM_OK;
}

/* a small F32 model whose weights have rows of `cols` values */
static void write_model(const char *path, uint64_t cols)
{
    gguf_writer *w;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
    gguf_writer_set_str(w, "general.architecture", "llama");
    uint64_t ne2[2] = { cols, 64 }, ne1[1] = { cols };
    gguf_writer_add_tensor_fill(w, "token_embd.weight", GGML_TYPE_F32, 2, ne2, fill_pattern, NULL);
    gguf_writer_add_tensor_fill(w, "blk.0.attn_norm.weight", GGML_TYPE_F32, 1, ne1, fill_pattern, NULL);
    gguf_writer_add_tensor_fill(w, "blk.0.attn_q.weight", GGML_TYPE_F32, 2, ne2, fill_pattern, NULL);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_writer_write(w, path), glesllm_last_error());
    gguf_writer_destroy(w);
}

static uint32_t type_of(const char *path, const char *tensor)
{
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gguf_open(path, &f), glesllm_last_error());
    const gguf_tensor *t = gguf_find_tensor(f, tensor);
    TEST_ASSERT_NOT_NULL(t);
    uint32_t type = t->type;
    gguf_close(f);
    return type;
}

static void test_row_length_fallback(void)
{
    char in[512], out[512];
    tmp_path(in, sizeof in, "odd.gguf");
    tmp_path(out, sizeof out, "odd-q.gguf");
    quant_model_callbacks cb = { NULL, collect_note, NULL, NULL, 0 };
    /* 96 values: no K block fits, 32 does */
    write_model(in, 96);
    notes[0] = 0;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, quant_model(in, out, QUANT_FTYPE_Q4_K_M, &cb),
                                  glesllm_last_error());
    TEST_ASSERT_EQUAL_UINT32(GGML_TYPE_Q5_0, type_of(out, "blk.0.attn_q.weight"));
    TEST_ASSERT_EQUAL_UINT32(GGML_TYPE_Q8_0, type_of(out, "token_embd.weight")); /* Q6_K -> Q8_0 */
    TEST_ASSERT_EQUAL_UINT32(GGML_TYPE_F32, type_of(out, "blk.0.attn_norm.weight"));
    TEST_ASSERT_NOT_NULL(strstr(notes, "blk.0.attn_q.weight: rows of 96 values are not whole Q4_K blocks; using Q5_0"));
    /* 40 values: not even 32 divides it */
    write_model(in, 40);
    notes[0] = 0;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, quant_model(in, out, QUANT_FTYPE_Q4_0, &cb));
    TEST_ASSERT_EQUAL_UINT32(GGML_TYPE_F16, type_of(out, "blk.0.attn_q.weight"));
    TEST_ASSERT_NOT_NULL(strstr(notes, "using F16"));
    unlink(in);
    unlink(out);
}

/* f (closed here) opens as a model; in and out removed */
static void opens_as_model(gguf_file *f, const char *in, const char *out)
{
    model m;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, model_open(f, &m), glesllm_last_error());
    model_close(&m);
    gguf_close(f);
    unlink(in);
    unlink(out);
}

/* The demo model of s written to `in`, quantized to `out` as ft says, opened */
static gguf_file *quantize_demo(const demo_spec *s, const char *in, const char *out, quant_ftype ft)
{
    demo_model *d;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, demo_model_create(s, &d), glesllm_last_error());
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_write(demo_model_writer(d), in));
    demo_model_destroy(d);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, quant_model(in, out, ft, NULL), glesllm_last_error());
    gguf_file *f;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_open(out, &f));
    return f;
}

/* Q4_K_M of a Mixtral-layout model (8 experts): the stacked experts are
 * quantized whole (3-D, the same shape), the router is kept, and llama.cpp's
 * rules for 8-expert models hold: attn_k and attn_v Q8_0, attn_output Q5_K,
 * ffn_down_exps Q6_K in the layers use_more_bits picks by the layer of its
 * name. The file opens as a model. */
static void test_expert_mix(void)
{
    char in[512], out[512];
    tmp_path(in, sizeof in, "moe.gguf");
    tmp_path(out, sizeof out, "moe-q.gguf");
    demo_spec s = demo_spec_default();
    s.n_layer = 8;
    s.n_embd = 256;
    s.n_ff = 256;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_vocab = 300;
    s.type = s.embd_type = s.out_type = GGML_TYPE_F32;
    s.n_expert = 8;
    s.n_expert_used = 2;
    gguf_file *f = quantize_demo(&s, in, out, QUANT_FTYPE_Q4_K_M);
    for (unsigned i = 0; i < s.n_layer; i++) {
        char name[64];
        struct {
            const char *t;
            uint32_t want;
        } w[] = { { "ffn_gate_inp.weight", GGML_TYPE_F32 },  { "attn_k.weight", GGML_TYPE_Q8_0 },
                  { "attn_v.weight", GGML_TYPE_Q8_0 },       { "attn_output.weight", GGML_TYPE_Q5_K },
                  { "attn_q.weight", GGML_TYPE_Q4_K },       { "ffn_gate_exps.weight", GGML_TYPE_Q4_K },
                  { "ffn_up_exps.weight", GGML_TYPE_Q4_K },
                  /* use_more_bits of 8 layers: 0, 3, 6, 7 */
                  { "ffn_down_exps.weight",
                    i == 0 || i == 3 || i == 6 || i == 7 ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K } };
        for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
            snprintf(name, sizeof name, "blk.%u.%s", i, w[k].t);
            const gguf_tensor *t = gguf_find_tensor(f, name);
            TEST_ASSERT_NOT_NULL_MESSAGE(t, name);
            TEST_ASSERT_EQUAL_STRING_MESSAGE(ggml_type_name(w[k].want), ggml_type_name(t->type), name);
            if (strstr(name, "_exps"))
                TEST_ASSERT_EQUAL_UINT64_MESSAGE(8, t->ne[2], name);
        }
    }
    opens_as_model(f, in, out);
}

/* Q4_0 of an RWKV-7 model: its projections quantized, its vectors ([n_embd,
 * 1, 1] ones too) and low-rank paths kept F32 as llama.cpp keeps them; the
 * file opens as a model. */
static void test_rwkv7_mix(void)
{
    char in[512], out[512];
    tmp_path(in, sizeof in, "rwkv.gguf");
    tmp_path(out, sizeof out, "rwkv-q.gguf");
    demo_spec s = demo_spec_default();
    s.arch = "rwkv7";
    s.n_layer = 2;
    s.n_embd = 256; /* (rows of whole Q6_K blocks for the output) */
    s.head_dim = 64;
    s.n_ff = 256;
    s.n_vocab = 300;
    s.type = s.embd_type = s.out_type = GGML_TYPE_F32;
    gguf_file *f = quantize_demo(&s, in, out, QUANT_FTYPE_Q4_0);
    struct {
        const char *t;
        uint32_t want;
    } w[] = { { "blk.1.time_mix_key.weight", GGML_TYPE_Q4_0 },
              { "blk.1.channel_mix_value.weight", GGML_TYPE_Q4_0 },
              { "blk.1.time_mix_w1.weight", GGML_TYPE_F32 },
              { "blk.1.time_mix_g2.weight", GGML_TYPE_F32 },
              { "blk.1.time_mix_lerp_fused.weight", GGML_TYPE_F32 },
              { "blk.1.channel_mix_lerp_k.weight", GGML_TYPE_F32 },
              { "output.weight", GGML_TYPE_Q6_K } };
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++) {
        const gguf_tensor *t = gguf_find_tensor(f, w[k].t);
        TEST_ASSERT_NOT_NULL_MESSAGE(t, w[k].t);
        TEST_ASSERT_EQUAL_STRING_MESSAGE(ggml_type_name(w[k].want), ggml_type_name(t->type), w[k].t);
    }
    opens_as_model(f, in, out);
}

/* the files whose names start with tmp_path(stem)'s, in its folder */
static int count_leftovers(const char *stem)
{
    char path[512];
    tmp_path(path, sizeof path, stem);
    char *prefix = strrchr(path, '/');
    *prefix++ = 0;
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d)
        closedir(d);
    return n;
}

static volatile sig_atomic_t stop_now;
static void cancel_midway(void *ctx, uint64_t index, uint64_t count, const char *name,
                          uint32_t from, uint32_t to, uint64_t done, uint64_t total)
{
    (void)ctx; (void)count; (void)name; (void)from; (void)to; (void)done; (void)total;
    if (index == 1)
        stop_now = 1;
}

static void test_interrupted_or_failed_run_leaves_nothing(void)
{
    char in[512], out[512];
    tmp_path(in, sizeof in, "src.gguf");
    tmp_path(out, sizeof out, "dst.gguf");
    write_model(in, 256);
    stop_now = 0;
    quant_model_callbacks cb = { cancel_midway, NULL, NULL, &stop_now, 1 };
    TEST_ASSERT_TRUE(GLESLLM_OK != quant_model(in, out, QUANT_FTYPE_Q4_0, &cb));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "interrupted"));
    TEST_ASSERT_EQUAL_INT(0, count_leftovers("dst"));
    /* an input that is not GGUF */
    FILE *f = fopen(in, "wb");
    fputs("not a model", f);
    fclose(f);
    TEST_ASSERT_TRUE(GLESLLM_OK != quant_model(in, out, QUANT_FTYPE_Q8_0, NULL));
    TEST_ASSERT_EQUAL_INT(0, count_leftovers("dst"));
    unlink(in);
    TEST_ASSERT_EQUAL_INT(-1, quant_ftype_from_name("Q3_K_XL"));
    TEST_ASSERT_EQUAL_INT(QUANT_FTYPE_Q4_K_M, quant_ftype_from_name("q4_k_m"));
}

/* the input cut short when tensor `cut_at` starts: its bytes (and every
 * later tensor's) are gone */
static const char *cut_path;
static uint64_t cut_at, cut_size;
static void truncate_midway(void *ctx, uint64_t index, uint64_t count, const char *name,
                            uint32_t from, uint32_t to, uint64_t done, uint64_t total)
{
    (void)ctx; (void)count; (void)name; (void)from; (void)to; (void)done; (void)total;
    if (index == cut_at)
        TEST_ASSERT_EQUAL_INT(0, truncate(cut_path, (off_t)cut_size));
}

/* An input truncated while it is read (another program rewriting it) is an
 * error naming the file and the tensor, not a SIGBUS from its mapping; the
 * tensor copied as it is (the norm) and the one converted (attn_q) alike */
static void test_input_truncated_while_read(void)
{
    char in[512], out[512];
    tmp_path(in, sizeof in, "cut.gguf");
    tmp_path(out, sizeof out, "cut-q.gguf");
    static const char *const names[] = { "blk.0.attn_norm.weight", "blk.0.attn_q.weight" };
    for (uint64_t i = 1; i <= 2; i++) {
        write_model(in, 256);
        gguf_file *f;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_open(in, &f));
        cut_size = gguf_data_offset(f) + gguf_find_tensor(f, names[i - 1])->offset + 8;
        gguf_close(f);
        cut_path = in;
        cut_at = i;
        quant_model_callbacks cb = { truncate_midway, NULL, NULL, NULL, 2 };
        TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_IO, quant_model(in, out, QUANT_FTYPE_Q4_0, &cb));
        const char *e = glesllm_last_error();
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(e, "the file changed while it was read"), e);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(e, names[i - 1]), e);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(e, in), e);
        TEST_ASSERT_EQUAL_INT(0, count_leftovers("cut-q"));
        TEST_ASSERT_EQUAL_INT(-1, access(out, F_OK));
    }
    unlink(in);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_error_no_worse_than_llama_cpp);
    RUN_TEST(test_other_quantizers_round_trip);
    RUN_TEST(test_mixes_match_llama_cpp_files);
    RUN_TEST(test_row_length_fallback);
    RUN_TEST(test_expert_mix);
    RUN_TEST(test_rwkv7_mix);
    RUN_TEST(test_interrupted_or_failed_run_leaves_nothing);
    RUN_TEST(test_input_truncated_while_read);
    return test_exit_code(UNITY_END());
}
