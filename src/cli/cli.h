/* The glesllm command line: one function per subcommand. Each returns the
 * process exit code: 0 success, 1 failure, 2 bad usage. Results go to
 * stdout, diagnostics to stderr. */
#ifndef GLESLLM_CLI_H
#define GLESLLM_CLI_H

#include "glesllm.h"

int cmd_info(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_run(int argc, char **argv);

/* "glesllm: <what>: <last error>" on stderr; returns 1. */
int cli_fail(const char *what, glesllm_status st);

#endif
