/* gpu/: the headless EGL + OpenGL ES 3.1 compute runtime. Knows no model.
 *
 *   gpu_context   display selection (GBM, EGL device, surfaceless), context,
 *                 limits and optional extensions          (gpu_context.c, egl_display.c)
 *   gpu_buffer    immutable and persistently mapped storage buffers (gpu_buffer.c)
 *   gpu_program   embedded kernels + #define variants, compile, link, disk cache
 *                                                        (gpu_program.c, program_cache.c)
 *   gpu_queue     dispatches, the memory barriers between them, one fence a step
 *                                                        (gpu_queue.c)
 *
 * A context is current on the thread that created it; every call taking it
 * must come from that thread.
 */
#ifndef GLESLLM_GPU_H
#define GLESLLM_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "glesllm.h"

/* ---- context ---------------------------------------------------------- */

typedef enum gpu_platform {
    GPU_PLATFORM_AUTO = 0,
    GPU_PLATFORM_GBM,
    GPU_PLATFORM_DEVICE,
    GPU_PLATFORM_SURFACELESS
} gpu_platform;

const char *gpu_platform_name(gpu_platform p);

/* The limits kernels are sized by. With GLESLLM_LIMITS=min each is clamped to
 * the OpenGL ES 3.1 minimum, so the portable path runs on any machine. */
typedef struct gpu_limits {
    uint32_t max_invocations;      /* GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS, >= 128 */
    uint32_t max_group_size[3];    /* GL_MAX_COMPUTE_WORK_GROUP_SIZE, >= 128,128,64 */
    uint32_t max_group_count[3];   /* GL_MAX_COMPUTE_WORK_GROUP_COUNT, >= 65535 */
    uint32_t max_shared_bytes;     /* GL_MAX_COMPUTE_SHARED_MEMORY_SIZE, >= 16384 */
    uint32_t max_storage_blocks;   /* GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS, >= 4 */
    uint32_t max_storage_bindings; /* GL_MAX_SHADER_STORAGE_BUFFER_BINDINGS, >= 4 */
    uint64_t max_storage_block_bytes; /* GL_MAX_SHADER_STORAGE_BLOCK_SIZE, >= 2^27 */
    uint32_t storage_offset_alignment;/* GL_SHADER_STORAGE_BUFFER_OFFSET_ALIGNMENT, <= 256 */
} gpu_limits;

typedef struct gpu_caps {
    bool buffer_storage;    /* GL_EXT_buffer_storage: immutable + persistent mapping */
    bool subgroup;          /* GL_KHR_shader_subgroup with basic+arithmetic in compute */
    uint32_t subgroup_size; /* 0 when !subgroup */
    bool fp16_arith;        /* GL_EXT_shader_explicit_arithmetic_types_float16 */
    bool mediump_is_fp16;   /* mediump float has < 23 mantissa bits (fragment stage query) */
    bool f16_types;         /* GL_NV_gpu_shader5: float16_t / f16vecN types and arithmetic */
    bool program_binary;    /* at least one program binary format */
    bool cpu;               /* a rasteriser on the CPU (llvmpipe, softpipe, SwiftShader) */
    uint64_t memory_total;  /* bytes of dedicated GPU memory, 0 when the driver does not say */
    const char *memory_source; /* the extension that said it, or NULL */
} gpu_caps;

typedef struct gpu_options {
    gpu_platform platform;   /* AUTO: GBM, then EGL device, then surfaceless */
    const char *device_path; /* a DRM render node, or NULL for the first */
    bool limits_min;         /* clamp limits to the GLES 3.1 minimums, drop optional paths */
    bool no_cache;           /* never read or write the program cache */
    const char *cache_dir;   /* NULL: $XDG_CACHE_HOME/glesllm, else ~/.cache/glesllm */
} gpu_options;

typedef struct gpu_context gpu_context;

/* Options from the environment: GLESLLM_PLATFORM, GLESLLM_DEVICE,
 * GLESLLM_LIMITS=min, GLESLLM_NO_CACHE=1. Fails on a value it does not know. */
glesllm_status gpu_options_from_env(gpu_options *opt);

glesllm_status gpu_context_create(const gpu_options *opt, gpu_context **out);
void gpu_context_destroy(gpu_context *ctx);

gpu_platform gpu_context_platform(const gpu_context *ctx);
const char *gpu_context_display_desc(const gpu_context *ctx); /* e.g. the render node */
const gpu_limits *gpu_context_limits(const gpu_context *ctx);
const gpu_caps *gpu_context_caps(const gpu_context *ctx);
const char *gpu_context_string(const gpu_context *ctx, unsigned gl_name); /* GL_VENDOR... */
bool gpu_context_limits_min(const gpu_context *ctx);
/* Whether f16 subnormals survive unpacking and arithmetic (f16 types, else
 * unpackHalf2x16 into f32): probed once with glsl/f16_probe.comp, then
 * remembered. The matvec's F16_SUBN levels need it (ops/matvec.c). */
glesllm_status gpu_context_f16_subnormals(gpu_context *ctx, bool *out);
/* In what order subgroupAdd adds a subgroup's values, as its first lane
 * holds the sum: GPU_SG_HALVES (the upper half onto the lower, then again:
 * a butterfly from the widest step), GPU_SG_NEIGHBOURS (from the narrowest),
 * or 0 (neither, or no subgroups). Probed once with glsl/sg_order.comp, then
 * remembered. The several-token matvecs add their lanes so without subgroup
 * operations (ops/matvec.c matvec_multi_config). */
enum { GPU_SG_HALVES = 1, GPU_SG_NEIGHBOURS = 2 };
glesllm_status gpu_context_subgroup_order(gpu_context *ctx, int *out);
/* The calling thread's current EGL context, kept by gpu_context_enter so
 * that gpu_context_leave puts it back: the library's entry points make the
 * context current on whatever thread calls them, and leave the caller's
 * own (or none) current afterwards, so that another thread may take it. */
typedef struct gpu_current {
    void *display, *draw, *read, *context;
    bool switched; /* enter made ctx current; leave undoes it */
} gpu_current;
/* The calling thread's current context now (none: context NULL). */
gpu_current gpu_current_get(void);
/* Makes ctx current on this thread unless it is already; an error where it
 * is current on another thread. */
glesllm_status gpu_context_enter(gpu_context *ctx, gpu_current *saved);
/* Puts back what was current before enter (saved->switched), else nothing. */
void gpu_context_leave(gpu_context *ctx, const gpu_current *saved);
/* The program cache folder, or NULL when the cache is off. */
const char *gpu_context_cache_dir(const gpu_context *ctx);
/* Why the cache is off (NULL when it is on). */
const char *gpu_context_cache_off_reason(const gpu_context *ctx);
/* Mesa's own shader cache: its folder (from MESA_SHADER_CACHE_DIR,
 * XDG_CACHE_HOME or HOME, as Mesa picks it; "" where none), and in `off`
 * why it is off for this process ("" while on): Mesa's variables, or too
 * little room on its disk, found before the driver started (program_cache.c
 * says why that matters). */
const char *gpu_context_mesa_cache(const gpu_context *ctx, const char **off);
/* The warning a caller should show, or NULL: Mesa's cache turned off for
 * want of room. */
const char *gpu_context_warning(const gpu_context *ctx);
/* Whether Mesa's cache in `folder` is safe on a disk with free_bytes left
 * (the check gpu_context_create makes with the disk's free space). */
bool gpu_mesa_cache_fits(const char *folder, uint64_t free_bytes);

/* ---- buffers ------------------------------------------------------------ */

typedef enum gpu_buffer_flags {
    GPU_BUFFER_DEVICE = 0,       /* immutable device storage, written once at creation */
    GPU_BUFFER_DYNAMIC = 1 << 0, /* may be updated later with gpu_buffer_write */
    GPU_BUFFER_MAPPED = 1 << 1   /* persistently mapped, coherent, readable and writable */
} gpu_buffer_flags;

typedef struct gpu_buffer {
    unsigned id;     /* GL buffer name */
    size_t size;     /* bytes */
    unsigned flags;  /* gpu_buffer_flags */
    void *mapped;    /* GPU_BUFFER_MAPPED: the persistent pointer */
} gpu_buffer;

/* data may be NULL (contents undefined). `what` names the buffer in errors. */
glesllm_status gpu_buffer_create(gpu_context *ctx, size_t size, const void *data, unsigned flags,
                                 const char *what, gpu_buffer *out);
/* The same, its contents zeros (counters that start at 0). */
glesllm_status gpu_buffer_create_zeroed(gpu_context *ctx, size_t size, unsigned flags,
                                        const char *what, gpu_buffer *out);
void gpu_buffer_destroy(gpu_buffer *buf);
glesllm_status gpu_buffer_write(gpu_buffer *buf, size_t offset, const void *data, size_t size);
/* size bytes of buf from src to dst (the two ranges apart), after what the
 * GPU has been given so far; later dispatches see them. */
glesllm_status gpu_buffer_copy_within(gpu_buffer *buf, size_t src, size_t dst, size_t size);
/* Slow path for tests and tools: waits for the GPU and copies through a
 * staging buffer. Never inside a decode step. */
glesllm_status gpu_buffer_read(gpu_context *ctx, const gpu_buffer *buf, size_t offset, void *out,
                               size_t size);
/* Bytes of GPU memory the driver says are free now, or 0 when it does not say
 * (GL_NVX_gpu_memory_info). Drivers that allocate lazily accept any size, so
 * buffers are checked against this before they are created. */
uint64_t gpu_context_memory_available(gpu_context *ctx);
/* How often and how much the driver evicted GPU memory to make room
 * (GL_NVX_gpu_memory_info); false where it does not say. */
bool gpu_context_memory_evicted(gpu_context *ctx, uint64_t *count, uint64_t *bytes);
/* Bytes of GPU memory allocated through this context. */
uint64_t gpu_context_allocated(const gpu_context *ctx);

/* ---- programs ----------------------------------------------------------- */

#define GPU_MAX_PARAMS 32

typedef struct gpu_program {
    unsigned id;
    int params_location; /* `uniform uint u_params[GPU_MAX_PARAMS]`, -1 if unused */
    uint32_t local_size[3];
    bool from_cache;     /* linked from the on-disk program cache */
    uint32_t binary_bytes; /* GL_PROGRAM_BINARY_LENGTH (0: not reported): the size of
                              the driver's form of the program, which need not be machine
                              code (NVIDIA's ES driver returns its assembly as text) */
    char name[64];
} gpu_program;

/* The embedded source of a glsl/ file, or NULL. */
const char *gpu_kernel_source(const char *name);

/* Build `name` (a .comp file of glsl/) with `defines` ("NAME VALUE" lines joined
 * by '\n', may be NULL) placed after the #version line. `#include "x.glsl"`
 * lines pull in embedded snippets. Compile errors name the kernel and show
 * the info log and the numbered lines around the error. */
glesllm_status gpu_program_build(gpu_context *ctx, const char *name, const char *defines,
                                 gpu_program *out);
/* The same from a source given by the caller (tests, tools). */
glesllm_status gpu_program_build_source(gpu_context *ctx, const char *name, const char *source,
                                        const char *defines, gpu_program *out);
void gpu_program_destroy(gpu_program *prog);

/* The exact text handed to the GL compiler for (name, defines): for errors
 * and tests. Caller frees. */
glesllm_status gpu_program_assemble(const char *name, const char *source, const char *defines,
                                    char **out);

/* ---- dispatch queue ----------------------------------------------------- */

typedef enum gpu_access { GPU_READ = 1, GPU_WRITE = 2, GPU_READ_WRITE = 3 } gpu_access;

typedef struct gpu_binding {
    uint32_t slot;          /* layout(binding = slot) */
    const gpu_buffer *buf;
    size_t offset;          /* bytes; a multiple of storage_offset_alignment */
    size_t size;            /* bytes; 0 = to the end of the buffer */
    gpu_access access;
    /* the bytes of buf (absolute) the kernel reads or writes through this
     * binding, when only part of its range: a dispatch whose used bytes meet
     * none written since the last barrier needs none, and a write marks only
     * these; 0, 0: the whole range. (The queue tracks writes only: a
     * narrowed read lets a later write of the bytes it reads go without a
     * barrier, so the caller narrows only where no dispatch before the next
     * barrier writes them.) */
    size_t used_begin, used_end;
} gpu_binding;

#define GPU_MAX_BINDINGS 8

typedef struct gpu_dispatch {
    const gpu_program *prog;
    gpu_binding bindings[GPU_MAX_BINDINGS];
    uint32_t n_bindings;
    uint32_t params[GPU_MAX_PARAMS]; /* u_params; floats through gpu_f2u */
    uint32_t n_params;
    uint32_t groups[3];
} gpu_dispatch;

static inline uint32_t gpu_f2u(float f)
{
    union { float f; uint32_t u; } v = { f };
    return v.u;
}

typedef struct gpu_queue gpu_queue;

glesllm_status gpu_queue_create(gpu_context *ctx, gpu_queue **out);
void gpu_queue_destroy(gpu_queue *q);
/* Records one dispatch; inserts a storage barrier first when it touches a
 * buffer range written since the last barrier. */
glesllm_status gpu_queue_dispatch(gpu_queue *q, const gpu_dispatch *d);
/* Ends the step: makes GPU writes visible to mapped pointers, places one
 * fence and flushes. */
glesllm_status gpu_queue_submit(gpu_queue *q);
/* Waits for the last submitted fence (timeout_ms 0 = a generous default). */
glesllm_status gpu_queue_wait(gpu_queue *q, uint32_t timeout_ms);
/* Waits for the submission before the last one (none in flight: returns at
 * once), so that the host can read that one's results while the last runs.
 * While profiling: gpu_queue_wait (the timestamps are read back together). */
glesllm_status gpu_queue_wait_prior(gpu_queue *q, uint32_t timeout_ms);
/* Counters for tests and benchmarks. */
typedef struct gpu_queue_stats {
    uint64_t dispatches;
    uint64_t barriers;
    uint64_t submits;
} gpu_queue_stats;
gpu_queue_stats gpu_queue_get_stats(const gpu_queue *q);

/* GPU time per kind of dispatch (benchmarks): with profiling on, a timestamp
 * (GL_EXT_disjoint_timer_query) follows every dispatch, and the time from the
 * previous timestamp (the barrier wait before the dispatch and the dispatch
 * itself) is added to the entry of its (program, work groups, barrier)
 * when the step is waited for. Timestamps cost time of their own: profile
 * runs are for finding where the time goes, not for the tokens/s figure. */
typedef struct gpu_profile_entry {
    char name[64];      /* the program's name (a copy: programs may go first) */
    uint32_t groups;    /* work groups of the dispatch, all dimensions */
    bool barrier;       /* a storage barrier preceded it */
    uint32_t seq;       /* GPU_PROFILE_SEQUENCE: its place among the step's dispatches */
    uint32_t binary_bytes; /* the program's (gpu_program.binary_bytes) */
    uint64_t count;
    uint64_t total_ns;
} gpu_profile_entry;
typedef enum gpu_profile_mode {
    GPU_PROFILE_DISPATCHES = 1, /* a timestamp after every dispatch */
    GPU_PROFILE_SUBMITS = 2,    /* one at the first dispatch after a wait and one at each
                                   submit: one entry, "submit", of whole submissions */
    GPU_PROFILE_SEQUENCE = 3    /* as DISPATCHES, an entry per position in the step (seq) */
} gpu_profile_mode;
/* False (with the reason in glesllm_last_error) where the driver has no
 * timestamps. Calling it again switches the mode (and keeps the entries). */
bool gpu_queue_profile_enable(gpu_queue *q, gpu_profile_mode mode);
/* The entries so far, largest total first; returns how many there are. */
size_t gpu_queue_profile_get(const gpu_queue *q, gpu_profile_entry *out, size_t max);
void gpu_queue_profile_reset(gpu_queue *q);

#endif
