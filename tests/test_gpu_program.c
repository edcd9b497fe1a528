/* Programs: compile errors that show the failing line, #define variants,
 * #include of snippets, and the on-disk program cache (second build links
 * from the cache; truncated, corrupted and foreign files are recovered from;
 * GLESLLM_NO_CACHE writes nothing); when Mesa's own cache is safe on a disk
 * with little room, and what a context says of it. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ops/ref_ops.h"
#include "test_gpu.h"

void setUp(void) {}
void tearDown(void) {}

static gpu_context *open_with_cache(const char *dir, bool no_cache)
{
    gpu_options opt;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_options_from_env(&opt));
    opt.cache_dir = dir;
    opt.no_cache = no_cache;
    gpu_context *ctx = NULL;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gpu_context_create(&opt, &ctx), glesllm_last_error());
    return ctx;
}

static const char broken_src[] = "#include \"common.glsl\"\n"           /* line 2 */
                                 "layout(local_size_x = 64) in;\n"       /* line 3 */
                                 "layout(std430, binding = 0) buffer B { float b[]; };\n"
                                 "void main()\n"                         /* line 5 */
                                 "{\n"
                                 "    b[0] = undefined_thing * 2.0;\n"   /* line 7 */
                                 "}\n";

static void test_compile_error_shows_the_failing_line(void)
{
    gpu_context *ctx = open_with_cache(NULL, true);
    gpu_program p;
    glesllm_status st = gpu_program_build_source(ctx, "broken.comp", broken_src, NULL, &p);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_SHADER, st);
    const char *msg = glesllm_last_error();
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(msg, "kernel broken.comp failed to compile"), msg);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(msg, "undefined_thing"), msg);
    /* the numbered line: #version is line 1, common.glsl's lines come in
     * place of the #include, and the failing line is marked with '>' */
    char *text = NULL;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_program_assemble("broken.comp", broken_src, NULL, &text));
    int line = 0, n = 1;
    for (const char *q = text; *q; q++) {
        if (strncmp(q, "    b[0] = undefined_thing", 26) == 0 && (q == text || q[-1] == '\n')) {
            line = n;
            break;
        }
        if (*q == '\n')
            n++;
    }
    free(text);
    TEST_ASSERT_GREATER_THAN_INT(2, line);
    char want[96];
    snprintf(want, sizeof want, ">%4d |     b[0] = undefined_thing * 2.0;", line);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(msg, want), msg);
    TEST_ASSERT_EQUAL_UINT(0, p.id);
    gpu_context_destroy(ctx);
}

static void test_defines_and_includes(void)
{
    char *text = NULL;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK,
                          gpu_program_assemble("rms_norm.comp", gpu_kernel_source("rms_norm.comp"),
                                               "WG_SIZE 64\nUSE_SUBGROUP 1", &text));
    TEST_ASSERT_EQUAL_INT(0, strncmp(text, "#version 310 es\n#define WG_SIZE 64\n#define USE_SUBGROUP 1\n", 57));
    TEST_ASSERT_NULL(strstr(text, "#include"));
    TEST_ASSERT_NOT_NULL(strstr(text, "float wg_reduce_sum(float v)")); /* from reduce.glsl */
    free(text);
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_SHADER,
                          gpu_program_assemble("x.comp", "#include \"missing.glsl\"\n", NULL, &text));
    TEST_ASSERT_NOT_NULL(strstr(glesllm_last_error(), "missing.glsl"));
    TEST_ASSERT_NULL(gpu_kernel_source("missing.comp"));
    gpu_context *ctx = open_with_cache(NULL, true);
    gpu_program p;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_SHADER, gpu_program_build(ctx, "missing.comp", NULL, &p));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_program_build(ctx, "rms_norm.comp", "WG_SIZE 32", &p));
    TEST_ASSERT_EQUAL_UINT32(32, p.local_size[0]);
    gpu_program_destroy(&p);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_program_build(ctx, "rms_norm.comp", "WG_SIZE 128", &p));
    TEST_ASSERT_EQUAL_UINT32(128, p.local_size[0]);
    gpu_program_destroy(&p);
    gpu_context_destroy(ctx);
}

/* ---- program cache -------------------------------------------------------- */

static char cache_dir[512];

static int count_files(const char *dir, char *first, size_t n)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (count++ == 0 && first)
            snprintf(first, n, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    return count;
}

/* Builds rms_norm from the cache folder in a fresh context, runs it on
 * random data against the CPU, and returns whether it came from the cache. */
static bool build_and_run(void)
{
    gpu_context *ctx = open_with_cache(cache_dir, false);
    if (!gpu_context_cache_dir(ctx)) {
        gpu_context_destroy(ctx);
        TEST_IGNORE_MESSAGE("program cache off: the driver offers no program binary formats");
    }
    gpu_program p;
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, gpu_program_build(ctx, "rms_norm.comp", "WG_SIZE 64", &p),
                                  glesllm_last_error());
    bool cached = p.from_cache;
    enum { R = 2, C = 100 };
    test_rng rng = { 5 };
    float x[R * C], w[C], y[R * C], ref[R * C];
    rng_fill(&rng, x, R * C, -1.0f, 1.0f);
    rng_fill(&rng, w, C, 0.5f, 1.5f);
    ref_rms_norm(ref, x, w, R, C, 1e-5f);
    gpu_buffer bx, bw, by;
    gpu_queue *q;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_create(ctx, &q));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof x, x, 0, "x", &bx));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof w, w, 0, "w", &bw));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_create(ctx, sizeof y, NULL, 0, "y", &by));
    gpu_dispatch d = test_rms_dispatch(&p, &bx, &bw, &by, R, C, 1e-5f);
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_dispatch(q, &d));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_submit(q));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_queue_wait(q, 0));
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_buffer_read(ctx, &by, 0, y, sizeof y));
    /* same kernel as test_gpu_kernel: 2e-6 relative */
    TEST_ASSERT_TRUE_MESSAGE(max_rel_error(y, ref, R * C, 1e-3) < 2e-6,
                             cached ? "program from the cache computes wrongly" : "compiled program wrong");
    gpu_buffer_destroy(&bx);
    gpu_buffer_destroy(&bw);
    gpu_buffer_destroy(&by);
    gpu_queue_destroy(q);
    gpu_program_destroy(&p);
    gpu_context_destroy(ctx);
    return cached;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void rewrite(const char *path, const unsigned char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    TEST_ASSERT_NOT_NULL(f);
    TEST_ASSERT_EQUAL_size_t(n, fwrite(data, 1, n, f));
    fclose(f);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    TEST_ASSERT_NOT_NULL(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    TEST_ASSERT_EQUAL_size_t(*n, fread(b, 1, *n, f));
    fclose(f);
    return b;
}

static void test_program_cache(void)
{
    const char *base = getenv("XDG_CACHE_HOME");
    snprintf(cache_dir, sizeof cache_dir, "%s/program-cache-test-%ld", base ? base : "/tmp",
             (long)getpid());
    char file[700];
    TEST_ASSERT_FALSE_MESSAGE(build_and_run(), "first build must compile");
    TEST_ASSERT_EQUAL_INT(1, count_files(cache_dir, file, sizeof file));
    long good_size = file_size(file);
    TEST_ASSERT_GREATER_THAN_INT(56, good_size);
    TEST_ASSERT_TRUE_MESSAGE(build_and_run(), "second build must link from the cache");

    size_t n;
    unsigned char *good = slurp(file, &n);
    /* truncated: ignored, rewritten whole, then used again */
    rewrite(file, good, n / 2);
    TEST_ASSERT_FALSE(build_and_run());
    TEST_ASSERT_EQUAL_INT(good_size, file_size(file));
    TEST_ASSERT_TRUE(build_and_run());
    /* a flipped byte in the driver's binary */
    unsigned char *bad = malloc(n);
    memcpy(bad, good, n);
    bad[n - 10] ^= 0x5a;
    rewrite(file, bad, n);
    TEST_ASSERT_FALSE(build_and_run());
    TEST_ASSERT_TRUE(build_and_run());
    /* foreign: another renderer's header (first byte of the renderer name) */
    memcpy(bad, good, n);
    bad[56] ^= 0x20;
    rewrite(file, bad, n);
    TEST_ASSERT_FALSE(build_and_run());
    TEST_ASSERT_TRUE(build_and_run());
    /* not a cache file at all */
    rewrite(file, (const unsigned char *)"hello", 5);
    TEST_ASSERT_FALSE(build_and_run());
    TEST_ASSERT_TRUE(build_and_run());
    TEST_ASSERT_EQUAL_INT(1, count_files(cache_dir, NULL, 0));
    free(bad);
    free(good);
    unlink(file);
    rmdir(cache_dir);
}

static void test_no_cache_writes_nothing(void)
{
    char dir[600];
    const char *base = getenv("XDG_CACHE_HOME");
    snprintf(dir, sizeof dir, "%s/no-cache-test-%ld", base ? base : "/tmp", (long)getpid());
    gpu_context *ctx = open_with_cache(dir, true);
    TEST_ASSERT_NULL(gpu_context_cache_dir(ctx));
    TEST_ASSERT_EQUAL_STRING("GLESLLM_NO_CACHE=1", gpu_context_cache_off_reason(ctx));
    gpu_program p;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_program_build(ctx, "rms_norm.comp", "WG_SIZE 64", &p));
    TEST_ASSERT_FALSE(p.from_cache);
    gpu_program_destroy(&p);
    gpu_context_destroy(ctx);
    TEST_ASSERT_EQUAL_INT(0, count_files(dir, NULL, 0));
}

/* Mesa's index is made with ftruncate and gets its disk blocks page by page
 * (program_cache.c): with none yet, 1.3 MB and 4 MiB besides must be free;
 * with every page written, nothing; partly written, what it lacks and
 * 4 MiB. (The run on a full disk itself: .ci/run, which can mount one.) */
static void test_mesa_cache_room(void)
{
    char dir[600], index[700];
    const char *base = getenv("XDG_CACHE_HOME");
    snprintf(dir, sizeof dir, "%s/mesa-room-test-%ld", base ? base : "/tmp", (long)getpid());
    snprintf(index, sizeof index, "%s/index", dir);
    TEST_ASSERT_EQUAL_INT(0, mkdir(dir, 0755));
    const uint64_t mib = 1 << 20, index_bytes = 65536 * 20 + 8;
    TEST_ASSERT_FALSE(gpu_mesa_cache_fits(dir, 5 * mib)); /* no index yet */
    TEST_ASSERT_TRUE(gpu_mesa_cache_fits(dir, 6 * mib));
    int fd = open(index, O_CREAT | O_WRONLY, 0644);
    TEST_ASSERT_TRUE(fd >= 0);
    TEST_ASSERT_EQUAL_INT(0, ftruncate(fd, (off_t)index_bytes)); /* Mesa's, before any write */
    struct stat st;
    TEST_ASSERT_EQUAL_INT(0, fstat(fd, &st));
    if ((uint64_t)st.st_blocks * 512 < index_bytes) { /* (a disk that keeps holes) */
        TEST_ASSERT_FALSE(gpu_mesa_cache_fits(dir, 5 * mib));
        TEST_ASSERT_TRUE(gpu_mesa_cache_fits(dir, 6 * mib));
    }
    static unsigned char page[4096];
    memset(page, 0xa5, sizeof page);
    for (uint64_t at = 0; at < index_bytes; at += sizeof page) {
        size_t n = index_bytes - at < sizeof page ? (size_t)(index_bytes - at) : sizeof page;
        TEST_ASSERT_EQUAL_INT((int)n, (int)pwrite(fd, page, n, (off_t)at));
    }
    TEST_ASSERT_EQUAL_INT(0, fsync(fd));
    TEST_ASSERT_EQUAL_INT(0, fstat(fd, &st));
    TEST_ASSERT_EQUAL_INT(0, close(fd));
    if ((uint64_t)st.st_blocks * 512 >= index_bytes) /* (not on a compressing disk) */
        TEST_ASSERT_TRUE(gpu_mesa_cache_fits(dir, 0));
    unlink(index);
    rmdir(dir);
    /* where the context says Mesa's cache is, and that it is on here (the
     * suite's disk has room) unless Mesa's variable says otherwise */
    gpu_context *ctx = open_with_cache(NULL, true);
    const char *off, *folder = gpu_context_mesa_cache(ctx, &off);
    if (base && !getenv("MESA_SHADER_CACHE_DIR") && !getenv("MESA_GLSL_CACHE_DIR")) {
        char want[600];
        snprintf(want, sizeof want, "%s/mesa_shader_cache", base);
        TEST_ASSERT_EQUAL_STRING(want, folder);
    }
    if (!getenv("MESA_SHADER_CACHE_DISABLE") && !getenv("MESA_GLSL_CACHE_DISABLE")) {
        TEST_ASSERT_EQUAL_STRING("", off);
        TEST_ASSERT_NULL(gpu_context_warning(ctx));
    }
    gpu_context_destroy(ctx);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_compile_error_shows_the_failing_line);
    RUN_TEST(test_defines_and_includes);
    RUN_TEST(test_program_cache);
    RUN_TEST(test_no_cache_writes_nothing);
    RUN_TEST(test_mesa_cache_room);
    return test_exit_code(UNITY_END());
}
