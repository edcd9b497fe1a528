/* Random-weight llama-family models. See demo_model.h. */
#include "model/demo_model.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "quant/quant.h"

#define MAX_BUFS 4096

struct demo_model {
    gguf_writer *w;
    void *bufs[MAX_BUFS];
    uint32_t n_bufs;
    char **tokens;
    uint32_t n_tokens;
};

demo_spec demo_spec_default(void)
{
    demo_spec s = { 0 };
    s.arch = "llama";
    s.name = "glesllm demo (random weights)";
    s.n_layer = 4;
    s.n_embd = 256;
    s.n_ff = 768;
    s.n_head = 8;
    s.n_head_kv = 4;
    s.n_vocab = 2048;
    s.n_ctx = 2048;
    s.type = GGML_TYPE_Q8_0;
    s.embd_type = GGML_TYPE_Q8_0;
    s.out_type = GGML_TYPE_Q8_0;
    s.tied = false; /* tied random embeddings make a model repeat its input */
    s.seed = 42;
    return s;
}

static float uniform(uint64_t *s) /* [-1, 1) */
{
    return (float)((double)(splitmix64(s) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

void demo_model_destroy(demo_model *d)
{
    if (!d)
        return;
    gguf_writer_destroy(d->w);
    for (uint32_t i = 0; i < d->n_bufs; i++)
        free(d->bufs[i]);
    for (uint32_t i = 0; d->tokens && i < d->n_tokens; i++)
        free(d->tokens[i]);
    free(d->tokens);
    free(d);
}

gguf_writer *demo_model_writer(demo_model *d) { return d->w; }

typedef struct fill_job {
    uint32_t type;
    uint64_t seed, rows, cols, row0, row1, row_bytes;
    float center, scale;
    uint8_t *dst;
    glesllm_status st;
} fill_job;

/* Rows [row0, row1): row r's values come from its own generator, so the
 * bytes do not depend on how rows are shared among threads. */
static void *fill_rows(void *arg)
{
    fill_job *j = arg;
    float *row = malloc(sizeof(float) * j->cols);
    if (!row) {
        j->st = GLESLLM_ERR_NO_MEMORY;
        return NULL;
    }
    for (uint64_t r = j->row0; r < j->row1 && !j->st; r++) {
        uint64_t g = j->seed ^ (r * 0xd1b54a32d192ed03ull);
        for (uint64_t c = 0; c < j->cols; c++)
            row[c] = j->center + j->scale * uniform(&g);
        j->st = quant_quantize(j->type, row, j->dst + r * j->row_bytes, j->cols);
    }
    free(row);
    return NULL;
}

/* rows x cols random values of spread `scale` around `center`, quantized on
 * every core. */
static glesllm_status make_tensor_n(demo_model *d, uint64_t *seed, const char *name,
                                    uint32_t type, uint64_t n_mat, uint64_t mat_rows,
                                    uint64_t cols, float center, float scale, const void *reuse)
{
    uint64_t rows = n_mat * mat_rows;
    uint64_t ne[3] = { cols, mat_rows, n_mat }, bytes;
    uint32_t n_dims = n_mat > 1 ? 3 : rows == 1 ? 1 : 2;
    uint64_t ne2[2] = { cols, rows };
    glesllm_status st = ggml_tensor_bytes(type, 2, ne2, &bytes);
    if (st)
        return err_prefix(st, "demo tensor %s: ", name);
    if (reuse)
        return gguf_writer_add_tensor(d->w, name, type, n_dims, ne, reuse);
    if (d->n_bufs == MAX_BUFS)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "demo model: too many tensors");
    uint8_t *buf = malloc((size_t)bytes);
    if (!buf)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory making demo tensor %s", name);
    d->bufs[d->n_bufs++] = buf;
    enum { MAX_THREADS = 64 };
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t n_threads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (uint64_t)cpus;
    if (rows * cols < (1u << 20))
        n_threads = 1;
    fill_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    bool started[MAX_THREADS] = { false };
    uint64_t tseed = splitmix64(seed);
    for (uint64_t t = 0; t < n_threads; t++) {
        jobs[t] = (fill_job){ type, tseed, rows, cols, rows * t / n_threads,
                              rows * (t + 1) / n_threads, bytes / rows, center, scale, buf,
                              GLESLLM_OK };
        if (t + 1 < n_threads)
            started[t] = pthread_create(&tid[t], NULL, fill_rows, &jobs[t]) == 0;
        if (!started[t])
            fill_rows(&jobs[t]);
    }
    for (uint64_t t = 0; t < n_threads; t++) {
        if (started[t])
            pthread_join(tid[t], NULL);
        if (jobs[t].st && !st)
            st = jobs[t].st;
    }
    if (st)
        return err_prefix(st, "demo tensor %s: ", name);
    return gguf_writer_add_tensor(d->w, name, type, n_dims, ne, buf);
}

static glesllm_status make_tensor(demo_model *d, uint64_t *seed, const char *name, uint32_t type,
                                  uint64_t rows, uint64_t cols, float center, float scale,
                                  const void *reuse)
{
    return make_tensor_n(d, seed, name, type, 1, rows, cols, center, scale, reuse);
}

/* A tensor of a layer: its name after "blk.N.", format, shape and values'
 * range (make_tensor's center and scale). */
typedef struct layer_tensor {
    const char *name;
    uint32_t type;
    uint64_t rows, cols;
    float center, scale;
} layer_tensor;

/* Layer `layer`'s tensors t[0..n), each made anew. */
static glesllm_status make_layer_tensors(demo_model *d, uint64_t *seed, uint32_t layer,
                                         const layer_tensor *t, size_t n)
{
    glesllm_status st = GLESLLM_OK;
    for (size_t k = 0; k < n && !st; k++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.%s", layer, t[k].name);
        st = make_tensor(d, seed, name, t[k].type, t[k].rows, t[k].cols, t[k].center, t[k].scale,
                         NULL);
    }
    return st;
}

static glesllm_status make_vocab(demo_model *d, const demo_spec *s)
{
    static const char *const cons[] = { "", "b", "d", "f", "g", "h", "k", "l", "m", "n",
                                        "p", "r", "s", "t", "v", "w", "th", "st" };
    static const char *const vow[] = { "a", "e", "i", "o", "u", "ai", "ea", "ou" };
    d->tokens = calloc(s->n_vocab, sizeof *d->tokens);
    float *scores = calloc(s->n_vocab, sizeof *scores);
    int32_t *types = calloc(s->n_vocab, sizeof *types);
    glesllm_status st = GLESLLM_OK;
    if (!d->tokens || !scores || !types) {
        st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    d->n_tokens = s->n_vocab;
    for (uint32_t i = 0; i < s->n_vocab; i++) {
        char piece[64];
        if (i < 3) {
            snprintf(piece, sizeof piece, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
            types[i] = i == 0 ? 2 : 3;
        } else {
            uint32_t k = i - 3, nc = sizeof cons / sizeof cons[0], nv = sizeof vow / sizeof vow[0];
            /* "\xe2\x96\x81" is U+2581, SentencePiece's word start */
            /* consonant, vowel, consonant: 2592 distinct words, then numbered */
            snprintf(piece, sizeof piece, "%s%s%s%s", k % 3 ? "\xe2\x96\x81" : "", cons[k % nc],
                     vow[(k / nc) % nv], cons[(k / (nc * nv)) % nc]);
            if (k >= nc * nv * nc)
                snprintf(piece + strlen(piece), sizeof piece - strlen(piece), "%u", k);
            types[i] = 1;
        }
        scores[i] = -(float)i;
        if (!(d->tokens[i] = strdup(piece))) {
            st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
            goto out;
        }
    }
    gguf_writer *w = d->w;
    if ((st = gguf_writer_set_str(w, "tokenizer.ggml.model", "llama")) ||
        (st = gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (const char *const *)d->tokens,
                                        s->n_vocab)) ||
        (st = gguf_writer_set_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores,
                                    s->n_vocab)) ||
        (st = gguf_writer_set_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types,
                                    s->n_vocab)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2)) ||
        (st = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0)))
        goto out;
out:
    free(scores);
    free(types);
    return st;
}

/* The embeddings, the output norm and (untied) the output matrix. */
static glesllm_status make_ends(demo_model *d, const demo_spec *s, uint64_t *seed)
{
    /* (Gemma's embeddings are scaled up by sqrt(n_embd) as they are read:
     * values of 1 would make every token's logit for itself the largest) */
    float es = strncmp(s->arch, "gemma", 5) == 0 ? 1.0f / sqrtf((float)s->n_embd) : 1.0f;
    glesllm_status st = make_tensor(d, seed, "token_embd.weight", s->embd_type, s->n_vocab,
                                    s->n_embd, 0.0f, es, NULL);
    if (!st)
        st = make_tensor(d, seed, "output_norm.weight", GGML_TYPE_F32, 1, s->n_embd, 1.0f, 0.2f,
                         NULL);
    if (!st && !s->tied)
        st = make_tensor(d, seed, "output.weight", s->out_type, s->n_vocab, s->n_embd, 0.0f,
                         2.0f * (1.0f / sqrtf((float)s->n_embd)), NULL);
    return st;
}

/* the dimensions of a head: the spec's, else n_embd / n_head */
static uint32_t head_dim_of(const demo_spec *s)
{
    return s->head_dim ? s->head_dim : s->n_embd / s->n_head;
}

static glesllm_status set_meta(gguf_writer *w, const demo_spec *s)
{
    char key[96];
    const char *a = s->arch;
    glesllm_status st;
#define U32(suffix, v)                                                                  \
    do {                                                                                \
        snprintf(key, sizeof key, "%s.%s", a, suffix);                                  \
        if ((st = gguf_writer_set_u32(w, key, v)))                                      \
            return st;                                                                  \
    } while (0)
    if ((st = gguf_writer_set_str(w, "general.architecture", a)) ||
        (st = gguf_writer_set_str(w, "general.name", s->name ? s->name : "demo")))
        return st;
    U32("context_length", s->n_ctx);
    U32("embedding_length", s->n_embd);
    U32("block_count", s->n_layer);
    U32("feed_forward_length", s->n_ff);
    U32("attention.head_count", s->n_head);
    U32("attention.head_count_kv", s->n_head_kv);
    uint32_t hd = head_dim_of(s);
    U32("rope.dimension_count", hd);
    if (s->head_dim) {
        U32("attention.key_length", hd);
        U32("attention.value_length", hd);
    }
    U32("vocab_size", s->n_vocab);
    if (s->long_rope)
        U32("rope.scaling.original_context_length", s->n_ctx / 2);
    if (strcmp(a, "phi3") == 0 || strncmp(a, "gemma", 5) == 0)
        U32("attention.sliding_window", s->window);
    if (s->n_expert) {
        U32("expert_count", s->n_expert);
        U32("expert_used_count", s->n_expert_used);
        if (s->n_ff_shexp || strcmp(a, "qwen3moe") == 0)
            U32("expert_feed_forward_length", s->n_ff);
        if (s->n_ff_shexp)
            U32("expert_shared_feed_forward_length", s->n_ff_shexp);
    }
#undef U32
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    if ((st = gguf_writer_set_f32(w, key, 1e-5f)))
        return st;
    snprintf(key, sizeof key, "%s.rope.scaling.attn_factor", a);
    if (s->long_rope && (st = gguf_writer_set_f32(w, key, 1.2f)))
        return st;
    /* (Gemma 2's caps, lower than its 50 and 30: random weights' scores and
     * logits reach them) */
    snprintf(key, sizeof key, "%s.attn_logit_softcapping", a);
    if (strcmp(a, "gemma2") == 0 && (st = gguf_writer_set_f32(w, key, 1.5f)))
        return st;
    snprintf(key, sizeof key, "%s.final_logit_softcapping", a);
    if (strcmp(a, "gemma2") == 0 && (st = gguf_writer_set_f32(w, key, 4.0f)))
        return st;
    /* (Gemma 3: the global layers' base and linear scaling, as its 4B and
     * larger have; its window layers turn by llama.cpp's fixed 10000) */
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (strcmp(a, "gemma3") == 0 && (st = gguf_writer_set_str(w, key, "linear")))
        return st;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", a);
    if (strcmp(a, "gemma3") == 0 && (st = gguf_writer_set_f32(w, key, 8.0f)))
        return st;
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    return gguf_writer_set_f32(w, key, strncmp(a, "qwen", 4) == 0 || strcmp(a, "gemma3") == 0
                                           ? 1000000.0f
                                           : 10000.0f);
}

/* attn_v's or ffn_down's type in layer i */
static uint32_t override_type(const demo_spec *s, uint32_t i, uint32_t over)
{
    uint32_t n8 = s->n_layer / 8;
    bool more = !s->more_bits_only || i < n8 || i >= s->n_layer - n8 || (i - n8) % 3 == 2;
    return over && more ? over : s->type;
}

/* Whether layer i of a jamba spec is attention (else a Mamba block). */
static bool jamba_attention(const demo_spec *s, uint32_t i)
{
    uint32_t every = s->attn_every ? s->attn_every : 2;
    return strcmp(s->arch, "jamba") == 0 && i % every == every / 2;
}

/* A Mamba or Jamba model's metadata and layers (demo_model_create's, after
 * the vocabulary and the embeddings) */
static glesllm_status mamba_meta(gguf_writer *w, const demo_spec *s, uint32_t di, uint32_t ds,
                                 uint32_t r)
{
    char key[96];
    glesllm_status st;
    const struct {
        const char *suffix;
        uint32_t v;
    } u[] = { { "context_length", s->n_ctx }, { "embedding_length", s->n_embd },
              { "block_count", s->n_layer },  { "ssm.conv_kernel", 4 },
              { "ssm.inner_size", di },       { "ssm.state_size", ds },
              { "ssm.time_step_rank", r } };
    const char *a = s->arch;
    if ((st = gguf_writer_set_str(w, "general.architecture", a)) ||
        (st = gguf_writer_set_str(w, "general.name", s->name ? s->name : "demo")))
        return st;
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", a, u[i].suffix);
        if ((st = gguf_writer_set_u32(w, key, u[i].v)))
            return st;
    }
    snprintf(key, sizeof key, "%s.ssm.dt_b_c_rms", a);
    if (s->dt_b_c_rms && (st = gguf_writer_set_bool(w, key, true)))
        return st;
    snprintf(key, sizeof key, "%s.ssm.group_count", a);
    if (strcmp(a, "mamba2") == 0 &&
        (st = gguf_writer_set_u32(w, key, s->n_group ? s->n_group : 1)))
        return st;
    if (strcmp(a, "jamba") == 0) { /* the attention layers' shape, a layer's KV heads */
        const struct {
            const char *suffix;
            uint32_t v;
        } j[] = { { "feed_forward_length", s->n_ff }, { "attention.head_count", s->n_head },
                  { "expert_count", s->n_expert }, { "expert_used_count", s->n_expert_used } };
        for (size_t i = 0; i < sizeof j / sizeof j[0]; i++) {
            snprintf(key, sizeof key, "jamba.%s", j[i].suffix);
            if ((i < 2 || s->n_expert) && (st = gguf_writer_set_u32(w, key, j[i].v)))
                return st;
        }
        int32_t *kv = calloc(s->n_layer, sizeof *kv);
        if (!kv)
            return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
        for (uint32_t i = 0; i < s->n_layer; i++)
            kv[i] = jamba_attention(s, i) ? (int32_t)s->n_head_kv : 0;
        st = gguf_writer_set_array(w, "jamba.attention.head_count_kv", GGUF_TYPE_INT32, kv,
                                   s->n_layer);
        free(kv);
        if (st)
            return st;
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    return gguf_writer_set_f32(w, key, 1e-5f);
}

static glesllm_status mamba_layers(demo_model *d, const demo_spec *s, uint64_t *seed, uint32_t di,
                                   uint32_t ds, uint32_t r)
{
    glesllm_status st = GLESLLM_OK;
    float se = 1.0f / sqrtf((float)s->n_embd), si = 1.0f / sqrtf((float)di);
    /* (the step's projection quantized as llama.cpp's quantize does, where
     * its rows hold whole blocks) */
    uint32_t dt_type = r % ggml_block_size(s->type) ? GGML_TYPE_F32 : s->type;
    bool jamba = strcmp(s->arch, "jamba") == 0;
    uint32_t hd = jamba ? s->n_embd / s->n_head : 0, kv = hd * s->n_head_kv;
    float sf = 1.0f / sqrtf((float)(s->n_ff ? s->n_ff : 1));
    const void *first[2][25] = { { NULL } }; /* the first bytes of each kind of layer */
    for (uint32_t i = 0; i < s->n_layer && !st; i++) {
        bool attn = jamba_attention(s, i), moe = jamba && s->n_expert && i % 2 == 1;
        /* values of a trained model's ranges: small steps (softplus of about
         * -3), A = -exp(A_log) between -7.5 and -0.5, D about 1 */
        const layer_tensor t[] = {
            { "attn_norm.weight", GGML_TYPE_F32, 1, s->n_embd, 1.0f, 0.2f },
            { "ssm_in.weight", s->type, 2ull * di, s->n_embd, 0.0f, se },
            { "ssm_conv1d.weight", GGML_TYPE_F32, di, 4, 0.0f, 0.5f },
            { "ssm_conv1d.bias", GGML_TYPE_F32, 1, di, 0.0f, 0.2f },
            { "ssm_x.weight", s->type, r + 2ull * ds, di, 0.0f, si },
            { "ssm_dt.weight", dt_type, di, r, 0.0f, 1.0f / sqrtf((float)r) },
            { "ssm_dt.bias", GGML_TYPE_F32, 1, di, -3.0f, 1.0f },
            { "ssm_a", GGML_TYPE_F32, di, ds, -4.0f, 3.5f },
            { "ssm_d", GGML_TYPE_F32, 1, di, 1.0f, 0.5f },
            { "ssm_out.weight", s->type, s->n_embd, di, 0.0f, si },
            /* jamba: the norms of dt, B and C; attention; the FFN or experts */
            { "ssm_dt_norm.weight", GGML_TYPE_F32, 1, r, 1.0f, 0.2f },
            { "ssm_b_norm.weight", GGML_TYPE_F32, 1, ds, 1.0f, 0.2f },
            { "ssm_c_norm.weight", GGML_TYPE_F32, 1, ds, 1.0f, 0.2f },
            { "attn_q.weight", s->type, s->n_embd, s->n_embd, 0.0f, se },
            { "attn_k.weight", s->type, kv, s->n_embd, 0.0f, se },
            { "attn_v.weight", s->type, kv, s->n_embd, 0.0f, se },
            { "attn_output.weight", s->type, s->n_embd, s->n_embd, 0.0f, se },
            { "ffn_norm.weight", GGML_TYPE_F32, 1, s->n_embd, 1.0f, 0.2f },
            { "ffn_gate.weight", s->type, s->n_ff, s->n_embd, 0.0f, se },
            { "ffn_up.weight", s->type, s->n_ff, s->n_embd, 0.0f, se },
            { "ffn_down.weight", s->type, s->n_embd, s->n_ff, 0.0f, sf },
            { "ffn_gate_inp.weight", GGML_TYPE_F32, s->n_expert, s->n_embd, 0.0f, 4.0f * se },
        };
        for (size_t k = 0; k < sizeof t / sizeof t[0] && !st; k++) {
            bool want = k == 0     ? true
                        : k < 10   ? !attn
                        : k < 13   ? jamba && !attn
                        : k < 17   ? attn
                        : k == 17  ? jamba
                        : k < 21   ? jamba && !moe
                                   : moe;
            if (!want)
                continue;
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s", i, t[k].name);
            st = make_tensor(d, seed, name, t[k].type, t[k].rows, t[k].cols, t[k].center,
                             t[k].scale, s->same_layers ? first[moe][k] : NULL);
            if (!st && !first[moe][k])
                first[moe][k] = d->bufs[d->n_bufs - 1];
        }
        const char *exps[3] = { "ffn_gate_exps.weight", "ffn_up_exps.weight",
                                "ffn_down_exps.weight" };
        for (uint32_t k = 0; moe && k < 3 && !st; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s", i, exps[k]);
            st = make_tensor_n(d, seed, name, s->type, s->n_expert, k < 2 ? s->n_ff : s->n_embd,
                               k < 2 ? s->n_embd : s->n_ff, 0.0f, k < 2 ? se : sf,
                               s->same_layers ? first[1][22 + k] : NULL);
            if (!st && !first[1][22 + k])
                first[1][22 + k] = d->bufs[d->n_bufs - 1];
        }
    }
    return st;
}

/* Mamba-2's layers: z | x B C | steps in, the convolution over x B C, a
 * head's step bias, A and D, the grouped norm, out */
static glesllm_status mamba2_layers(demo_model *d, const demo_spec *s, uint64_t *seed,
                                    uint32_t di, uint32_t ds, uint32_t nh)
{
    uint32_t ng = s->n_group ? s->n_group : 1, cw = di + 2 * ng * ds;
    float se = 1.0f / sqrtf((float)s->n_embd), si = 1.0f / sqrtf((float)di);
    glesllm_status st = GLESLLM_OK;
    for (uint32_t i = 0; i < s->n_layer && !st; i++) {
        const layer_tensor t[] = {
            { "attn_norm.weight", GGML_TYPE_F32, 1, s->n_embd, 1.0f, 0.2f },
            { "ssm_in.weight", s->type, di + cw + nh, s->n_embd, 0.0f, se },
            { "ssm_conv1d.weight", GGML_TYPE_F32, cw, 4, 0.0f, 0.5f },
            { "ssm_conv1d.bias", GGML_TYPE_F32, 1, cw, 0.0f, 0.2f },
            { "ssm_dt.bias", GGML_TYPE_F32, 1, nh, -3.0f, 1.0f },
            { "ssm_a", GGML_TYPE_F32, nh, 1, -4.0f, 3.5f },
            { "ssm_d", GGML_TYPE_F32, nh, 1, 1.0f, 0.5f },
            { "ssm_norm.weight", GGML_TYPE_F32, ng, di / ng, 1.0f, 0.2f },
            { "ssm_out.weight", s->type, s->n_embd, di, 0.0f, si },
        };
        st = make_layer_tensors(d, seed, i, t, sizeof t / sizeof t[0]);
    }
    return st;
}

static glesllm_status mamba_create(const demo_spec *s, demo_model *d)
{
    uint32_t di = 2 * s->n_embd, ds = s->d_state ? s->d_state : 16;
    uint32_t r = s->dt_rank ? s->dt_rank : (s->n_embd + 15) / 16;
    uint64_t seed = s->seed;
    glesllm_status st = gguf_writer_create(&d->w);
    if (!st)
        st = mamba_meta(d->w, s, di, ds, r);
    if (!st)
        st = make_vocab(d, s);
    if (!st)
        st = make_ends(d, s, &seed);
    if (!st && strcmp(s->arch, "mamba2") == 0)
        return mamba2_layers(d, s, &seed, di, ds, r);
    return st ? st : mamba_layers(d, s, &seed, di, ds, r);
}

/* The ranks of an RWKV-7 spec's low-rank paths (decay, learning rate,
 * value residual, gate), sized against n_embd as the releases' are */
static void rwkv_ranks(const demo_spec *s, uint32_t r[4])
{
    uint32_t d = s->n_embd;
    r[0] = r[1] = d / 16 > 8 ? d / 16 : 8;
    r[2] = d / 32 > 4 ? d / 32 : 4;
    r[3] = d / 8 > 8 ? d / 8 : 8;
}

/* An RWKV-7 model: the metadata, the made-up vocabulary, the embeddings
 * with their LayerNorm, and each layer's norms, time mix and channel mix, in
 * a trained model's ranges (lerps in [0, 1], decays exp(-0.6 sigmoid(w0 +
 * ...)) across (0.55, 1), k_k and k_a about 1) */
static glesllm_status rwkv7_create(const demo_spec *s, demo_model *d)
{
    uint64_t seed = s->seed;
    uint32_t r[4], hs = s->head_dim ? s->head_dim : 64, D = s->n_embd;
    rwkv_ranks(s, r);
    char key[96];
    const struct {
        const char *suffix;
        uint32_t v;
    } u[] = { { "context_length", s->n_ctx },
              { "embedding_length", D },
              { "block_count", s->n_layer },
              { "feed_forward_length", s->n_ff },
              { "wkv.head_size", hs },
              { "attention.decay_lora_rank", r[0] },
              { "attention.iclr_lora_rank", r[1] },
              { "attention.value_residual_mix_lora_rank", r[2] },
              { "attention.gate_lora_rank", r[3] },
              { "token_shift_count", 2 } };
    glesllm_status st = gguf_writer_create(&d->w);
    if (!st && !(st = gguf_writer_set_str(d->w, "general.architecture", "rwkv7")))
        st = gguf_writer_set_str(d->w, "general.name", s->name ? s->name : "demo");
    for (size_t i = 0; !st && i < sizeof u / sizeof u[0]; i++) {
        snprintf(key, sizeof key, "rwkv7.%s", u[i].suffix);
        st = gguf_writer_set_u32(d->w, key, u[i].v);
    }
    if (!st)
        st = gguf_writer_set_f32(d->w, "rwkv7.attention.layer_norm_epsilon", 1e-5f);
    if (!st)
        st = make_vocab(d, s);
    if (!st)
        st = make_ends(d, s, &seed);
    const char *const top[] = { "token_embd_norm.weight", "token_embd_norm.bias",
                                "output_norm.bias" };
    for (size_t i = 0; !st && i < 3; i++)
        st = make_tensor(d, &seed, top[i], GGML_TYPE_F32, 1, D, i % 2 ? 0.0f : 1.0f,
                         i % 2 ? 0.1f : 0.2f, NULL);
    float se = 1.0f / sqrtf((float)D), sf = 1.0f / sqrtf((float)(s->n_ff ? s->n_ff : 1));
    for (uint32_t i = 0; i < s->n_layer && !st; i++) {
        uint32_t rv = i ? r[2] : r[1]; /* (layer 0's unused path: the learning rate's rank) */
        const layer_tensor t[] = {
            { "attn_norm.weight", GGML_TYPE_F32, 1, D, 1.0f, 0.2f },
            { "attn_norm.bias", GGML_TYPE_F32, 1, D, 0.0f, 0.1f },
            { "attn_norm_2.weight", GGML_TYPE_F32, 1, D, 1.0f, 0.2f },
            { "attn_norm_2.bias", GGML_TYPE_F32, 1, D, 0.0f, 0.1f },
            { "time_mix_w0.weight", GGML_TYPE_F32, 1, D, -0.5f, 2.0f },
            { "time_mix_w1.weight", GGML_TYPE_F32, r[0], D, 0.0f, se },
            { "time_mix_w2.weight", GGML_TYPE_F32, D, r[0], 0.0f, 0.3f },
            { "time_mix_a0.weight", GGML_TYPE_F32, 1, D, 0.0f, 1.0f },
            { "time_mix_a1.weight", GGML_TYPE_F32, r[1], D, 0.0f, se },
            { "time_mix_a2.weight", GGML_TYPE_F32, D, r[1], 0.0f, 0.3f },
            { "time_mix_v0.weight", GGML_TYPE_F32, 1, D, 0.0f, 1.0f },
            { "time_mix_v1.weight", GGML_TYPE_F32, rv, D, 0.0f, se },
            { "time_mix_v2.weight", GGML_TYPE_F32, D, rv, 0.0f, 0.3f },
            { "time_mix_g1.weight", GGML_TYPE_F32, r[3], D, 0.0f, se },
            { "time_mix_g2.weight", GGML_TYPE_F32, D, r[3], 0.0f, 0.3f },
            { "time_mix_k_k.weight", GGML_TYPE_F32, 1, D, 1.0f, 0.2f },
            { "time_mix_k_a.weight", GGML_TYPE_F32, 1, D, 1.0f, 0.2f },
            { "time_mix_r_k.weight", GGML_TYPE_F32, 1, D, 0.0f, 0.5f },
            { "time_mix_key.weight", s->type, D, D, 0.0f, se },
            { "time_mix_value.weight", s->type, D, D, 0.0f, se },
            { "time_mix_receptance.weight", s->type, D, D, 0.0f, se },
            { "time_mix_output.weight", s->type, D, D, 0.0f, se },
            { "time_mix_ln.weight", GGML_TYPE_F32, 1, D, 1.0f, 0.2f },
            { "time_mix_ln.bias", GGML_TYPE_F32, 1, D, 0.0f, 0.1f },
            { "channel_mix_key.weight", s->type, s->n_ff, D, 0.0f, se },
            { "channel_mix_value.weight", s->type, D, s->n_ff, 0.0f, sf },
        };
        st = make_layer_tensors(d, &seed, i, t, sizeof t / sizeof t[0]);
        /* the token-shift mixes, [n_embd, 1, 1, 6] and [n_embd, 1, 1] as
         * llama.cpp writes them */
        const struct {
            const char *name;
            uint32_t n_dims, n;
        } lerps[] = { { "time_mix_lerp_fused.weight", 4, 6 },
                      { "channel_mix_lerp_k.weight", 3, 1 } };
        for (size_t k = 0; k < 2 && !st; k++) {
            if (d->n_bufs == MAX_BUFS)
                return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "demo model: too many tensors");
            float *v = malloc(sizeof(float) * D * lerps[k].n);
            if (!v)
                return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
            d->bufs[d->n_bufs++] = v;
            for (uint64_t j = 0; j < (uint64_t)D * lerps[k].n; j++)
                v[j] = 0.5f + 0.45f * uniform(&seed);
            uint64_t ne[4] = { D, 1, 1, lerps[k].n };
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s", i, lerps[k].name);
            st = gguf_writer_add_tensor(d->w, name, GGML_TYPE_F32, lerps[k].n_dims, ne, v);
        }
    }
    return st;
}

/* A model made by an architecture's own maker (the state-space and RWKV
 * models'), freed where it fails */
static glesllm_status create_with(const demo_spec *s,
                                  glesllm_status (*make)(const demo_spec *, demo_model *),
                                  demo_model **out)
{
    demo_model *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    glesllm_status st = make(s, d);
    if (st) {
        demo_model_destroy(d);
        return st;
    }
    *out = d;
    return GLESLLM_OK;
}

glesllm_status demo_model_create(const demo_spec *s, demo_model **out)
{
    *out = NULL;
    if (strcmp(s->arch, "rwkv7") == 0) {
        uint32_t hs = s->head_dim ? s->head_dim : 64;
        if (!s->n_layer || !s->n_embd || !s->n_ff || s->n_vocab < 3 || s->n_embd % hs)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "demo model: inconsistent shape");
        return create_with(s, rwkv7_create, out);
    }
    if (strcmp(s->arch, "mamba") == 0 || strcmp(s->arch, "mamba2") == 0 ||
        strcmp(s->arch, "jamba") == 0) {
        bool j = s->arch[0] == 'j';
        if (!s->n_layer || !s->n_embd || s->n_vocab < 3 ||
            (j && (!s->n_ff || !s->n_head || !s->n_head_kv || s->n_embd % s->n_head ||
                   s->n_head % s->n_head_kv ||
                   (s->n_expert && (!s->n_expert_used || s->n_expert_used > s->n_expert)))))
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "demo model: inconsistent shape");
        return create_with(s, mamba_create, out);
    }
    if (!s->n_layer || !s->n_embd || !s->n_ff || !s->n_head || !s->n_head_kv || s->n_vocab < 3 ||
        (!s->head_dim && s->n_embd % s->n_head) || s->n_head % s->n_head_kv ||
        (s->n_expert && (!s->n_expert_used || s->n_expert_used > s->n_expert)))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "demo model: inconsistent shape");
    bool qwen = strncmp(s->arch, "qwen2", 5) == 0, moe = s->n_expert > 0;
    bool gemma3 = strcmp(s->arch, "gemma3") == 0;
    bool qk_width = strcmp(s->arch, "olmoe") == 0,
         qk_head = strncmp(s->arch, "qwen3", 5) == 0 || gemma3;
    bool fused = strcmp(s->arch, "phi3") == 0,
         gemma = strcmp(s->arch, "gemma2") == 0 || gemma3;
    demo_model *d = calloc(1, sizeof *d);
    if (!d)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    glesllm_status st = gguf_writer_create(&d->w);
    if (!st)
        st = set_meta(d->w, s);
    if (!st)
        st = make_vocab(d, s);
    uint64_t seed = s->seed;
    uint32_t hd = head_dim_of(s);
    uint32_t q_dim = s->n_head * hd, kv_dim = s->n_head_kv * hd;
    float se = 1.0f / sqrtf((float)s->n_embd), sf = 1.0f / sqrtf((float)s->n_ff);
    if (!st)
        st = make_ends(d, s, &seed);
    if (!st && s->long_rope)
        st = make_tensor(d, &seed, "rope_factors_long.weight", GGML_TYPE_F32, 1, hd / 2, 3.0f, 2.0f,
                         NULL);
    if (!st && s->long_rope)
        st = make_tensor(d, &seed, "rope_factors_short.weight", GGML_TYPE_F32, 1, hd / 2, 1.1f,
                         0.1f, NULL);
    const void *(*made)[26] = calloc(s->n_layer, sizeof *made); /* each layer's tensor bytes */
    if (!made && !st)
        st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    for (uint32_t i = 0; i < s->n_layer && !st; i++) {
        uint32_t vt = override_type(s, i, s->v_type), dt = override_type(s, i, s->down_type);
        struct {
            const char *name;
            uint32_t type;
            uint64_t rows, cols;
            float center, scale;
            uint64_t n_mat;
        } t[] = {
            { "attn_norm.weight", GGML_TYPE_F32, 1, s->n_embd, 1.0f, 0.2f },
            { "attn_q.weight", s->type, q_dim, s->n_embd, 0.0f, se },
            { "attn_k.weight", s->type, kv_dim, s->n_embd, 0.0f, se },
            { "attn_v.weight", vt, kv_dim, s->n_embd, 0.0f, se },
            { "attn_output.weight", s->type, s->n_embd, q_dim, 0.0f, se },
            { "ffn_norm.weight", GGML_TYPE_F32, 1, s->n_embd, 1.0f, 0.2f },
            { "ffn_gate.weight", s->type, s->n_ff, s->n_embd, 0.0f, se },
            { "ffn_up.weight", s->type, s->n_ff, s->n_embd, 0.0f, se },
            { "ffn_down.weight", dt, s->n_embd, s->n_ff, 0.0f, sf },
            { "attn_q.bias", GGML_TYPE_F32, 1, q_dim, 0.0f, 0.5f },
            { "attn_k.bias", GGML_TYPE_F32, 1, kv_dim, 0.0f, 0.5f },
            { "attn_v.bias", GGML_TYPE_F32, 1, kv_dim, 0.0f, 0.5f },
            /* experts (in place of ffn_gate/up/down) */
            { "ffn_gate_inp.weight", GGML_TYPE_F32, s->n_expert, s->n_embd, 0.0f, 4.0f * se },
            { "ffn_gate_exps.weight", s->type, s->n_ff, s->n_embd, 0.0f, se, s->n_expert },
            { "ffn_up_exps.weight", s->type, s->n_ff, s->n_embd, 0.0f, se, s->n_expert },
            { "ffn_down_exps.weight", dt, s->n_embd, s->n_ff, 0.0f, sf, s->n_expert },
            { "ffn_gate_inp_shexp.weight", GGML_TYPE_F32, 1, s->n_embd, 0.0f, se },
            { "ffn_gate_shexp.weight", s->type, s->n_ff_shexp, s->n_embd, 0.0f, se },
            { "ffn_up_shexp.weight", s->type, s->n_ff_shexp, s->n_embd, 0.0f, se },
            { "ffn_down_shexp.weight", dt, s->n_embd, s->n_ff_shexp, 0.0f,
              1.0f / sqrtf((float)(s->n_ff_shexp ? s->n_ff_shexp : 1)) },
            /* the norms of Q and K: over their width (olmoe), of a head (qwen3) */
            { "attn_q_norm.weight", GGML_TYPE_F32, 1, qk_head ? hd : q_dim, 1.0f, 0.2f },
            { "attn_k_norm.weight", GGML_TYPE_F32, 1, qk_head ? hd : kv_dim, 1.0f, 0.2f },
            /* Q|K|V and gate|up, each in one tensor (phi3; in place of 1-3 and 6-7) */
            { "attn_qkv.weight", s->type, q_dim + 2ull * kv_dim, s->n_embd, 0.0f, se },
            { "ffn_up.weight", s->type, 2ull * s->n_ff, s->n_embd, 0.0f, se },
            /* Gemma 2's norms after attention and the FFN */
            { "post_attention_norm.weight", GGML_TYPE_F32, 1, s->n_embd, 1.0f, 0.2f },
            { "post_ffw_norm.weight", GGML_TYPE_F32, 1, s->n_embd, 1.0f, 0.2f },
        };
        uint32_t n = sizeof t / sizeof t[0];
        for (uint32_t k = 0; k < n && !st; k++) {
            bool want = k < 6 || (k < 9    ? !moe
                                  : k < 12 ? qwen
                                  : k < 16 ? moe
                                  : k < 20 ? s->n_ff_shexp > 0
                                  : k < 22 ? qk_width || qk_head
                                  : k < 24 ? fused
                                           : gemma);
            if (fused && ((k >= 1 && k <= 3) || k == 6 || k == 7))
                want = false;
            if (!want)
                continue;
            char name[64];
            snprintf(name, sizeof name, "blk.%u.%s", i, t[k].name);
            const void *reuse = NULL;
            for (uint32_t j = 0; s->same_layers && j < i && !reuse; j++)
                if (made[j][k] && (k == 3                 ? override_type(s, j, s->v_type) == vt
                                   : k == 8 || k == 15 || k == 19 ? override_type(s, j, s->down_type) == dt
                                                          : true))
                    reuse = made[j][k];
            st = make_tensor_n(d, &seed, name, t[k].type, t[k].n_mat ? t[k].n_mat : 1, t[k].rows,
                               t[k].cols, t[k].center, t[k].scale, reuse);
            made[i][k] = reuse ? reuse : d->bufs[d->n_bufs - 1];
        }
    }
    free(made);
    if (st) {
        demo_model_destroy(d);
        return st;
    }
    *out = d;
    return GLESLLM_OK;
}

glesllm_status demo_model_to_memory(const demo_spec *spec, uint8_t **data, size_t *size)
{
    demo_model *d;
    glesllm_status st = demo_model_create(spec, &d);
    if (st)
        return st;
    st = gguf_writer_write_memory(d->w, data, size);
    demo_model_destroy(d);
    return st;
}
