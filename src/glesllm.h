/* glesllm: LLM inference through OpenGL ES 3.1 compute shaders on headless EGL.
 *
 * The whole public interface of libglesllm. A program opens a backend (the
 * GPU: an EGL display and an OpenGL ES context), opens a model (a GGUF file)
 * on it, makes a context (a KV cache of the model) and generates:
 *
 *     glesllm_backend *b;  glesllm_model *m;  glesllm_context *c;
 *     glesllm_backend_open(NULL, &b);
 *     glesllm_model_open(b, "model.gguf", NULL, &m);
 *     glesllm_context_create(m, NULL, &c);
 *     glesllm_generate(c, "Once upon a time", NULL, on_piece, NULL, NULL);
 *
 * (examples/simple.c is that program whole.)
 *
 * Errors: every call that can fail returns a glesllm_status; GLESLLM_OK is 0.
 * After a failure glesllm_last_error() says, for the calling thread, what
 * went wrong and what to do about it. The library never exits and never
 * prints: its messages go to the log callback of glesllm_backend_params.
 *
 * Threads: a backend's OpenGL ES context is made current by the library at
 * the start of each call that needs the GPU (the caller's own current
 * context, if any, is put back at its end), so a backend and all that was
 * made from it may be used from any thread, one call at a time. A call made
 * while another thread is inside a call on the same backend returns
 * GLESLLM_ERR_BUSY at once; to use two contexts from two threads at the
 * same time, give each its own backend (and model). glesllm_cancel() is the
 * exception: it may be called from any thread, or a signal handler, at any
 * time. A callback (a streamed piece, progress) runs inside its call: it may
 * cancel, but another call on the backend from it returns GLESLLM_ERR_BUSY,
 * and it must not free or close a handle.
 *
 * Handles: a handle that an open or create call returns stays valid until
 * its close or free call. A model closed while contexts of it remain keeps what they
 * need until the last is freed, but calls on them then fail. Closing a
 * backend before its models and contexts is refused (GLESLLM_ERR_BUSY).
 */
#ifndef GLESLLM_H
#define GLESLLM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GLESLLM_API
#elif defined(__GNUC__)
#define GLESLLM_API __attribute__((visibility("default")))
#else
#define GLESLLM_API
#endif

#define GLESLLM_VERSION_MAJOR 0
#define GLESLLM_VERSION_MINOR 2
#define GLESLLM_VERSION_PATCH 0

/* ---- errors --------------------------------------------------------------- */

/* Stable values: they may be stored or compared by callers. */
typedef enum glesllm_status {
    GLESLLM_OK = 0,
    GLESLLM_ERR_INVALID_ARGUMENT = 1, /* a caller passed something unusable */
    GLESLLM_ERR_NO_MEMORY = 2,        /* host allocation failed */
    GLESLLM_ERR_IO = 3,               /* a file could not be opened, read or written */
    GLESLLM_ERR_EGL = 4,              /* no usable EGL display or context */
    GLESLLM_ERR_GL = 5,               /* an OpenGL ES call reported an error */
    GLESLLM_ERR_UNSUPPORTED = 6,      /* the driver lacks a required version, limit or extension */
    GLESLLM_ERR_SHADER = 7,           /* a kernel failed to compile or link */
    GLESLLM_ERR_GPU_OUT_OF_MEMORY = 8,/* the driver could not allocate GPU memory */
    GLESLLM_ERR_FORMAT = 9,           /* malformed input file (GGUF, cache, ...) */
    GLESLLM_ERR_TIMEOUT = 10,         /* the GPU did not finish in time */
    GLESLLM_ERR_BUSY = 11,            /* the backend is in a call on another thread, or
                                         still has models or contexts open */
    GLESLLM_ERR_SMALL_BUFFER = 12,    /* the caller's buffer is too small: the call said
                                         how much it needs */
    GLESLLM_ERR_CANCELLED = 13,       /* stopped by the caller's request */
    GLESLLM_ERR_STATE_MISMATCH = 14,  /* a saved state that is one, but damaged, of another
                                         version or written for another model */
    GLESLLM_ERR_KV_FULL = 15          /* the KV cache's pages are all taken by sequences of
                                         the same cache: free or truncate one, then retry */
} glesllm_status;

/* Short fixed description of a status code ("GPU out of memory"). */
GLESLLM_API const char *glesllm_strerror(glesllm_status status);

/* Detailed message of the last failure on this thread ("" if none). It
 * stays valid until the next failing call on this thread. */
GLESLLM_API const char *glesllm_last_error(void);

/* "MAJOR.MINOR.PATCH" of the library (which may be newer than this header). */
GLESLLM_API const char *glesllm_version(void);

/* ---- backend: the GPU ----------------------------------------------------- */

typedef enum glesllm_platform {
    GLESLLM_PLATFORM_AUTO = 0,    /* GBM, then EGL device, then surfaceless */
    GLESLLM_PLATFORM_GBM,         /* a DRM render node through GBM */
    GLESLLM_PLATFORM_DEVICE,      /* EGL_EXT_platform_device */
    GLESLLM_PLATFORM_SURFACELESS  /* EGL_MESA_platform_surfaceless */
} glesllm_platform;

typedef enum glesllm_log_level {
    GLESLLM_LOG_ERROR = 0,
    GLESLLM_LOG_WARN = 1,
    GLESLLM_LOG_INFO = 2
} glesllm_log_level;

/* A message of the library (one line, no newline). */
typedef void (*glesllm_log_fn)(void *ud, glesllm_log_level level, const char *msg);

typedef struct glesllm_backend_params {
    glesllm_platform platform;
    const char *device;     /* a DRM node (/dev/dri/renderD128), or NULL for the first */
    int limits_min;         /* nonzero: size every kernel by the GLES 3.1 minimum limits */
    int no_cache;           /* nonzero: never read or write the compiled-kernel cache */
    const char *cache_dir;  /* the kernel cache folder; NULL: $XDG_CACHE_HOME/glesllm,
                               else ~/.cache/glesllm */
    /* nonzero: read the engine's tuning from GLESLLM_* environment variables
     * (docs/tuning.md); zero: the engine's own choices */
    int tuning_from_env;
    glesllm_log_fn log;     /* NULL: messages are dropped */
    void *log_ud;
} glesllm_backend_params;

typedef struct glesllm_backend glesllm_backend;

/* The defaults: every field zero or NULL. */
GLESLLM_API glesllm_backend_params glesllm_backend_default_params(void);

/* The defaults changed by the environment as the glesllm command reads it:
 * GLESLLM_PLATFORM (gbm, device, surfaceless, auto), GLESLLM_DEVICE,
 * GLESLLM_LIMITS=min, GLESLLM_NO_CACHE=1, and tuning_from_env set. A value
 * it does not know is an error naming it. */
GLESLLM_API glesllm_status glesllm_backend_params_from_env(glesllm_backend_params *out);

/* Opens the GPU (params NULL: the defaults). Fails with GLESLLM_ERR_EGL or
 * GLESLLM_ERR_UNSUPPORTED, saying why, where no display offers OpenGL ES
 * 3.1 with compute shaders. Where the disk under Mesa's own shader cache has
 * under about 5 MiB free (Mesa's driver ends the process with SIGBUS when
 * that disk fills), it first sets MESA_SHADER_CACHE_DISABLE in the
 * process's environment and logs a warning; a MESA_SHADER_CACHE_DISABLE the
 * process set itself is left as it is. */
GLESLLM_API glesllm_status glesllm_backend_open(const glesllm_backend_params *params,
                                                glesllm_backend **out);
/* Refused (GLESLLM_ERR_BUSY) while models of it are open; NULL is fine. */
GLESLLM_API glesllm_status glesllm_backend_close(glesllm_backend *b);

/* GL_RENDERER ("NVIDIA H100 80GB HBM3/PCIe/SSE2", "llvmpipe (LLVM 15.0.6, 256 bits)"). */
GLESLLM_API const char *glesllm_backend_renderer(const glesllm_backend *b);

/* What the engine runs on, as `glesllm info --gpu` prints it: platform, GL
 * strings, limits, optional extensions, kernel cache and the engine's choices,
 * one "name: value" line each. *text is malloc'd; free() it. */
GLESLLM_API glesllm_status glesllm_backend_describe(glesllm_backend *b, char **text);

/* ---- model: a GGUF file ----------------------------------------------------- */

enum {
    GLESLLM_DESCRIBE_JSON = 1,   /* one JSON object instead of "name: value" lines */
    GLESLLM_DESCRIBE_TENSORS = 2 /* every tensor too: name, type, shape, offset */
};
/* What a GGUF file is, from its header alone (no tensor data, no GPU; any
 * architecture), as `glesllm info MODEL` prints it: architecture, shapes,
 * tokenizer, tensor types and the GPU memory it needs at a context of
 * n_ctx (0: its training context; < 0: that, at most 4096). *text is
 * malloc'd; free() it. */
GLESLLM_API glesllm_status glesllm_file_describe(const char *path, int32_t n_ctx, unsigned flags,
                                                 char **text);

typedef struct glesllm_model glesllm_model;

/* Progress of the upload: bytes done of the total; called on the calling thread. */
typedef void (*glesllm_progress_fn)(void *ud, uint64_t done, uint64_t total);

typedef struct glesllm_model_params {
    glesllm_progress_fn progress; /* the weights' upload (first context); may be NULL */
    void *progress_ud;
    /* nonzero: the vocabulary alone (text functions and metadata) of a file
     * of any architecture; no context can be made of it */
    int vocab_only;
    /* the model's messages (a vocabulary's warnings); NULL: the backend's log */
    glesllm_log_fn log;
    void *log_ud;
} glesllm_model_params;

/* Opens and checks a GGUF model: its architecture, tensors and vocabulary.
 * b may be NULL: the model can then be queried and tokenize, but no
 * context made of it. The weights go to the GPU with the first context.
 * A file the engine cannot run is an error naming the reason. */
GLESLLM_API glesllm_status glesllm_model_open(glesllm_backend *b, const char *path,
                                              const glesllm_model_params *params,
                                              glesllm_model **out);
/* The built-in demo model (a small llama of random weights: its text means
 * nothing) for a first run and for tests without a file. */
GLESLLM_API glesllm_status glesllm_model_open_demo(glesllm_backend *b,
                                                   const glesllm_model_params *params,
                                                   glesllm_model **out);
/* NULL is fine. Contexts still open fail from now on (see Handles above). */
GLESLLM_API void glesllm_model_close(glesllm_model *m);

/* Queries; 0 or NULL for a NULL model. */
/* "llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "olmoe", "phi3" or "smollm3" */
GLESLLM_API const char *glesllm_model_arch(const glesllm_model *m);
GLESLLM_API uint32_t glesllm_model_n_vocab(const glesllm_model *m);
GLESLLM_API uint32_t glesllm_model_n_ctx_train(const glesllm_model *m);
GLESLLM_API uint32_t glesllm_model_n_layer(const glesllm_model *m);
GLESLLM_API uint32_t glesllm_model_n_embd(const glesllm_model *m);
GLESLLM_API uint64_t glesllm_model_n_params(const glesllm_model *m);
GLESLLM_API uint64_t glesllm_model_size(const glesllm_model *m); /* tensor bytes in the file */
/* Special tokens; -1 where the vocabulary has none. */
GLESLLM_API int32_t glesllm_token_bos(const glesllm_model *m);
GLESLLM_API int32_t glesllm_token_eos(const glesllm_model *m);
GLESLLM_API int32_t glesllm_token_eot(const glesllm_model *m);
/* Whether generation ends at token (EOS, EOT, end-of-turn tokens). */
GLESLLM_API int glesllm_token_is_eog(const glesllm_model *m, int32_t token);

/* The value of metadata key as text (numbers in decimal, arrays as
 * "[n items]") into buf (NUL-terminated, cut to size); returns the length
 * of the whole text, or -1 when the file has no such key. */
GLESLLM_API int32_t glesllm_model_meta(const glesllm_model *m, const char *key, char *buf,
                                       size_t size);
/* The formats of its matrices (tensors of two or more dimensions), most
 * elements first, joined by '+' ("Q4_K+Q6_K"), into buf (NUL-terminated,
 * cut to size); returns the length of the whole text. */
GLESLLM_API size_t glesllm_model_formats(const glesllm_model *m, char *buf, size_t size);

/* tokenizer.chat_template, or NULL when the file has none. */
GLESLLM_API const char *glesllm_model_chat_template(const glesllm_model *m);

/* ---- text ------------------------------------------------------------------- */

enum {
    GLESLLM_TOKENIZE_ADD_SPECIAL = 1,  /* BOS (and EOS) as the vocabulary asks */
    GLESLLM_TOKENIZE_PARSE_SPECIAL = 2 /* control-token text (<s>, <|im_end|>) becomes that
                                          token; else it is plain text */
};

/* The ids of text[0..len) into ids (room for cap), their count into *n.
 * When more than cap: GLESLLM_ERR_SMALL_BUFFER, *n the count needed. The
 * same ids as `glesllm tokenize` and llama.cpp give. */
GLESLLM_API glesllm_status glesllm_tokenize(const glesllm_model *m, const char *text, size_t len,
                                            unsigned flags, int32_t *ids, size_t cap, size_t *n);

/* The bytes of one token (a piece of UTF-8, maybe part of a character)
 * into buf; returns how many it has, which may exceed size (then buf holds
 * the first size). Control tokens give nothing unless special is nonzero.
 * 0 for an id outside the vocabulary. */
GLESLLM_API size_t glesllm_token_piece(const glesllm_model *m, int32_t token, int special,
                                       char *buf, size_t size);

enum {
    GLESLLM_DETOKENIZE_REMOVE_SPECIAL = 1, /* drop a leading BOS and trailing EOS */
    GLESLLM_DETOKENIZE_SPECIAL = 2         /* control tokens give their text */
};
/* The text of ids[0..n) into buf (NUL-terminated), its length into *len.
 * When it does not fit: GLESLLM_ERR_SMALL_BUFFER, *len the length needed. */
GLESLLM_API glesllm_status glesllm_detokenize(const glesllm_model *m, const int32_t *ids,
                                              size_t n, unsigned flags, char *buf, size_t size,
                                              size_t *len);

/* ---- chat templates ------------------------------------------------------------ */

typedef struct glesllm_chat_message {
    const char *role;    /* "system", "user", "assistant" (others as the template takes them) */
    const char *content;
} glesllm_chat_message;

/* The built-in template that tmpl is: tmpl a built-in's name ("chatml",
 * "llama3", ...) or a model's Jinja template (glesllm_model_chat_template),
 * recognised by its markers as llama.cpp recognises it. NULL: neither. */
GLESLLM_API const char *glesllm_chat_template_name(const char *tmpl);
/* The built-in templates' names into names (room for cap); returns how
 * many there are. */
GLESLLM_API size_t glesllm_chat_builtin_templates(const char **names, size_t cap);
/* The conversation msgs[0..n) as prompt text through the template tmpl (a
 * name or a Jinja template, as above), followed by what opens the
 * assistant's reply where add_assistant is nonzero; the same text as
 * llama.cpp's llama_chat_apply_template. Into buf (NUL-terminated), its
 * length into *len; GLESLLM_ERR_SMALL_BUFFER when it does not fit (*len
 * the length needed), GLESLLM_ERR_UNSUPPORTED for a template that is not
 * a built-in one. The text holds control tokens' text (<|im_start|>):
 * tokenize it with GLESLLM_TOKENIZE_PARSE_SPECIAL. */
GLESLLM_API glesllm_status glesllm_chat_apply(const char *tmpl, const glesllm_chat_message *msgs,
                                              size_t n, int add_assistant, char *buf, size_t size,
                                              size_t *len);

/* ---- context: a KV cache of one model --------------------------------------- */

typedef struct glesllm_context glesllm_context;

typedef struct glesllm_context_params {
    uint32_t n_ctx;   /* positions; 0: the model's training context, at most 4096 */
    uint32_t n_batch; /* prompt tokens a batched pass; 0: 512 */
    uint32_t draft_max; /* the most drafted tokens it checks a pass as the target of
                           speculative decoding (glesllm_set_draft); 0: 7 */
    /* glesllm_context_create_seqs: positions of the pool of KV pages its
     * sequences share, each taking pages as it grows up to n_ctx (0: room
     * for every sequence's n_ctx) */
    uint64_t kv_size;
} glesllm_context_params;

/* Makes a context (params NULL: the defaults). The model's weights are
 * uploaded with its first context; later contexts share them. Fails with
 * GLESLLM_ERR_GPU_OUT_OF_MEMORY, naming the sizes, where they do not fit. */
GLESLLM_API glesllm_status glesllm_context_create(glesllm_model *m,
                                                  const glesllm_context_params *params,
                                                  glesllm_context **out);
/* NULL is fine. */
GLESLLM_API void glesllm_context_free(glesllm_context *c);

GLESLLM_API uint32_t glesllm_context_n_ctx(const glesllm_context *c);
/* Positions the cache holds: [0, n_past). */
GLESLLM_API uint32_t glesllm_context_n_past(const glesllm_context *c);
/* The token at a cached position, -1 outside [0, n_past). */
GLESLLM_API int32_t glesllm_context_token(const glesllm_context *c, uint32_t pos);
/* The model of c (NULL for NULL). */
GLESLLM_API glesllm_model *glesllm_context_model(const glesllm_context *c);

typedef struct glesllm_context_info {
    uint32_t n_ctx, n_batch;
    uint64_t weight_bytes;    /* the model's weights on the GPU (shared by its contexts) */
    const char *kv_placement; /* "device" or "mapped" (host-visible) buffers */
    uint32_t dispatches;      /* GPU dispatches of the last step */
    /* a recurrent model's (Mamba's) state on the GPU, F32, in three copies
     * (before and after the last pass, and where a rollback is expected to
     * go back to); 0: none */
    uint64_t state_bytes;
    /* the KV cache on the GPU, F16, every attention layer's (a sliding-window
     * layer's only the positions its ring keeps, where that is fewer) */
    uint64_t kv_bytes;
} glesllm_context_info;
GLESLLM_API glesllm_status glesllm_context_get_info(const glesllm_context *c,
                                                   glesllm_context_info *out);
/* The weight bytes one decode step reads on the GPU: every layer's and the
 * output head's, of a mixture of experts only the experts a token uses (its
 * active parameters); 0 for NULL. Divided by a step's time: the weights'
 * share of the memory bandwidth. */
GLESLLM_API uint64_t glesllm_context_step_bytes(const glesllm_context *c);

/* ---- several sequences in one cache ------------------------------------------ */

/* n contexts ("sequences", up to 256) that share one KV cache, a pool of
 * pages (params->kv_size positions; glesllm_kv_pages) from which each takes
 * up to params->n_ctx positions, and its buffers and kernels (the batch
 * passes' built here): each is a context for
 * every function of this header (its own positions, tokens, sampling,
 * draft, state files), and glesllm_decode_batch runs one token of several
 * of them in one pass that reads the weights once for all (a server's
 * streams). A context's logits last until another of its sequences runs a
 * pass. Free each with glesllm_context_free (the cache goes with the last).
 * Only for models whose layers are all attention (not Mamba, Jamba, RWKV):
 * GLESLLM_ERR_UNSUPPORTED else. out has room for n. */
GLESLLM_API glesllm_status glesllm_context_create_seqs(glesllm_model *m,
                                                       const glesllm_context_params *params,
                                                       uint32_t n, glesllm_context **out);
/* The KV cache of c (and of the sequences it shares it with) in pages of
 * *page positions: *used of the *total pages held by its sequences (a
 * page that sequences share counted once). A sequence takes pages as its
 * passes reach them, shares those of a start copied from another
 * (glesllm_copy_seq) until either writes into them, and gives them back
 * when truncated (glesllm_truncate to 0 frees them all). A pass that finds
 * too few free fails with GLESLLM_ERR_KV_FULL, no sequence's positions
 * changed (in a batch, sequences before the one that found too few keep
 * the pages they took, for their next pass). Any pointer may be NULL. */
GLESLLM_API glesllm_status glesllm_kv_pages(const glesllm_context *c, uint32_t *page,
                                            uint32_t *used, uint32_t *total);
/* The pages sequences seqs[0..n) of one cache hold, a page they share
 * counted once (a server's running requests' pages, say); 0 for bad
 * input. */
GLESLLM_API uint32_t glesllm_kv_pages_held(const glesllm_context *const *seqs, uint32_t n);
/* The most tokens glesllm_decode_batch(_tokens) takes a call on c's cache
 * (a token a sequence for glesllm_decode_batch); 0: none (c is no such
 * sequence). */
GLESLLM_API uint32_t glesllm_decode_batch_max(const glesllm_context *c);
/* tokens[i] at the next position of seqs[i] (distinct sequences of one
 * cache, n at most glesllm_decode_batch_max), in one pass. Afterwards each
 * is as after glesllm_decode of its one token: its logits (glesllm_get_logits
 * with -1), glesllm_next_token by its own sampling. */
GLESLLM_API glesllm_status glesllm_decode_batch(glesllm_context *const *seqs, uint32_t n,
                                                const int32_t *tokens);
/* As glesllm_decode_batch with n_tokens[i] (at least 1) tokens of seqs[i]
 * at its next positions, tokens holding them one sequence after another
 * (seqs[0]'s first), at most glesllm_decode_batch_max in all: a server puts
 * a chunk of a new prompt beside its generating sequences' tokens so.
 * Afterwards each is as after glesllm_decode of its tokens: the logits of
 * its last (glesllm_get_logits with -1), glesllm_next_token. */
GLESLLM_API glesllm_status glesllm_decode_batch_tokens(glesllm_context *const *seqs, uint32_t n,
                                                       const int32_t *tokens,
                                                       const uint32_t *n_tokens);

/* dst's cache becomes the first n positions of src's (two sequences of
 * one cache; n at most src's n_past), copied on the GPU: a start of a
 * prompt that another sequence ran (a system prompt) is not run again. */
GLESLLM_API glesllm_status glesllm_copy_seq(glesllm_context *dst, const glesllm_context *src,
                                            uint32_t n);

/* ---- sampling --------------------------------------------------------------- */

typedef struct glesllm_sampling {
    float temp;             /* <= 0: greedy (the most likely token) */
    int32_t top_k;          /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off */
    int32_t repeat_last_n;  /* tokens the penalty looks at; -1: the whole context */
    uint64_t seed;          /* the same seed gives the same tokens */
} glesllm_sampling;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat
 * penalty 1 over the last 64, seed 0. */
GLESLLM_API glesllm_sampling glesllm_sampling_default(void);
/* Greedy: temp 0. */
GLESLLM_API glesllm_sampling glesllm_sampling_greedy(void);

/* How c picks tokens from now on (glesllm_decode's next token and
 * glesllm_generate); a new seed restarts the random sequence. Contexts
 * start greedy. */
GLESLLM_API glesllm_status glesllm_set_sampling(glesllm_context *c, const glesllm_sampling *s);

/* ---- decoding ----------------------------------------------------------------- */

enum {
    /* keep the logits of every token of the batch (n at most the batch size),
     * not only the last's */
    GLESLLM_DECODE_ALL_LOGITS = 1
};

/* Runs tokens ids[0..n) at positions pos .. pos + n - 1; pos at most
 * n_past (an earlier pos drops the cached positions from it on, as
 * glesllm_truncate does). A batch of several tokens goes through the
 * batched prefill. Afterwards n_past is pos + n, the last token's logits
 * can be read, and the next token (by the context's sampling) is ready.
 * More tokens than the batch size (without GLESLLM_DECODE_ALL_LOGITS) run
 * in passes of it, and glesllm_cancel stops them between passes:
 * GLESLLM_ERR_CANCELLED, n_past at the end of the last pass run, no logits. */
GLESLLM_API glesllm_status glesllm_decode(glesllm_context *c, const int32_t *ids, uint32_t n,
                                          uint32_t pos, unsigned flags);

/* The logits (n_vocab floats) of token i of the last decode's batch (i = -1:
 * its last token; other i need GLESLLM_DECODE_ALL_LOGITS). Copies; slow
 * next to glesllm_next_token. */
GLESLLM_API glesllm_status glesllm_get_logits(glesllm_context *c, int32_t i, float *out);

/* The token the context's sampling picks after the last decode (greedy:
 * the argmax, found on the GPU). Each call picks anew. */
GLESLLM_API glesllm_status glesllm_next_token(glesllm_context *c, int32_t *token);

/* Drops cached positions from n_past on (n_past at most the current). A
 * model with sliding-window layers keeps their K/V for a window and a
 * prompt chunk (n_batch) before its last pass: its next decode after a
 * truncation further back runs positions 0 .. n_past - 1 again first (as
 * a recurrent model does past its kept states). */
GLESLLM_API glesllm_status glesllm_truncate(glesllm_context *c, uint32_t n_past);

/* ---- generation --------------------------------------------------------------- */

/* Text of a generated token: the bytes of complete UTF-8 characters (len
 * may be 0 while a character is incomplete); after the last token a call
 * with token -1 gives what is left. Return nonzero to stop. */
typedef int (*glesllm_piece_fn)(void *ud, int32_t token, const char *text, size_t len);

typedef enum glesllm_stop {
    GLESLLM_STOP_N_PREDICT = 0, /* the token count */
    GLESLLM_STOP_EOG = 1,       /* an end-of-generation token */
    GLESLLM_STOP_CONTEXT = 2,   /* the context is full */
    GLESLLM_STOP_CALLBACK = 3,  /* the piece callback returned nonzero */
    GLESLLM_STOP_CANCELLED = 4  /* glesllm_cancel */
} glesllm_stop;

typedef struct glesllm_generate_params {
    int32_t n_predict;      /* tokens to generate (0: only the prompt runs); < 0: until
                               a stop */
    int ignore_eos;         /* nonzero: end-of-generation tokens do not stop */
    int special;            /* nonzero: control-token text in a text prompt becomes
                               that token; their pieces print their text */
} glesllm_generate_params;

/* 128 tokens, end-of-generation tokens stop, special-token text is plain text. */
GLESLLM_API glesllm_generate_params glesllm_generate_default(void);

typedef struct glesllm_generate_result {
    uint32_t n_prompt;      /* prompt tokens */
    uint32_t n_reused;      /* of them, already in the cache (not run again) */
    uint32_t n_gen;         /* tokens generated */
    double prompt_s, gen_s; /* wall time of the prompt and of generation */
    glesllm_stop stop;
    uint32_t dispatches_per_token;
    /* speculative decoding (glesllm_set_draft): verification passes,
     * tokens drafted, drafted tokens accepted, tokens by plain steps, and
     * wall time drafting, and verifying or in plain steps */
    uint32_t n_rounds, n_drafted, n_accepted, n_plain;
    double draft_s, verify_s;
} glesllm_generate_result;

/* Tokenizes prompt (BOS as the vocabulary asks) and generates. */
GLESLLM_API glesllm_status glesllm_generate(glesllm_context *c, const char *prompt,
                                            const glesllm_generate_params *params,
                                            glesllm_piece_fn on_piece, void *ud,
                                            glesllm_generate_result *result);
/* The same from token ids. The longest prefix of them that the context
 * already holds (an earlier generate, or a loaded state) is not run again;
 * the rest of the cache is dropped. Then tokens by the context's sampling
 * until params->n_predict, an end-of-generation token, a full context,
 * the callback's request or glesllm_cancel. on_piece may be NULL. */
GLESLLM_API glesllm_status glesllm_generate_tokens(glesllm_context *c, const int32_t *prompt,
                                                   uint32_t n_prompt,
                                                   const glesllm_generate_params *params,
                                                   glesllm_piece_fn on_piece, void *ud,
                                                   glesllm_generate_result *result);

/* Asks the generate running on c (or the next to start) to stop after its
 * current token. Any thread, or a signal handler; never blocks. */
GLESLLM_API void glesllm_cancel(glesllm_context *c);

/* The most tokens a draft may propose a round. */
#define GLESLLM_DRAFT_MAX 32

/* Speculative decoding: draft (a context of a small model with the same
 * vocabulary, on the same backend) proposes up to draft_max tokens a round
 * (draft_min at least; 0: plain steps where drafting does not pay) that c
 * checks in one pass. Greedy, the tokens are those of c alone. NULL turns
 * it off. The draft context must outlive its use by c. */
GLESLLM_API glesllm_status glesllm_set_draft(glesllm_context *c, glesllm_context *draft,
                                             uint32_t draft_max, uint32_t draft_min);

/* ---- state: what a context holds --------------------------------------------- */

/* Writes the cached positions and their tokens to path (through a temporary
 * file renamed at the end: nothing is left behind on failure). */
GLESLLM_API glesllm_status glesllm_state_save_file(glesllm_context *c, const char *path);
/* Reads a state written for this model. A file that is not a state is
 * GLESLLM_ERR_FORMAT; one that is, but was written for another model, by
 * another version, or is damaged (its checksum), GLESLLM_ERR_STATE_MISMATCH:
 * either way the context is left empty. prefix (may be NULL): only the
 * longest common prefix of the file's tokens and prefix[0..n_prefix) is
 * loaded. *n_loaded (may be NULL): the positions loaded. */
GLESLLM_API glesllm_status glesllm_state_load_file(glesllm_context *c, const char *path,
                                                   const int32_t *prefix, uint32_t n_prefix,
                                                   uint32_t *n_loaded);
/* The same in memory: *size gets the bytes the state takes; with buf NULL
 * or size too small (GLESLLM_ERR_SMALL_BUFFER) nothing is written. */
GLESLLM_API glesllm_status glesllm_state_save(glesllm_context *c, void *buf, size_t cap,
                                              size_t *size);
GLESLLM_API glesllm_status glesllm_state_load(glesllm_context *c, const void *buf, size_t size);

/* ---- tools --------------------------------------------------------------------- */

/* Perplexity of tokens (text tokenized with GLESLLM_TOKENIZE_ADD_SPECIAL)
 * as llama.cpp's `perplexity` computes it: windows of the context's size,
 * each from an empty cache with its first token the BOS (where the
 * vocabulary adds one), the second half of each scored. max_chunks 0: every
 * whole window. Needs at least two windows of tokens. on_chunk (may be
 * NULL) after each window: its number (from 1), the count, PPL so far. The
 * context's cache is left holding the last window. */
typedef struct glesllm_perplexity_result {
    double ppl, ppl_err, nll;
    uint32_t n_chunks, n_scored;
    int cancelled; /* glesllm_cancel stopped it (between two passes of the batch size): the
                    * figures are of the windows done, zeros where none was */
} glesllm_perplexity_result;
typedef void (*glesllm_chunk_fn)(void *ud, uint32_t chunk, uint32_t n_chunks, double ppl);
GLESLLM_API glesllm_status glesllm_perplexity(glesllm_context *c, const int32_t *ids, size_t n,
                                              uint32_t max_chunks, glesllm_chunk_fn on_chunk,
                                              void *ud, glesllm_perplexity_result *result);

/* glesllm_perplexity, and each scored position's logits (n_vocab floats,
 * valid during the call) handed to on_logits in order, index from 0, with
 * the token that follows the position: what a KL-divergence against
 * another run compares. It runs inside the backend's lock: it must not
 * call the backend. Nonzero from it stops the run (GLESLLM_ERR_CANCELLED). */
typedef int (*glesllm_logits_fn)(void *ud, uint32_t index, const float *logits,
                                 uint32_t n_vocab, int32_t next);
GLESLLM_API glesllm_status glesllm_perplexity_logits(glesllm_context *c, const int32_t *ids,
                                                     size_t n, uint32_t max_chunks,
                                                     glesllm_chunk_fn on_chunk,
                                                     glesllm_logits_fn on_logits, void *ud,
                                                     glesllm_perplexity_result *result);

/* Quantizing a GGUF model file as llama.cpp's llama-quantize does: the 2-D
 * weights to type (the output matrix Q6_K, except under Q8_0; Q4_K_M's
 * Q6_K layers as llama.cpp picks them), norms and 1-D tensors as they are.
 * Through a temporary file renamed at the end: a failed or cancelled run
 * leaves nothing behind. No GPU. */
typedef struct glesllm_quantize_params {
    const char *type;     /* "Q4_0", "Q8_0", "Q4_K", "Q6_K" or "Q4_K_M" (any case) */
    unsigned threads;     /* 0: every CPU */
    /* after each tensor: its index and the count, its name, its format
     * before and after, the bytes read so far and in all; may be NULL */
    void (*on_tensor)(void *ud, uint64_t index, uint64_t count, const char *name,
                      const char *from, const char *to, uint64_t done, uint64_t total);
    /* a note (a row length that made a tensor fall back); may be NULL */
    void (*on_note)(void *ud, const char *msg);
    void *ud;
    volatile sig_atomic_t *cancel; /* set (a signal handler may) to stop; may be NULL */
} glesllm_quantize_params;
/* GLESLLM_ERR_INVALID_ARGUMENT for an unknown type or an output that is the
 * input; GLESLLM_ERR_CANCELLED when *cancel was set. */
GLESLLM_API glesllm_status glesllm_quantize(const char *in, const char *out,
                                            const glesllm_quantize_params *params);

#ifdef __cplusplus
}
#endif
#endif /* GLESLLM_H */
