/* glesllm serve: the OpenAI-compatible HTTP server (src/server). Flags
 * follow llama-server's. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "server/serve.h"
#include "server/serve_http.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: glesllm serve [-m MODEL.gguf] [--host ADDR] [--port N] [-np N] [-c N]\n"
            "                     [options]\n"
            "\n"
            "An HTTP server with OpenAI's API: POST /v1/completions and /v1/chat/completions\n"
            "(streamed as server-sent events with \"stream\": true), GET /v1/models, /health\n"
            "and /metrics (Prometheus), POST /tokenize and /detokenize. Without -m it serves\n"
            "the built-in demo model. Ctrl-C (or SIGTERM) stops it: it takes no new\n"
            "connections, cancels what runs and exits 0.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE        the GGUF model\n"
            "  -a, --alias NAME        the model's name in the API (default: the file's name)\n"
            "  --host ADDR             the address to listen on (default 127.0.0.1: this\n"
            "                          machine only; 0.0.0.0: every network)\n"
            "  --port N                the port (default 8080; 0: a free one, said on stderr)\n"
            "  -np, --parallel N       requests run side by side, each in a slot of its own\n"
            "                          (default 4); more wait for a free slot\n"
            "  -c, --ctx-size N        KV cache positions of all slots together (default:\n"
            "                          the model's training context, at most 4096, a slot);\n"
            "                          the slots share them as pages, and one request may\n"
            "                          take them all, up to the training context (with\n"
            "                          --draft or a recurrent model each slot has its share)\n"
            "  -b, --batch-size N      prompt tokens per batched pass (default 512)\n"
            "  --api-key KEY           requests must send 'Authorization: Bearer KEY'\n"
            "                          (/health excepted)\n"
            "  --chat-template NAME    format chats with this built-in template (default:\n"
            "                          the model's own, recognised by its markers; chatml\n"
            "                          where the model has none); names: see below\n"
            "  --max-body BYTES        the largest request body (default 1048576)\n"
            "  --draft FILE            speculative decoding: a small model with the same\n"
            "                          vocabulary drafts tokens that the model checks in one\n"
            "                          pass, in every slot (greedy: the same text as without)\n"
            "  --draft-max N           most tokens drafted a round (default 8)\n"
            "  --draft-min N           fewest tokens drafted a round (default 0: plain steps\n"
            "                          where drafting does not pay)\n"
            "\n"
            "chat templates:");
    const char *names[64];
    size_t n = glesllm_chat_builtin_templates(names, 64);
    for (size_t i = 0; i < n && i < 64; i++)
        fprintf(f, "%s%s", i % 8 ? " " : "\n  ", names[i]);
    fprintf(f, "\n");
}

typedef struct serve_args {
    const char *model, *alias, *host, *api_key, *chat_template, *draft;
    long port, n_slots, n_ctx, n_batch, max_body, draft_max, draft_min;
} serve_args;

static const char *const value_options[] = { "-m", "--model", "-a", "--alias", "--host",
                                             "--port", "-np", "--parallel", "-c", "--ctx-size",
                                             "-b", "--batch-size", "--api-key",
                                             "--chat-template", "--max-body", "--draft", "-md",
                                             "--model-draft", "--draft-max", "--draft-min",
                                             NULL };

static int parse_args(int argc, char **argv, serve_args *a)
{
    memset(a, 0, sizeof *a);
    a->host = "127.0.0.1";
    a->port = 8080;
    a->n_slots = 4;
    a->max_body = 1 << 20;
    a->draft_max = 8;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return -1;
        }
        int rc = cli_option_value("serve", argc, argv, i, value_options);
        if (rc)
            return rc;
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(o, "-m") || !strcmp(o, "--model"))
            a->model = v;
        else if (!strcmp(o, "-a") || !strcmp(o, "--alias"))
            a->alias = v;
        else if (!strcmp(o, "--host"))
            a->host = v;
        else if (!strcmp(o, "--api-key"))
            a->api_key = v;
        else if (!strcmp(o, "--chat-template"))
            a->chat_template = v;
        else if (!strcmp(o, "--draft") || !strcmp(o, "-md") || !strcmp(o, "--model-draft"))
            a->draft = v;
        else if (!strcmp(o, "--draft-max"))
            ok = cli_parse_long(v, 1, GLESLLM_DRAFT_MAX, &a->draft_max);
        else if (!strcmp(o, "--draft-min"))
            ok = cli_parse_long(v, 0, GLESLLM_DRAFT_MAX, &a->draft_min);
        else if (!strcmp(o, "--port"))
            ok = cli_parse_long(v, 0, 65535, &a->port);
        else if (!strcmp(o, "-np") || !strcmp(o, "--parallel"))
            ok = cli_parse_long(v, 1, 256, &a->n_slots);
        else if (!strcmp(o, "-c") || !strcmp(o, "--ctx-size"))
            ok = cli_parse_long(v, 0, 1 << 24, &a->n_ctx);
        else if (!strcmp(o, "-b") || !strcmp(o, "--batch-size"))
            ok = cli_parse_long(v, 1, 1 << 16, &a->n_batch);
        else if (!strcmp(o, "--max-body"))
            ok = cli_parse_long(v, 1024, 1L << 30, &a->max_body);
        if (!ok) {
            fprintf(stderr, "glesllm serve: invalid value '%s' for %s%s\n", v, o,
                    cli_parse_want());
            return 2;
        }
    }
    if (a->api_key && !a->api_key[0]) {
        fprintf(stderr, "glesllm serve: --api-key is empty\n");
        return 2;
    }
    if (a->draft_min > a->draft_max) {
        fprintf(stderr, "glesllm serve: --draft-min %ld is over --draft-max %ld\n", a->draft_min,
                a->draft_max);
        return 2;
    }
    if (a->n_ctx && a->n_ctx / a->n_slots < 8) {
        fprintf(stderr, "glesllm serve: -c %ld split between %ld slots leaves each fewer than 8 "
                        "positions: raise -c or lower -np\n", a->n_ctx, a->n_slots);
        return 2;
    }
    return 0;
}

/* The chat template by name, or the model's; NULL after saying why. */
static const char *pick_template(const serve_args *a, glesllm_model *m)
{
    if (a->chat_template) {
        const char *names[64];
        size_t n = glesllm_chat_builtin_templates(names, 64);
        for (size_t i = 0; i < n && i < 64; i++)
            if (!strcmp(names[i], a->chat_template))
                return names[i];
        fprintf(stderr, "glesllm serve: --chat-template '%s' is none of the built-in templates "
                        "(see 'glesllm serve --help')\n", a->chat_template);
        return NULL;
    }
    const char *own = glesllm_model_chat_template(m);
    if (!own) {
        fprintf(stderr, "glesllm serve: the model has no chat template: chats use chatml "
                        "(--chat-template picks another)\n");
        return "chatml";
    }
    const char *name = glesllm_chat_template_name(own);
    if (!name)
        fprintf(stderr, "glesllm serve: the model's chat template is none of the built-in ones "
                        "glesllm recognises: name the one it follows with --chat-template NAME "
                        "(see 'glesllm serve --help')\n");
    return name;
}

int cmd_serve(int argc, char **argv)
{
    serve_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? 0 : rc;

    struct addrinfo hints = { 0 }, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%ld", a.port);
    int gai = getaddrinfo(a.host, port, &hints, &ai);
    if (gai) {
        fprintf(stderr, "glesllm serve: --host %s: %s\n", a.host, gai_strerror(gai));
        return 2;
    }

    /* SIGINT and SIGTERM go to sigwait below, not to a thread */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    glesllm_backend *b = NULL;
    glesllm_model *m = NULL, *dm = NULL;
    serve *s = NULL;
    serve_http *h = NULL;
    rc = 1;
    if (cli_open_backend(&b) || cli_open_model(b, a.model, &m))
        goto done;
    if (a.draft) {
        glesllm_model_params mp = { NULL, NULL, 0, NULL, NULL };
        glesllm_status st = glesllm_model_open(b, a.draft, &mp, &dm);
        if (st) {
            cli_fail("the draft model", st);
            goto done;
        }
    }
    const char *tmpl = pick_template(&a, m);
    if (!tmpl)
        goto done;
    char id[256];
    const char *base = a.model ? strrchr(a.model, '/') : NULL;
    snprintf(id, sizeof id, "%s", a.alias ? a.alias : a.model ? (base ? base + 1 : a.model) : "demo");
    /* a slot: -c at most, the training context at most (without -c: that,
     * 4096 at most, and -c the slots' together) */
    uint32_t n_train = glesllm_model_n_ctx_train(m);
    uint32_t slot_ctx = n_train && n_train < 4096 ? n_train : 4096;
    if (a.n_ctx)
        slot_ctx = n_train && n_train < (uint32_t)a.n_ctx ? n_train : (uint32_t)a.n_ctx;
    serve_params sp = { (unsigned)a.n_slots, slot_ctx,
                        a.n_ctx && (uint64_t)a.n_ctx < (uint64_t)a.n_slots * slot_ctx
                            ? (uint64_t)a.n_ctx
                            : (uint64_t)a.n_slots * slot_ctx,
                        a.n_batch ? (uint32_t)a.n_batch : 512, dm, (uint32_t)a.draft_max,
                        (uint32_t)a.draft_min, 0 };
    if (serve_start(m, &sp, &s))
        goto done;
    serve_http_params hp = { id, a.api_key, (size_t)a.max_body, 256, (long long)time(NULL) };
    if (serve_http_start(s, m, &hp, tmpl, ai->ai_addr, &h)) {
        fprintf(stderr, "glesllm serve: cannot listen on %s port %ld: %s\n", a.host, a.port,
                errno ? strerror(errno) : "the HTTP library refused");
        goto done;
    }
    serve_metrics mt;
    serve_get_metrics(s, &mt);
    fprintf(stderr, "glesllm: serving %s on http://%s%s%s:%u (%u slots of up to %u positions",
            id, ai->ai_family == AF_INET6 ? "[" : "", a.host, ai->ai_family == AF_INET6 ? "]" : "",
            serve_http_port(h), sp.n_slots, serve_n_ctx(s));
    if (mt.kv_pages)
        fprintf(stderr, " sharing a KV cache of %llu positions in pages of %u",
                (unsigned long long)mt.kv_pages * mt.kv_page, mt.kv_page);
    fprintf(stderr, ", chat template %s%s%s)\n", tmpl, a.draft ? ", draft " : "",
            a.draft ? a.draft : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "glesllm: %s: stopping (no new connections; running requests cancelled)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    serve_http_quiesce(h);
    serve_stop(s);
    /* the cancelled requests' last chunks and [DONE] out before the
     * connections close (a client that does not read is given 5 s) */
    if (!serve_http_drain(h, 5000))
        fprintf(stderr, "glesllm: closing connections whose responses were not read in 5 s\n");
    rc = 0;
done:
    serve_http_stop(h);
    serve_free(s);
    glesllm_model_close(dm);
    glesllm_model_close(m);
    glesllm_backend_close(b);
    freeaddrinfo(ai);
    return rc;
}
