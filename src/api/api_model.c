/* The model handle: a GGUF file opened and checked, its vocabulary, and the
 * GPU weights its contexts share; text to ids and back. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "model/demo_model.h"
#include "text/tokenizer.h"

glesllm_status api_check_model(const glesllm_model *m)
{
    if (!m)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the model is NULL");
    if (m->tag != TAG_MODEL)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the handle given as a model is not one (or was closed)");
    if (m->closed)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the model was closed");
    return GLESLLM_OK;
}

glesllm_status api_vocab(const glesllm_model *m, const vocab **out)
{
    glesllm_status st = api_check_model(m);
    if (st)
        return st;
    if (!m->voc)
        return err_set(GLESLLM_ERR_FORMAT, "the model has no usable vocabulary: %s", m->vocab_err);
    *out = m->voc;
    return GLESLLM_OK;
}

/* (with the last reference: no context is left, nor its weights) */
static void model_free(glesllm_model *m)
{
    if (m->b)
        m->b->n_models--;
    model_close(&m->m);
    vocab_free(m->voc);
    gguf_close(m->f);
    free(m->demo);
    free(m->chat_template);
    m->tag = 0;
    free(m);
}

void api_model_release(glesllm_model *m)
{
    if (--m->refs == 0)
        model_free(m);
}

static glesllm_status open_file(glesllm_backend *b, const char *path, const uint8_t *mem,
                                size_t size, const glesllm_model_params *params,
                                glesllm_model **out)
{
    if (!out)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    glesllm_status st;
    if (b && (st = api_check_backend(b)))
        return st;
    glesllm_model *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(GLESLLM_ERR_NO_MEMORY, "out of memory");
    m->b = b;
    if (params)
        m->params = *params;
    st = path ? gguf_open(path, &m->f) : gguf_open_memory(mem, size, &m->f);
    bool opened = false;
    if (!st && m->params.vocab_only) {
        if ((st = vocab_load(m->f, &m->voc)) && path)
            err_prefix(st, "%s: ", path);
    } else if (!st) {
        st = model_open(m->f, &m->m);
        opened = st == GLESLLM_OK;
        if (st && path)
            err_prefix(st, "%s: ", path);
    }
    if (st) {
        if (opened)
            model_close(&m->m);
        vocab_free(m->voc);
        gguf_close(m->f);
        free(m);
        return st;
    }
    /* a model without a usable vocabulary still runs from ids */
    if (!m->voc && vocab_load(m->f, &m->voc)) {
        snprintf(m->vocab_err, sizeof m->vocab_err, "%s", glesllm_last_error());
        m->voc = NULL;
        MODEL_LOG(m, GLESLLM_LOG_WARN, "no usable vocabulary (%s): the model runs from token "
                  "ids only", m->vocab_err);
    } else if (*vocab_warnings(m->voc)) {
        MODEL_LOG(m, GLESLLM_LOG_WARN, "%s", vocab_warnings(m->voc));
    }
    gguf_str tmpl;
    if (gguf_get_str(m->f, "tokenizer.chat_template", &tmpl) == GLESLLM_OK &&
        (m->chat_template = malloc(tmpl.len + 1)))
        gguf_str_copy(tmpl, m->chat_template, tmpl.len + 1);
    m->tag = TAG_MODEL;
    m->refs = 1;
    if (b)
        b->n_models++;
    err_clear();
    *out = m;
    return GLESLLM_OK;
}

glesllm_status glesllm_model_open(glesllm_backend *b, const char *path,
                                  const glesllm_model_params *params, glesllm_model **out)
{
    if (!path)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the model path is NULL (glesllm_model_open_demo opens the demo model)");
    return open_file(b, path, NULL, 0, params, out);
}

glesllm_status glesllm_model_open_demo(glesllm_backend *b, const glesllm_model_params *params,
                                       glesllm_model **out)
{
    demo_spec spec = demo_spec_default();
    uint8_t *data;
    size_t size;
    glesllm_status st = demo_model_to_memory(&spec, &data, &size);
    if (st)
        return err_prefix(st, "making the demo model: ");
    if ((st = open_file(b, NULL, data, size, params, out))) {
        free(data);
        return st;
    }
    (*out)->demo = data;
    MODEL_LOG(*out, GLESLLM_LOG_INFO, "the built-in demo model: %s, %u layers, %u hidden, %s; random "
            "weights, so the text means nothing", spec.arch, spec.n_layer, spec.n_embd,
            ggml_type_name(spec.type));
    return GLESLLM_OK;
}

void glesllm_model_close(glesllm_model *m)
{
    if (!m || m->tag != TAG_MODEL || m->closed)
        return;
    m->closed = true;
    api_model_release(m);
}

#define HP(m, field, none) (api_check_model(m) ? (none) : (m)->m.hp.field)

const char *glesllm_model_arch(const glesllm_model *m) { return HP(m, arch_name, NULL); }
uint32_t glesllm_model_n_vocab(const glesllm_model *m)
{
    return api_check_model(m) ? 0 : m->params.vocab_only ? vocab_size(m->voc) : m->m.hp.n_vocab;
}
uint32_t glesllm_model_n_ctx_train(const glesllm_model *m) { return HP(m, n_ctx_train, 0); }
uint32_t glesllm_model_n_layer(const glesllm_model *m) { return HP(m, n_layer, 0); }
uint32_t glesllm_model_n_embd(const glesllm_model *m) { return HP(m, n_embd, 0); }

uint64_t glesllm_model_n_params(const glesllm_model *m)
{
    uint64_t n = 0;
    for (uint64_t i = 0; !api_check_model(m) && i < gguf_tensor_count(m->f); i++)
        n += gguf_tensor_at(m->f, i)->n_elements;
    return n;
}

uint64_t glesllm_model_size(const glesllm_model *m)
{
    uint64_t n = 0;
    for (uint64_t i = 0; !api_check_model(m) && i < gguf_tensor_count(m->f); i++)
        n += gguf_tensor_at(m->f, i)->size;
    return n;
}

/* a special token of the vocabulary, else of the model's metadata */
static int32_t special(const glesllm_model *m, int32_t (*of)(const vocab *), int32_t none)
{
    if (api_check_model(m))
        return -1;
    return m->voc ? of(m->voc) : none;
}

int32_t glesllm_token_bos(const glesllm_model *m) { return special(m, vocab_bos, HP(m, bos, -1)); }
int32_t glesllm_token_eos(const glesllm_model *m) { return special(m, vocab_eos, HP(m, eos, -1)); }
int32_t glesllm_token_eot(const glesllm_model *m) { return special(m, vocab_eot, -1); }

int glesllm_token_is_eog(const glesllm_model *m, int32_t token)
{
    return !api_check_model(m) && m->voc && vocab_is_eog(m->voc, token);
}

/* the text of a scalar value into buf; its length */
static int value_text(const gguf_value *v, char *buf, size_t size)
{
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        return snprintf(buf, size, "%" PRIu64, v->v.u64);
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        return snprintf(buf, size, "%" PRId64, v->v.i64);
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        return snprintf(buf, size, "%.9g", v->v.f64);
    case GGUF_TYPE_BOOL:
        return snprintf(buf, size, "%s", v->v.b ? "true" : "false");
    case GGUF_TYPE_STRING:
        if (size)
            gguf_str_copy(v->v.str, buf, size);
        return v->v.str.len > INT32_MAX ? INT32_MAX : (int)v->v.str.len;
    case GGUF_TYPE_ARRAY: /* (a count, not the items) */
        return snprintf(buf, size, "[%" PRIu64 " items]", v->v.arr.count);
    default:
        return snprintf(buf, size, "?");
    }
}

int32_t glesllm_model_meta(const glesllm_model *m, const char *key, char *buf, size_t size)
{
    if (api_check_model(m) || !key)
        return -1;
    const gguf_kv *kv = gguf_find(m->f, key);
    if (!kv)
        return -1;
    char none[1];
    return value_text(&kv->value, buf ? buf : none, buf ? size : 0);
}

size_t glesllm_model_formats(const glesllm_model *m, char *buf, size_t size)
{
    char none[1];
    if (!buf || !size) {
        buf = none;
        size = 1;
    }
    buf[0] = '\0';
    if (api_check_model(m))
        return 0;
    uint64_t per_type[GGML_TYPE_MAX_ID] = { 0 };
    for (uint64_t i = 0; i < gguf_tensor_count(m->f); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->f, i);
        if (t->n_dims >= 2 && t->type < GGML_TYPE_MAX_ID)
            per_type[t->type] += t->n_elements;
    }
    size_t len = 0;
    for (;;) {
        uint32_t best = GGML_TYPE_MAX_ID;
        for (uint32_t ty = 0; ty < GGML_TYPE_MAX_ID; ty++)
            if (per_type[ty] && (best == GGML_TYPE_MAX_ID || per_type[ty] > per_type[best]))
                best = ty;
        if (best == GGML_TYPE_MAX_ID)
            break;
        const char *nm = ggml_type_name(best);
        len += (size_t)snprintf(buf + (len < size ? len : size - 1), len < size ? size - len : 1,
                                "%s%s", len ? "+" : "", nm ? nm : "?");
        per_type[best] = 0;
    }
    return len;
}

const char *glesllm_model_chat_template(const glesllm_model *m)
{
    return api_check_model(m) ? NULL : m->chat_template;
}

glesllm_status glesllm_tokenize(const glesllm_model *m, const char *text, size_t len,
                                unsigned flags, int32_t *ids, size_t cap, size_t *n)
{
    const vocab *v = NULL;
    glesllm_status st = api_vocab(m, &v);
    if (st)
        return st;
    if (!n || (!text && len) || (!ids && cap))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "tokenize: NULL text, ids or n");
    tok_ids t = { 0 };
    unsigned f = (flags & GLESLLM_TOKENIZE_ADD_SPECIAL ? TOK_ADD_SPECIAL : 0) |
                 (flags & GLESLLM_TOKENIZE_PARSE_SPECIAL ? TOK_PARSE_SPECIAL : 0);
    if ((st = tok_encode(v, text ? text : "", len, f, &t))) {
        tok_ids_free(&t);
        return st;
    }
    *n = t.n;
    if (ids && t.n && cap)
        memcpy(ids, t.ids, (t.n < cap ? t.n : cap) * sizeof *ids);
    tok_ids_free(&t);
    if (*n > cap)
        return err_set(GLESLLM_ERR_SMALL_BUFFER, "the text has %zu tokens, room was given for %zu",
                       *n, cap);
    return GLESLLM_OK;
}

size_t glesllm_token_piece(const glesllm_model *m, int32_t token, int special, char *buf,
                           size_t size)
{
    const vocab *v = NULL;
    if (api_vocab(m, &v) || token < 0 || (uint32_t)token >= vocab_size(v))
        return 0;
    char none[1];
    return vocab_piece(v, token, special != 0, buf ? buf : none, buf ? size : 0);
}

glesllm_status glesllm_detokenize(const glesllm_model *m, const int32_t *ids, size_t n,
                                  unsigned flags, char *buf, size_t size, size_t *len)
{
    const vocab *v = NULL;
    glesllm_status st = api_vocab(m, &v);
    if (st)
        return st;
    if (!len || (!ids && n) || (!buf && size))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "detokenize: NULL ids, buf or len");
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= vocab_size(v))
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "token %d (at %zu) is outside the vocabulary of %u", ids[i], i,
                           vocab_size(v));
    unsigned f = (flags & GLESLLM_DETOKENIZE_REMOVE_SPECIAL ? TOK_REMOVE_SPECIAL : 0) |
                 (flags & GLESLLM_DETOKENIZE_SPECIAL ? TOK_UNPARSE_SPECIAL : 0);
    char *text;
    if ((st = tok_decode(v, ids, n, f, &text, len)))
        return st;
    if (size) {
        size_t k = *len < size ? *len : size - 1;
        memcpy(buf, text, k);
        buf[k] = '\0';
    }
    free(text);
    if (*len >= size)
        return err_set(GLESLLM_ERR_SMALL_BUFFER,
                       "the text is %zu bytes, room was given for %zu and the NUL", *len,
                       size ? size - 1 : 0);
    return GLESLLM_OK;
}
