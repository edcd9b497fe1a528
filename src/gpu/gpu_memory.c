/* How much GPU memory the driver says is free, where it says it at all.
 *
 * Some drivers (NVIDIA's among them) allocate buffer storage lazily: a
 * glBufferStorageEXT far larger than the card succeeds and fails only later,
 * when the memory is touched. So buffers are checked against the free memory
 * the driver reports before they are created. Sources, in order:
 *   1. GL_NVX_gpu_memory_info (NVIDIA desktop GL; not every GLES driver)
 *   2. NVML (libnvidia-ml.so.1, part of the NVIDIA driver), loaded at run time,
 *      for the GPUs whose name the GL renderer starts with; the least free
 *      among them, since EGL does not say which one it is
 * Unified-memory boards report nothing; there the driver's own
 * GL_OUT_OF_MEMORY at allocation is what we have. */
#include <dlfcn.h>
#include <string.h>

#include "gpu/gpu_internal.h"

/* GL_NVX_gpu_memory_info: not in the Khronos GLES headers */
#define GL_GPU_MEMORY_INFO_DEDICATED_VIDMEM_NVX 0x9047
#define GL_GPU_MEMORY_INFO_CURRENT_AVAILABLE_VIDMEM_NVX 0x9049
#define GL_GPU_MEMORY_INFO_EVICTION_COUNT_NVX 0x904A
#define GL_GPU_MEMORY_INFO_EVICTED_MEMORY_NVX 0x904B

typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;
typedef int (*pfn_nvml_init)(void);
typedef int (*pfn_nvml_count)(unsigned *);
typedef int (*pfn_nvml_handle)(unsigned, void **);
typedef int (*pfn_nvml_name)(void *, char *, unsigned);
typedef int (*pfn_nvml_mem)(void *, nvml_memory *);

/* total and free bytes over the NVML devices matching the renderer */
static bool nvml_query(gpu_context *ctx, uint64_t *total, uint64_t *free_bytes)
{
    if (!ctx->nvml_lib)
        return false;
    pfn_nvml_count count = (pfn_nvml_count)dlsym(ctx->nvml_lib, "nvmlDeviceGetCount_v2");
    pfn_nvml_handle handle = (pfn_nvml_handle)dlsym(ctx->nvml_lib, "nvmlDeviceGetHandleByIndex_v2");
    pfn_nvml_name name = (pfn_nvml_name)dlsym(ctx->nvml_lib, "nvmlDeviceGetName");
    pfn_nvml_mem mem = (pfn_nvml_mem)dlsym(ctx->nvml_lib, "nvmlDeviceGetMemoryInfo");
    unsigned n = 0;
    if (!count || !handle || !name || !mem || count(&n) != 0)
        return false;
    bool found = false;
    for (unsigned i = 0; i < n && i < 64; i++) {
        void *dev = NULL;
        char dev_name[128] = "";
        nvml_memory m;
        if (handle(i, &dev) != 0 || name(dev, dev_name, sizeof dev_name) != 0 ||
            strncmp(ctx->renderer, dev_name, strlen(dev_name)) != 0 || mem(dev, &m) != 0)
            continue;
        if (!found || m.free < *free_bytes) {
            *free_bytes = m.free;
            *total = m.total;
        }
        found = true;
    }
    return found;
}

void gpu_memory_init(gpu_context *ctx)
{
    gpu_caps *C = &ctx->caps;
    if (gpu_has_gl_extension("GL_NVX_gpu_memory_info")) {
        GLint kib = 0;
        glGetIntegerv(GL_GPU_MEMORY_INFO_DEDICATED_VIDMEM_NVX, &kib);
        if (glGetError() == GL_NO_ERROR && kib > 0) {
            C->memory_total = (uint64_t)kib * 1024u;
            C->memory_source = "GL_NVX_gpu_memory_info";
            return;
        }
    }
    if (strstr(ctx->vendor, "NVIDIA")) {
        ctx->nvml_lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        pfn_nvml_init init =
            ctx->nvml_lib ? (pfn_nvml_init)dlsym(ctx->nvml_lib, "nvmlInit_v2") : NULL;
        uint64_t total = 0, free_bytes = 0;
        if (init && init() == 0 && nvml_query(ctx, &total, &free_bytes)) {
            C->memory_total = total;
            C->memory_source = "NVML";
            return;
        }
        if (ctx->nvml_lib)
            dlclose(ctx->nvml_lib);
        ctx->nvml_lib = NULL;
    }
}

void gpu_memory_close(gpu_context *ctx)
{
    if (!ctx->nvml_lib)
        return;
    typedef int (*pfn_shutdown)(void);
    pfn_shutdown shutdown = (pfn_shutdown)dlsym(ctx->nvml_lib, "nvmlShutdown");
    if (shutdown)
        shutdown();
    dlclose(ctx->nvml_lib);
    ctx->nvml_lib = NULL;
}

uint64_t gpu_context_memory_available(gpu_context *ctx)
{
    if (!ctx->caps.memory_source)
        return 0;
    if (ctx->nvml_lib) {
        uint64_t total = 0, free_bytes = 0;
        return nvml_query(ctx, &total, &free_bytes) ? free_bytes : 0;
    }
    GLint kib = 0;
    glGetIntegerv(GL_GPU_MEMORY_INFO_CURRENT_AVAILABLE_VIDMEM_NVX, &kib);
    if (glGetError() != GL_NO_ERROR || kib <= 0)
        return 0;
    return (uint64_t)kib * 1024u;
}

bool gpu_context_memory_evicted(gpu_context *ctx, uint64_t *count, uint64_t *bytes)
{
    (void)ctx;
    *count = *bytes = 0;
    if (!gpu_has_gl_extension("GL_NVX_gpu_memory_info"))
        return false;
    GLint n = 0, kib = 0;
    gpu_gl_clear_errors();
    glGetIntegerv(GL_GPU_MEMORY_INFO_EVICTION_COUNT_NVX, &n);
    glGetIntegerv(GL_GPU_MEMORY_INFO_EVICTED_MEMORY_NVX, &kib);
    if (glGetError() != GL_NO_ERROR)
        return false;
    *count = n > 0 ? (uint64_t)n : 0;
    *bytes = kib > 0 ? (uint64_t)kib * 1024u : 0;
    return true;
}
