/* glesllm info --gpu: what the engine would run on. */
#include <GLES3/gl31.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "gpu/gpu.h"

static void info_usage(FILE *f)
{
    fprintf(f, "usage: glesllm info --gpu\n"
               "  --gpu    open the GPU as the engine would and print the EGL platform,\n"
               "           GL_VENDOR/RENDERER/VERSION, the limits used, optional extensions\n"
               "           and whether the program cache is on\n");
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static int info_gpu(void)
{
    gpu_options opt;
    glesllm_status st = gpu_options_from_env(&opt);
    if (st != GLESLLM_OK)
        return cli_fail("bad environment", st);
    gpu_context *ctx = NULL;
    st = gpu_context_create(&opt, &ctx);
    if (st != GLESLLM_OK)
        return cli_fail("cannot open the GPU", st);
    const gpu_limits *L = gpu_context_limits(ctx);
    const gpu_caps *C = gpu_context_caps(ctx);
    printf("platform:            %s (%s)\n", gpu_platform_name(gpu_context_platform(ctx)),
           gpu_context_display_desc(ctx));
    printf("GL_VENDOR:           %s\n", gpu_context_string(ctx, GL_VENDOR));
    printf("GL_RENDERER:         %s\n", gpu_context_string(ctx, GL_RENDERER));
    printf("GL_VERSION:          %s\n", gpu_context_string(ctx, GL_VERSION));
    printf("GLSL version:        %s\n", gpu_context_string(ctx, GL_SHADING_LANGUAGE_VERSION));
    printf("limits used%s:\n", gpu_context_limits_min(ctx) ? " (GLESLLM_LIMITS=min: GLES 3.1 minimums)" : "");
    printf("  work group invocations     %u\n", L->max_invocations);
    printf("  work group size            %u x %u x %u\n", L->max_group_size[0], L->max_group_size[1],
           L->max_group_size[2]);
    printf("  work group count           %u x %u x %u\n", L->max_group_count[0],
           L->max_group_count[1], L->max_group_count[2]);
    printf("  shared memory              %u bytes\n", L->max_shared_bytes);
    printf("  storage blocks per shader  %u\n", L->max_storage_blocks);
    printf("  storage buffer bindings    %u\n", L->max_storage_bindings);
    printf("  storage block size         %llu MiB\n",
           (unsigned long long)(L->max_storage_block_bytes >> 20));
    printf("  storage offset alignment   %u bytes\n", L->storage_offset_alignment);
    printf("optional extensions:\n");
    printf("  GL_EXT_buffer_storage      %s\n", yes_no(C->buffer_storage));
    if (C->subgroup)
        printf("  GL_KHR_shader_subgroup     yes (subgroup size %u)\n", C->subgroup_size);
    else
        printf("  GL_KHR_shader_subgroup     no%s\n",
               gpu_context_limits_min(ctx) ? " (off under GLESLLM_LIMITS=min)" : "");
    printf("  fp16 arithmetic            %s%s\n", yes_no(C->fp16_arith),
           C->mediump_is_fp16 ? " (mediump float is fp16)" : "");
    printf("  program binaries           %s\n", yes_no(C->program_binary));
    if (C->memory_source)
        printf("GPU memory:          %llu MiB, %llu MiB free (%s)\n",
               (unsigned long long)(C->memory_total >> 20),
               (unsigned long long)(gpu_context_memory_available(ctx) >> 20), C->memory_source);
    else
        printf("GPU memory:          not reported by the driver\n");
    const char *dir = gpu_context_cache_dir(ctx);
    if (dir)
        printf("program cache:       on (%s)\n", dir);
    else
        printf("program cache:       off (%s)\n", gpu_context_cache_off_reason(ctx));
    gpu_context_destroy(ctx);
    return 0;
}

int cmd_info(int argc, char **argv)
{
    bool gpu = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0)
            gpu = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            info_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "glesllm info: unknown argument '%s'\n", argv[i]);
            info_usage(stderr);
            return 2;
        }
    }
    if (!gpu) {
        info_usage(stderr);
        return 2;
    }
    return info_gpu();
}
