/* On-disk cache of linked programs (glGetProgramBinary).
 *
 * One file per program, named by a hash of (renderer, driver version,
 * assembled source). The file repeats the renderer, version and two
 * independent source hashes, and checksums its payload, so a stale, truncated,
 * foreign or corrupted file is detected, removed and rewritten; the driver's
 * own glProgramBinary check is the last line of defence.
 *
 * Layout (little-endian, host order):
 *   char     magic[8]     "GLLMPRG1"
 *   uint32_t binary_format
 *   uint32_t renderer_len, version_len
 *   uint32_t reserved (0)
 *   uint64_t payload_len
 *   uint64_t payload_hash  fnv1a64(payload)
 *   uint64_t source_hash[2]
 *   char     renderer[renderer_len], version[version_len]
 *   uint8_t  payload[payload_len]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "gpu/gpu_internal.h"

#define CACHE_MAGIC "GLLMPRG1"
#define MAX_PAYLOAD (64u << 20)

typedef struct cache_header {
    char magic[8];
    uint32_t binary_format;
    uint32_t renderer_len, version_len;
    uint32_t reserved;
    uint64_t payload_len;
    uint64_t payload_hash;
    uint64_t source_hash[2];
} cache_header;
_Static_assert(sizeof(cache_header) == 56, "cache header layout is part of the file format");

static uint64_t fnv1a64(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define SEED_A 0xcbf29ce484222325ull
#define SEED_B 0x84222325cbf29ce4ull

static int mkdir_p(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST) {
                *p = '/';
                return -1;
            }
            *p = '/';
        }
    }
    return (mkdir(path, 0755) != 0 && errno != EEXIST) ? -1 : 0;
}

/* $XDG_CACHE_HOME/leaf, else ~/.cache/leaf (where glesllm and Mesa keep
 * their caches); the length written, or -1 where neither is an absolute
 * path. */
static int user_cache_folder(const char *leaf, char *out, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        return snprintf(out, n, "%s/%s", xdg, leaf);
    if (home && home[0] == '/')
        return snprintf(out, n, "%s/.cache/%s", home, leaf);
    return -1;
}

void gpu_cache_init(gpu_context *ctx, const gpu_options *opt)
{
    ctx->cache_on = false;
    if (opt->no_cache) {
        snprintf(ctx->cache_off_reason, sizeof ctx->cache_off_reason, "GLESLLM_NO_CACHE=1");
        return;
    }
    if (!ctx->caps.program_binary) {
        snprintf(ctx->cache_off_reason, sizeof ctx->cache_off_reason,
                 "the driver offers no program binary formats%s",
                 ctx->mesa_cache_off[0] ? " (Mesa offers them with its shader cache on only)" : "");
        return;
    }
    int n = opt->cache_dir ? snprintf(ctx->cache_dir, sizeof ctx->cache_dir, "%s", opt->cache_dir)
                           : user_cache_folder("glesllm", ctx->cache_dir, sizeof ctx->cache_dir);
    if (n < 0) {
        snprintf(ctx->cache_off_reason, sizeof ctx->cache_off_reason,
                 "neither XDG_CACHE_HOME nor HOME is an absolute path");
        return;
    }
    if (n <= 0 || (size_t)n >= sizeof ctx->cache_dir - 64) {
        snprintf(ctx->cache_off_reason, sizeof ctx->cache_off_reason, "cache path too long");
        return;
    }
    if (mkdir_p(ctx->cache_dir) != 0) {
        snprintf(ctx->cache_off_reason, sizeof ctx->cache_off_reason, "cannot create %.150s: %s",
                 ctx->cache_dir, strerror(errno));
        return;
    }
    ctx->cache_on = true;
}

/* Mesa's own shader cache (its multi-file kind, Mesa's default here) maps an
 * index of 65,536 keys of 20 bytes and a size, made with ftruncate: its
 * pages take their disk blocks when first written, and a disk that is full
 * by then ends the process with SIGBUS inside the driver. Its entries are
 * written with checked writes. So the cache is safe where the disk has
 * room for what the index still lacks, and some over for other writers. */
#define MESA_INDEX_BYTES (65536ull * 20 + 8)
#define MESA_ROOM (4ull << 20)

bool gpu_mesa_cache_fits(const char *folder, uint64_t free_bytes)
{
    char index[1100];
    snprintf(index, sizeof index, "%s/index", folder);
    struct stat st;
    uint64_t lacks = MESA_INDEX_BYTES;
    if (stat(index, &st) == 0 && st.st_size >= 0) {
        uint64_t has = (uint64_t)st.st_blocks * 512;
        lacks = (uint64_t)st.st_size > has ? (uint64_t)st.st_size - has : 0;
        if (lacks == 0)
            return true; /* every page already on the disk */
    }
    return free_bytes >= lacks + MESA_ROOM;
}

/* The free bytes of the disk holding path, or of its nearest folder that
 * exists; false where none can be asked. */
static bool free_bytes_under(const char *path, uint64_t *out)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (;;) {
        struct statvfs vs;
        if (statvfs(p, &vs) == 0) {
            *out = (uint64_t)vs.f_bavail * vs.f_frsize;
            return true;
        }
        char *slash = strrchr(p, '/');
        if (errno != ENOENT || !slash || slash == p)
            return false;
        *slash = '\0';
    }
}

void gpu_mesa_cache_guard(gpu_context *ctx)
{
    const char *dir = getenv("MESA_SHADER_CACHE_DIR");
    if (!dir || !*dir)
        dir = getenv("MESA_GLSL_CACHE_DIR");
    if (dir && *dir)
        snprintf(ctx->mesa_cache_dir, sizeof ctx->mesa_cache_dir, "%s/mesa_shader_cache", dir);
    else if (user_cache_folder("mesa_shader_cache", ctx->mesa_cache_dir,
                               sizeof ctx->mesa_cache_dir) < 0)
        ctx->mesa_cache_dir[0] = '\0';
    const char *off = getenv("MESA_SHADER_CACHE_DISABLE");
    if (!off || !*off)
        off = getenv("MESA_GLSL_CACHE_DISABLE");
    if (off && *off) { /* the user's choice, either way (Mesa's booleans) */
        if (!strcmp(off, "1") || !strcmp(off, "true") || !strcmp(off, "y") || !strcmp(off, "yes"))
            snprintf(ctx->mesa_cache_off, sizeof ctx->mesa_cache_off,
                     "MESA_SHADER_CACHE_DISABLE=%.20s", off);
        return;
    }
    uint64_t free_b;
    if (!ctx->mesa_cache_dir[0] || !free_bytes_under(ctx->mesa_cache_dir, &free_b) ||
        gpu_mesa_cache_fits(ctx->mesa_cache_dir, free_b))
        return;
    /* read by the driver when it starts, which is next */
    setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
    setenv("MESA_GLSL_CACHE_DISABLE", "true", 1);
    snprintf(ctx->mesa_cache_off, sizeof ctx->mesa_cache_off,
             "Mesa's shader cache is off for this run: only %llu KiB free on the disk of %.200s "
             "(a full disk there ends the process inside the driver); free some space, or point "
             "MESA_SHADER_CACHE_DIR at another disk",
             (unsigned long long)(free_b >> 10), ctx->mesa_cache_dir);
    ctx->mesa_cache_warn = true;
}

static void cache_path(const gpu_context *ctx, const char *source, char *out, size_t n)
{
    uint64_t h = fnv1a64(ctx->renderer, strlen(ctx->renderer), SEED_A);
    h = fnv1a64(ctx->version, strlen(ctx->version), h);
    h = fnv1a64(source, strlen(source), h);
    snprintf(out, n, "%s/%016llx.bin", ctx->cache_dir, (unsigned long long)h);
}

/* The whole file, or NULL. */
static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size > 0 && (unsigned long)size <= MAX_PAYLOAD + 4096 && fseek(f, 0, SEEK_SET) == 0) {
            buf = malloc((size_t)size);
            if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
                free(buf);
                buf = NULL;
            }
            *len = (size_t)size;
        }
    }
    fclose(f);
    return buf;
}

bool gpu_cache_load(gpu_context *ctx, const char *source, GLuint prog)
{
    char path[1200];
    cache_path(ctx, source, path, sizeof path);
    size_t len = 0;
    unsigned char *buf = read_file(path, &len);
    if (!buf)
        return false;
    bool ok = false;
    cache_header h;
    size_t rlen = strlen(ctx->renderer), vlen = strlen(ctx->version);
    if (len >= sizeof h) {
        memcpy(&h, buf, sizeof h);
        size_t want = sizeof h + (size_t)h.renderer_len + h.version_len;
        ok = memcmp(h.magic, CACHE_MAGIC, 8) == 0 && h.reserved == 0 && h.renderer_len == rlen &&
             h.version_len == vlen && h.payload_len > 0 && h.payload_len <= MAX_PAYLOAD &&
             len == want + h.payload_len &&
             memcmp(buf + sizeof h, ctx->renderer, rlen) == 0 &&
             memcmp(buf + sizeof h + rlen, ctx->version, vlen) == 0 &&
             h.source_hash[0] == fnv1a64(source, strlen(source), SEED_A) &&
             h.source_hash[1] == fnv1a64(source, strlen(source), SEED_B) &&
             h.payload_hash == fnv1a64(buf + want, (size_t)h.payload_len, SEED_A);
        if (ok) {
            gpu_gl_clear_errors();
            glProgramBinary(prog, h.binary_format, buf + want, (GLsizei)h.payload_len);
            GLint linked = 0;
            glGetProgramiv(prog, GL_LINK_STATUS, &linked);
            ok = glGetError() == GL_NO_ERROR && linked;
        }
    }
    free(buf);
    if (!ok)
        unlink(path); /* stale or broken: rewritten after the compile */
    return ok;
}

void gpu_cache_store(gpu_context *ctx, const char *source, GLuint prog)
{
    GLint size = 0;
    glGetProgramiv(prog, GL_PROGRAM_BINARY_LENGTH, &size);
    if (size <= 0 || (uint32_t)size > MAX_PAYLOAD) {
        gpu_gl_clear_errors();
        return;
    }
    unsigned char *payload = malloc((size_t)size);
    if (!payload)
        return;
    GLenum format = 0;
    GLsizei got = 0;
    glGetProgramBinary(prog, size, &got, &format, payload);
    if (glGetError() != GL_NO_ERROR || got <= 0) {
        free(payload);
        return;
    }
    cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.binary_format = format;
    h.renderer_len = (uint32_t)strlen(ctx->renderer);
    h.version_len = (uint32_t)strlen(ctx->version);
    h.payload_len = (uint64_t)got;
    h.payload_hash = fnv1a64(payload, (size_t)got, SEED_A);
    h.source_hash[0] = fnv1a64(source, strlen(source), SEED_A);
    h.source_hash[1] = fnv1a64(source, strlen(source), SEED_B);

    char path[1200], tmp[1300];
    cache_path(ctx, source, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 &&
              fwrite(ctx->renderer, 1, h.renderer_len, f) == h.renderer_len &&
              fwrite(ctx->version, 1, h.version_len, f) == h.version_len &&
              fwrite(payload, 1, (size_t)got, f) == (size_t)got;
    if (f && fclose(f) != 0)
        ok = false;
    /* The cache is an optimisation: a failed write only costs a compile. */
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
    free(payload);
}
