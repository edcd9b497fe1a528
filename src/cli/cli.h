/* The glesllm command line: one function per subcommand, built on the
 * public interface (glesllm.h) alone. Each returns the process exit code:
 * 0 success, 1 failure, 2 bad usage. Results go to stdout, diagnostics to
 * stderr. */
#ifndef GLESLLM_CLI_H
#define GLESLLM_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "glesllm.h"

int cmd_bench(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

/* Set by SIGINT/SIGTERM between cli_catch_signals() and cli_release_signals(),
 * which also cancels what runs on c (may be NULL): long commands stop
 * cleanly (Ctrl-C exits 130). */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_signals(glesllm_context *c);
void cli_release_signals(void);

/* "[#########.....]" for pct (0..100) into bar (31 bytes). */
void cli_progress_bar(int pct, char bar[31]);

/* The whole of a file (path NULL: standard input) into *text (malloc'd,
 * NUL-terminated after *len bytes); 0, or 1 after saying why on stderr. */
int cli_read_text(const char *path, char **text, size_t *len);

/* "glesllm: <what>: <last error>" on stderr (what NULL: without it); returns 1. */
int cli_fail(const char *what, glesllm_status st);

/* A decimal number within [lo, hi] and nothing else. */
bool cli_parse_long(const char *s, long lo, long hi, long *out);
bool cli_parse_float(const char *s, float lo, float hi, float *out);
/* What the last of those to fail wanted, as " (a whole number from 1 to
 * 32)", for an "invalid value" message; "" if the last one succeeded. */
const char *cli_parse_want(void);

/* Before argv[i]'s value: 0 where argv[i] is one of `options` (taking a
 * value, NULL-ended) and a value follows; else 2 after saying on stderr
 * that the argument is unexpected, the option unknown, or its value
 * missing. */
int cli_option_value(const char *cmd, int argc, char **argv, int i, const char *const *options);

/* Whether p[0..n) is one whole, valid UTF-8 character. */
bool cli_utf8_char(const char *p, size_t n);

/* The library's warnings and errors on stderr as "glesllm: warning: ...". */
void cli_log(void *ud, glesllm_log_level level, const char *msg);

/* The GPU with the options and tuning the environment sets
 * (glesllm_backend_params_from_env). 0, or 1 after saying why. */
int cli_open_backend(glesllm_backend **b);
/* A model for a command: the file, or the built-in demo when path is NULL
 * (said on stderr); its weights upload with a progress bar on a terminal.
 * 0, or 1 after saying why. */
int cli_open_model(glesllm_backend *b, const char *path, glesllm_model **m);
/* A context of m (0s: the defaults); `name` (the model's) heads an error.
 * 0, or 1 after saying why. */
int cli_make_context(glesllm_model *m, const char *name, uint32_t n_ctx, uint32_t n_batch,
                     uint32_t draft_max, glesllm_context **c);

/* The ids of text[0..len) (glesllm_tokenize's flags) into *ids (malloc'd,
 * *n of them; may be NULL when none). */
glesllm_status cli_tokenize(const glesllm_model *m, const char *text, size_t len, unsigned flags,
                            int32_t **ids, size_t *n);

/* Seconds on a monotonic clock. */
double cli_now(void);

#endif
