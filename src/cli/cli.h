/* The glesllm command line: one function per subcommand. Each returns the
 * process exit code: 0 success, 1 failure, 2 bad usage. Results go to
 * stdout, diagnostics to stderr. */
#ifndef GLESLLM_CLI_H
#define GLESLLM_CLI_H

#include <signal.h>
#include <stddef.h>

#include "glesllm.h"

int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);

/* Set by SIGINT/SIGTERM between cli_catch_signals() and cli_release_signals():
 * long commands stop cleanly (Ctrl-C exits 130). */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_signals(void);
void cli_release_signals(void);

/* "[#########.....]" for pct (0..100) into bar (31 bytes). */
void cli_progress_bar(int pct, char bar[31]);

/* The whole of a file (path NULL: standard input) into *text (malloc'd,
 * NUL-terminated after *len bytes); 0, or 1 after saying why on stderr. */
int cli_read_text(const char *path, char **text, size_t *len);

/* "glesllm: <what>: <last error>" on stderr; returns 1. */
int cli_fail(const char *what, glesllm_status st);

#endif
