/* EGL display selection: GBM on a DRM render node, else an EGL device
 * (EGL_EXT_platform_device), else Mesa surfaceless. Each failure records why,
 * so a forced choice, or the last of the automatic ones, can say what is
 * missing instead of just "failed". */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpu/gpu_internal.h"

#define DRM_MAJOR 226 /* Linux's character major of /dev/dri */

#ifndef EGL_PLATFORM_GBM_KHR
#define EGL_PLATFORM_GBM_KHR 0x31D7
#endif
#ifndef EGL_PLATFORM_SURFACELESS_MESA
#define EGL_PLATFORM_SURFACELESS_MESA 0x31DD
#endif
#ifndef EGL_DRM_RENDER_NODE_FILE_EXT
#define EGL_DRM_RENDER_NODE_FILE_EXT 0x3377
#endif
#ifndef EGL_PLATFORM_DEVICE_EXT
#define EGL_PLATFORM_DEVICE_EXT 0x313F
#endif

#define MAX_EGL_DEVICES 16

const char *gpu_platform_name(gpu_platform p)
{
    switch (p) {
    case GPU_PLATFORM_AUTO: return "auto";
    case GPU_PLATFORM_GBM: return "gbm";
    case GPU_PLATFORM_DEVICE: return "device";
    case GPU_PLATFORM_SURFACELESS: return "surfaceless";
    }
    return "?";
}

const char *gpu_egl_error_name(EGLint err)
{
    switch (err) {
    case EGL_SUCCESS: return "EGL_SUCCESS";
    case EGL_NOT_INITIALIZED: return "EGL_NOT_INITIALIZED";
    case EGL_BAD_ACCESS: return "EGL_BAD_ACCESS";
    case EGL_BAD_ALLOC: return "EGL_BAD_ALLOC";
    case EGL_BAD_ATTRIBUTE: return "EGL_BAD_ATTRIBUTE";
    case EGL_BAD_CONFIG: return "EGL_BAD_CONFIG";
    case EGL_BAD_CONTEXT: return "EGL_BAD_CONTEXT";
    case EGL_BAD_CURRENT_SURFACE: return "EGL_BAD_CURRENT_SURFACE";
    case EGL_BAD_DISPLAY: return "EGL_BAD_DISPLAY";
    case EGL_BAD_MATCH: return "EGL_BAD_MATCH";
    case EGL_BAD_NATIVE_PIXMAP: return "EGL_BAD_NATIVE_PIXMAP";
    case EGL_BAD_NATIVE_WINDOW: return "EGL_BAD_NATIVE_WINDOW";
    case EGL_BAD_PARAMETER: return "EGL_BAD_PARAMETER";
    case EGL_BAD_SURFACE: return "EGL_BAD_SURFACE";
    case EGL_CONTEXT_LOST: return "EGL_CONTEXT_LOST";
    }
    return "unknown EGL error";
}

static bool has_word(const char *list, const char *word)
{
    if (!list)
        return false;
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    }
    return false;
}

static PFNEGLGETPLATFORMDISPLAYEXTPROC get_platform_display(void)
{
    return (PFNEGLGETPLATFORMDISPLAYEXTPROC)eglGetProcAddress("eglGetPlatformDisplayEXT");
}

/* eglInitialize on a platform display; on failure writes why into `why`. */
static EGLDisplay init_display(EGLenum platform, void *native, const char *what, char *why,
                               size_t why_len)
{
    PFNEGLGETPLATFORMDISPLAYEXTPROC gpd = get_platform_display();
    if (!gpd) {
        snprintf(why, why_len, "%s: eglGetPlatformDisplayEXT is missing (EGL_EXT_platform_base)", what);
        return EGL_NO_DISPLAY;
    }
    EGLDisplay d = gpd(platform, native, NULL);
    if (d == EGL_NO_DISPLAY) {
        snprintf(why, why_len, "%s: eglGetPlatformDisplayEXT failed (%s)", what,
                 gpu_egl_error_name(eglGetError()));
        return EGL_NO_DISPLAY;
    }
    EGLint major = 0, minor = 0;
    if (!eglInitialize(d, &major, &minor)) {
        snprintf(why, why_len, "%s: eglInitialize failed (%s)", what,
                 gpu_egl_error_name(eglGetError()));
        return EGL_NO_DISPLAY;
    }
    return d;
}

/* ---- GBM ---------------------------------------------------------------- */

struct gbm_device;
typedef struct gbm_device *(*pfn_gbm_create_device)(int fd);
typedef void (*pfn_gbm_device_destroy)(struct gbm_device *);

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* First /dev/dri/renderD* in name order; false when there is none. */
static bool first_render_node(char *out, size_t out_len)
{
    DIR *dir = opendir("/dev/dri");
    if (!dir)
        return false;
    char names[64][64];
    const char *sorted[64];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL && n < 64) {
        if (strncmp(e->d_name, "renderD", 7) == 0 && strlen(e->d_name) < sizeof names[0]) {
            strcpy(names[n], e->d_name);
            sorted[n] = names[n];
            n++;
        }
    }
    closedir(dir);
    if (n == 0)
        return false;
    qsort(sorted, n, sizeof sorted[0], cmp_str);
    snprintf(out, out_len, "/dev/dri/%s", sorted[0]);
    return true;
}

static bool open_gbm(const gpu_options *opt, gpu_context *ctx, char *why, size_t why_len)
{
    char node[256];
    if (opt->device_path) {
        snprintf(node, sizeof node, "%s", opt->device_path);
    } else if (!first_render_node(node, sizeof node)) {
        snprintf(why, why_len,
                 "gbm: no DRM render node (/dev/dri/renderD*) on this machine; is a GPU driver "
                 "loaded, and is /dev/dri visible (containers need --device /dev/dri)?");
        return false;
    }
    /* the render node first: its absence is the more basic thing to fix */
    const char *client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (!has_word(client, "EGL_KHR_platform_gbm") && !has_word(client, "EGL_MESA_platform_gbm")) {
        snprintf(why, why_len, "gbm: render node %s exists, but the EGL library lacks "
                               "EGL_KHR_platform_gbm / EGL_MESA_platform_gbm", node);
        return false;
    }
    int fd = open(node, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, why_len, "gbm: cannot open render node %s: %s%s", node, strerror(errno),
                 errno == EACCES ? " (add the user to the 'render' group)" : "");
        return false;
    }
    /* Mesa's GBM accepts any file and falls back to its software renderer on
     * one that is no GPU: a node named by GLESLLM_DEVICE must be a DRM device
     * (character major DRM_MAJOR) */
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISCHR(sb.st_mode) || major(sb.st_rdev) != DRM_MAJOR) {
        close(fd);
        snprintf(why, why_len,
                 "gbm: %s is not a DRM device node (a GPU's /dev/dri/renderD* or "
                 "/dev/dri/card*)",
                 node);
        return false;
    }
    void *lib = dlopen("libgbm.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        close(fd);
        snprintf(why, why_len, "gbm: cannot load libgbm.so.1 (install libgbm1): %s", dlerror());
        return false;
    }
    pfn_gbm_create_device create = (pfn_gbm_create_device)dlsym(lib, "gbm_create_device");
    pfn_gbm_device_destroy destroy = (pfn_gbm_device_destroy)dlsym(lib, "gbm_device_destroy");
    struct gbm_device *gbm = (create && destroy) ? create(fd) : NULL;
    if (!gbm) {
        snprintf(why, why_len, "gbm: gbm_create_device failed on %s (no GBM backend for this driver?)",
                 node);
        dlclose(lib);
        close(fd);
        return false;
    }
    char what[300];
    snprintf(what, sizeof what, "gbm on %s", node);
    EGLDisplay d = init_display(EGL_PLATFORM_GBM_KHR, gbm, what, why, why_len);
    if (d == EGL_NO_DISPLAY) {
        destroy(gbm);
        dlclose(lib);
        close(fd);
        return false;
    }
    ctx->display = d;
    ctx->gbm_lib = lib;
    ctx->gbm_device = gbm;
    ctx->drm_fd = fd;
    snprintf(ctx->display_desc, sizeof ctx->display_desc, "%s", node);
    return true;
}

/* ---- EGL device ---------------------------------------------------------- */

static bool open_device(const gpu_options *opt, gpu_context *ctx, char *why, size_t why_len)
{
    const char *client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (!has_word(client, "EGL_EXT_platform_device") ||
        (!has_word(client, "EGL_EXT_device_enumeration") && !has_word(client, "EGL_EXT_device_base"))) {
        snprintf(why, why_len, "device: the EGL library lacks EGL_EXT_platform_device / "
                               "EGL_EXT_device_enumeration");
        return false;
    }
    PFNEGLQUERYDEVICESEXTPROC query_devices =
        (PFNEGLQUERYDEVICESEXTPROC)eglGetProcAddress("eglQueryDevicesEXT");
    PFNEGLQUERYDEVICESTRINGEXTPROC query_string =
        (PFNEGLQUERYDEVICESTRINGEXTPROC)eglGetProcAddress("eglQueryDeviceStringEXT");
    EGLDeviceEXT devs[MAX_EGL_DEVICES];
    EGLint n = 0;
    if (!query_devices || !query_string || !query_devices(MAX_EGL_DEVICES, devs, &n) || n <= 0) {
        snprintf(why, why_len, "device: no EGL devices found (eglQueryDevicesEXT: %s)",
                 gpu_egl_error_name(eglGetError()));
        return false;
    }
    /* Hardware devices first, Mesa's software device last. */
    char last_why[512] = "";
    bool matched = false;
    for (int pass = 0; pass < 2; pass++) {
        for (EGLint i = 0; i < n; i++) {
            const char *exts = query_string(devs[i], EGL_EXTENSIONS);
            bool software = has_word(exts, "EGL_MESA_device_software");
            if (software != (pass == 1))
                continue;
            const char *render = has_word(exts, "EGL_EXT_device_drm_render_node")
                                     ? query_string(devs[i], EGL_DRM_RENDER_NODE_FILE_EXT)
                                     : NULL;
            const char *card = has_word(exts, "EGL_EXT_device_drm")
                                   ? query_string(devs[i], EGL_DRM_DEVICE_FILE_EXT)
                                   : NULL;
            if (opt->device_path && !(render && strcmp(render, opt->device_path) == 0) &&
                !(card && strcmp(card, opt->device_path) == 0))
                continue;
            matched = true;
            char what[300];
            snprintf(what, sizeof what, "device %d%s%s%s", (int)i, software ? " (software)" : "",
                     render ? " " : "", render ? render : (card ? card : ""));
            EGLDisplay d = init_display(EGL_PLATFORM_DEVICE_EXT, devs[i], what, last_why,
                                        sizeof last_why);
            if (d != EGL_NO_DISPLAY) {
                ctx->display = d;
                snprintf(ctx->display_desc, sizeof ctx->display_desc, "EGL %s", what);
                return true;
            }
        }
    }
    if (opt->device_path && !matched)
        snprintf(why, why_len, "device: none of the %d EGL devices is %s", (int)n, opt->device_path);
    else
        snprintf(why, why_len, "%s", last_why);
    return false;
}

/* ---- surfaceless --------------------------------------------------------- */

static bool open_surfaceless(gpu_context *ctx, char *why, size_t why_len)
{
    const char *client = eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (!has_word(client, "EGL_MESA_platform_surfaceless")) {
        snprintf(why, why_len, "surfaceless: the EGL library lacks EGL_MESA_platform_surfaceless "
                               "(Mesa's EGL: install libegl-mesa0)");
        return false;
    }
    EGLDisplay d = init_display(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, "surfaceless",
                                why, why_len);
    if (d == EGL_NO_DISPLAY)
        return false;
    ctx->display = d;
    snprintf(ctx->display_desc, sizeof ctx->display_desc, "EGL_MESA_platform_surfaceless");
    return true;
}

glesllm_status gpu_display_open(const gpu_options *opt, gpu_context *ctx)
{
    char why[3][600] = { "", "", "" };
    ctx->drm_fd = -1;
    if (!eglQueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS) && opt->platform != GPU_PLATFORM_AUTO)
        return err_set(GLESLLM_ERR_EGL,
                       "EGL: no client extensions (EGL_EXT_client_extensions); the EGL library is "
                       "too old for headless platforms (install libegl1 and a driver's EGL)");
    switch (opt->platform) {
    case GPU_PLATFORM_GBM:
        if (open_gbm(opt, ctx, why[0], sizeof why[0]))
            break;
        return err_set(GLESLLM_ERR_EGL, "GLESLLM_PLATFORM=gbm cannot work: %s", why[0]);
    case GPU_PLATFORM_DEVICE:
        if (open_device(opt, ctx, why[1], sizeof why[1]))
            break;
        return err_set(GLESLLM_ERR_EGL, "GLESLLM_PLATFORM=device cannot work: %s", why[1]);
    case GPU_PLATFORM_SURFACELESS:
        if (opt->device_path)
            return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                           "GLESLLM_DEVICE=%s cannot be used with GLESLLM_PLATFORM=surfaceless "
                           "(surfaceless picks its own device); unset one of them",
                           opt->device_path);
        if (open_surfaceless(ctx, why[2], sizeof why[2]))
            break;
        return err_set(GLESLLM_ERR_EGL, "GLESLLM_PLATFORM=surfaceless cannot work: %s", why[2]);
    case GPU_PLATFORM_AUTO:
        if (open_gbm(opt, ctx, why[0], sizeof why[0])) {
            ctx->platform = GPU_PLATFORM_GBM;
            return GLESLLM_OK;
        }
        if (open_device(opt, ctx, why[1], sizeof why[1])) {
            ctx->platform = GPU_PLATFORM_DEVICE;
            return GLESLLM_OK;
        }
        /* A named device must not silently become Mesa's software renderer. */
        if (opt->device_path)
            return err_set(GLESLLM_ERR_EGL, "GLESLLM_DEVICE=%s cannot be used:\n  %s\n  %s",
                           opt->device_path, why[0], why[1]);
        if (open_surfaceless(ctx, why[2], sizeof why[2])) {
            ctx->platform = GPU_PLATFORM_SURFACELESS;
            return GLESLLM_OK;
        }
        return err_set(GLESLLM_ERR_EGL,
                       "no headless EGL display could be opened:\n  %s\n  %s\n  %s\n"
                       "Install a GPU driver's EGL (or Mesa: libegl-mesa0 libgl1-mesa-dri).",
                       why[0], why[1], why[2]);
    }
    ctx->platform = opt->platform;
    return GLESLLM_OK;
}

void gpu_display_close(gpu_context *ctx)
{
    if (ctx->display != EGL_NO_DISPLAY)
        eglTerminate(ctx->display);
    ctx->display = EGL_NO_DISPLAY;
    if (ctx->gbm_device) {
        pfn_gbm_device_destroy destroy =
            (pfn_gbm_device_destroy)dlsym(ctx->gbm_lib, "gbm_device_destroy");
        if (destroy)
            destroy((struct gbm_device *)ctx->gbm_device);
        ctx->gbm_device = NULL;
    }
    if (ctx->gbm_lib)
        dlclose(ctx->gbm_lib);
    ctx->gbm_lib = NULL;
    if (ctx->drm_fd >= 0)
        close(ctx->drm_fd);
    ctx->drm_fd = -1;
}
