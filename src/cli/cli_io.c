/* What every command shares below main(): signals, messages, reading a
 * prompt file, parsing numbers, the progress bar. See cli.h. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

volatile sig_atomic_t cli_interrupted;
static struct sigaction old_int, old_term;
static glesllm_context *volatile cancel_target;

/* The first SIGINT asks the work to stop where it can (the text so far, the
 * stats, no partial file); a second one, or SIGTERM, ends the process at
 * once, as 128 + the signal says (a temporary file it was writing is removed
 * by the next write of that path, tmp_files.h). */
static void on_signal(int sig)
{
    if (sig == SIGTERM || cli_interrupted)
        _exit(128 + sig);
    cli_interrupted = 1;
    glesllm_cancel(cancel_target); /* (only a store: safe in a handler) */
}

void cli_catch_signals(glesllm_context *c)
{
    cancel_target = c;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    cli_interrupted = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
}

void cli_release_signals(void)
{
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    cancel_target = NULL;
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool cli_utf8_char(const char *p, size_t n)
{
    const unsigned char *u = (const unsigned char *)p;
    size_t want = u[0] < 0x80 ? 1 : (u[0] >> 5) == 6 ? 2 : (u[0] >> 4) == 14 ? 3
                : (u[0] >> 3) == 30 ? 4 : 0;
    if (!want || want != n)
        return false;
    for (size_t i = 1; i < n; i++)
        if ((u[i] & 0xc0) != 0x80)
            return false;
    return true;
}

void cli_log(void *ud, glesllm_log_level level, const char *msg)
{
    (void)ud;
    if (level <= GLESLLM_LOG_WARN)
        fprintf(stderr, "glesllm: %s%s\n", level == GLESLLM_LOG_WARN ? "warning: " : "", msg);
}

void cli_progress_bar(int pct, char bar[31])
{
    for (int i = 0; i < 30; i++)
        bar[i] = i < pct * 30 / 100 ? '#' : '.';
    bar[30] = 0;
}

int cli_fail(const char *what, glesllm_status st)
{
    const char *msg = glesllm_last_error();
    fprintf(stderr, "glesllm: %s%s%s\n", what ? what : "", what ? ": " : "",
            msg[0] ? msg : glesllm_strerror(st));
    return 1;
}

int cli_read_text(const char *path, char **text, size_t *len)
{
    FILE *f = path ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "glesllm: cannot open '%s': %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    bool failed = !buf || ferror(f);
    int err = errno;
    if (path)
        fclose(f);
    if (failed) {
        fprintf(stderr, "glesllm: reading %s: %s\n", path ? path : "standard input",
                buf ? strerror(err) : "out of memory");
        free(buf);
        return 1;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return 0;
}

/* what the last cli_parse_long/cli_parse_float call that failed wanted, for
 * the caller's message ("" after one that succeeded) */
static char parse_want[96];

bool cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        snprintf(parse_want, sizeof parse_want, " (a whole number from %ld to %ld)", lo, hi);
        return false;
    }
    parse_want[0] = '\0';
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, float lo, float hi, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        snprintf(parse_want, sizeof parse_want, " (a number from %g to %g)", lo, hi);
        return false;
    }
    parse_want[0] = '\0';
    *out = v;
    return true;
}

const char *cli_parse_want(void)
{
    return parse_want;
}

int cli_option_value(const char *cmd, int argc, char **argv, int i, const char *const *options)
{
    const char *o = argv[i];
    bool known = false;
    for (size_t k = 0; options[k] && !known; k++)
        known = strcmp(o, options[k]) == 0;
    const char *what = o[0] != '-' ? "unexpected argument"
                       : !known    ? "unknown option"
                       : i + 1 >= argc ? "missing value after"
                                       : NULL;
    if (!what)
        return 0;
    fprintf(stderr, "glesllm %s: %s '%s'; see 'glesllm %s --help'\n", cmd, what, o, cmd);
    return 2;
}
