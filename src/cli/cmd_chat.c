/* glesllm chat: a conversation in the terminal. Each turn formats the whole
 * conversation with the chat template; the context already holds all of it
 * but the new message (glesllm_generate_tokens skips the cached start), so
 * a turn runs only its own tokens. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm chat [-m MODEL.gguf] [-sys TEXT] [options]\n"
            "\n"
            "Talks with a model: type a message and Enter; the reply streams to stdout.\n"
            "Ctrl-C stops a reply; /exit or the end of input (Ctrl-D) quits. The conversation\n"
            "stays in the context between turns. Without -m: the built-in demo model.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE          the GGUF model\n"
            "  -sys, --system-prompt T   a system message first\n"
            "  --chat-template NAME      a built-in template (default: the model's own; chatml\n"
            "                            where it has none); 'glesllm serve --help' lists them\n"
            "  -n, --n-predict N         most tokens a reply (default -1: until the model ends it)\n"
            "  -c, --ctx-size N          context size (default: the model's, at most 4096)\n"
            "  --temp T, --top-k N, --top-p P, --min-p P, --repeat-penalty F, -s SEED\n"
            "                            sampling, as 'glesllm run' (default seed: random)\n");
}

typedef struct chat_args {
    const char *model, *system, *tmpl;
    long n_predict, n_ctx;
    glesllm_sampling sp;
    long long seed;
} chat_args;

static const char *const value_options[] = { "-m", "--model", "-sys", "--system-prompt",
                                             "--chat-template", "-n", "--n-predict", "-c",
                                             "--ctx-size", "--temp", "--top-k", "--top-p",
                                             "--min-p", "--repeat-penalty", "-s", "--seed",
                                             NULL };

static int parse_args(int argc, char **argv, chat_args *a)
{
    memset(a, 0, sizeof *a);
    a->n_predict = -1;
    a->sp = glesllm_sampling_default();
    a->seed = -1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return -1;
        }
        int rc = cli_option_value("chat", argc, argv, i, value_options);
        if (rc)
            return rc;
        const char *v = argv[++i];
        bool ok = true;
        long n;
        if (!strcmp(o, "-m") || !strcmp(o, "--model"))
            a->model = v;
        else if (!strcmp(o, "-sys") || !strcmp(o, "--system-prompt"))
            a->system = v;
        else if (!strcmp(o, "--chat-template"))
            a->tmpl = v;
        else if (!strcmp(o, "-n") || !strcmp(o, "--n-predict"))
            ok = cli_parse_long(v, -1, 1 << 24, &a->n_predict);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size"))
            ok = cli_parse_long(v, 0, 1 << 24, &a->n_ctx);
        else if (!strcmp(o, "--temp"))
            ok = cli_parse_float(v, 0, 100, &a->sp.temp);
        else if (!strcmp(o, "--top-k") && (ok = cli_parse_long(v, 0, 1 << 20, &n)))
            a->sp.top_k = (int32_t)n;
        else if (!strcmp(o, "--top-p"))
            ok = cli_parse_float(v, 0, 1, &a->sp.top_p);
        else if (!strcmp(o, "--min-p"))
            ok = cli_parse_float(v, 0, 1, &a->sp.min_p);
        else if (!strcmp(o, "--repeat-penalty"))
            ok = cli_parse_float(v, 0.01f, 100, &a->sp.repeat_penalty);
        else if ((!strcmp(o, "-s") || !strcmp(o, "--seed")) &&
                 (ok = cli_parse_long(v, -1, 0x7fffffffL, &n)))
            a->seed = n;
        if (!ok) {
            fprintf(stderr, "glesllm chat: invalid value '%s' for %s%s\n", v, o,
                    cli_parse_want());
            return 2;
        }
    }
    if (a->tmpl && !glesllm_chat_template_name(a->tmpl)) {
        fprintf(stderr, "glesllm chat: --chat-template '%s' is none of the built-in templates "
                        "(see 'glesllm serve --help')\n", a->tmpl);
        return 2;
    }
    return 0;
}

/* Ctrl-C: the reply stops; at the prompt, nothing but a new prompt. */
static glesllm_context *volatile replying;
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
    glesllm_cancel(replying);
}

typedef struct reply {
    char *text;
    size_t len, cap;
    int32_t *ids; /* the conversation's ids: the prompt's, then the reply's */
    size_t n_ids, cap_ids;
    bool failed;
} reply;

static int on_piece(void *ud, int32_t token, const char *text, size_t len)
{
    reply *r = ud;
    if (token >= 0) {
        if (r->n_ids == r->cap_ids) {
            int32_t *ids = realloc(r->ids, sizeof *ids * (r->cap_ids *= 2));
            if (!ids) {
                r->failed = true;
                return 1;
            }
            r->ids = ids;
        }
        r->ids[r->n_ids++] = token;
    }
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (r->len + len + 1 > r->cap) {
        size_t cap = (r->len + len + 1) * 2;
        char *t = realloc(r->text, cap);
        if (!t) {
            r->failed = true;
            return 1;
        }
        r->text = t;
        r->cap = cap;
    }
    memcpy(r->text + r->len, text, len);
    r->len += len;
    r->text[r->len] = '\0';
    return 0;
}

typedef struct history {
    glesllm_chat_message *m;
    char **owned;
    size_t n, cap;
    int32_t *ids; /* the conversation so far as it ran: prompts' and replies' ids */
    size_t n_ids;
} history;

static bool history_add(history *h, const char *role, char *content /* taken */)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        glesllm_chat_message *m = realloc(h->m, cap * sizeof *m);
        if (m)
            h->m = m;
        char **o = realloc(h->owned, cap * sizeof *o);
        if (o)
            h->owned = o;
        if (!m || !o) {
            free(content);
            return false;
        }
        h->cap = cap;
    }
    h->m[h->n].role = role;
    h->m[h->n].content = content;
    h->owned[h->n++] = content;
    return true;
}

/* The conversation msgs[0..n) through the template (malloc'd), or NULL
 * after saying why. */
static char *format(const char *tmpl, const glesllm_chat_message *msgs, size_t n, int add,
                    size_t *len)
{
    char *text = NULL;
    glesllm_status st = glesllm_chat_apply(tmpl, msgs, n, add, NULL, 0, len);
    if (st == GLESLLM_ERR_SMALL_BUFFER && !(text = malloc(*len + 1)))
        st = GLESLLM_ERR_NO_MEMORY;
    else if (st == GLESLLM_ERR_SMALL_BUFFER)
        st = glesllm_chat_apply(tmpl, msgs, n, add, text, *len + 1, len);
    if (st) {
        free(text);
        cli_fail("formatting the conversation", st);
        return NULL;
    }
    return text;
}

/* One turn: the conversation's ids, then the reply. The ids are those of
 * the turns before as they ran (prompts and replies), followed by the new
 * message's text: the conversation's text past that of the turns before
 * it, as llama.cpp's chat does; the context holds all but that. 0, or 1. */
static int turn(glesllm_context *c, const char *tmpl, history *h, const chat_args *a)
{
    glesllm_model *m = glesllm_context_model(c);
    size_t len = 0, prev_len = 0;
    char *text = format(tmpl, h->m, h->n, 1, &len);
    if (!text)
        return 1;
    char *prev = h->n_ids && h->n > 1 ? format(tmpl, h->m, h->n - 1, 0, &prev_len) : NULL;
    if (h->n_ids && h->n > 1 && !prev) {
        free(text);
        return 1;
    }
    bool extend = prev && prev_len <= len && !memcmp(prev, text, prev_len);
    free(prev);
    const char *tail = extend ? text + prev_len : text;
    unsigned flags = GLESLLM_TOKENIZE_PARSE_SPECIAL | (extend ? 0 : GLESLLM_TOKENIZE_ADD_SPECIAL);
    int32_t *tail_ids = NULL, *ids = NULL;
    size_t n_tail = 0, n = 0, keep = extend ? h->n_ids : 0;
    glesllm_status st = cli_tokenize(m, tail, strlen(tail), flags, &tail_ids, &n_tail);
    free(text);
    size_t cap = keep + n_tail + 64;
    if (!st && !(ids = malloc(sizeof *ids * cap)))
        st = GLESLLM_ERR_NO_MEMORY;
    if (st) {
        free(tail_ids);
        return cli_fail("tokenizing the conversation", st);
    }
    if (keep)
        memcpy(ids, h->ids, sizeof *ids * keep);
    if (n_tail)
        memcpy(ids + keep, tail_ids, sizeof *ids * n_tail);
    n = keep + n_tail;
    free(tail_ids);
    if (n + 1 >= glesllm_context_n_ctx(c)) {
        free(ids);
        fprintf(stderr, "glesllm chat: the conversation (%zu tokens) fills the context (%u): "
                        "start again with a larger -c\n", n, glesllm_context_n_ctx(c));
        return 1;
    }
    glesllm_generate_params gp = glesllm_generate_default();
    gp.n_predict = (int32_t)a->n_predict;
    /* (a copy: the prompt stays as it is while it runs) */
    reply r = { NULL, 0, 0, malloc(sizeof *ids * cap), n, cap, false };
    if (!r.ids) {
        free(ids);
        return cli_fail("keeping the conversation", GLESLLM_ERR_NO_MEMORY);
    }
    memcpy(r.ids, ids, sizeof *ids * n);
    glesllm_generate_result res;
    replying = c;
    st = glesllm_generate_tokens(c, ids, (uint32_t)n, &gp, on_piece, &r, &res);
    replying = NULL;
    free(ids);
    printf("\n");
    fflush(stdout);
    free(h->ids);
    h->ids = r.ids; /* the prompt and the reply: the next turn starts with them */
    h->n_ids = r.failed ? 0 : r.n_ids;
    if (st && st != GLESLLM_ERR_CANCELLED) {
        free(r.text);
        return cli_fail("generating", st);
    }
    fprintf(stderr, "[%u prompt tokens, %u of them cached; %u tokens, %.1f tokens/s]\n",
            res.n_prompt, res.n_reused, res.n_gen, res.gen_s > 0 ? res.n_gen / res.gen_s : 0.0);
    if (res.stop == GLESLLM_STOP_CONTEXT)
        fprintf(stderr, "glesllm chat: the context is full; the conversation cannot go on\n");
    if (!history_add(h, "assistant", r.text ? r.text : strdup("")))
        return cli_fail("keeping the reply", GLESLLM_ERR_NO_MEMORY);
    return res.stop == GLESLLM_STOP_CONTEXT;
}

int cmd_chat(int argc, char **argv)
{
    chat_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;
    glesllm_backend *b = NULL;
    glesllm_model *m = NULL;
    glesllm_context *c = NULL;
    history h = { 0 };
    rc = 1;
    if (cli_open_backend(&b) || cli_open_model(b, a.model, &m) ||
        cli_make_context(m, "chat", (uint32_t)a.n_ctx, 0, 0, &c))
        goto done;
    const char *tmpl = a.tmpl;
    if (!tmpl && !(tmpl = glesllm_model_chat_template(m))) {
        fprintf(stderr, "glesllm chat: the model has no chat template: using chatml "
                        "(--chat-template picks another)\n");
        tmpl = "chatml";
    }
    if (!glesllm_chat_template_name(tmpl)) {
        fprintf(stderr, "glesllm chat: the model's chat template is none of the built-in ones "
                        "glesllm recognises: name the one it follows with --chat-template NAME "
                        "(see 'glesllm serve --help')\n");
        goto done;
    }
    glesllm_sampling sp = a.sp;
    sp.seed = a.seed >= 0 ? (uint64_t)a.seed : (uint64_t)time(NULL);
    glesllm_set_sampling(c, &sp);
    if (a.system && !history_add(&h, "system", strdup(a.system)))
        goto done;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C at the prompt ends the read */
    sigaction(SIGINT, &sa, &old);
    bool tty = isatty(0);
    if (tty)
        fprintf(stderr, "glesllm chat: /exit or Ctrl-D quits; Ctrl-C stops a reply\n");
    char *line = NULL;
    size_t cap = 0;
    rc = 0;
    for (;;) {
        if (tty)
            fprintf(stderr, "> ");
        interrupted = 0;
        errno = 0;
        ssize_t got = getline(&line, &cap, stdin);
        if (got < 0) {
            if (errno == EINTR || interrupted) {
                clearerr(stdin);
                fprintf(stderr, "\n");
                continue;
            }
            break;
        }
        while (got && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
            break;
        if (!got)
            continue;
        char *msg = strdup(line);
        if (!msg || !history_add(&h, "user", msg)) {
            rc = cli_fail("keeping the message", GLESLLM_ERR_NO_MEMORY);
            break;
        }
        if ((rc = turn(c, tmpl, &h, &a)))
            break;
    }
    free(line);
    sigaction(SIGINT, &old, NULL);
done:
    for (size_t i = 0; i < h.n; i++)
        free(h.owned[i]);
    free(h.owned);
    free(h.m);
    free(h.ids);
    glesllm_context_free(c);
    glesllm_model_close(m);
    glesllm_backend_close(b);
    return rc;
}
