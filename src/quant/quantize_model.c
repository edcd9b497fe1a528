/* Quantizing a GGUF model: the type policy of quantize_model.h, metadata
 * copied, each tensor converted (on all CPU cores) while the writer streams
 * the output file. The tensors' bytes are read with pread, not through the
 * mapping: an input truncated while it is read is then an error instead of a
 * SIGBUS. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/error.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/quantize_model.h"

static const struct {
    const char *name;
    uint32_t base;    /* ggml type of most weights */
    uint32_t gguf_id; /* LLAMA_FTYPE_MOSTLY_* */
} ftypes[] = {
    [QUANT_FTYPE_Q4_0] = { "Q4_0", GGML_TYPE_Q4_0, 2 },
    [QUANT_FTYPE_Q8_0] = { "Q8_0", GGML_TYPE_Q8_0, 7 },
    [QUANT_FTYPE_Q4_K] = { "Q4_K", GGML_TYPE_Q4_K, 14 }, /* llama.cpp's Q4_K_S number */
    [QUANT_FTYPE_Q6_K] = { "Q6_K", GGML_TYPE_Q6_K, 18 },
    [QUANT_FTYPE_Q4_K_M] = { "Q4_K_M", GGML_TYPE_Q4_K, 15 },
};

int quant_ftype_from_name(const char *name)
{
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (strcasecmp(ftypes[i].name, name) == 0)
            return (int)i;
    return -1;
}

const char *quant_ftype_name(quant_ftype f) { return ftypes[f].name; }
uint32_t quant_ftype_gguf_id(quant_ftype f) { return ftypes[f].gguf_id; }

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* {general.architecture}.suffix as a number, 0 where there is none */
static uint32_t arch_key_u32(const gguf_file *f, const char *suffix)
{
    gguf_str a;
    char arch[72];
    if (gguf_get_str(f, "general.architecture", &a) != GLESLLM_OK || a.len > 64)
        return 0;
    snprintf(arch, sizeof arch, "%.*s", (int)a.len, a.data);
    return gguf_get_arch_u32(f, arch, suffix, 0);
}

/* llama.cpp's choice of which layers of a Q4_K_M get more bits */
static int use_more_bits(uint64_t i, uint64_t n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i >= n / 8 && (i - n / 8) % 3 == 2);
}

typedef struct policy {
    quant_ftype ftype;
    int tied;               /* no output.weight: token_embd is the output */
    uint64_t n_attn_v, i_attn_v, n_ffn_down, i_ffn_down;
    uint32_t n_expert, n_layer; /* {arch}.expert_count (0: none), block_count */
} policy;

/* The type for tensor t, before the row-length fallback; t's own type when
 * it stays as it is. */
static uint32_t choose_type(policy *p, const gguf_tensor *t)
{
    /* (matrices and stacked experts; llama.cpp keeps the experts' router as
     * it is) */
    /* (dimensions as ggml counts them: up to the last one above 1, so that
     * RWKV's [n_embd, 1, 1] mixes are vectors) */
    uint32_t dims = 1;
    for (uint32_t d = 1; d < t->n_dims; d++)
        if (t->ne[d] > 1)
            dims = d + 1;
    if (dims < 2 || !ends_with(t->name, "weight") || strstr(t->name, "ffn_gate_inp.weight"))
        return t->type;
    /* RWKV's vectors and low-rank paths stay as they are too, as llama.cpp
     * keeps them */
    static const char *const rwkv_kept[] = { "time_mix_first.", "time_mix_w0.", "time_mix_w1.",
                                             "time_mix_w2.",    "time_mix_v0.", "time_mix_v1.",
                                             "time_mix_v2.",    "time_mix_a0.", "time_mix_a1.",
                                             "time_mix_a2.",    "time_mix_g1.", "time_mix_g2.",
                                             "time_mix_decay_w1.", "time_mix_decay_w2.",
                                             "time_mix_lerp_fused." };
    for (size_t i = 0; i < sizeof rwkv_kept / sizeof rwkv_kept[0]; i++)
        if (strstr(t->name, rwkv_kept[i]))
            return t->type;
    bool eight = p->n_expert == 8; /* llama.cpp's rules for 8-expert models (Mixtral) */
    uint32_t base = ftypes[p->ftype].base;
    int is_output = strcmp(t->name, "output.weight") == 0 ||
                    (p->tied && strcmp(t->name, "token_embd.weight") == 0);
    if (is_output)
        return base == GGML_TYPE_Q8_0 ? GGML_TYPE_Q8_0 : GGML_TYPE_Q6_K;
    if (strstr(t->name, "attn_v.weight")) {
        uint64_t i = p->i_attn_v++;
        if (eight)
            return GGML_TYPE_Q8_0;
        if (p->ftype == QUANT_FTYPE_Q4_K_M && use_more_bits(i, p->n_attn_v))
            return GGML_TYPE_Q6_K;
    } else if (strstr(t->name, "attn_k.weight")) {
        if (eight)
            return GGML_TYPE_Q8_0;
    } else if (strstr(t->name, "attn_output.weight")) {
        if (eight && (p->ftype == QUANT_FTYPE_Q4_K_M || p->ftype == QUANT_FTYPE_Q4_K))
            return GGML_TYPE_Q5_K;
    } else if (strstr(t->name, "ffn_down")) {
        /* with experts, a layer's by its name over block_count (its experts'
         * and shared expert's down alike); else the count of those before */
        uint64_t i = p->i_ffn_down++, n = p->n_ffn_down;
        unsigned layer;
        if (p->n_expert > 1 && sscanf(t->name, "blk.%u.", &layer) == 1) {
            i = layer;
            n = p->n_layer;
        }
        if (p->ftype == QUANT_FTYPE_Q4_K_M && use_more_bits(i, n))
            return GGML_TYPE_Q6_K;
    }
    return base;
}

/* the row-length fallback */
static uint32_t fit_type(uint32_t type, uint64_t cols)
{
    if (cols % ggml_block_size(type) == 0)
        return type;
    if (type == GGML_TYPE_Q4_K && cols % 32 == 0)
        return GGML_TYPE_Q5_0;
    if (type == GGML_TYPE_Q6_K && cols % 32 == 0)
        return GGML_TYPE_Q8_0;
    if (type == GGML_TYPE_Q5_K && cols % 32 == 0)
        return GGML_TYPE_Q5_1;
    return GGML_TYPE_F16;
}

/* ---- converting one tensor, on several threads --------------------------- */

typedef struct job {
    uint32_t from;
    const uint8_t *src; /* rows of `from` */
    uint32_t to;
    uint64_t rows, cols, src_row_bytes, dst_row_bytes;
    uint8_t *out;
    volatile sig_atomic_t *cancel;
} job;

typedef struct worker {
    const job *j;
    uint64_t r0, r1;
    glesllm_status st;
    char err[256];
} worker;

static void *convert_rows(void *arg)
{
    worker *w = arg;
    const job *j = w->j;
    float *row = malloc((size_t)j->cols * sizeof *row);
    w->st = row ? GLESLLM_OK : err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    for (uint64_t r = w->r0; r < w->r1 && w->st == GLESLLM_OK; r++) {
        if (j->cancel && *j->cancel) {
            w->st = err_set(GLESLLM_ERR_CANCELLED, "interrupted");
            break;
        }
        w->st = quant_dequantize(j->from, j->src + r * j->src_row_bytes, row, (size_t)j->cols);
        if (w->st == GLESLLM_OK)
            w->st = quant_quantize(j->to, row, j->out + r * j->dst_row_bytes, (size_t)j->cols);
    }
    if (w->st != GLESLLM_OK) /* errors are thread-local: carry the text back */
        snprintf(w->err, sizeof w->err, "%s", glesllm_last_error());
    free(row);
    return NULL;
}

static glesllm_status convert(const job *j, unsigned threads)
{
    if (threads > 64)
        threads = 64;
    if (threads > j->rows)
        threads = (unsigned)j->rows;
    if (!threads)
        threads = 1;
    worker w[64];
    pthread_t th[64];
    int running[64] = { 0 };
    for (unsigned i = 0; i < threads; i++) {
        w[i] = (worker){ j, j->rows * i / threads, j->rows * (i + 1) / threads, GLESLLM_OK, "" };
        if (i > 0)
            running[i] = pthread_create(&th[i], NULL, convert_rows, &w[i]) == 0;
    }
    convert_rows(&w[0]);
    for (unsigned i = 1; i < threads; i++) {
        if (running[i])
            pthread_join(th[i], NULL);
        else
            convert_rows(&w[i]); /* the thread could not start: do its rows here */
    }
    for (unsigned i = 0; i < threads; i++)
        if (w[i].st != GLESLLM_OK)
            return err_set(w[i].st, "%s", w[i].err);
    return GLESLLM_OK;
}

typedef struct out_tensor {
    const gguf_tensor *src;
    uint32_t to;
    uint64_t index, count;
    uint64_t bytes;
    uint8_t *buf; /* the converted tensor while it is being written */
    struct model_ctx *m;
} out_tensor;

typedef struct model_ctx {
    const quant_model_callbacks *cb;
    uint64_t done, total;
    unsigned threads;
    const char *path; /* the input, read through fd */
    int fd;
    uint64_t data_offset;
} model_ctx;

/* n bytes of tensor t from byte `at` of its data */
static glesllm_status read_source(const model_ctx *m, const gguf_tensor *t, uint64_t at,
                                  void *buf, size_t n)
{
    uint64_t pos = m->data_offset + t->offset + at;
    for (size_t got = 0; got < n;) {
        ssize_t r = pread(m->fd, (uint8_t *)buf + got, n - got, (off_t)(pos + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return err_set(GLESLLM_ERR_IO, "reading tensor %s of %s: %s", t->name, m->path,
                           strerror(errno));
        if (r == 0)
            return err_set(GLESLLM_ERR_IO,
                           "%s ends at byte %llu, inside tensor %s: the file changed while it "
                           "was read; quantize a copy that nothing writes to",
                           m->path, (unsigned long long)(pos + got), t->name);
        got += (size_t)r;
    }
    return GLESLLM_OK;
}

/* the source rows converted a slice at a time: its bytes read, then
 * converted on every core */
#define SLICE_BYTES (64u << 20)

static glesllm_status convert_tensor(const model_ctx *m, const out_tensor *o)
{
    uint64_t one[1] = { o->src->ne[0] }, src_row = 0, dst_row = 0;
    uint64_t rows = o->src->ne[1] * o->src->ne[2] * o->src->ne[3]; /* (stacked experts: all) */
    ggml_tensor_bytes(o->src->type, 1, one, &src_row);
    ggml_tensor_bytes(o->to, 1, one, &dst_row);
    uint64_t per = src_row < SLICE_BYTES ? SLICE_BYTES / src_row : 1;
    if (per > rows)
        per = rows;
    uint8_t *src = malloc((size_t)(per * src_row));
    if (!src)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory reading %s (%.1f MiB)",
                       o->src->name, (double)(per * src_row) / (1 << 20));
    glesllm_status st = GLESLLM_OK;
    for (uint64_t r0 = 0; r0 < rows && st == GLESLLM_OK; r0 += per) {
        uint64_t nr = rows - r0 < per ? rows - r0 : per;
        st = read_source(m, o->src, r0 * src_row, src, (size_t)(nr * src_row));
        job j = { o->src->type, src, o->to, nr, o->src->ne[0], src_row, dst_row,
                  o->buf + r0 * dst_row, m->cb ? m->cb->cancel : NULL };
        if (st == GLESLLM_OK)
            st = convert(&j, m->threads);
    }
    free(src);
    return st;
}

static glesllm_status fill_tensor(void *ctx, void *buf, uint64_t offset, size_t n)
{
    out_tensor *o = ctx;
    model_ctx *m = o->m;
    if (m->cb && m->cb->cancel && *m->cb->cancel)
        return err_set(GLESLLM_ERR_CANCELLED, "interrupted");
    if (offset == 0) {
        if (m->cb && m->cb->tensor)
            m->cb->tensor(m->cb->ctx, o->index, o->count, o->src->name, o->src->type, o->to,
                          m->done, m->total);
        if (o->to == o->src->type) {
            o->buf = NULL; /* copied straight from the input */
        } else {
            o->buf = malloc((size_t)o->bytes);
            if (!o->buf)
                return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory converting %s (%.1f MiB)",
                               o->src->name, (double)o->bytes / (1 << 20));
            glesllm_status st = convert_tensor(m, o);
            if (st != GLESLLM_OK) {
                free(o->buf);
                o->buf = NULL;
                return err_prefix(st, "converting %s: ", o->src->name);
            }
        }
    }
    if (o->buf)
        memcpy(buf, o->buf + offset, n);
    else {
        glesllm_status st = read_source(m, o->src, offset, buf, n);
        if (st != GLESLLM_OK)
            return st;
    }
    if (offset + n >= o->bytes) {
        free(o->buf);
        o->buf = NULL;
        m->done += o->src->size;
    }
    return GLESLLM_OK;
}

static void note(const quant_model_callbacks *cb, const char *fmt, ...) GLESLLM_PRINTF(2, 3);
static void note(const quant_model_callbacks *cb, const char *fmt, ...)
{
    if (!cb || !cb->note)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cb->note(cb->ctx, msg);
}

static glesllm_status copy_metadata(const gguf_file *in, gguf_writer *w, quant_ftype ftype)
{
    glesllm_status st = GLESLLM_OK;
    int have_ft = 0, have_qv = 0;
    for (uint64_t i = 0; st == GLESLLM_OK && i < gguf_kv_count(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        char *key = malloc((size_t)kv->key.len + 1);
        if (!key)
            return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
        memcpy(key, kv->key.data, (size_t)kv->key.len);
        key[kv->key.len] = 0;
        if (strcmp(key, "general.file_type") == 0) {
            st = gguf_writer_set_u32(w, key, quant_ftype_gguf_id(ftype));
            have_ft = 1;
        } else if (strcmp(key, "general.quantization_version") == 0) {
            st = gguf_writer_set_u32(w, key, 2);
            have_qv = 1;
        } else {
            st = gguf_writer_set_raw(w, key, kv->value.type, kv->raw, kv->raw_len);
        }
        free(key);
    }
    if (st == GLESLLM_OK && !have_qv)
        st = gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (st == GLESLLM_OK && !have_ft)
        st = gguf_writer_set_u32(w, "general.file_type", quant_ftype_gguf_id(ftype));
    return st;
}

glesllm_status quant_model(const char *in_path, const char *out_path, quant_ftype ftype,
                           const quant_model_callbacks *cb)
{
    gguf_file *in = NULL;
    gguf_writer *w = NULL;
    out_tensor *outs = NULL;
    glesllm_status st = gguf_open(in_path, &in);
    if (st != GLESLLM_OK)
        return st;
    uint64_t n = gguf_tensor_count(in);
    policy pol = { ftype, gguf_find_tensor(in, "output.weight") == NULL, 0, 0, 0, 0, 0, 0 };
    pol.n_expert = arch_key_u32(in, "expert_count");
    pol.n_layer = arch_key_u32(in, "block_count");
    model_ctx m = { cb, 0, 0, cb && cb->threads ? cb->threads : 0, in_path, -1,
                    gguf_data_offset(in) };
    m.fd = open(in_path, O_RDONLY | O_CLOEXEC);
    if (m.fd < 0) {
        st = err_set(GLESLLM_ERR_IO, "cannot open %s: %s", in_path, strerror(errno));
        gguf_close(in);
        return st;
    }
    if (!m.threads) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        m.threads = c > 0 ? (unsigned)c : 1;
    }
    for (uint64_t i = 0; i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        pol.n_attn_v += strstr(t->name, "attn_v.weight") != NULL;
        pol.n_ffn_down += strstr(t->name, "ffn_down") != NULL;
        m.total += t->size;
    }
    if (!(outs = calloc(n ? n : 1, sizeof *outs)))
        st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    if (st == GLESLLM_OK)
        st = gguf_writer_create(&w);
    if (st == GLESLLM_OK)
        st = copy_metadata(in, w, ftype);
    for (uint64_t i = 0; st == GLESLLM_OK && i < n; i++) {
        const gguf_tensor *t = gguf_tensor_at(in, i);
        out_tensor *o = &outs[i];
        o->src = t;
        o->index = i;
        o->count = n;
        o->m = &m;
        uint32_t want = choose_type(&pol, t);
        o->to = want == t->type ? want : fit_type(want, t->ne[0]);
        if (o->to != want)
            note(cb, "%s: rows of %llu values are not whole %s blocks; using %s (as llama.cpp does)",
                 t->name, (unsigned long long)t->ne[0], ggml_type_name(want),
                 ggml_type_name(o->to));
        if (o->to != t->type && !quant_supported(t->type)) {
            st = err_set(GLESLLM_ERR_UNSUPPORTED, "tensor %s is %s, which cannot be converted yet",
                         t->name, ggml_type_name(t->type) ? ggml_type_name(t->type) : "unknown");
            break;
        }
        if (o->to != t->type && t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 &&
            t->type != GGML_TYPE_BF16)
            note(cb, "%s: requantizing %s to %s loses more than quantizing from F32/F16",
                 t->name, ggml_type_name(t->type), ggml_type_name(o->to));
        uint64_t ne[4] = { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
        if ((st = ggml_tensor_bytes(o->to, t->n_dims, ne, &o->bytes)) != GLESLLM_OK)
            break;
        st = gguf_writer_add_tensor_fill(w, t->name, o->to, t->n_dims, ne, fill_tensor, o);
    }
    if (st == GLESLLM_OK)
        st = gguf_writer_write(w, out_path);
    if (outs)
        for (uint64_t i = 0; i < n; i++)
            free(outs[i].buf);
    free(outs);
    gguf_writer_destroy(w);
    gguf_close(in);
    close(m.fd);
    return st;
}
