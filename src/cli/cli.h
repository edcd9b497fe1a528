/* The glesllm command line: one function per subcommand. Each returns the
 * process exit code: 0 success, 1 failure, 2 bad usage. Results go to
 * stdout, diagnostics to stderr. */
#ifndef GLESLLM_CLI_H
#define GLESLLM_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "glesllm.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "model/gpu_model.h"
#include "model/model.h"
#include "text/vocab.h"

int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
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

/* A decimal number within [lo, hi] and nothing else. */
bool cli_parse_long(const char *s, long lo, long hi, long *out);
bool cli_parse_float(const char *s, float lo, float hi, float *out);
/* What the last of those to fail wanted, as " (a whole number from 1 to
 * 32)", for an "invalid value" message; "" if the last one succeeded. */
const char *cli_parse_want(void);

/* A model a command works on: the file (or the built-in demo when path is
 * NULL), its metadata, optionally its vocabulary, and once uploaded the GPU
 * model. The functions return 0, or an exit code after saying why on stderr. */
typedef struct cli_model {
    const char *name;  /* the path, or "demo" */
    uint8_t *demo;
    gguf_file *f;
    model m;
    bool opened;
    vocab *voc;
    gpu_model *gm;
    double t0, load_s; /* when opening began; seconds until uploaded */
} cli_model;

enum { CLI_NEED_VOCAB = 1 };
int cli_model_open(const char *path, unsigned need, cli_model *cm);
/* Opens the GPU with the options and the engine's tuning the environment
 * sets (gpu_options_from_env, tuning_from_env); cli_tuning is that tuning,
 * which cli_model_upload passes down. */
int cli_open_gpu(gpu_context **ctx);
const tuning *cli_tuning(void);
/* Uploads with a load progress bar on a terminal (n_batch, n_small 0: the
 * defaults of gpu_model_options). */
int cli_model_upload(cli_model *cm, gpu_context *ctx, uint32_t n_ctx, uint32_t n_batch,
                     int32_t n_small);
void cli_model_close(cli_model *cm);

#endif
