/* glesllm serve as a client sees it, on the built-in demo model: the
 * routes, streaming, greedy text equal to `glesllm run --temp 0`, clients
 * side by side, a client that goes away, stop strings, every bad request's
 * status, and SIGTERM; and glesllm chat's turns. The server runs on 127.0.0.1 on a free port; the
 * client is plain HTTP/1.1 over a socket. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "test_support.h"

#define KEY "test-key"

static pid_t server;
static int port;
static char err_path[256];

static const char *cli(void)
{
    const char *c = getenv("GLESLLM_CLI");
    return c ? c : GLESLLM_CLI_PATH;
}

/* Starts the server with args; its stderr to err_path. The port it says. */
static void start(const char *args)
{
    snprintf(err_path, sizeof err_path, "/tmp/glesllm_test_server_%d.err", (int)getpid());
    remove(err_path); /* (an earlier server's port is not this one's) */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "exec '%s' serve --port 0 %s 2>'%s' >/dev/null </dev/null", cli(),
             args, err_path);
    server = fork();
    TEST_ASSERT_TRUE(server >= 0);
    if (server == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    char err[4096];
    for (int i = 0; i < 1200; i++) { /* the demo model's upload and compiles: up to 2 min */
        read_text_file(err_path, err, sizeof err);
        const char *p = strstr(err, "http://127.0.0.1:");
        if (p) {
            port = atoi(p + strlen("http://127.0.0.1:"));
            return;
        }
        int st;
        if (waitpid(server, &st, WNOHANG) == server)
            TEST_FAIL_MESSAGE(err);
        usleep(100000);
    }
    TEST_FAIL_MESSAGE("the server did not say its port in 2 minutes");
}

/* SIGTERM, then its exit code. */
static int stop(void)
{
    kill(server, SIGTERM);
    int st = 0;
    waitpid(server, &st, 0);
    server = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct resp {
    int status;
    char *body; /* malloc'd, NUL-terminated */
} resp;

static int connect_local(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { 0 };
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void send_request(int fd, const char *method, const char *path, const char *key,
                         const char *body, size_t len)
{
    char head[512];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     method, path, key ? "Authorization: Bearer " : "", key ? key : "",
                     key ? "\r\n" : "", body ? len : (size_t)0);
    ssize_t w = write(fd, head, (size_t)n);
    for (size_t off = 0; body && w >= 0 && off < len; off += (size_t)w)
        w = write(fd, body + off, len - off);
}

/* A whole request and response (the body de-chunked where it came in chunks). */
static resp request(const char *method, const char *path, const char *key, const char *body)
{
    resp r = { 0, NULL };
    int fd = connect_local();
    TEST_ASSERT_TRUE_MESSAGE(fd >= 0, "cannot connect to the server");
    send_request(fd, method, path, key, body, body ? strlen(body) : 0);
    size_t cap = 1 << 16, len = 0;
    char *raw = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            raw = realloc(raw, cap *= 2);
        ssize_t k = read(fd, raw + len, cap - len - 1);
        if (k <= 0)
            break;
        len += (size_t)k;
    }
    close(fd);
    raw[len] = '\0';
    sscanf(raw, "HTTP/1.%*d %d", &r.status);
    char *b = strstr(raw, "\r\n\r\n");
    b = b ? b + 4 : raw + len;
    r.body = malloc(len + 1);
    if (strstr(raw, "Transfer-Encoding: chunked") && strstr(raw, "Transfer-Encoding: chunked") < b) {
        size_t o = 0;
        for (;;) {
            unsigned long n = strtoul(b, &b, 16);
            b = strstr(b, "\r\n");
            if (!n || !b)
                break;
            memcpy(r.body + o, b + 2, n);
            o += n;
            b += 2 + n + 2;
        }
        r.body[o] = '\0';
    } else {
        strcpy(r.body, b);
    }
    free(raw);
    return r;
}

static cJSON *json_of(resp *r)
{
    cJSON *j = cJSON_Parse(r->body);
    TEST_ASSERT_NOT_NULL_MESSAGE(j, r->body);
    return j;
}

/* The text of a completion or a chat reply. */
static char *text_of(cJSON *j)
{
    cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    cJSON *t = cJSON_GetObjectItem(ch, "text");
    if (!t)
        t = cJSON_GetObjectItem(cJSON_GetObjectItem(ch, "message"), "content");
    TEST_ASSERT_TRUE(cJSON_IsString(t));
    return t->valuestring;
}

static const char *finish_of(cJSON *j)
{
    cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0),
                                   "finish_reason");
    return cJSON_IsString(f) ? f->valuestring : "";
}

/* A metric's value from /metrics. */
static double metric(const char *name)
{
    resp r = request("GET", "/metrics", KEY, NULL);
    TEST_ASSERT_EQUAL(200, r.status);
    char pat[128];
    snprintf(pat, sizeof pat, "\n%s ", name);
    const char *p = strstr(r.body, pat);
    TEST_ASSERT_NOT_NULL_MESSAGE(p, name);
    double v = atof(p + strlen(pat));
    free(r.body);
    return v;
}

/* ---- the tests: one server for all but the last ---------------------------------------- */

static void test_routes(void)
{
    resp r = request("GET", "/health", NULL, NULL);
    TEST_ASSERT_EQUAL(200, r.status);
    TEST_ASSERT_NOT_NULL(strstr(r.body, "\"ok\""));
    free(r.body);
    r = request("GET", "/v1/models", KEY, NULL);
    TEST_ASSERT_EQUAL(200, r.status);
    cJSON *j = json_of(&r);
    cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0);
    TEST_ASSERT_EQUAL_STRING("demo", cJSON_GetObjectItem(m, "id")->valuestring);
    cJSON_Delete(j);
    free(r.body);
    r = request("POST", "/tokenize", KEY, "{\"content\": \"Hello world\"}");
    TEST_ASSERT_EQUAL(200, r.status);
    j = json_of(&r);
    cJSON *toks = cJSON_GetObjectItem(j, "tokens");
    int n = cJSON_GetArraySize(toks);
    TEST_ASSERT_TRUE(n > 0);
    /* the text of all the ids is that of each id in turn (the demo's made-up
     * vocabulary lacks some letters: "Hello world" does not come back whole) */
    char body[4096], joined[4096] = "";
    for (int i = 0; i < n; i++) {
        snprintf(body, sizeof body, "{\"tokens\": [%d]}", cJSON_GetArrayItem(toks, i)->valueint);
        resp one = request("POST", "/detokenize", KEY, body);
        cJSON *oj = json_of(&one);
        strcat(joined, cJSON_GetObjectItem(oj, "content")->valuestring);
        cJSON_Delete(oj);
        free(one.body);
    }
    char *arr = cJSON_PrintUnformatted(toks);
    snprintf(body, sizeof body, "{\"tokens\": %s}", arr);
    free(arr);
    cJSON_Delete(j);
    free(r.body);
    r = request("POST", "/detokenize", KEY, body);
    TEST_ASSERT_EQUAL(200, r.status);
    j = json_of(&r);
    TEST_ASSERT_TRUE(strlen(joined) > 0);
    TEST_ASSERT_EQUAL_STRING(joined, cJSON_GetObjectItem(j, "content")->valuestring);
    cJSON_Delete(j);
    free(r.body);
}

static void test_greedy_matches_run(void)
{
    char cmd[1024], want[8192];
    char out_path[256];
    snprintf(out_path, sizeof out_path, "/tmp/glesllm_test_server_%d.out", (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' run -p 'Once upon a time' -n 24 --temp 0 >'%s' 2>/dev/null",
             cli(), out_path);
    TEST_ASSERT_EQUAL(0, system(cmd));
    read_text_file(out_path, want, sizeof want);
    remove(out_path);
    size_t n = strlen(want);
    if (n && want[n - 1] == '\n') /* (run ends the text with a newline) */
        want[n - 1] = '\0';
    resp r = request("POST", "/v1/completions", KEY,
                     "{\"model\": \"demo\", \"prompt\": \"Once upon a time\", \"max_tokens\": 24, "
                     "\"temperature\": 0}");
    TEST_ASSERT_EQUAL_MESSAGE(200, r.status, r.body);
    cJSON *j = json_of(&r);
    TEST_ASSERT_EQUAL_STRING(want, text_of(j));
    TEST_ASSERT_EQUAL_STRING("length", finish_of(j));
    cJSON *u = cJSON_GetObjectItem(j, "usage");
    TEST_ASSERT_EQUAL(24, cJSON_GetObjectItem(u, "completion_tokens")->valueint);
    TEST_ASSERT_EQUAL(cJSON_GetObjectItem(u, "prompt_tokens")->valueint + 24,
                      cJSON_GetObjectItem(u, "total_tokens")->valueint);
    cJSON_Delete(j);
    free(r.body);
}

/* Streamed chat: the role first, the deltas make the reply the same
 * request gives unstreamed, the last chunk has the finish reason and the
 * usage, then [DONE]. */
static void test_chat_stream(void)
{
    const char *req = "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
                      "{\"role\": \"user\", \"content\": \"Hi there\"}], \"max_tokens\": 16, "
                      "\"temperature\": 0%s}";
    char body[512];
    snprintf(body, sizeof body, req, "");
    resp plain = request("POST", "/v1/chat/completions", KEY, body);
    TEST_ASSERT_EQUAL_MESSAGE(200, plain.status, plain.body);
    cJSON *pj = json_of(&plain);
    TEST_ASSERT_EQUAL_STRING("chat.completion", cJSON_GetObjectItem(pj, "object")->valuestring);
    snprintf(body, sizeof body, req, ", \"stream\": true");
    resp s = request("POST", "/v1/chat/completions", KEY, body);
    TEST_ASSERT_EQUAL(200, s.status);
    char joined[8192] = "";
    int events = 0;
    bool role = false, done = false, finished = false;
    for (char *e = strstr(s.body, "data: "); e; e = strstr(e + 1, "data: ")) {
        TEST_ASSERT_FALSE_MESSAGE(done, "an event after [DONE]");
        char *end = strstr(e, "\n\n");
        TEST_ASSERT_NOT_NULL(end);
        *end = '\0';
        if (!strcmp(e + 6, "[DONE]")) {
            done = true;
            *end = '\n';
            continue;
        }
        cJSON *j = cJSON_Parse(e + 6);
        TEST_ASSERT_NOT_NULL_MESSAGE(j, e);
        TEST_ASSERT_EQUAL_STRING("chat.completion.chunk", cJSON_GetObjectItem(j, "object")->valuestring);
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
        cJSON *d = cJSON_GetObjectItem(ch, "delta");
        if (events++ == 0) {
            TEST_ASSERT_EQUAL_STRING("assistant", cJSON_GetObjectItem(d, "role")->valuestring);
            role = true;
        }
        cJSON *c = cJSON_GetObjectItem(d, "content");
        if (cJSON_IsString(c))
            strcat(joined, c->valuestring);
        if (cJSON_IsString(cJSON_GetObjectItem(ch, "finish_reason"))) {
            finished = true;
            TEST_ASSERT_EQUAL_STRING(finish_of(pj), finish_of(j));
            TEST_ASSERT_EQUAL(16, cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"),
                                                      "completion_tokens")->valueint);
        }
        cJSON_Delete(j);
        *end = '\n';
    }
    TEST_ASSERT_TRUE(role && finished && done);
    TEST_ASSERT_TRUE(events > 3);
    TEST_ASSERT_EQUAL_STRING(text_of(pj), joined);
    cJSON_Delete(pj);
    free(plain.body);
    free(s.body);
}

/* A stop string: the text ends before it, finish_reason "stop". */
static void test_stop_string(void)
{
    const char *req = "{\"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0}";
    resp r = request("POST", "/v1/completions", KEY, req);
    cJSON *j = json_of(&r);
    const char *full = text_of(j);
    TEST_ASSERT_TRUE(strlen(full) > 12);
    char stop[8], body[512];
    memcpy(stop, full + 8, 4); /* four bytes inside the text (the demo's pieces are ASCII) */
    stop[4] = '\0';
    size_t at = (size_t)(strstr(full, stop) - full);
    snprintf(body, sizeof body,
             "{\"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0, "
             "\"stop\": [\"never in the text\", \"%s\"]}",
             stop);
    resp s = request("POST", "/v1/completions", KEY, body);
    TEST_ASSERT_EQUAL(200, s.status);
    cJSON *sj = json_of(&s);
    TEST_ASSERT_EQUAL(at, strlen(text_of(sj)));
    TEST_ASSERT_EQUAL(0, strncmp(full, text_of(sj), at));
    TEST_ASSERT_EQUAL_STRING("stop", finish_of(sj));
    cJSON_Delete(j);
    cJSON_Delete(sj);
    free(r.body);
    free(s.body);
}

#define N_CLIENTS 8
static char *client_text[N_CLIENTS];
/* a greedy completion of 40 tokens of this prompt, by client i */
typedef struct client_job {
    int i;
    const char *prompt;
} client_job;
static void *client(void *arg)
{
    const client_job *job = arg;
    char body[256];
    snprintf(body, sizeof body,
             "{\"prompt\": \"%s\", \"max_tokens\": 40, \"temperature\": 0}", job->prompt);
    resp r = request("POST", "/v1/completions", KEY, body);
    cJSON *j = r.status == 200 ? cJSON_Parse(r.body) : NULL;
    cJSON *t = j ? cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0), "text")
                 : NULL;
    client_text[job->i] = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    cJSON_Delete(j);
    free(r.body);
    return NULL;
}

/* n clients at once (at most N_CLIENTS), each's text into client_text */
static void clients(int n, const char *prompt)
{
    pthread_t th[N_CLIENTS];
    client_job jobs[N_CLIENTS];
    for (int i = 0; i < n; i++) {
        jobs[i] = (client_job){ i, prompt };
        pthread_create(&th[i], NULL, client, &jobs[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

/* 8 clients at once on 4 slots: all get the whole greedy text, the one a
 * client alone gets, though the slots generate it in shared passes and the
 * prompts of those that find others generating run in their pass (a prompt
 * no other test sends: only one slot holds it). */
static void test_concurrent_clients(void)
{
    double batched = metric("glesllm:tokens_batched_total");
    clients(1, "Hello world");
    double folded = metric("glesllm:prompt_tokens_batched_total");
    char *alone = client_text[0];
    TEST_ASSERT_NOT_NULL(alone);
    clients(N_CLIENTS, "Hello world");
    for (int i = 0; i < N_CLIENTS; i++) {
        TEST_ASSERT_NOT_NULL(client_text[i]);
        TEST_ASSERT_EQUAL_STRING(client_text[0], client_text[i]);
        TEST_ASSERT_TRUE(strlen(client_text[i]) > 40);
    }
    TEST_ASSERT_EQUAL_STRING(alone, client_text[0]);
    free(alone);
    for (int i = 0; i < N_CLIENTS; i++)
        free(client_text[i]);
    TEST_ASSERT_TRUE(metric("glesllm:tokens_batched_total") > batched);
    /* (the prompts of requests that found the others generating ran in
     * their pass: more than the last token of each) */
    TEST_ASSERT_TRUE(metric("glesllm:prompt_tokens_batched_total") > folded + N_CLIENTS);
    TEST_ASSERT_EQUAL(0, metric("glesllm:requests_processing"));
    TEST_ASSERT_EQUAL(0, metric("glesllm:requests_deferred"));
}

/* A prompt longer than a shared pass (its own passes, then its last token
 * joins the others) and short ones at once, before any slot holds them:
 * each gets the text it gets alone. */
static void test_long_prompt_beside_short_ones(void)
{
    const char *long_p = "Hello world, hello world, hello world, hello world, hello world, "
                         "hello world, hello world, hello world, hello world, hello world";
    const char *prompts[3] = { long_p, "Tell me", "A story" };
    pthread_t th[3];
    client_job jobs[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (client_job){ i, prompts[i] };
        pthread_create(&th[i], NULL, client, &jobs[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    char *together[3];
    for (int i = 0; i < 3; i++) {
        together[i] = client_text[i];
        TEST_ASSERT_NOT_NULL(together[i]);
    }
    for (int i = 0; i < 3; i++) {
        clients(1, prompts[i]);
        TEST_ASSERT_NOT_NULL(client_text[0]);
        TEST_ASSERT_EQUAL_STRING(client_text[0], together[i]);
        free(client_text[0]);
        free(together[i]);
    }
}

/* A streamed completion until the end of the context: its connection. */
static int endless_stream(void)
{
    int fd = connect_local();
    TEST_ASSERT_TRUE(fd >= 0);
    const char *body = "{\"prompt\": \"Hello\", \"max_tokens\": -1, \"stream\": true}";
    send_request(fd, "POST", "/v1/completions", KEY, body, strlen(body));
    return fd;
}

/* A prompt whose start another slot's cache holds (a shared system
 * prompt): copied from there, not run again, and the text the same. */
static void test_prompt_start_copied_from_another_slot(void)
{
    const char *prompt = "You are a helpful assistant who answers briefly and well. "
                         "Question: what is the capital of France?";
    char body[512];
    snprintf(body, sizeof body,
             "{\"prompt\": \"%s\", \"max_tokens\": 24, \"temperature\": 0}", prompt);
    resp alone = request("POST", "/v1/completions", KEY, body);
    TEST_ASSERT_EQUAL(200, alone.status);
    /* a long stream of the same prompt in one slot... */
    int fd = connect_local();
    TEST_ASSERT_TRUE(fd >= 0);
    char sbody[512];
    snprintf(sbody, sizeof sbody,
             "{\"prompt\": \"%s Answer:\", \"max_tokens\": -1, \"stream\": true}", prompt);
    send_request(fd, "POST", "/v1/completions", KEY, sbody, strlen(sbody));
    char buf[4096];
    TEST_ASSERT_TRUE(read(fd, buf, sizeof buf) > 0); /* (its prompt has run) */
    /* ...and the prompt again while it runs: another slot, which copies */
    double copied = metric("glesllm:prompt_tokens_copied_total");
    resp again = request("POST", "/v1/completions", KEY, body);
    TEST_ASSERT_EQUAL(200, again.status);
    TEST_ASSERT_TRUE_MESSAGE(metric("glesllm:prompt_tokens_copied_total") >= copied + 16,
                             "no prompt tokens copied");
    cJSON *a = json_of(&alone), *b = json_of(&again);
    TEST_ASSERT_EQUAL_STRING(text_of(a), text_of(b));
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(alone.body);
    free(again.body);
    close(fd);
}

/* A client that goes away mid-stream: its request stops, its slot frees,
 * and the KV pages it took go back to the pool at once. */
static void test_client_drops(void)
{
    double before = metric("glesllm:tokens_predicted_total");
    TEST_ASSERT_EQUAL(0, metric("glesllm:kv_pages_used")); /* (nothing runs) */
    double kept = metric("glesllm:kv_pages_kept");
    TEST_ASSERT_TRUE(metric("glesllm:kv_pages") > 0);
    int fd = endless_stream();
    char buf[4096];
    ssize_t got = 0;
    for (int i = 0; i < 3 && got >= 0; i++) /* the headers and the first events */
        got = read(fd, buf, sizeof buf);
    TEST_ASSERT_TRUE(got > 0);
    TEST_ASSERT_EQUAL(1, metric("glesllm:requests_processing"));
    /* (a few rounds on: past its first page; up to 30 s, for a loaded
     * machine under the sanitizers, where llvmpipe's steps are slow) */
    double held = 0;
    for (int i = 0; i < 1500 && held < 2; i++) {
        usleep(20000);
        held = metric("glesllm:kv_pages_used");
    }
    TEST_ASSERT_TRUE_MESSAGE(held >= 2, "the stream took no pages");
    close(fd);
    double busy = 1;
    for (int i = 0; i < 600 && busy; i++) { /* (up to 30 s) */
        usleep(50000);
        busy = metric("glesllm:requests_processing");
    }
    TEST_ASSERT_EQUAL(0, busy);
    TEST_ASSERT_EQUAL(0, metric("glesllm:kv_cache_tokens"));
    /* none held, and none kept for it (its slot's earlier kept start, if
     * any, went too) */
    TEST_ASSERT_EQUAL(0, metric("glesllm:kv_pages_used"));
    TEST_ASSERT_TRUE(metric("glesllm:kv_pages_kept") <= kept);
    /* stopped, not run to the end of its 512 positions */
    TEST_ASSERT_TRUE(metric("glesllm:tokens_predicted_total") - before < 250);
}

static void *run_four(void *arg)
{
    clients(4, arg);
    return NULL;
}

/* A pool of 3 pages of 32 positions for 4 slots: a 40-token completion of
 * a short prompt keeps 2 pages, so the requests run one at a time, the
 * others deferred for pages (not failed); each gets the text it gets
 * alone, and the pool is free of them at the end. */
static void test_kv_pool_defers(void)
{
    start("-np 4 -c 96 --api-key " KEY);
    TEST_ASSERT_EQUAL(3, metric("glesllm:kv_pages"));
    TEST_ASSERT_EQUAL(32, metric("glesllm:kv_page_size"));
    clients(1, "Tell me a story");
    char *alone = client_text[0];
    TEST_ASSERT_NOT_NULL(alone);
    pthread_t th;
    pthread_create(&th, NULL, run_four, "Tell me a story");
    double waited = 0, most = 0;
    for (int i = 0; i < 3000 && (i < 5 || metric("glesllm:requests_processing") > 0 ||
                                 metric("glesllm:requests_deferred") > 0); i++) {
        waited = fmax(waited, metric("glesllm:requests_deferred_kv"));
        most = fmax(most, metric("glesllm:requests_processing"));
        usleep(10000);
    }
    pthread_join(th, NULL);
    TEST_ASSERT_TRUE_MESSAGE(waited >= 1, "no request waited for pages");
    TEST_ASSERT_EQUAL(1, most);
    for (int i = 0; i < 4; i++) {
        TEST_ASSERT_NOT_NULL(client_text[i]);
        TEST_ASSERT_EQUAL_STRING(alone, client_text[i]);
        free(client_text[i]);
    }
    free(alone);
    TEST_ASSERT_EQUAL(0, metric("glesllm:requests_deferred_kv"));
    TEST_ASSERT_EQUAL(0, metric("glesllm:kv_pages_used"));
    TEST_ASSERT_TRUE(metric("glesllm:kv_pages_kept") <= 3);
    TEST_ASSERT_EQUAL(0, stop());
}

static void expect(const char *method, const char *path, const char *key, const char *body,
                   int status, const char *says)
{
    resp r = request(method, path, key, body);
    char msg[512];
    snprintf(msg, sizeof msg, "%s %s %s: %s", method, path, body ? body : "", r.body);
    TEST_ASSERT_EQUAL_MESSAGE(status, r.status, msg);
    cJSON *j = cJSON_Parse(r.body);
    cJSON *e = cJSON_GetObjectItem(j, "error");
    TEST_ASSERT_NOT_NULL_MESSAGE(e, msg);
    TEST_ASSERT_EQUAL_MESSAGE(status, cJSON_GetObjectItem(e, "code")->valueint, msg);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(cJSON_GetObjectItem(e, "message")->valuestring, says), msg);
    cJSON_Delete(j);
    free(r.body);
}

static void test_bad_requests(void)
{
    const char *c = "/v1/completions";
    expect("POST", c, KEY, "{\"prompt\": ", 400, "not valid JSON");
    expect("POST", c, KEY, "[1, 2]", 400, "JSON object");
    expect("POST", c, KEY, "{\"prompt\": 5}", 400, "'prompt'");
    expect("POST", c, KEY, "{\"prompt\": \"x\", \"max_tokens\": \"ten\"}", 400, "'max_tokens'");
    expect("POST", c, KEY, "{\"prompt\": \"x\", \"temperature\": -1}", 400, "'temperature'");
    expect("POST", c, KEY, "{\"prompt\": \"x\", \"stream\": \"yes\"}", 400, "'stream'");
    expect("POST", c, KEY, "{\"prompt\": \"x\", \"ignore_eos\": 1}", 400, "'ignore_eos'");
    expect("POST", c, KEY, "{\"prompt\": \"x\", \"stop\": [1]}", 400, "'stop'");
    char long_stop[1200] = "{\"prompt\": \"x\", \"stop\": \"";
    memset(long_stop + strlen(long_stop), 'a', 1100);
    strcpy(long_stop + strlen(long_stop), "\"}");
    expect("POST", c, KEY, long_stop, 400, "over 1024 bytes");
    expect("POST", c, KEY, "{\"prompt\": [1, 99999999]}", 400, "token ids");
    expect("POST", "/v1/chat/completions", KEY, "{\"messages\": []}", 400, "'messages'");
    expect("POST", "/v1/chat/completions", KEY, "{\"messages\": [{\"content\": \"x\"}]}", 400,
           "'role'");
    expect("POST", c, KEY, "{\"prompt\": \"x\", \"model\": \"gpt-4\"}", 404, "gpt-4");
    expect("GET", "/v1/nothing", KEY, NULL, 404, "no route");
    expect("GET", c, KEY, NULL, 405, "POST");
    expect("GET", "/v1/models", NULL, NULL, 401, "API key");
    expect("GET", "/v1/models", "wrong", NULL, 401, "API key");
    /* a prompt longer than a slot's context (-c: the slots share its 2048
     * positions, and one request may take them all) */
    size_t n = 64 * 1024;
    char *big = malloc(n + 64);
    int k = snprintf(big, n + 64, "{\"prompt\": \"");
    for (size_t i = 0; i < 3000; i++)
        k += snprintf(big + k, n + 64 - (size_t)k, "a b ");
    snprintf(big + k, n + 64 - (size_t)k, "\"}");
    expect("POST", c, KEY, big, 400, "the context holds 2048");
    free(big);
    /* a body over --max-body (64 KiB here) */
    n = 70 * 1024;
    big = malloc(n + 1);
    memset(big, ' ', n);
    big[n] = '\0';
    big[0] = '{';
    big[n - 1] = '}';
    expect("POST", c, KEY, big, 413, "--max-body");
    free(big);
    /* the server still answers */
    resp r = request("GET", "/health", NULL, NULL);
    TEST_ASSERT_EQUAL(200, r.status);
    free(r.body);
}

/* SIGTERM while a stream runs: the stream ends with [DONE], exit 0. */
static void test_sigterm(void)
{
    int fd = endless_stream();
    char buf[65536];
    size_t len = 0;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    TEST_ASSERT_TRUE(k > 0);
    len = (size_t)k;
    TEST_ASSERT_EQUAL(0, stop());
    while (len < sizeof buf - 1 && (k = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)k;
    buf[len] = '\0';
    close(fd);
    TEST_ASSERT_NOT_NULL(strstr(buf, "data: [DONE]"));
    char err[4096];
    read_text_file(err_path, err, sizeof err);
    TEST_ASSERT_NOT_NULL(strstr(err, "SIGTERM: stopping"));
    remove(err_path);
}

/* --draft: every slot drafts with a small model of the same vocabulary;
 * greedy, the text is the model's alone (`glesllm run --temp 0`), for two
 * clients at once. */
static void test_draft(void)
{
    TEST_NEEDS_SHARED(dir);
    char cmd[1024], want[8192], args[1024], out_path[256];
    snprintf(out_path, sizeof out_path, "/tmp/glesllm_test_server_%d.out", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "'%s' run -m '%s/models/tiny-spm-q8_0.gguf' -p 'Once upon a time' -n 40 --temp 0 "
             ">'%s' 2>/dev/null",
             cli(), dir, out_path);
    TEST_ASSERT_EQUAL(0, system(cmd));
    read_text_file(out_path, want, sizeof want);
    remove(out_path);
    size_t n = strlen(want);
    if (n && want[n - 1] == '\n')
        want[n - 1] = '\0';
    snprintf(args, sizeof args,
             "-m '%s/models/tiny-spm-q8_0.gguf' --draft '%s/models/tiny-spm-q4_0.gguf' "
             "--draft-max 4 --draft-min 1 -np 2 -c 1024 --api-key " KEY,
             dir, dir);
    start(args);
    clients(2, "Once upon a time");
    /* the draft did draft, and some of it was kept */
    TEST_ASSERT_TRUE(metric("glesllm:tokens_drafted_total") > 0);
    TEST_ASSERT_TRUE(metric("glesllm:tokens_drafted_accepted_total") > 0);
    TEST_ASSERT_EQUAL(0, stop());
    for (int i = 0; i < 2; i++) {
        TEST_ASSERT_NOT_NULL(client_text[i]);
        TEST_ASSERT_EQUAL_STRING(want, client_text[i]);
        free(client_text[i]);
    }
}

/* glesllm chat: two turns from standard input; the second runs only its
 * own message (the first turn and its reply stay in the context). */
static void test_chat_command(void)
{
    char cmd[1024], out[8192], err[8192], out_path[256];
    snprintf(out_path, sizeof out_path, "/tmp/glesllm_test_chat_%d", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "printf 'Hello there\\nHow are you\\n/exit\\nnot read\\n' | '%s' chat -n 8 --temp 0 "
             "-sys 'Be brief' >'%s.out' 2>'%s.err'",
             cli(), out_path, out_path);
    int st = system(cmd);
    char path[300];
    snprintf(path, sizeof path, "%s.out", out_path);
    read_text_file(path, out, sizeof out);
    remove(path);
    snprintf(path, sizeof path, "%s.err", out_path);
    read_text_file(path, err, sizeof err);
    remove(path);
    TEST_ASSERT_TRUE_MESSAGE(WIFEXITED(st) && WEXITSTATUS(st) == 0, err);
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    TEST_ASSERT_EQUAL_MESSAGE(2, lines, out); /* two replies, nothing else on stdout */
    unsigned p1, c1, g1, p2, c2, g2;
    const char *s1 = strstr(err, "\n[");
    TEST_ASSERT_NOT_NULL_MESSAGE(s1, err);
    TEST_ASSERT_EQUAL(3, sscanf(s1 + 1, "[%u prompt tokens, %u of them cached; %u tokens", &p1, &c1, &g1));
    const char *s2 = strstr(s1 + 1, "\n[");
    TEST_ASSERT_NOT_NULL_MESSAGE(s2, err);
    TEST_ASSERT_EQUAL(3, sscanf(s2 + 1, "[%u prompt tokens, %u of them cached; %u tokens", &p2, &c2, &g2));
    TEST_ASSERT_EQUAL(0, c1);
    TEST_ASSERT_EQUAL(8, g1);
    /* the first prompt and the reply's tokens but its last (never run) */
    TEST_ASSERT_EQUAL(p1 + g1 - 1, c2);
    TEST_ASSERT_TRUE(p2 > p1 + g1);
}

/* Options the server refuses, before it loads anything. */
static void test_bad_options(void)
{
    char cmd[1024];
    const char *bad[] = { "--port 70000", "-np 0", "--chat-template nonsense",
                          "-c 16 -np 4", "--draft /nonexistent/x.gguf", "--draft-max 0",
                          "--draft-max 2 --draft-min 3",
                          "--host no.such.host.invalid" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' serve %s >/dev/null 2>&1 </dev/null", cli(), bad[i]);
        int st = system(cmd);
        TEST_ASSERT_TRUE_MESSAGE(WIFEXITED(st) && WEXITSTATUS(st) != 0, bad[i]);
    }
}

int main(void)
{
    UNITY_BEGIN();
    signal(SIGPIPE, SIG_IGN);
    start("-np 4 -c 2048 --api-key " KEY " --max-body 65536");
    RUN_TEST(test_routes);
    RUN_TEST(test_greedy_matches_run);
    RUN_TEST(test_chat_stream);
    RUN_TEST(test_stop_string);
    RUN_TEST(test_concurrent_clients);
    RUN_TEST(test_long_prompt_beside_short_ones);
    RUN_TEST(test_client_drops);
    RUN_TEST(test_prompt_start_copied_from_another_slot);
    RUN_TEST(test_bad_requests);
    RUN_TEST(test_sigterm);
    if (server)
        stop();
    RUN_TEST(test_bad_options);
    RUN_TEST(test_chat_command);
    RUN_TEST(test_kv_pool_defers);
    RUN_TEST(test_draft);
    if (*err_path)
        remove(err_path); /* (the last server's) */
    return UNITY_END();
}

void setUp(void) {}
void tearDown(void) {}
