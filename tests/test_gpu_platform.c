/* EGL display selection: each platform forced in turn, the automatic order,
 * and bad environment values. (A driver below OpenGL ES 3.1: test_cli.c.) */
#include <stdlib.h>
#include <string.h>

#include <GLES3/gl31.h>

#include "test_gpu.h"

void setUp(void) {}
void tearDown(void) {}

static gpu_options base_options(gpu_platform p)
{
    gpu_options opt;
    TEST_ASSERT_EQUAL_INT(GLESLLM_OK, gpu_options_from_env(&opt));
    opt.platform = p;
    opt.device_path = NULL;
    opt.no_cache = true;
    return opt;
}

static void check_working_context(gpu_context *ctx, gpu_platform p)
{
    TEST_ASSERT_EQUAL_INT(p, gpu_context_platform(ctx));
    TEST_ASSERT_TRUE(strlen(gpu_context_string(ctx, GL_RENDERER)) > 0);
    TEST_ASSERT_NOT_NULL(strstr(gpu_context_string(ctx, GL_VERSION), "OpenGL ES"));
    const gpu_limits *L = gpu_context_limits(ctx);
    TEST_ASSERT_GREATER_OR_EQUAL_INT(128, L->max_invocations);
    TEST_ASSERT_GREATER_OR_EQUAL_INT(16384, L->max_shared_bytes);
    TEST_ASSERT_GREATER_OR_EQUAL_INT(4, L->max_storage_blocks);
    TEST_ASSERT_TRUE(L->max_storage_block_bytes >= (1ull << 27));
    if (gpu_context_limits_min(ctx)) {
        TEST_ASSERT_EQUAL_UINT32(128, L->max_invocations);
        TEST_ASSERT_EQUAL_UINT32(16384, L->max_shared_bytes);
        TEST_ASSERT_EQUAL_UINT32(4, L->max_storage_blocks);
        TEST_ASSERT_EQUAL_UINT64(1ull << 27, L->max_storage_block_bytes);
        TEST_ASSERT_FALSE(gpu_context_caps(ctx)->subgroup);
    }
}

static void test_auto_order_opens_a_display(void)
{
    gpu_options opt = base_options(GPU_PLATFORM_AUTO);
    gpu_context *ctx = NULL;
    glesllm_status st = gpu_context_create(&opt, &ctx);
    TEST_ASSERT_EQUAL_INT_MESSAGE(GLESLLM_OK, st, glesllm_last_error());
    /* without a render node the automatic order must have fallen back */
    if (!has_render_node())
        TEST_ASSERT_TRUE(gpu_context_platform(ctx) != GPU_PLATFORM_GBM);
    check_working_context(ctx, gpu_context_platform(ctx));
    gpu_context_destroy(ctx);
}

static void test_forced_gbm(void)
{
    gpu_options opt = base_options(GPU_PLATFORM_GBM);
    gpu_context *ctx = NULL;
    glesllm_status st = gpu_context_create(&opt, &ctx);
    if (!has_render_node()) {
        TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_EGL, st);
        TEST_ASSERT_NULL(ctx);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), "GLESLLM_PLATFORM=gbm"),
                                     glesllm_last_error());
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), "no DRM render node (/dev/dri/renderD*)"),
                                     glesllm_last_error());
        return;
    }
    if (st != GLESLLM_OK) {
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), "gbm"), glesllm_last_error());
        return;
    }
    check_working_context(ctx, GPU_PLATFORM_GBM);
    gpu_context_destroy(ctx);
}

static int forced_works(gpu_platform p, const char *env_word)
{
    gpu_options opt = base_options(p);
    gpu_context *ctx = NULL;
    glesllm_status st = gpu_context_create(&opt, &ctx);
    if (st != GLESLLM_OK) {
        TEST_ASSERT_NULL(ctx);
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), env_word), glesllm_last_error());
        printf("  %s cannot work here: %s\n", env_word, glesllm_last_error());
        return 0;
    }
    printf("  %s: %s\n", env_word, gpu_context_string(ctx, GL_RENDERER));
    check_working_context(ctx, p);
    gpu_context_destroy(ctx);
    return 1;
}

static void test_forced_device(void) { forced_works(GPU_PLATFORM_DEVICE, "GLESLLM_PLATFORM=device"); }

static void test_forced_surfaceless(void)
{
    forced_works(GPU_PLATFORM_SURFACELESS, "GLESLLM_PLATFORM=surfaceless");
}

static void test_a_headless_fallback_works(void)
{
    /* what CI and machines without /dev/dri rely on */
    int n = forced_works(GPU_PLATFORM_DEVICE, "GLESLLM_PLATFORM=device") +
            forced_works(GPU_PLATFORM_SURFACELESS, "GLESLLM_PLATFORM=surfaceless");
    TEST_ASSERT_GREATER_THAN_INT(0, n);
}

static void test_missing_device_path_is_named(void)
{
    gpu_options opt = base_options(GPU_PLATFORM_AUTO);
    opt.device_path = "/dev/dri/renderD250";
    gpu_context *ctx = NULL;
    TEST_ASSERT_EQUAL_INT(GLESLLM_ERR_EGL, gpu_context_create(&opt, &ctx));
    TEST_ASSERT_NULL(ctx);
    TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), "/dev/dri/renderD250"),
                                 glesllm_last_error());
}

static void with_env(const char *name, const char *value, glesllm_status want, const char *needle)
{
    const char *old = getenv(name);
    char *saved = old ? strdup(old) : NULL;
    setenv(name, value, 1);
    gpu_options opt;
    glesllm_status st = gpu_options_from_env(&opt);
    if (saved) {
        setenv(name, saved, 1);
        free(saved);
    } else {
        unsetenv(name);
    }
    TEST_ASSERT_EQUAL_INT(want, st);
    if (needle)
        TEST_ASSERT_NOT_NULL_MESSAGE(strstr(glesllm_last_error(), needle), glesllm_last_error());
}

static void test_environment_values(void)
{
    with_env("GLESLLM_PLATFORM", "wayland", GLESLLM_ERR_INVALID_ARGUMENT,
             "use gbm, device, surfaceless or auto");
    with_env("GLESLLM_LIMITS", "tiny", GLESLLM_ERR_INVALID_ARGUMENT, "GLESLLM_LIMITS=tiny");
    with_env("GLESLLM_NO_CACHE", "yes", GLESLLM_ERR_INVALID_ARGUMENT, "GLESLLM_NO_CACHE=yes");
    with_env("GLESLLM_PLATFORM", "surfaceless", GLESLLM_OK, NULL);
    with_env("GLESLLM_LIMITS", "min", GLESLLM_OK, NULL);
}

int main(void)
{
    UNITY_BEGIN();
    RUN_TEST(test_auto_order_opens_a_display);
    RUN_TEST(test_forced_gbm);
    RUN_TEST(test_forced_device);
    RUN_TEST(test_forced_surfaceless);
    RUN_TEST(test_a_headless_fallback_works);
    RUN_TEST(test_missing_device_path_is_named);
    RUN_TEST(test_environment_values);
    return test_exit_code(UNITY_END());
}
