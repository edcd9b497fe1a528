/* The glesllm command as a user runs it: exit codes, what goes to stdout and
 * what to stderr, and the messages for a platform that cannot work. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gguf_samples.h"
#include "model/demo_model.h"
#include "test_support.h"

void setUp(void) {}
void tearDown(void) {}

static char out_path[256], err_path[256];
static char out[16384], err[16384];

/* Runs `env glesllm args` and returns its exit code; stdout and stderr land in out/err. */
/* run with standard output into the file `to` (out: NULL) */
static int run_to(const char *env, const char *args, const char *to)
{
    char cmd[2048];
    const char *cli = getenv("GLESLLM_CLI"); /* a copied build runs elsewhere */
    snprintf(cmd, sizeof cmd, "%s '%s' %s >'%s' 2>'%s' </dev/null", env ? env : "",
             cli ? cli : GLESLLM_CLI_PATH,
             args, to ? to : out_path, err_path);
    int rc = system(cmd);
    read_text_file(to ? "/dev/null" : out_path, out, sizeof out);
    read_text_file(err_path, err, sizeof err);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc);
}

static int run(const char *env, const char *args) { return run_to(env, args, NULL); }

/* The CLI run with args in the background, sent SIG (INT, TERM) once the
 * shell test `ready` holds ($OUT and $ERR: its stdout and stderr so far) or
 * after 60 s, so that a loaded machine still loads the model first; its
 * status as system() gives it, its output in out and err. */
static int run_signalled(const char *args, const char *ready, const char *sig)
{
    char cmd[1600];
    const char *cli = getenv("GLESLLM_CLI");
    snprintf(cmd, sizeof cmd,
             "OUT='%s' ERR='%s' sh -c '\"%s\" %s & pid=$!; i=0; "
             "until %s || [ $i -ge 600 ]; do sleep 0.1; i=$((i+1)); done; "
             "kill -%s $pid; wait $pid' >'%s' 2>'%s'",
             out_path, err_path, cli ? cli : GLESLLM_CLI_PATH, args, ready, sig, out_path,
             err_path);
    int rc = system(cmd);
    read_text_file(out_path, out, sizeof out);
    read_text_file(err_path, err, sizeof err);
    return rc;
}

/* how many times needle occurs in hay */
static int count_in(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* A full disk under standard output: exit 1 and a message, for every
 * command that prints (before, run and info exited 0, tokenize 1 silently) */
static void test_write_errors_are_failures(void)
{
    if (access("/dev/full", W_OK) != 0)
        TEST_IGNORE_MESSAGE("no /dev/full here");
    static const char *const cmds[] = { "--version", "run -n 2 --temp 0", "info --gpu" };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        TEST_ASSERT_EQUAL_INT_MESSAGE(1, run_to(NULL, cmds[i], "/dev/full"), cmds[i]);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "writing to standard output failed"), err);
    }
}

static void test_version_and_help(void)
{
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "--version"));
    char want[64];
    snprintf(want, sizeof want, "glesllm %s\n", glesllm_version());
    TEST_ASSERT_EQUAL_STRING(want, out);
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "--help"));
    TEST_ASSERT_NOT_NULL(strstr(out, "info --gpu"));
    TEST_ASSERT_NOT_NULL(strstr(out, "GLESLLM_PLATFORM"));
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "info --help"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, ""));
    TEST_ASSERT_NOT_NULL(strstr(err, "usage"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "frobnicate"));
    TEST_ASSERT_NOT_NULL(strstr(err, "unknown command 'frobnicate'"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "info --bogus"));
    TEST_ASSERT_NOT_NULL(strstr(err, "--bogus"));
}

static void test_info_gpu_reports_the_gpu(void)
{
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "info --gpu"), err);
    const char *fields[] = { "platform:", "GL_VENDOR:", "GL_RENDERER:", "GL_VERSION:",
                             "work group invocations", "storage block size",
                             "GL_KHR_shader_subgroup", "GL_EXT_buffer_storage", "fp16 arithmetic",
                             "program cache:" };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, fields[i]), fields[i]);
    TEST_ASSERT_EQUAL_STRING("", err);
}

static void test_info_gpu_with_each_platform(void)
{
    /* device and surfaceless: at least one works wherever the tests run */
    int ok = 0;
    if (run("GLESLLM_PLATFORM=device", "info --gpu") == 0) {
        TEST_ASSERT_NOT_NULL(strstr(out, "platform:            device"));
        ok++;
    } else {
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "GLESLLM_PLATFORM=device cannot work"), err);
    }
    if (run("GLESLLM_PLATFORM=surfaceless", "info --gpu") == 0) {
        TEST_ASSERT_NOT_NULL(strstr(out, "platform:            surfaceless"));
        ok++;
    } else {
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "GLESLLM_PLATFORM=surfaceless cannot work"), err);
    }
    TEST_ASSERT_GREATER_THAN_INT(0, ok);
    int rc = run("GLESLLM_PLATFORM=gbm", "info --gpu");
    if (!has_render_node()) {
        TEST_ASSERT_EQUAL_INT(1, rc);
        TEST_ASSERT_EQUAL_STRING("", out);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "no DRM render node"), err);
    }
    TEST_ASSERT_EQUAL_INT(1, run("GLESLLM_PLATFORM=x11", "info --gpu"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "GLESLLM_PLATFORM=x11 is not known"), err);
    TEST_ASSERT_EQUAL_INT(1, run("GLESLLM_DEVICE=/dev/dri/renderD250", "info --gpu"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/dev/dri/renderD250"), err);
    /* a file that is no GPU: Mesa's GBM would open it and render in software */
    TEST_ASSERT_EQUAL_INT(1, run("GLESLLM_DEVICE=/dev/null", "info --gpu"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/dev/null is not a DRM device node"), err);
    TEST_ASSERT_EQUAL_STRING("", out);
}

static void test_limits_min_and_no_cache_are_reported(void)
{
    TEST_ASSERT_EQUAL_INT(0, run("GLESLLM_LIMITS=min GLESLLM_NO_CACHE=1", "info --gpu"));
    TEST_ASSERT_NOT_NULL(strstr(out, "GLESLLM_LIMITS=min"));
    TEST_ASSERT_NOT_NULL(strstr(out, "work group invocations     128\n"));
    TEST_ASSERT_NOT_NULL(strstr(out, "storage block size         128 MiB\n"));
    TEST_ASSERT_NOT_NULL(strstr(out, "program cache:       off (GLESLLM_NO_CACHE=1)"));
}

/* In a child process: Mesa reads its version override once per driver load. */
static void test_driver_below_gles31_is_rejected(void)
{
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "info --gpu"));
    if (!strstr(out, "GL_VERSION:          OpenGL ES 3.2 Mesa") &&
        !strstr(out, "GL_VERSION:          OpenGL ES 3.1 Mesa"))
        TEST_IGNORE_MESSAGE("not a Mesa driver: MESA_GLES_VERSION_OVERRIDE cannot fake an old one");
    TEST_ASSERT_EQUAL_INT(1, run("MESA_GLES_VERSION_OVERRIDE=3.0", "info --gpu"));
    TEST_ASSERT_EQUAL_STRING("", out);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "compute shaders need OpenGL ES 3.1"), err);
}

/* ---- info MODEL ----------------------------------------------------------------- */

static void json_has(const char *field_and_value)
{
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, field_and_value), field_and_value);
}

static void test_info_model_json(void)
{
    TEST_NEEDS_SHARED(dir);
    char args[1200];
    snprintf(args, sizeof args, "info '%s/models/tiny-spm-q4_k_m.gguf' --json -c 512", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("", err);
    TEST_ASSERT_EQUAL_INT('{', out[0]);
    TEST_ASSERT_EQUAL_INT('\n', out[strlen(out) - 1]);
    json_has("\"architecture\": \"llama\"");
    json_has("\"parameters\": 11340032");
    json_has("\"layers\": 4, \"hidden_size\": 256, \"feed_forward_size\": 768, \"heads\": 8, "
             "\"kv_heads\": 4, \"head_dim\": 32, \"context_length\": 2048");
    json_has("\"rope\": {\"type\": \"norm\", \"base\": 10000");
    json_has("\"vocab_size\": 32000, \"tokenizer_model\": \"llama\"");
    json_has("\"Q4_K\": {\"tensors\": 24");
    json_has("\"Q6_K\": {\"tensors\": 5");
    /* KV cache at 512: 2 x 4 layers x 512 x (4 x 32) x 2 bytes */
    json_has("\"kv_cache\": 1048576");
    /* a vocabulary alone: described, and the verdict run would give (exit 1) */
    snprintf(args, sizeof args, "info '%s/tokenizer/ggml-vocab-gpt-2.gguf' --json", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(1, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "this file will not run"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "architecture 'gpt2' is not supported"), err);
    json_has("\"n_tensors\": 0");
    json_has("\"vocab_size\": 50257, \"tokenizer_model\": \"gpt2\", \"tokenizer_pre\": \"gpt-2\"");
}

static void test_info_model_text_and_tensors(void)
{
    TEST_NEEDS_SHARED(dir);
    char args[1200];
    snprintf(args, sizeof args, "info '%s/models/aidreams260K-f32.gguf' --tensors", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL(strstr(out, "parameters:         263744"));
    TEST_ASSERT_NOT_NULL(strstr(out, "token_embd.weight"));
    TEST_ASSERT_NOT_NULL(strstr(out, "64 x 512"));
    TEST_ASSERT_NOT_NULL(strstr(out, "GPU memory at context 128"));
}

static void test_info_model_bad_input(void)
{
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "info /nonexistent/model.gguf"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/nonexistent/model.gguf: cannot open"), err);
    TEST_ASSERT_EQUAL_STRING("", out);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "info " GLESLLM_CLI_PATH));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "not a GGUF file"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "info x.gguf -c lots"));
    TEST_ASSERT_NOT_NULL(strstr(err, "-c needs a context size"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "info a.gguf b.gguf"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "info --gpu a.gguf"));
}

static void test_quantize_command(void)
{
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "quantize"));
    TEST_ASSERT_NOT_NULL(strstr(err, "usage: glesllm quantize"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "quantize a.gguf b.gguf Q3_X"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "unknown type 'Q3_X'"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "quantize --threads 0 a.gguf b.gguf Q4_0"));
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "quantize /nonexistent/a.gguf /tmp/b.gguf Q4_0"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/nonexistent/a.gguf: cannot open"), err);
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "quantize --help"));
    TEST_ASSERT_NOT_NULL(strstr(out, "Q4_K_M"));
    TEST_NEEDS_SHARED(dir);
    char args[1024], dst[256];
    snprintf(dst, sizeof dst, "/tmp/glesllm-test-cli-%ld.gguf", (long)getpid());
    snprintf(args, sizeof args, "quantize %s/models/tiny-spm-f32.gguf %s Q8_0", dir, dst);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("", out); /* nothing on stdout */
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "-> Q8_0"), err);
    TEST_ASSERT_EQUAL_INT(0, access(dst, F_OK));
    unlink(dst);
    /* Ctrl-C in the middle: exit 130, no output and no temporary file */
    snprintf(args, sizeof args,
             "quantize --threads 1 %s/models/tiny-spm-f32.gguf %s Q4_K & pid=$!; sleep 0.2; "
             "kill -INT $pid; wait $pid; rc=$?; ls %s* 2>/dev/null; exit $rc", dir, dst, dst);
    char cmd[1400];
    const char *cli = getenv("GLESLLM_CLI");
    snprintf(cmd, sizeof cmd, "sh -c '\"%s\" %s' >'%s' 2>'%s'", cli ? cli : GLESLLM_CLI_PATH, args,
             out_path, err_path);
    int rc = system(cmd);
    read_text_file(out_path, out, sizeof out);
    read_text_file(err_path, err, sizeof err);
    TEST_ASSERT_TRUE_MESSAGE(WIFEXITED(rc) && WEXITSTATUS(rc) == 130, err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "interrupted"), err);
    TEST_ASSERT_EQUAL_STRING("", out); /* ls found neither the file nor a temporary */
}

static void test_run_demo_and_flags(void)
{
    /* no -m: the built-in demo, text on stdout, timings on stderr */
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "run -n 16 --ignore-eos"), err); /* EOS could come first */
    TEST_ASSERT_TRUE_MESSAGE(strlen(out) > 16, out);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "tokens/s"), err);
    TEST_ASSERT_NULL_MESSAGE(strstr(out, "tokens/s"), out);
    /* the same seed, the same ids; greedy is the same every time */
    char first[4096];
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "run -n 24 --print-ids --seed 11 --temp 1.2"));
    snprintf(first, sizeof first, "%s", out);
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "run -n 24 --print-ids --seed 11 --temp 1.2"));
    TEST_ASSERT_EQUAL_STRING(first, out);
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "run -n 24 --print-ids --seed 12 --temp 1.2 --ignore-eos"));
    TEST_ASSERT_TRUE_MESSAGE(strcmp(first, out) != 0, "another seed, other tokens");
    int n_ids = 0;
    for (char *p = out; *p; p++)
        n_ids += *p == ' ';
    TEST_ASSERT_EQUAL_INT(23, n_ids);
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "run -n 8 --print-ids --temp 0 --prompt-ids 1,300,301"));
    snprintf(first, sizeof first, "%s", out);
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "run -n 8 --print-ids --temp 0 --prompt-ids 1,300,301 "
                                       "--repeat-penalty 1.3 --top-k 0 --top-p 0.5 --min-p 0"));
    TEST_ASSERT_EQUAL_STRING(first, out); /* temp 0 is greedy whatever else is set */
    /* the end of the context stops generation with a message */
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "run -c 8 -n 100 --print-ids --prompt-ids 1,5,6"),
                                  err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "context of 8 tokens is full"), err);
    TEST_ASSERT_NULL_MESSAGE(strstr(err, "trained on"), err);
    /* a context past the demo's training context (2048): a warning */
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "run -c 2560 -n 2 --prompt-ids 1,5,6"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(
        strstr(err, "context of 2560 tokens is longer than the 2048 the model was trained on"), err);
    /* bad input */
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run --temp"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run --top-p 2"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run --bogus 1"));
    TEST_ASSERT_NOT_NULL(strstr(err, "unknown option '--bogus'"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run --prompt-ids 1,x"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run --prompt-ids 1,99999"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "outside the model's vocabulary"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run -c 2 --prompt-ids 1,2,3"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run -p hello --prompt-ids 1"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "one way"), err);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "run -f /nonexistent/prompt.txt"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/nonexistent/prompt.txt"), err);
    /* a text prompt through the demo model's own vocabulary */
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "run -p 'the cat' -n 4 --temp 0 --print-ids"), err);
    TEST_ASSERT_TRUE_MESSAGE(strlen(out) > 4, out);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "run -m /nonexistent/model.gguf"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/nonexistent/model.gguf: cannot open"), err);
    TEST_ASSERT_EQUAL_INT_MESSAGE(1, count_in(err, "/nonexistent/model.gguf"), err);
    TEST_ASSERT_EQUAL_STRING("", out);
    /* an environment variable set to what it does not take: exit 1, named */
    static const char *const bad_env[] = {
        "GLESLLM_KV=fast",        "GLESLLM_UNROLL=yes",       "GLESLLM_MULTI_NT=1",
        "GLESLLM_SMALL_BATCH=8x", "GLESLLM_FUSE_NORM=no",     "GLESLLM_MULTI_XSH=off",
        "GLESLLM_MATMUL=128,8",   "GLESLLM_MATMUL=128,8,4,5", "GLESLLM_MATVEC=256,16,x",
        "GLESLLM_MULTI=256,16,2,3", "GLESLLM_F16_DOT=on",     "GLESLLM_F16_SUBN=yes",
        "GLESLLM_FETCH_AHEAD=3",  "GLESLLM_FETCH_AHEAD=16",   "GLESLLM_X_ONCE=yes",
        "GLESLLM_ATTN_GROUP=2",   "GLESLLM_PREFETCH_MIB=0",   "GLESLLM_PREFETCH_QKV_MIB=-1",
    };
    for (size_t i = 0; i < sizeof bad_env / sizeof bad_env[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "%.*s=", (int)strcspn(bad_env[i], "="), bad_env[i]);
        TEST_ASSERT_EQUAL_INT_MESSAGE(1, run(bad_env[i], "run -n 1"), bad_env[i]);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, name), err);
    }
    TEST_ASSERT_EQUAL_INT_MESSAGE(
        0,
        run("GLESLLM_FUSE_NORM=0 GLESLLM_MULTI_XSH=0 GLESLLM_MATMUL=128,8,4,0 GLESLLM_FETCH_AHEAD=2",
            "run -n 2"),
        err);
    /* f16 tiles with the weights' values doubled (f32 arithmetic without f16
     * types): a 40-token prompt goes through the matmul */
    TEST_ASSERT_EQUAL_INT_MESSAGE(
        0,
        run("GLESLLM_MATMUL=128,8,8,3",
            "run -n 2 --temp 0 --print-ids --prompt-ids "
            "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,"
            "31,32,33,34,35,36,37,38,39,40"),
        err);
    TEST_ASSERT_TRUE_MESSAGE(strlen(out) > 2, out);
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "run --help"));
    TEST_ASSERT_NOT_NULL(strstr(out, "--repeat-last-n"));
    /* Ctrl-C while generating: exit 130 with the stats (a context large enough that a fast
     * GPU is still generating when the signal comes; the signal once the first text is
     * out, or after 60 s, so that a loaded machine still loads the model first) */
    int rc = run_signalled("run -n -1 -c 32768 --ignore-eos", "[ -s \"$OUT\" ]", "INT");
    TEST_ASSERT_TRUE_MESSAGE(WIFEXITED(rc) && WEXITSTATUS(rc) == 130, err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "stopped: interrupted"), err);
    /* Ctrl-C in a long prompt (3,000 tokens in passes of 64): seen between
     * passes, not after the whole prompt (minutes on a slow GPU).
     * The signal comes a second into the prompt: a prompt that took longer
     * than 2 s was cut short (on a fast GPU it may be over by then) */
    rc = run_signalled("run -n 4 -c 4096 -b 64 --prompt-ids $(seq -s, 1000 1999),"
                       "$(seq -s, 1000 1999),$(seq -s, 1000 1999)",
                       "grep -q sampling \"$ERR\" && sleep 1", "INT");
    TEST_ASSERT_TRUE_MESSAGE(WIFEXITED(rc) && WEXITSTATUS(rc) == 130, err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "stopped: interrupted"), err);
    const char *pr = strstr(err, "glesllm: prompt: ");
    unsigned n_run = 0, n_from_cache = 0;
    double secs = 0;
    TEST_ASSERT_NOT_NULL_MESSAGE(pr, err);
    TEST_ASSERT_EQUAL_INT_MESSAGE(3, sscanf(pr, "glesllm: prompt: %u tokens (%u from the prompt "
                                                "cache) in %lf s", &n_run, &n_from_cache, &secs),
                                  err);
    TEST_ASSERT_TRUE_MESSAGE(n_run < 3000 || secs < 2.0, err);
    /* SIGTERM: exit 143 at once, not after the step in flight */
    rc = run_signalled("run -n -1 -c 32768 --ignore-eos", "[ -s \"$OUT\" ]", "TERM");
    TEST_ASSERT_TRUE_MESSAGE(WIFEXITED(rc) && WEXITSTATUS(rc) == 143, err);
    TEST_ASSERT_NULL_MESSAGE(strstr(err, "stopped:"), err);
}

static void test_run_shared_model_greedy(void)
{
    TEST_NEEDS_SHARED(dir);
    /* aidreams260K: llama.cpp's greedy continuation of its first reference prompt */
    char args[1024];
    snprintf(args, sizeof args,
             "run -m %s/models/aidreams260K-f32.gguf --temp 0 -n 8 --print-ids "
             "--prompt-ids 1,429,491,433,295,429,444,445,265,262,263,342,430", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("446 280 432 458 375 431 422 314\n", out);
    /* the same prompt as text: the tokenizer gives llama.cpp's prompt ids */
    snprintf(args, sizeof args, "run -m %s/models/aidreams260K-f32.gguf --temp 0 -n 8 --print-ids "
             "-p 'Once upon a time'", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("446 280 432 458 375 431 422 314\n", out);
    snprintf(args, sizeof args, "run -m %s/models/aidreams260K-f32.gguf --temp 0 -n 8", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_TRUE_MESSAGE(strlen(out) > 8, out); /* text */
}

/* --draft: the same greedy ids with the llama.cpp Q4_0 file as draft of the
 * F32 one (and for the mixture-of-experts files), and the stats line; a
 * draft with another vocabulary is refused.
 * --prompt-cache: a second run reuses the prompt and prints the same ids. */
static void test_run_draft_and_prompt_cache(void)
{
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run --draft-max 0"));
    /* the message says what it takes */
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "--draft-max (a whole number from 1 to 32)"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run --draft-max 4 --draft-min 5"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "--draft-min"), err);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "run --draft /nonexistent/draft.gguf"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/nonexistent/draft.gguf: cannot open"), err);
    TEST_ASSERT_EQUAL_INT_MESSAGE(1, count_in(err, "/nonexistent/draft.gguf"), err);
    char cache[256], args[1400], plain[4096];
    snprintf(cache, sizeof cache, "/tmp/glesllm-test-cli-%ld.kv", (long)getpid());
    unlink(cache);
    /* the demo: its own file as a cache, reused by a second run */
    snprintf(args, sizeof args, "run -n 6 --temp 0 --print-ids --prompt-ids 1,5,6,7 "
             "--prompt-cache %s", cache);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "wrote 4 tokens"), err);
    snprintf(plain, sizeof plain, "%s", out);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "4 of the prompt's 4 tokens reused"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "(3 from the prompt cache)"), err);
    TEST_ASSERT_EQUAL_STRING(plain, out);
    /* bytes of its K/V changed (other ids, silently, without the
     * checksum): said, the run goes on without it, and it is written anew */
    FILE *f = fopen(cache, "r+b");
    TEST_ASSERT_NOT_NULL(f);
    for (int i = 0; i < 20; i++) {
        TEST_ASSERT_EQUAL_INT(0, fseek(f, 100 + 37 * i, SEEK_SET));
        fputc(0x55 ^ i, f);
    }
    fclose(f);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "is damaged"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "written anew"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "wrote 4 tokens"), err);
    TEST_ASSERT_EQUAL_STRING(plain, out);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "4 of the prompt's 4 tokens reused"), err);
    TEST_ASSERT_EQUAL_STRING(plain, out);
    /* a folder it cannot be written in: refused before any generation */
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "run -n 4 --prompt-cache /nonexistent/dir/c.kv"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "cannot write a file in '/nonexistent/dir'"), err);
    TEST_ASSERT_EQUAL_STRING("", out);
    /* not a session file: a clear error, exit 1, the file left alone (it
     * may be anything) */
    f = fopen(cache, "wb");
    TEST_ASSERT_NOT_NULL(f);
    fputs("not a cache", f);
    fclose(f);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "not a glesllm session file"), err);
    unlink(cache);
    TEST_NEEDS_SHARED(dir);
    snprintf(args, sizeof args, "run -m %s/models/tiny-spm-f32.gguf --temp 0 -n 20 --print-ids "
             "-p 'The quick brown fox'", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    snprintf(plain, sizeof plain, "%s", out);
    snprintf(args, sizeof args, "run -m %s/models/tiny-spm-f32.gguf --temp 0 -n 20 --print-ids "
             "-p 'The quick brown fox' --draft %s/models/tiny-spm-q4_0.gguf --draft-max 5", dir,
             dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING(plain, out);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "speculative: "), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "drafted "), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "effective "), err);
    snprintf(args, sizeof args, "run -m %s/models/tiny-spm-f32.gguf -n 4 --draft "
             "%s/models/tiny-bpe-f32.gguf", dir, dir);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "must share the model's vocabulary"), err);
    TEST_ASSERT_EQUAL_STRING("", out);
    /* mixture-of-experts targets: the same ids with a draft (Mixtral's and
     * Qwen2-MoE's each the other's: one vocabulary; OLMoE its own) */
    const char *moe[3][2] = { { "arch-mixtral", "arch-qwen2moe" },
                              { "arch-qwen2moe", "arch-mixtral" },
                              { "arch-olmoe", "arch-olmoe" } };
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "run -m %s/models/%s.gguf --temp 0 -n 24 --print-ids "
                 "-p 'Once upon a time'", dir, moe[i][0]);
        TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
        snprintf(plain, sizeof plain, "%s", out);
        snprintf(args, sizeof args, "run -m %s/models/%s.gguf --temp 0 -n 24 --print-ids "
                 "-p 'Once upon a time' --draft %s/models/%s.gguf --draft-max 4", dir,
                 moe[i][0], dir, moe[i][1]);
        TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
        TEST_ASSERT_EQUAL_STRING_MESSAGE(plain, out, moe[i][0]);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "drafted "), err);
    }
}

static void test_bench_command(void)
{
    /* the demo model: a markdown table with one row per test */
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "bench -p 16,24 -n 4 -r 2"), err);
    TEST_ASSERT_NOT_NULL(strstr(out, "| model "));
    TEST_ASSERT_NOT_NULL(strstr(out, "t/s"));
    TEST_ASSERT_NOT_NULL(strstr(out, "pp16"));
    TEST_ASSERT_NOT_NULL(strstr(out, "pp24"));
    TEST_ASSERT_NOT_NULL(strstr(out, "tg4"));
    TEST_ASSERT_NOT_NULL(strstr(out, "Q8_0"));
    TEST_ASSERT_NOT_NULL(strstr(out, " ± "));
    TEST_ASSERT_NULL(strstr(err, "error"));
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "bench -p 8 -n 2 -r 3 -o json"), err);
    TEST_ASSERT_EQUAL_INT('[', out[0]);
    TEST_ASSERT_NOT_NULL(strstr(out, "\"test\": \"pp8\""));
    TEST_ASSERT_NOT_NULL(strstr(out, "\"test\": \"tg2\""));
    TEST_ASSERT_NOT_NULL(strstr(out, "\"avg_ts\": "));
    TEST_ASSERT_NOT_NULL(strstr(out, "\"stddev_ts\": "));
    TEST_ASSERT_NOT_NULL(strstr(out, "]\n"));
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "bench -p 8 -n 0 -r 1 -o csv"), err);
    TEST_ASSERT_EQUAL_INT(0, strncmp(out, "model_filename,", 15));
    TEST_ASSERT_NOT_NULL(strstr(out, ",\"pp8\","));
    TEST_ASSERT_NULL(strstr(out, "tg"));
    /* -d: each test again after a prompt of that many tokens */
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "bench -p 8 -n 2 -d 0,16 -r 1 -o json"), err);
    TEST_ASSERT_NOT_NULL(strstr(out, "\"test\": \"pp8\""));
    TEST_ASSERT_NOT_NULL(strstr(out, "\"test\": \"tg2\""));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "\"n_depth\": 16, \"n_parallel\": 1, \"test\": \"pp8 @ d16\""), out);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "\"n_depth\": 16, \"n_parallel\": 1, \"test\": \"tg2 @ d16\""), out);
    /* -np: generation in several sequences at once */
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, "bench -p 0 -n 4 -np 1,3 -r 1 -o json"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "\"n_parallel\": 3, \"test\": \"tg4 @ np3\""), out);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "\"n_parallel\": 1, \"test\": \"tg4\""), out);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "bench -np 0"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "bench -d 1,x"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "-d"), err);
    /* bad input */
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "bench -o xml"));
    TEST_ASSERT_NOT_NULL(strstr(err, "'xml'"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "(md, json or csv)"), err); /* what it takes */
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "bench -p 0 -n 0"));
    TEST_ASSERT_NOT_NULL(strstr(err, "nothing to measure"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "bench -p 1,x"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "bench -r 0"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "(a whole number from 1 to 1000)"), err);
    /* Ctrl-C in a long prompt (16,000 tokens in passes of 64: its warm-up
     * and its run take minutes on llvmpipe): seen between passes, exit 130
     * well within a minute, without a row; a GPU fast enough to be done by
     * the signal prints its row and exits 0 */
    time_t t0 = time(NULL);
    int rc = run_signalled("bench -p 16000 -n 0 -r 1 -b 64",
                           "grep -q \"loaded in\" \"$ERR\" && sleep 1", "INT");
    TEST_ASSERT_TRUE_MESSAGE(WIFEXITED(rc), err);
    if (WEXITSTATUS(rc) == 0)
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "pp16000"), out);
    else {
        TEST_ASSERT_EQUAL_INT_MESSAGE(130, WEXITSTATUS(rc), err);
        TEST_ASSERT_TRUE_MESSAGE(time(NULL) - t0 < 60, err);
        TEST_ASSERT_NULL_MESSAGE(strstr(out, "pp16000"), out);
        TEST_ASSERT_NULL_MESSAGE(strstr(err, "error"), err);
    }
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "bench -m /nonexistent/model.gguf -p 8 -n 0"));
    TEST_ASSERT_NOT_NULL(strstr(err, "/nonexistent/model.gguf"));
    TEST_ASSERT_EQUAL_STRING("", out); /* checked before the table starts */
}

/* Six times the same two sentences of English (about 200 tokens). */
static void write_story(const char *path)
{
    FILE *f = fopen(path, "w");
    TEST_ASSERT_NOT_NULL(f);
    for (int i = 0; i < 6; i++)
        fputs("Once upon a time there was a little girl named Lily. She liked to play in the "
              "garden with her dog, and one day they found a big red ball under the tree. ", f);
    fclose(f);
}

static void test_perplexity_command(void)
{
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "perplexity"));
    TEST_ASSERT_NOT_NULL(strstr(err, "-m MODEL.gguf"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "perplexity -m x.gguf -c 1"));
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "perplexity -m /nonexistent.gguf -f /nonexistent.txt"));
    TEST_ASSERT_NOT_NULL(strstr(err, "/nonexistent.txt"));
    TEST_NEEDS_SHARED(dir);
    char text_path[300], args[1024];
    snprintf(text_path, sizeof text_path, "%s.txt", out_path);
    write_story(text_path);
    snprintf(args, sizeof args, "perplexity -m %s/models/aidreams260K-f32.gguf -f %s -c 64 -b 32",
             dir, text_path);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, strncmp(out, "Final estimate: PPL = ", 22), out);
    double ppl = atof(out + 22);
    TEST_ASSERT_TRUE_MESSAGE(ppl > 1.0 && ppl < 512.0, out); /* within the 512-token vocabulary */
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "[1]"), err); /* progress on stderr */
    TEST_ASSERT_NULL(strchr(strchr(out, '\n') + 1, 'P')); /* one line on stdout */
    /* a text too short for two windows */
    snprintf(args, sizeof args, "perplexity -m %s/models/aidreams260K-f32.gguf -f %s -c 4096",
             dir, text_path);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "needs at"), err);
    TEST_ASSERT_EQUAL_STRING("", out);
    remove(text_path);
}

/* --kl-divergence-base saves a run's distributions; --kl-divergence
 * compares another with them: nothing between a run and itself, something
 * small for the same model in Q8_0. */
static void test_perplexity_kl_divergence(void)
{
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "perplexity -m x.gguf --kl-divergence"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "--kl-divergence-base"), err);
    TEST_NEEDS_SHARED(dir);
    char text_path[300], base[300], args[1024];
    snprintf(text_path, sizeof text_path, "%s.txt", out_path);
    snprintf(base, sizeof base, "%s.kld", out_path);
    write_story(text_path);
    const char *f32 = "tiny-spm-f32.gguf", *q8 = "tiny-spm-q8_0.gguf";
    snprintf(args, sizeof args, "perplexity -m %s/models/%s -f %s -c 64 --kl-divergence-base %s",
             dir, f32, text_path, base);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "saved to"), err);
    TEST_ASSERT_EQUAL_INT(0, access(base, R_OK));
    double kld[2], same[2];
    const char *models[2] = { f32, q8 };
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "perplexity -m %s/models/%s -f %s -c 64 --kl-divergence-base %s --kl-divergence",
                 dir, models[i], text_path, base);
        TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
        const char *k = strstr(out, "Mean    KLD:"), *t = strstr(out, "Same top p :");
        TEST_ASSERT_NOT_NULL_MESSAGE(k, out);
        TEST_ASSERT_NOT_NULL_MESSAGE(t, out);
        kld[i] = atof(k + strlen("Mean    KLD:"));
        same[i] = atof(t + strlen("Same top p :"));
    }
    /* itself: the base's 2-byte rounding of log-probabilities moves nothing */
    TEST_ASSERT_TRUE_MESSAGE(kld[0] < 1e-6, out);
    TEST_ASSERT_TRUE_MESSAGE(same[0] == 100.0, out);
    /* Q8_0: close, not the same (3e-4 on llvmpipe for this random-weight model) */
    TEST_ASSERT_TRUE_MESSAGE(kld[1] > 1e-5 && kld[1] < 0.05, out);
    TEST_ASSERT_TRUE_MESSAGE(same[1] > 50.0, out);
    /* a base of another -c, a file that is no base, a base that cannot be written */
    snprintf(args, sizeof args,
             "perplexity -m %s/models/%s -f %s -c 32 --kl-divergence-base %s --kl-divergence", dir,
             f32, text_path, base);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "saved from another run"), err);
    snprintf(args, sizeof args,
             "perplexity -m %s/models/%s -f %s -c 64 --kl-divergence-base %s --kl-divergence", dir,
             f32, text_path, text_path);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "no KL-divergence base"), err);
    snprintf(args, sizeof args,
             "perplexity -m %s/models/%s -f %s -c 64 --kl-divergence-base /nonexistent/x.kld", dir,
             f32, text_path);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/nonexistent/x.kld"), err);
    remove(base);
    remove(text_path);
}

static void test_tokenize_command(void)
{
    /* bad input first: no model, both -p and -f, unknown flags, missing files */
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "tokenize -p hi"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "-m"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "tokenize -m x.gguf -p hi -f y.txt"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "tokenize -m x.gguf --bogus"));
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "tokenize -m"));
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "tokenize -m /nonexistent/v.gguf -p hi"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "/nonexistent/v.gguf"), err);
    TEST_ASSERT_EQUAL_STRING("", out);
    TEST_ASSERT_EQUAL_INT(0, run(NULL, "tokenize --help"));
    TEST_ASSERT_NOT_NULL(strstr(out, "--special"));
    /* a GGUF file without a vocabulary */
    char path[256], args[1400];
    snprintf(path, sizeof path, "/tmp/glesllm-test-cli-%ld-novocab.gguf", (long)getpid());
    gguf_writer *w;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
    gguf_writer_set_str(w, "general.architecture", "llama");
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_write(w, path));
    gguf_writer_destroy(w);
    snprintf(args, sizeof args, "tokenize -m %s -p hi", path);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "tokenizer.ggml.model"), err);
    unlink(path);

    TEST_NEEDS_SHARED(dir);
    /* vocabulary-only files: ids, pieces, BOS as the vocabulary says */
    snprintf(args, sizeof args, "tokenize -m %s/tokenizer/ggml-vocab-llama-spm.gguf -p 'Hello world' --ids", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("1 15043 3186\n", out);
    snprintf(args, sizeof args, "tokenize -m %s/tokenizer/ggml-vocab-llama-spm.gguf -p 'Hello world' --ids --no-bos", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("15043 3186\n", out);
    snprintf(args, sizeof args, "tokenize -m %s/tokenizer/ggml-vocab-llama-spm.gguf -p 'Hello'", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("     1 -> '<s>'\n 15043 -> ' Hello'\n", out);
    /* special-token text is parsed only when asked */
    snprintf(args, sizeof args, "tokenize -m %s/tokenizer/ggml-vocab-llama-spm.gguf -p '<s>Hello' --ids --no-bos --special", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("1 15043\n", out);
    snprintf(args, sizeof args, "tokenize -m %s/tokenizer/ggml-vocab-llama-spm.gguf -p '<s>Hello' --ids --no-bos", dir);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_TRUE_MESSAGE(strcmp(out, "1 15043\n") != 0, out);
    /* GPT-2 adds no BOS; the text from a file, and from standard input */
    snprintf(path, sizeof path, "/tmp/glesllm-test-cli-%ld-prompt.txt", (long)getpid());
    FILE *f = fopen(path, "wb");
    TEST_ASSERT_NOT_NULL(f);
    fputs("Hello world", f);
    fclose(f);
    snprintf(args, sizeof args, "tokenize -m %s/tokenizer/ggml-vocab-gpt-2.gguf -f %s --ids", dir, path);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_EQUAL_STRING("15496 995\n", out);
    const char *cli = getenv("GLESLLM_CLI");
    snprintf(args, sizeof args, "\"%s\" tokenize -m %s/tokenizer/ggml-vocab-gpt-2.gguf --ids <'%s' >'%s' 2>'%s'",
             cli ? cli : GLESLLM_CLI_PATH, dir, path, out_path, err_path);
    int rc = system(args);
    read_text_file(out_path, out, sizeof out);
    TEST_ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
    TEST_ASSERT_EQUAL_STRING("15496 995\n", out);
    unlink(path);
}

/* Messages that name the actual problem: an unknown option given last (was
 * "missing value after"), a negative temperature, a folder given for a
 * file, a path said once. */
static void test_messages_name_the_problem(void)
{
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run -n 2 --bogus"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "unknown option '--bogus'"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "bench --bogus"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "unknown option '--bogus'"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "perplexity -m x.gguf --bogus"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "unknown option '--bogus'"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run -n 2 --temp"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "missing value after '--temp'"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run -n 2 --temp -1"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "--temp"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "run -n 2 --temp 0 --prompt-cache /tmp"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "is a folder"), err);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, "tokenize -m /nonexistent/vocab.gguf -p hi"));
    TEST_ASSERT_EQUAL_INT_MESSAGE(1, count_in(err, "/nonexistent/vocab.gguf"), err);
    TEST_ASSERT_EQUAL_INT(2, run(NULL, "quantize /nonexistent/a.gguf /tmp Q4_0"));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "is a folder"), err);
}

/* Strings from a file reach neither a terminal nor a JSON reader raw: an
 * escape sequence in general.name (which could retitle or clear a
 * terminal; C1's CSI too, which JSON would allow raw) and a byte of no UTF-8
 * character come out escaped. */
static void test_info_escapes_what_the_file_says(void)
{
    char path[256], args[400];
    snprintf(path, sizeof path, "/tmp/glesllm-test-cli-%ld-escape.gguf", (long)getpid());
    gguf_writer *w;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_create(&w));
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "general.name", "x\033]0;pwned\007\033[2J\xff\xc2\x9b caf\xc3\xa9");
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_write(w, path));
    gguf_writer_destroy(w);
    /* (a file of metadata alone: described, and it will not run) */
    snprintf(args, sizeof args, "info %s", path);
    TEST_ASSERT_EQUAL_INT_MESSAGE(1, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "this file will not run"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "x\\x1b]0;pwned\\x07\\x1b[2J\\xff\\xc2\\x9b caf\xc3\xa9"),
                                 out);
    TEST_ASSERT_NULL(strchr(out, '\033'));
    snprintf(args, sizeof args, "info %s --json", path);
    TEST_ASSERT_EQUAL_INT_MESSAGE(1, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(
        strstr(out, "\"name\": \"x\\u001b]0;pwned\\u0007\\u001b[2J\\ufffd\\u009b caf\xc3\xa9\""), out);
    for (const char *p = out; *p; p++) /* no byte of no character */
        TEST_ASSERT_TRUE_MESSAGE((unsigned char)*p != 0xff && (unsigned char)*p >= 0x0a, out);
    unlink(path);
}

/* A Gemma 2 file with a window of 5 on every other layer: info names the
 * window and the ring its layers' K/V take at the context asked for, in
 * text and in JSON. */
static void test_info_names_the_window(void)
{
    demo_spec s = demo_spec_default();
    s.arch = "gemma2";
    s.n_layer = 4;
    s.window = 5;
    char path[300], args[400];
    snprintf(path, sizeof path, "%s.window.gguf", out_path);
    demo_model *d;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, demo_model_create(&s, &d));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_writer_write(demo_model_writer(d), path));
    demo_model_destroy(d);
    snprintf(args, sizeof args, "info %s -c 8192", path);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "sliding window:     5 positions on 2 of 4 layers"), out);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "(at context 8192 their K/V a ring of "), out);
    snprintf(args, sizeof args, "info %s -c 8192 --json", path);
    TEST_ASSERT_EQUAL_INT_MESSAGE(0, run(NULL, args), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(
        strstr(out, "\"sliding_window\": 5, \"window_layers\": 2, \"attention_layers\": 4, "
                    "\"window_kv_positions\": "), out);
    unsigned ring = 0;
    TEST_ASSERT_EQUAL_INT(1, sscanf(strstr(out, "\"window_kv_positions\": "),
                                    "\"window_kv_positions\": %u", &ring));
    TEST_ASSERT_TRUE_MESSAGE(ring > 5 && ring < 8192, out);
    unlink(path);
}

/* A model whose RoPE base is NaN computes NaN logits: refused when opened,
 * naming the key, by run and perplexity alike (perplexity printed "PPL =
 * -nan" with exit 0). */
static void test_non_finite_hyperparameters_are_refused(void)
{
    demo_spec s = demo_spec_default();
    uint8_t *data;
    size_t size;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, demo_model_to_memory(&s, &data, &size));
    const char *key = "llama.rope.freq_base";
    uint8_t *at = NULL;
    for (size_t i = 0; !at && i + strlen(key) + 8 <= size; i++)
        if (memcmp(data + i, key, strlen(key)) == 0)
            at = data + i;
    TEST_ASSERT_NOT_NULL(at);
    float nan_value = NAN; /* the value follows the key and its 4-byte type */
    memcpy(at + strlen(key) + 4, &nan_value, 4);
    char path[300], text[300], args[1024];
    snprintf(path, sizeof path, "%s.nan.gguf", out_path);
    snprintf(text, sizeof text, "%s.nan.txt", out_path);
    FILE *f = fopen(path, "wb");
    TEST_ASSERT_EQUAL_size_t(size, fwrite(data, 1, size, f));
    fclose(f);
    free(data);
    f = fopen(text, "w");
    for (int i = 0; i < 40; i++)
        fputs("once upon a time there was a word and another word ", f);
    fclose(f);
    snprintf(args, sizeof args, "run -m %s -n 4 --temp 0", path);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "rope.freq_base"), err);
    snprintf(args, sizeof args, "perplexity -m %s -f %s -c 16", path, text);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "rope.freq_base"), err);
    TEST_ASSERT_EQUAL_STRING("", out);
    /* info describes it, and gives run's verdict */
    snprintf(args, sizeof args, "info %s", path);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "this file will not run"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "rope.freq_base"), err);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(out, "architecture:"), out);
    /* quantize refuses it before any work, and writes nothing */
    char q[320];
    snprintf(q, sizeof q, "%s.q8.gguf", out_path);
    snprintf(args, sizeof args, "quantize %s %s Q8_0", path, q);
    TEST_ASSERT_EQUAL_INT(1, run(NULL, args));
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(err, "rope.freq_base"), err);
    TEST_ASSERT_NOT_EQUAL(0, access(q, F_OK));
    remove(path);
    remove(text);
}

/* Mutated and truncated copies through the real command: every one exits 0
 * or 1 with a message (the file could not be read, or will not run), none
 * by a signal. */
static void test_info_survives_mutated_files(void)
{
    for (int k = 0; k < 4; k++) {
        uint8_t *data;
        size_t n;
        TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gguf_sample(k, &data, &n));
        test_rng rng = { 500 + (uint64_t)k };
        for (int it = 0; it < 50; it++) {
            char path[256], args[300];
            snprintf(path, sizeof path, "/tmp/glesllm-test-cli-%ld-mut.gguf", (long)getpid());
            uint8_t *copy = malloc(n);
            memcpy(copy, data, n);
            size_t len = (it % 3 == 0) ? (size_t)(rng_next(&rng) % n) : n;
            for (int j = 0; j < 1 + it % 6; j++)
                copy[rng_next(&rng) % (n < 2048 ? n : 2048)] = (uint8_t)rng_next(&rng);
            FILE *fp = fopen(path, "wb");
            TEST_ASSERT_NOT_NULL(fp);
            fwrite(copy, 1, len, fp);
            fclose(fp);
            free(copy);
            snprintf(args, sizeof args, "info '%s' --json --tensors", path);
            int rc = run(NULL, args);
            char msg[700];
            snprintf(msg, sizeof msg, "sample %d mutation %d: exit %d, stderr: %.500s", k, it, rc, err);
            TEST_ASSERT_TRUE_MESSAGE(rc == 0 || rc == 1, msg);
            if (rc == 1)
                TEST_ASSERT_TRUE_MESSAGE(strstr(err, "glesllm: cannot read the model:") ||
                                             strstr(err, "glesllm: this file will not run:"),
                                         msg);
            unlink(path);
        }
        free(data);
    }
}

int main(void)
{
    snprintf(out_path, sizeof out_path, "/tmp/glesllm-test-cli-%ld.out", (long)getpid());
    snprintf(err_path, sizeof err_path, "/tmp/glesllm-test-cli-%ld.err", (long)getpid());
    UNITY_BEGIN();
    RUN_TEST(test_version_and_help);
    RUN_TEST(test_write_errors_are_failures);
    RUN_TEST(test_info_gpu_reports_the_gpu);
    RUN_TEST(test_info_gpu_with_each_platform);
    RUN_TEST(test_limits_min_and_no_cache_are_reported);
    RUN_TEST(test_driver_below_gles31_is_rejected);
    RUN_TEST(test_info_model_json);
    RUN_TEST(test_info_model_text_and_tensors);
    RUN_TEST(test_info_model_bad_input);
    RUN_TEST(test_info_survives_mutated_files);
    RUN_TEST(test_non_finite_hyperparameters_are_refused);
    RUN_TEST(test_messages_name_the_problem);
    RUN_TEST(test_info_escapes_what_the_file_says);
    RUN_TEST(test_info_names_the_window);
    RUN_TEST(test_quantize_command);
    RUN_TEST(test_run_demo_and_flags);
    RUN_TEST(test_run_shared_model_greedy);
    RUN_TEST(test_run_draft_and_prompt_cache);
    RUN_TEST(test_tokenize_command);
    RUN_TEST(test_bench_command);
    RUN_TEST(test_perplexity_command);
    RUN_TEST(test_perplexity_kl_divergence);
    int r = test_exit_code(UNITY_END());
    unlink(out_path);
    unlink(err_path);
    return r;
}
