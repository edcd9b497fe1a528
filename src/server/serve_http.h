/* The server's HTTP side (serve_http.c): OpenAI's routes on libmicrohttpd. */
#ifndef GLESLLM_SERVE_HTTP_H
#define GLESLLM_SERVE_HTTP_H

#include <sys/socket.h>

#include "serve.h"

typedef struct serve_http_params {
    const char *model_id; /* what /v1/models lists and requests may name */
    const char *api_key;  /* NULL: none asked */
    size_t max_body;      /* bytes; a larger body is answered 413 */
    unsigned max_connections;
    long long started; /* the server's start, seconds since 1970 */
} serve_http_params;

typedef struct serve_http serve_http;

/* Listens on addr. template_name: the chat template (NULL: chat requests
 * are answered 400). 0, or 1 with errno set. */
int serve_http_start(serve *s, glesllm_model *m, const serve_http_params *p,
                     const char *template_name, const struct sockaddr *addr, serve_http **out);
unsigned serve_http_port(serve_http *h);
/* Stops accepting connections; those open go on. */
void serve_http_quiesce(serve_http *h);
/* Waits up to timeout_ms for the requests begun to complete (their
 * responses sent, a stream's to its [DONE], or their clients gone); false
 * if some had not. */
bool serve_http_drain(serve_http *h, unsigned timeout_ms);
/* Stops: connections still open are closed. */
void serve_http_stop(serve_http *h);

#endif
