/* The server's HTTP side: routes, OpenAI's request and response JSON,
 * server-sent events, errors. libmicrohttpd runs a thread a connection, so
 * a handler may wait for its request; cJSON reads and writes the JSON. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "serve_http.h"

struct serve_http {
    struct MHD_Daemon *d;
    serve *s;
    glesllm_model *m;
    const serve_http_params *p;
    const char *template_name; /* the chat template (NULL: none recognised) */
    unsigned long long next_id;
    unsigned open;     /* requests begun and not yet completed (sent or dropped) */
    pthread_mutex_t mu;
    pthread_cond_t done; /* signalled as open falls */
};

/* ---- responses ------------------------------------------------------------------ */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             char *body /* malloc'd, taken */)
{
    struct MHD_Response *res =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!res) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(conn, status, res);
    MHD_destroy_response(res);
    return ret;
}

static enum MHD_Result reply_json(struct MHD_Connection *conn, unsigned status, cJSON *j)
{
    char *body = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!body)
        return MHD_NO;
    return reply(conn, status, "application/json; charset=utf-8", body);
}

static const char *error_type(unsigned status)
{
    return status == 401   ? "authentication_error"
           : status == 404 ? "not_found_error"
           : status == 503 ? "unavailable_error"
           : status >= 500 ? "server_error"
                           : "invalid_request_error";
}

/* {"error": {"code", "message", "type"}}, as OpenAI's API and llama-server
 * answer */
static cJSON *error_json(unsigned status, const char *msg)
{
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddNumberToObject(e, "code", status);
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(status));
    return j;
}

static enum MHD_Result reply_error(struct MHD_Connection *conn, unsigned status, const char *fmt,
                                   ...) __attribute__((format(printf, 3, 4)));
static enum MHD_Result reply_error(struct MHD_Connection *conn, unsigned status, const char *fmt,
                                   ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return reply_json(conn, status, error_json(status, msg));
}

/* ---- a request's parameters -------------------------------------------------------- */

typedef struct params_error {
    char msg[300];
} params_error;

static bool bad(params_error *e, const char *fmt, const char *name)
{
    snprintf(e->msg, sizeof e->msg, fmt, name);
    return false;
}

/* A number field within [lo, hi] (absent: untouched). */
static bool get_number(const cJSON *j, const char *name, double lo, double hi, double *out,
                       params_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, name);
    if (!v || cJSON_IsNull(v))
        return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return bad(e, "'%s' must be a number", name);
    if (v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(e->msg, sizeof e->msg, "'%s' is %g; it must be from %g to %g", name,
                 v->valuedouble, lo, hi);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static bool get_int(const cJSON *j, const char *name, double lo, double hi, double *out,
                    params_error *e)
{
    double v = *out;
    if (!get_number(j, name, lo, hi, &v, e))
        return false;
    if (v != floor(v))
        return bad(e, "'%s' must be a whole number", name);
    *out = v;
    return true;
}

/* The sampling and stopping fields shared by completions and chat. */
static bool read_params(const cJSON *j, serve_req *r, bool *stream, params_error *e)
{
    if (!cJSON_IsObject(j))
        return bad(e, "the body must be a JSON object%s", "");
    glesllm_sampling sp = glesllm_sampling_default();
    double v, max_tokens = -1;
    const char *const max_names[] = { "max_tokens", "max_completion_tokens", "n_predict" };
    for (int i = 0; i < 3; i++)
        if (!get_int(j, max_names[i], -1, 1e9, &max_tokens, e))
            return false;
    r->n_predict = (int32_t)max_tokens;
    v = sp.temp;
    if (!get_number(j, "temperature", 0, 100, &v, e))
        return false;
    sp.temp = (float)v;
    v = sp.top_p;
    if (!get_number(j, "top_p", 0, 1, &v, e))
        return false;
    sp.top_p = (float)v;
    v = sp.min_p;
    if (!get_number(j, "min_p", 0, 1, &v, e))
        return false;
    sp.min_p = (float)v;
    v = sp.top_k;
    if (!get_int(j, "top_k", -1, 1e9, &v, e))
        return false;
    sp.top_k = (int32_t)v;
    v = sp.repeat_penalty;
    if (!get_number(j, "repeat_penalty", 0.01, 100, &v, e))
        return false;
    sp.repeat_penalty = (float)v;
    v = -1;
    if (!get_int(j, "seed", -9.2e18, 1.8e19, &v, e))
        return false;
    if (v < 0) { /* none given: a random one, as llama-server's -1 */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        sp.seed = (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)ts.tv_sec;
    } else {
        sp.seed = (uint64_t)v;
    }
    r->sampling = sp;
    v = 1;
    if (!get_int(j, "n", 1, 1, &v, e))
        return bad(e, "'n' must be 1: one choice a request%s", "");
    const cJSON *ie = cJSON_GetObjectItemCaseSensitive(j, "ignore_eos");
    if (ie && !cJSON_IsNull(ie) && !cJSON_IsBool(ie))
        return bad(e, "'ignore_eos' must be true or false%s", "");
    r->ignore_eos = cJSON_IsTrue(ie);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "stream");
    if (st && !cJSON_IsNull(st) && !cJSON_IsBool(st))
        return bad(e, "'stream' must be true or false%s", "");
    *stream = cJSON_IsTrue(st);
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(j, "stop");
    if (stop && !cJSON_IsNull(stop)) {
        const cJSON *one = cJSON_IsString(stop) ? stop : NULL;
        if (!one && (!cJSON_IsArray(stop) || cJSON_GetArraySize(stop) > SERVE_MAX_STOP))
            return bad(e, "'stop' must be a string or an array of at most 4 strings%s", "");
        const cJSON *it;
        if (one) {
            if (strlen(one->valuestring) > 1024)
                return bad(e, "a 'stop' string is over 1024 bytes%s", "");
            if (!(r->stop[r->n_stop++] = strdup(one->valuestring)))
                return bad(e, "out of memory%s", "");
        } else {
            cJSON_ArrayForEach(it, stop)
            {
                if (!cJSON_IsString(it))
                    return bad(e, "'stop' must be a string or an array of at most 4 strings%s",
                               "");
                if (strlen(it->valuestring) > 1024)
                    return bad(e, "a 'stop' string is over 1024 bytes%s", "");
                if (!(r->stop[r->n_stop++] = strdup(it->valuestring)))
                    return bad(e, "out of memory%s", "");
            }
        }
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (model && !cJSON_IsNull(model) && !cJSON_IsString(model))
        return bad(e, "'model' must be a string%s", "");
    return true;
}

/* ---- the worker's results as OpenAI's JSON ---------------------------------------- */

enum kind { KIND_COMPLETION, KIND_CHAT };

typedef struct reply_ctx {
    serve_http *h;
    serve_req *r;
    enum kind kind;
    char id[48];
    long long created;
    uint32_t n_prompt;
    int fd;
    /* streaming */
    size_t sent;    /* bytes of r->text in events so far */
    bool opened;    /* (chat) the first chunk, with the role, went */
    bool finished;  /* the last chunk went */
    bool ended;     /* so did [DONE] */
    char *buf;      /* an event not yet wholly taken by libmicrohttpd */
    size_t buf_len, buf_off;
} reply_ctx;

static cJSON *usage_json(const reply_ctx *c)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", c->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", c->r->n_gen);
    cJSON_AddNumberToObject(u, "total_tokens", c->n_prompt + c->r->n_gen);
    return u;
}

static cJSON *head_json(const reply_ctx *c, const char *object)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", c->id);
    cJSON_AddStringToObject(j, "object", object);
    cJSON_AddNumberToObject(j, "created", (double)c->created);
    cJSON_AddStringToObject(j, "model", c->h->p->model_id);
    return j;
}

/* One choice: a completion's text, or a chat message (delta for a chunk);
 * text NULL: an empty delta. finish NULL: JSON null. */
static cJSON *choice_json(const reply_ctx *c, const char *text, size_t len, const char *finish,
                          bool chunk, bool role)
{
    cJSON *ch = cJSON_CreateObject();
    cJSON_AddNumberToObject(ch, "index", 0);
    char *t = malloc(len + 1);
    if (t) {
        if (len)
            memcpy(t, text, len);
        t[len] = '\0';
    }
    if (c->kind == KIND_COMPLETION) {
        cJSON_AddStringToObject(ch, "text", t ? t : "");
        cJSON_AddNullToObject(ch, "logprobs");
    } else {
        cJSON *msg = cJSON_AddObjectToObject(ch, chunk ? "delta" : "message");
        if (role)
            cJSON_AddStringToObject(msg, "role", "assistant");
        if (text)
            cJSON_AddStringToObject(msg, "content", t ? t : "");
    }
    free(t);
    if (finish)
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    else
        cJSON_AddNullToObject(ch, "finish_reason");
    return ch;
}

/* ---- waiting for the worker --------------------------------------------------------- */

/* Whether the client closed its side of the connection. */
static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };
    if (poll(&p, 1, 0) <= 0)
        return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR))
        return true;
    char ch;
    return recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Under r->mu: waits until the text grows past `seen` or the request ends,
 * or a tenth of a second. */
static void wait_locked(serve_req *r, size_t seen)
{
    if (r->done || r->len > seen)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100000000;
    if (ts.tv_nsec >= 1000000000)
        ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

/* ---- streaming: server-sent events ----------------------------------------------------- */

static bool event(reply_ctx *c, cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s)
        return false;
    size_t n = strlen(s);
    free(c->buf);
    c->buf = malloc(n + 9);
    if (!c->buf) {
        free(s);
        return false;
    }
    c->buf_len = (size_t)snprintf(c->buf, n + 9, "data: %s\n\n", s);
    c->buf_off = 0;
    free(s);
    return true;
}

/* The next event: the role (chat's first chunk), new text, the last chunk
 * (its finish reason and the usage), then [DONE]. false: none yet. */
static bool next_event(reply_ctx *c)
{
    serve_req *r = c->r;
    const char *object = c->kind == KIND_CHAT ? "chat.completion.chunk" : "text_completion";
    if (c->kind == KIND_CHAT && !c->opened) {
        c->opened = true;
        cJSON *j = head_json(c, object), *chs = cJSON_AddArrayToObject(j, "choices");
        cJSON_AddItemToArray(chs, choice_json(c, "", 0, NULL, true, true));
        return event(c, j);
    }
    pthread_mutex_lock(&r->mu);
    wait_locked(r, c->sent);
    bool ret = false;
    if (r->len > c->sent) {
        cJSON *j = head_json(c, object), *chs = cJSON_AddArrayToObject(j, "choices");
        cJSON_AddItemToArray(chs, choice_json(c, r->text + c->sent, r->len - c->sent, NULL, true,
                                              false));
        c->sent = r->len;
        ret = event(c, j);
    } else if (r->done && r->err_status) {
        c->finished = true;
        ret = event(c, error_json((unsigned)r->err_status, r->err));
    } else if (r->done) {
        c->finished = true;
        cJSON *j = head_json(c, object), *chs = cJSON_AddArrayToObject(j, "choices");
        cJSON_AddItemToArray(chs, choice_json(c, NULL, 0, r->finish, true, false));
        cJSON_AddItemToObject(j, "usage", usage_json(c));
        ret = event(c, j);
    }
    pthread_mutex_unlock(&r->mu);
    return ret;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    reply_ctx *c = cls;
    while (c->buf_off == c->buf_len) {
        if (c->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (c->finished) {
            free(c->buf);
            c->buf = strdup("data: [DONE]\n\n");
            if (!c->buf)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            c->buf_len = strlen(c->buf);
            c->buf_off = 0;
            c->ended = true;
            break;
        }
        if (client_gone(c->fd))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        next_event(c);
    }
    size_t n = c->buf_len - c->buf_off < max ? c->buf_len - c->buf_off : max;
    memcpy(out, c->buf + c->buf_off, n);
    c->buf_off += n;
    return (ssize_t)n;
}

/* The response is gone (sent, or the client went away): a request still
 * running is cancelled, its slot freed. */
static void stream_free(void *cls)
{
    reply_ctx *c = cls;
    serve_cancel(c->h->s, c->r);
    serve_req_release(c->h->s, c->r);
    free(c->buf);
    free(c);
}

/* ---- running a request --------------------------------------------------------------- */

static enum MHD_Result run(serve_http *h, struct MHD_Connection *conn, serve_req *r, enum kind kind,
                           bool stream)
{
    uint32_t n_ctx = serve_n_ctx(h->s);
    if (r->n_prompt == 0) {
        serve_req_release(h->s, r);
        return reply_error(conn, 400, "the prompt is empty");
    }
    if (r->n_prompt >= n_ctx) {
        uint32_t n = r->n_prompt;
        serve_req_release(h->s, r);
        return reply_error(conn, 400,
                           "the prompt has %u tokens; the context holds %u (a slot's most of "
                           "-c): shorten the prompt, or start the server with a larger -c or "
                           "fewer slots (-np)",
                           n, n_ctx);
    }
    reply_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        serve_req_release(h->s, r);
        return reply_error(conn, 500, "out of memory");
    }
    c->h = h;
    c->r = r;
    c->kind = kind;
    c->n_prompt = r->n_prompt;
    c->created = (long long)time(NULL);
    pthread_mutex_lock(&h->mu);
    snprintf(c->id, sizeof c->id, "%s-%llu", kind == KIND_CHAT ? "chatcmpl" : "cmpl", ++h->next_id);
    pthread_mutex_unlock(&h->mu);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    c->fd = ci ? ci->connect_fd : -1;
    serve_submit(h->s, r);
    if (stream) {
        struct MHD_Response *res =
            MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, c, stream_free);
        if (!res) {
            stream_free(c);
            return MHD_NO;
        }
        MHD_add_response_header(res, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(res, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, res);
        MHD_destroy_response(res);
        return ret;
    }
    pthread_mutex_lock(&r->mu);
    while (!r->done) {
        wait_locked(r, r->len);
        if (!r->done && client_gone(c->fd)) {
            pthread_mutex_unlock(&r->mu);
            stream_free(c); /* cancels */
            return MHD_NO;
        }
    }
    pthread_mutex_unlock(&r->mu);
    cJSON *j;
    unsigned status = 200;
    if (r->err_status) {
        status = (unsigned)r->err_status;
        j = error_json(status, r->err);
    } else {
        j = head_json(c, kind == KIND_CHAT ? "chat.completion" : "text_completion");
        cJSON *chs = cJSON_AddArrayToObject(j, "choices");
        cJSON_AddItemToArray(chs, choice_json(c, r->text ? r->text : "", r->len, r->finish, false,
                                              true));
        cJSON_AddItemToObject(j, "usage", usage_json(c));
    }
    stream_free(c);
    return reply_json(conn, status, j);
}

static glesllm_status tokenize(const glesllm_model *m, const char *text, unsigned flags,
                               int32_t **ids, uint32_t *n)
{
    size_t len = strlen(text), cnt = 0;
    *ids = NULL;
    *n = 0;
    glesllm_status st = glesllm_tokenize(m, text, len, flags, NULL, 0, &cnt);
    if (st != GLESLLM_ERR_SMALL_BUFFER)
        return st;
    if (cnt > UINT32_MAX / 2 || !(*ids = malloc(sizeof **ids * cnt)))
        return GLESLLM_ERR_NO_MEMORY;
    st = glesllm_tokenize(m, text, len, flags, *ids, cnt, &cnt);
    *n = (uint32_t)cnt;
    return st;
}

/* The model a request names, where it names one, is this server's. */
static bool model_known(serve_http *h, const cJSON *j)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
    return !cJSON_IsString(model) || !strcmp(model->valuestring, h->p->model_id);
}

static enum MHD_Result completions(serve_http *h, struct MHD_Connection *conn, const cJSON *j,
                                   enum kind kind)
{
    serve_req *r = serve_req_new();
    if (!r)
        return reply_error(conn, 500, "out of memory");
    params_error e;
    bool stream = false;
    if (!read_params(j, r, &stream, &e)) {
        serve_req_release(h->s, r);
        return reply_error(conn, 400, "%s", e.msg);
    }
    if (!model_known(h, j)) {
        serve_req_release(h->s, r);
        return reply_error(conn, 404, "the model '%s' does not exist here; this server has '%s'",
                           cJSON_GetObjectItemCaseSensitive(j, "model")->valuestring,
                           h->p->model_id);
    }
    glesllm_status st = GLESLLM_OK;
    unsigned flags = GLESLLM_TOKENIZE_ADD_SPECIAL | GLESLLM_TOKENIZE_PARSE_SPECIAL;
    if (kind == KIND_COMPLETION) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, "prompt");
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 &&
            cJSON_IsString(cJSON_GetArrayItem(p, 0)))
            p = cJSON_GetArrayItem(p, 0);
        if (cJSON_IsString(p)) {
            st = tokenize(h->m, p->valuestring, flags, &r->prompt, &r->n_prompt);
        } else if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0) {
            int n = cJSON_GetArraySize(p);
            if (!(r->prompt = malloc(sizeof *r->prompt * (size_t)n)))
                st = GLESLLM_ERR_NO_MEMORY;
            const cJSON *it;
            uint32_t n_vocab = glesllm_model_n_vocab(h->m);
            cJSON_ArrayForEach(it, p)
            {
                if (!r->prompt)
                    break;
                if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= n_vocab ||
                    it->valuedouble != floor(it->valuedouble)) {
                    serve_req_release(h->s, r);
                    return reply_error(conn, 400,
                                       "'prompt' as an array holds token ids, whole numbers "
                                       "from 0 to %u",
                                       n_vocab - 1);
                }
                r->prompt[r->n_prompt++] = (int32_t)it->valuedouble;
            }
        } else {
            serve_req_release(h->s, r);
            return reply_error(conn, 400,
                               "'prompt' must be a string, or an array of token ids");
        }
    } else {
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
        if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
            serve_req_release(h->s, r);
            return reply_error(conn, 400, "'messages' must be a non-empty array");
        }
        if (!h->template_name) {
            serve_req_release(h->s, r);
            return reply_error(conn, 400,
                               "the model's chat template is none that glesllm knows; start the "
                               "server with --chat-template NAME");
        }
        int n = cJSON_GetArraySize(msgs);
        glesllm_chat_message *cm = calloc((size_t)n, sizeof *cm);
        char **owned = calloc((size_t)n, sizeof *owned);
        const char *why = cm && owned ? NULL : "out of memory";
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, msgs)
        {
            if (why)
                break;
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
            const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
            if (!cJSON_IsObject(it) || !cJSON_IsString(role)) {
                why = "each message must be an object with a 'role' string";
                break;
            }
            cm[i].role = role->valuestring;
            if (cJSON_IsString(content)) {
                cm[i].content = content->valuestring;
            } else if (!content || cJSON_IsNull(content)) {
                cm[i].content = "";
            } else if (cJSON_IsArray(content)) {
                /* content parts: their texts joined */
                size_t len = 0;
                const cJSON *part;
                cJSON_ArrayForEach(part, content)
                {
                    const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
                    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(part, "type");
                    if (!cJSON_IsString(t) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text")) {
                        why = "a message's content parts must be of type 'text' (glesllm reads "
                              "no images or audio)";
                        break;
                    }
                    len += strlen(t->valuestring);
                }
                if (why || !(owned[i] = malloc(len + 1))) {
                    why = why ? why : "out of memory";
                    break;
                }
                owned[i][0] = '\0';
                cJSON_ArrayForEach(part, content)
                    strcat(owned[i], cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
                cm[i].content = owned[i];
            } else {
                why = "a message's 'content' must be a string or an array of text parts";
                break;
            }
            i++;
        }
        size_t len = 0;
        char *text = NULL;
        if (!why && glesllm_chat_apply(h->template_name, cm, (size_t)n, 1, NULL, 0, &len) ==
                        GLESLLM_ERR_SMALL_BUFFER &&
            (text = malloc(len + 1)))
            st = glesllm_chat_apply(h->template_name, cm, (size_t)n, 1, text, len + 1, &len);
        else if (!why)
            why = "out of memory";
        for (int k = 0; k < n && owned; k++)
            free(owned[k]);
        free(owned);
        free(cm);
        if (why) {
            free(text);
            serve_req_release(h->s, r);
            return reply_error(conn, 400, "%s", why);
        }
        if (!st)
            st = tokenize(h->m, text, flags, &r->prompt, &r->n_prompt);
        free(text);
    }
    if (st) {
        serve_req_release(h->s, r);
        return reply_error(conn, st == GLESLLM_ERR_NO_MEMORY ? 500 : 400, "%s",
                           glesllm_last_error());
    }
    return run(h, conn, r, kind, stream);
}

/* ---- the other routes ----------------------------------------------------------------- */

static enum MHD_Result route_tokenize(serve_http *h, struct MHD_Connection *conn, const cJSON *j)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(j, "add_special");
    const cJSON *parse = cJSON_GetObjectItemCaseSensitive(j, "parse_special");
    if (!cJSON_IsString(content))
        return reply_error(conn, 400, "'content' must be a string");
    if ((add && !cJSON_IsBool(add)) || (parse && !cJSON_IsBool(parse)))
        return reply_error(conn, 400, "'add_special' and 'parse_special' must be true or false");
    unsigned flags = (cJSON_IsTrue(add) ? GLESLLM_TOKENIZE_ADD_SPECIAL : 0) |
                     (parse && cJSON_IsFalse(parse) ? 0 : GLESLLM_TOKENIZE_PARSE_SPECIAL);
    int32_t *ids;
    uint32_t n;
    glesllm_status st = tokenize(h->m, content->valuestring, flags, &ids, &n);
    if (st)
        return reply_error(conn, 400, "%s", glesllm_last_error());
    cJSON *out = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(out, "tokens");
    for (uint32_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
    free(ids);
    return reply_json(conn, 200, out);
}

static enum MHD_Result route_detokenize(serve_http *h, struct MHD_Connection *conn,
                                        const cJSON *j)
{
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(j, "tokens"), *it;
    if (!cJSON_IsArray(toks))
        return reply_error(conn, 400, "'tokens' must be an array of token ids");
    int n = cJSON_GetArraySize(toks);
    int32_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    if (!ids)
        return reply_error(conn, 500, "out of memory");
    int k = 0;
    uint32_t n_vocab = glesllm_model_n_vocab(h->m);
    cJSON_ArrayForEach(it, toks)
    {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= n_vocab ||
            it->valuedouble != floor(it->valuedouble)) {
            free(ids);
            return reply_error(conn, 400, "'tokens' holds token ids, whole numbers from 0 to %u",
                               n_vocab - 1);
        }
        ids[k++] = (int32_t)it->valuedouble;
    }
    size_t len = 0;
    char *text = NULL;
    glesllm_status st = glesllm_detokenize(h->m, ids, (size_t)n, 0, NULL, 0, &len);
    if (st == GLESLLM_ERR_SMALL_BUFFER && (text = malloc(len + 1)))
        st = glesllm_detokenize(h->m, ids, (size_t)n, 0, text, len + 1, &len);
    else if (!st && (text = malloc(1)))
        text[0] = '\0';
    free(ids);
    if (st || !text) {
        free(text);
        return reply_error(conn, 500, "%s", st ? glesllm_last_error() : "out of memory");
    }
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "content", text);
    free(text);
    return reply_json(conn, 200, out);
}

static enum MHD_Result route_models(serve_http *h, struct MHD_Connection *conn)
{
    cJSON *j = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(j, "data");
    cJSON_AddStringToObject(j, "object", "list");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", h->p->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)h->p->started);
    cJSON_AddStringToObject(m, "owned_by", "glesllm");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddStringToObject(meta, "arch", glesllm_model_arch(h->m));
    cJSON_AddNumberToObject(meta, "n_vocab", glesllm_model_n_vocab(h->m));
    cJSON_AddNumberToObject(meta, "n_ctx_train", glesllm_model_n_ctx_train(h->m));
    cJSON_AddNumberToObject(meta, "n_ctx", serve_n_ctx(h->s));
    cJSON_AddNumberToObject(meta, "n_params", (double)glesllm_model_n_params(h->m));
    cJSON_AddItemToArray(data, m);
    return reply_json(conn, 200, j);
}

static enum MHD_Result route_metrics(serve_http *h, struct MHD_Connection *conn)
{
    serve_metrics mt;
    serve_get_metrics(h->s, &mt);
    char *b = malloc(8192);
    if (!b)
        return MHD_NO;
    snprintf(b, 8192,
             "# HELP glesllm:prompt_tokens_total Prompt tokens run.\n"
             "# TYPE glesllm:prompt_tokens_total counter\n"
             "glesllm:prompt_tokens_total %llu\n"
             "# HELP glesllm:prompt_seconds_total Seconds of prompt passes.\n"
             "# TYPE glesllm:prompt_seconds_total counter\n"
             "glesllm:prompt_seconds_total %.3f\n"
             "# HELP glesllm:tokens_predicted_total Tokens generated.\n"
             "# TYPE glesllm:tokens_predicted_total counter\n"
             "glesllm:tokens_predicted_total %llu\n"
             "# HELP glesllm:tokens_predicted_seconds_total Seconds of generation.\n"
             "# TYPE glesllm:tokens_predicted_seconds_total counter\n"
             "glesllm:tokens_predicted_seconds_total %.3f\n"
             "# HELP glesllm:tokens_drafted_total Tokens the draft model proposed (--draft).\n"
             "# TYPE glesllm:tokens_drafted_total counter\n"
             "glesllm:tokens_drafted_total %llu\n"
             "# HELP glesllm:tokens_drafted_accepted_total Of them, the tokens the model kept.\n"
             "# TYPE glesllm:tokens_drafted_accepted_total counter\n"
             "glesllm:tokens_drafted_accepted_total %llu\n"
             "# HELP glesllm:prompt_tokens_copied_total Prompt tokens copied from another slot's cache.\n"
             "# TYPE glesllm:prompt_tokens_copied_total counter\n"
             "glesllm:prompt_tokens_copied_total %llu\n"
             "# HELP glesllm:tokens_batched_total Tokens generated in passes shared by slots.\n"
             "# TYPE glesllm:tokens_batched_total counter\n"
             "glesllm:tokens_batched_total %llu\n"
             "# HELP glesllm:prompt_tokens_batched_total Prompt tokens run in passes shared with generating slots.\n"
             "# TYPE glesllm:prompt_tokens_batched_total counter\n"
             "glesllm:prompt_tokens_batched_total %llu\n"
             "# HELP glesllm:requests_total Requests handed to the worker.\n"
             "# TYPE glesllm:requests_total counter\n"
             "glesllm:requests_total %llu\n"
             "# HELP glesllm:requests_processing Requests in a slot now.\n"
             "# TYPE glesllm:requests_processing gauge\n"
             "glesllm:requests_processing %u\n"
             "# HELP glesllm:requests_deferred Requests waiting for a free slot or KV cache pages.\n"
             "# TYPE glesllm:requests_deferred gauge\n"
             "glesllm:requests_deferred %u\n"
             "# HELP glesllm:slots Slots (sequences run side by side, -np).\n"
             "# TYPE glesllm:slots gauge\n"
             "glesllm:slots %u\n"
             "# HELP glesllm:kv_cache_tokens KV cache positions held by running requests.\n"
             "# TYPE glesllm:kv_cache_tokens gauge\n"
             "glesllm:kv_cache_tokens %llu\n"
             "# HELP glesllm:kv_cache_size KV cache positions in all slots.\n"
             "# TYPE glesllm:kv_cache_size gauge\n"
             "glesllm:kv_cache_size %llu\n"
             "# HELP glesllm:kv_pages_used KV cache pages held by running requests.\n"
             "# TYPE glesllm:kv_pages_used gauge\n"
             "glesllm:kv_pages_used %u\n"
             "# HELP glesllm:kv_pages_kept KV cache pages only idle slots hold (a finished request's cache kept for a prompt that starts the same; taken back when pages are wanted).\n"
             "# TYPE glesllm:kv_pages_kept gauge\n"
             "glesllm:kv_pages_kept %u\n"
             "# HELP glesllm:kv_pages KV cache pages in the pool the slots share (0: each slot its own cache); with sliding-window layers, the pool of the other layers (the window layers keep a ring of their own, sized not to run out first).\n"
             "# TYPE glesllm:kv_pages gauge\n"
             "glesllm:kv_pages %u\n"
             "# HELP glesllm:kv_page_size Positions a KV cache page.\n"
             "# TYPE glesllm:kv_page_size gauge\n"
             "glesllm:kv_page_size %u\n"
             "# HELP glesllm:requests_deferred_kv Of the deferred requests, those waiting for KV cache pages.\n"
             "# TYPE glesllm:requests_deferred_kv gauge\n"
             "glesllm:requests_deferred_kv %u\n",
             (unsigned long long)mt.prompt_tokens, mt.prompt_s,
             (unsigned long long)mt.predicted_tokens, mt.predicted_s,
             (unsigned long long)mt.drafted, (unsigned long long)mt.accepted,
             (unsigned long long)mt.shared, (unsigned long long)mt.batched,
             (unsigned long long)mt.prompt_batched,
             (unsigned long long)mt.requests, mt.processing, mt.deferred, mt.slots,
             (unsigned long long)mt.kv_used, (unsigned long long)mt.kv_size, mt.kv_pages_used,
             mt.kv_pages_kept, mt.kv_pages, mt.kv_page, mt.deferred_kv);
    return reply(conn, 200, "text/plain; version=0.0.4", b);
}

/* ---- the connection ------------------------------------------------------------------- */

typedef struct upload {
    char *body;
    size_t len, cap;
    bool too_large;
} upload;

static bool authorised(serve_http *h, struct MHD_Connection *conn)
{
    if (!h->p->api_key)
        return true;
    const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!a || strncasecmp(a, "Bearer ", 7))
        return false;
    a += 7;
    /* compared in constant time: the key's length and bytes leak nothing */
    size_t n = strlen(a), k = strlen(h->p->api_key);
    unsigned diff = n != k;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned)(a[i] ^ h->p->api_key[i % (k ? k : 1)]);
    return diff == 0;
}

static bool is(const char *url, const char *route)
{
    /* /v1/x and /x both */
    return !strcmp(url, route) || (!strncmp(url, "/v1", 3) && !strcmp(url + 3, route));
}

static enum MHD_Result dispatch(serve_http *h, struct MHD_Connection *conn, const char *url,
                                const char *method, upload *u)
{
    bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(method, "OPTIONS")) { /* a browser's CORS preflight */
        struct MHD_Response *res = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(res, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(res, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        MHD_add_response_header(res, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        enum MHD_Result ret = MHD_queue_response(conn, 204, res);
        MHD_destroy_response(res);
        return ret;
    }
    if (is(url, "/health")) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "status", "ok");
        return reply_json(conn, 200, j);
    }
    if (!authorised(h, conn))
        return reply_error(conn, 401, "a missing or wrong API key: send 'Authorization: Bearer "
                                      "KEY' with the server's --api-key");
    static const char *const gets[] = { "/models", "/metrics", NULL };
    static const char *const posts[] = { "/completions", "/chat/completions", "/tokenize",
                                         "/detokenize", NULL };
    bool known_get = false, known_post = false;
    for (int i = 0; gets[i]; i++)
        known_get |= is(url, gets[i]);
    for (int i = 0; posts[i]; i++)
        known_post |= is(url, posts[i]);
    if (!known_get && !known_post)
        return reply_error(conn, 404, "no route %s %s: this server has GET /health, /v1/models, "
                                      "/metrics and POST /v1/completions, /v1/chat/completions, "
                                      "/tokenize, /detokenize",
                           method, url);
    if ((known_get && !get) || (known_post && !post))
        return reply_error(conn, 405, "%s takes %s, not %s", url, known_get ? "GET" : "POST",
                           method);
    if (is(url, "/models"))
        return route_models(h, conn);
    if (is(url, "/metrics"))
        return route_metrics(h, conn);
    if (u->too_large)
        return reply_error(conn, 413, "the request body is over %zu bytes (the server's "
                                      "--max-body)",
                           h->p->max_body);
    cJSON *j = cJSON_ParseWithLength(u->body ? u->body : "", u->len);
    if (!j)
        return reply_error(conn, 400, "the body is not valid JSON (near byte %zu)",
                           cJSON_GetErrorPtr() && u->body
                               ? (size_t)(cJSON_GetErrorPtr() - u->body)
                               : (size_t)0);
    enum MHD_Result ret;
    if (!cJSON_IsObject(j))
        ret = reply_error(conn, 400, "the body must be a JSON object");
    else if (is(url, "/completions"))
        ret = completions(h, conn, j, KIND_COMPLETION);
    else if (is(url, "/chat/completions"))
        ret = completions(h, conn, j, KIND_CHAT);
    else if (is(url, "/tokenize"))
        ret = route_tokenize(h, conn, j);
    else
        ret = route_detokenize(h, conn, j);
    cJSON_Delete(j);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *data, size_t *size, void **con_cls)
{
    (void)version;
    serve_http *h = cls;
    upload *u = *con_cls;
    if (!u) {
        if (!(u = calloc(1, sizeof *u)))
            return MHD_NO;
        *con_cls = u;
        pthread_mutex_lock(&h->mu);
        h->open++;
        pthread_mutex_unlock(&h->mu);
        return MHD_YES;
    }
    if (*size) {
        if (u->len + *size > h->p->max_body) {
            u->too_large = true;
        } else if (!u->too_large) {
            if (u->len + *size + 1 > u->cap) {
                size_t cap = (u->len + *size + 1) * 2;
                char *b = realloc(u->body, cap);
                if (!b)
                    return MHD_NO;
                u->body = b;
                u->cap = cap;
            }
            memcpy(u->body + u->len, data, *size);
            u->len += *size;
        }
        *size = 0;
        return MHD_YES;
    }
    return dispatch(h, conn, url, method, u);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    (void)conn, (void)why;
    serve_http *h = cls;
    upload *u = *con_cls;
    if (u) {
        free(u->body);
        free(u);
        *con_cls = NULL;
        pthread_mutex_lock(&h->mu);
        h->open--;
        pthread_cond_broadcast(&h->done);
        pthread_mutex_unlock(&h->mu);
    }
}

/* ---- starting and stopping ------------------------------------------------------------- */

int serve_http_start(serve *s, glesllm_model *m, const serve_http_params *p,
                     const char *template_name, const struct sockaddr *addr, serve_http **out)
{
    serve_http *h = calloc(1, sizeof *h);
    if (!h)
        return 1;
    h->s = s;
    h->m = m;
    h->p = p;
    h->template_name = template_name;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->done, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_ITC;
    if (addr->sa_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)p->max_connections,
                            MHD_OPTION_END);
    if (!h->d) {
        int e = errno;
        pthread_cond_destroy(&h->done);
        pthread_mutex_destroy(&h->mu);
        free(h);
        errno = e;
        return 1;
    }
    *out = h;
    return 0;
}

unsigned serve_http_port(serve_http *h)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : 0;
}

void serve_http_quiesce(serve_http *h)
{
    MHD_socket fd = MHD_quiesce_daemon(h->d);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

bool serve_http_drain(serve_http *h, unsigned timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&h->mu);
    int e = 0;
    while (h->open && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&h->done, &h->mu, &until);
    bool drained = h->open == 0;
    pthread_mutex_unlock(&h->mu);
    return drained;
}

void serve_http_stop(serve_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    pthread_cond_destroy(&h->done);
    pthread_mutex_destroy(&h->mu);
    free(h);
}
