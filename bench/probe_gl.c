/* probe_gl: what a desktop OpenGL 4.6 context, made through the same EGL
 * device display as the engine's OpenGL ES one, offers a prefill matmul on
 * this driver: its version, the extensions that matter (SPIR-V, cooperative
 * matrices, f16 and int8 arithmetic), which GLSL cooperative-matrix
 * extensions its compiler takes (and the ES one's), and where one does, the
 * FLOP/s of a plain cooperative-matrix product C = A B^T in f16 with f32
 * sums (rows x tokens x columns of a 7B model's FFN: 14336 x 512 x 4096),
 * checked against the CPU on a few entries. With --spirv, instead: the
 * outer-product loop of bench_flops as SPIR-V files (GL_ARB_gl_spirv; made
 * from bench/probe_spirv_outer.comp as it says) against the same file's loop
 * as GLSL through the driver's compiler, in the desktop context, TFLOP/s
 * each (o_RxC_sW: with W words of shared memory declared); files named m_N,
 * cooperative-matrix products from bench/probe_spirv_coop.comp, timed
 * alone; any other file only specialized (bench/probe_spirv_idot.spvasm). A
 * driver that does not know a module's capability may crash in
 * glSpecializeShader (NVIDIA's does on the cooperative-matrix and
 * integer-dot modules, Mesa's on the first): run one file a process, and the
 * line "specializing" names the file. A probe for bench/RESULTS.md
 * ("Prefill tiles"), not a kernel of the engine.
 *
 *   probe_gl [ROWS TOKENS COLS]
 *   probe_gl --spirv bench/probe_spirv_outer.comp o_8x4.spv|m_4.spv|idot.spv ... */
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <GLES3/gl31.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef EGL_PLATFORM_DEVICE_EXT
#define EGL_PLATFORM_DEVICE_EXT 0x313F
#endif
#define GL_SPIR_V_EXTENSIONS_ 0x9553
#define GL_NUM_SPIR_V_EXTENSIONS_ 0x9554
#define GL_EXTENSIONS_ 0x1F03
#define GL_NUM_EXTENSIONS_ 0x821D

typedef const GLubyte *(*get_stringi_fn)(GLenum, GLuint);
typedef const GLubyte *(*get_string_fn)(GLenum);
typedef void (*get_integerv_fn)(GLenum, GLint *);
typedef GLuint (*create_shader_fn)(GLenum);
typedef void (*shader_source_fn)(GLuint, GLsizei, const GLchar *const *, const GLint *);
typedef void (*compile_shader_fn)(GLuint);
typedef void (*get_shaderiv_fn)(GLuint, GLenum, GLint *);
typedef void (*get_shader_info_log_fn)(GLuint, GLsizei, GLsizei *, GLchar *);
typedef GLuint (*create_program_fn)(void);
typedef void (*attach_shader_fn)(GLuint, GLuint);
typedef void (*link_program_fn)(GLuint);
typedef void (*get_programiv_fn)(GLuint, GLenum, GLint *);
typedef void (*get_program_info_log_fn)(GLuint, GLsizei, GLsizei *, GLchar *);
typedef void (*use_program_fn)(GLuint);
typedef void (*gen_buffers_fn)(GLsizei, GLuint *);
typedef void (*bind_buffer_fn)(GLenum, GLuint);
typedef void (*buffer_data_fn)(GLenum, GLsizeiptr, const void *, GLenum);
typedef void (*bind_buffer_base_fn)(GLenum, GLuint, GLuint);
typedef void (*dispatch_compute_fn)(GLuint, GLuint, GLuint);
typedef void (*memory_barrier_fn)(GLbitfield);
typedef void (*finish_fn)(void);
typedef void *(*map_buffer_range_fn)(GLenum, GLintptr, GLsizeiptr, GLbitfield);
typedef GLboolean (*unmap_buffer_fn)(GLenum);
typedef void (*shader_binary_fn)(GLsizei, const GLuint *, GLenum, const void *, GLsizei);
typedef void (*specialize_shader_fn)(GLuint, const GLchar *, GLuint, const GLuint *,
                                     const GLuint *);
typedef void (*uniform1ui_fn)(GLint, GLuint);

static struct {
    get_stringi_fn GetStringi;
    get_string_fn GetString;
    get_integerv_fn GetIntegerv;
    create_shader_fn CreateShader;
    shader_source_fn ShaderSource;
    compile_shader_fn CompileShader;
    get_shaderiv_fn GetShaderiv;
    get_shader_info_log_fn GetShaderInfoLog;
    create_program_fn CreateProgram;
    attach_shader_fn AttachShader;
    link_program_fn LinkProgram;
    get_programiv_fn GetProgramiv;
    get_program_info_log_fn GetProgramInfoLog;
    use_program_fn UseProgram;
    gen_buffers_fn GenBuffers;
    bind_buffer_fn BindBuffer;
    buffer_data_fn BufferData;
    bind_buffer_base_fn BindBufferBase;
    dispatch_compute_fn DispatchCompute;
    memory_barrier_fn MemoryBarrier;
    finish_fn Finish;
    map_buffer_range_fn MapBufferRange;
    unmap_buffer_fn UnmapBuffer;
    shader_binary_fn ShaderBinary;
    specialize_shader_fn SpecializeShader;
    uniform1ui_fn Uniform1ui;
} gl;

#define LOAD(name) (*(void **)&gl.name = (void *)eglGetProcAddress("gl" #name))

static void load_gl(void)
{
    LOAD(GetStringi), LOAD(GetString), LOAD(GetIntegerv), LOAD(CreateShader), LOAD(ShaderSource);
    LOAD(CompileShader), LOAD(GetShaderiv), LOAD(GetShaderInfoLog), LOAD(CreateProgram);
    LOAD(AttachShader), LOAD(LinkProgram), LOAD(GetProgramiv), LOAD(GetProgramInfoLog);
    LOAD(UseProgram), LOAD(GenBuffers), LOAD(BindBuffer), LOAD(BufferData), LOAD(BindBufferBase);
    LOAD(DispatchCompute), LOAD(MemoryBarrier), LOAD(Finish), LOAD(MapBufferRange);
    LOAD(UnmapBuffer), LOAD(ShaderBinary), LOAD(SpecializeShader), LOAD(Uniform1ui);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The first EGL device's display, initialised. */
static EGLDisplay device_display(void)
{
    PFNEGLQUERYDEVICESEXTPROC query =
        (PFNEGLQUERYDEVICESEXTPROC)eglGetProcAddress("eglQueryDevicesEXT");
    PFNEGLGETPLATFORMDISPLAYEXTPROC get =
        (PFNEGLGETPLATFORMDISPLAYEXTPROC)eglGetProcAddress("eglGetPlatformDisplayEXT");
    EGLDeviceEXT devs[8];
    EGLint n = 0;
    if (!query || !get || !query(8, devs, &n) || n < 1)
        return EGL_NO_DISPLAY;
    for (EGLint i = 0; i < n; i++) {
        EGLDisplay d = get(EGL_PLATFORM_DEVICE_EXT, devs[i], NULL);
        if (d != EGL_NO_DISPLAY && eglInitialize(d, NULL, NULL))
            return d;
    }
    return EGL_NO_DISPLAY;
}

/* A context of api (EGL_OPENGL_API 4.minor core, or EGL_OPENGL_ES_API 3.1), current. */
static EGLContext make_context(EGLDisplay d, EGLenum api, int minor)
{
    if (!eglBindAPI(api))
        return EGL_NO_CONTEXT;
    EGLint cfg_attr[] = { EGL_RENDERABLE_TYPE,
                          api == EGL_OPENGL_API ? EGL_OPENGL_BIT : EGL_OPENGL_ES3_BIT,
                          EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_NONE };
    EGLConfig cfg;
    EGLint n = 0;
    if (!eglChooseConfig(d, cfg_attr, &cfg, 1, &n) || n < 1)
        return EGL_NO_CONTEXT;
    EGLint gl_attr[] = { EGL_CONTEXT_MAJOR_VERSION, 4, EGL_CONTEXT_MINOR_VERSION, minor,
                         EGL_CONTEXT_OPENGL_PROFILE_MASK, EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                         EGL_NONE };
    EGLint es_attr[] = { EGL_CONTEXT_MAJOR_VERSION, 3, EGL_CONTEXT_MINOR_VERSION, 1, EGL_NONE };
    EGLContext c = eglCreateContext(d, cfg, EGL_NO_CONTEXT,
                                    api == EGL_OPENGL_API ? gl_attr : es_attr);
    if (c == EGL_NO_CONTEXT || !eglMakeCurrent(d, EGL_NO_SURFACE, EGL_NO_SURFACE, c))
        return EGL_NO_CONTEXT;
    load_gl();
    return c;
}

static int has_ext(const char *name)
{
    GLint n = 0;
    gl.GetIntegerv(GL_NUM_EXTENSIONS_, &n);
    for (GLint i = 0; i < n; i++)
        if (!strcmp((const char *)gl.GetStringi(GL_EXTENSIONS_, (GLuint)i), name))
            return 1;
    return 0;
}

/* The program of compute shader s (compiled or specialized: `done` says
 * it, `failed` its failure), 0 when that failed or it does not link (the
 * log's first line said). */
static GLuint link_shader(GLuint s, const char *what, const char *done, const char *failed)
{
    GLint ok = 0;
    char log[4096] = "";
    gl.GetShaderiv(s, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        gl.GetShaderInfoLog(s, sizeof log, NULL, log);
        char *nl = strchr(log, '\n');
        if (nl)
            *nl = '\0';
        printf("  %-46s %s: %s\n", what, failed, *log ? log : "(no log)");
        return 0;
    }
    GLuint p = gl.CreateProgram();
    gl.AttachShader(p, s);
    gl.LinkProgram(p);
    gl.GetProgramiv(p, GL_LINK_STATUS, &ok);
    if (!ok) {
        gl.GetProgramInfoLog(p, sizeof log, NULL, log);
        printf("  %-46s %s, does not link: %.200s\n", what, done, log);
        return 0;
    }
    printf("  %-46s %s and links\n", what, done);
    return p;
}

/* A compute program of src, 0 when it does not compile or link. */
static GLuint compile(const char *src, const char *what)
{
    GLuint s = gl.CreateShader(GL_COMPUTE_SHADER);
    gl.ShaderSource(s, 1, &src, NULL);
    gl.CompileShader(s);
    return link_shader(s, what, "compiles", "does not compile");
}

/* C[r][t] = sum_k A[r][k] B[t][k]: each subgroup of 32 a 32 x 32 block of
 * C in four 16 x 16 cooperative matrices, A and B read from memory (no
 * shared-memory staging: a floor, not what a tuned kernel reaches). */
static const char *coop_nv_src =
    "#version 450\n"
    "#extension GL_NV_cooperative_matrix : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "#extension GL_KHR_memory_scope_semantics : require\n"
    "#extension GL_KHR_shader_subgroup_basic : require\n"
    "layout(local_size_x = 128) in;\n"
    "layout(std430, binding = 0) readonly buffer A { float16_t a[]; };\n"
    "layout(std430, binding = 1) readonly buffer B { float16_t b[]; };\n"
    "layout(std430, binding = 2) writeonly buffer C { float c[]; };\n"
    "void main() {\n"
    "  uint sg = gl_SubgroupID;\n"
    "  uint r0 = gl_WorkGroupID.x * 64u + (sg & 1u) * 32u, t0 = gl_WorkGroupID.y * 64u + (sg >> 1) * 32u;\n"
    "  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][2];\n"
    "  for (int i = 0; i < 2; i++) for (int j = 0; j < 2; j++)\n"
    "    acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);\n"
    "  for (uint k = 0u; k < COLS; k += 16u) {\n"
    "    fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma[2], mb[2];\n"
    "    for (int i = 0; i < 2; i++) {\n"
    "      coopMatLoadNV(ma[i], a, (r0 + uint(i) * 16u) * COLS + k, COLS, false);\n"
    "      coopMatLoadNV(mb[i], b, (t0 + uint(i) * 16u) * COLS + k, COLS, true);\n"
    "    }\n"
    "    for (int i = 0; i < 2; i++) for (int j = 0; j < 2; j++)\n"
    "      acc[i][j] = coopMatMulAddNV(ma[i], mb[j], acc[i][j]);\n"
    "  }\n"
    "  for (int i = 0; i < 2; i++) for (int j = 0; j < 2; j++)\n"
    "    coopMatStoreNV(acc[i][j], c, (r0 + uint(i) * 16u) * TOKENS + t0 + uint(j) * 16u, TOKENS, false);\n"
    "}\n";

static const char *coop_khr_src =
    "#version 450\n"
    "#extension GL_KHR_cooperative_matrix : require\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "#extension GL_KHR_memory_scope_semantics : require\n"
    "layout(local_size_x = 32) in;\n"
    "layout(std430, binding = 0) readonly buffer A { float16_t a[]; };\n"
    "void main() {\n"
    "  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> m;\n"
    "  coopMatLoad(m, a, 0u, 16u, gl_CooperativeMatrixLayoutRowMajor);\n"
    "}\n";

static const char *f16_src =
    "#version 450\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n"
    "layout(local_size_x = 32) in;\n"
    "layout(std430, binding = 0) buffer A { f16vec2 a[]; };\n"
    "void main() { a[gl_GlobalInvocationID.x] = a[gl_GlobalInvocationID.x] * f16vec2(2.0); }\n";

static const char *nv5_src =
    "#version 450\n"
    "#extension GL_NV_gpu_shader5 : require\n"
    "layout(local_size_x = 32) in;\n"
    "layout(std430, binding = 0) buffer A { f16vec2 a[]; };\n"
    "void main() { a[gl_GlobalInvocationID.x] = fma(a[gl_GlobalInvocationID.x], f16vec2(2.0), f16vec2(1.0)); }\n";

static const char *int8_src =
    "#version 450\n"
    "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n"
    "#extension GL_EXT_shader_integer_dot_product : require\n"
    "layout(local_size_x = 32) in;\n"
    "layout(std430, binding = 0) buffer A { int a[]; };\n"
    "void main() { a[0] = dotEXT(i8vec4(1), i8vec4(2)); }\n";

static const char *coop_es_src =
    "#version 310 es\n"
    "#extension GL_NV_cooperative_matrix : require\n"
    "layout(local_size_x = 32) in;\n"
    "void main() {}\n";

static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (e < 113)
        return (uint16_t)sign; /* (small values: zero, enough for a probe) */
    return (uint16_t)(sign | ((e - 112) << 10) | (m >> 13));
}

static float from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t x = e ? sign | ((e + 112) << 23) | (m << 13) : sign;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void bench_coop(unsigned rows, unsigned tokens, unsigned cols)
{
    char src[8192];
    snprintf(src, sizeof src, "%s", coop_nv_src);
    char defs[128];
    snprintf(defs, sizeof defs, "#define COLS %uu\n#define TOKENS %uu\n", cols, tokens);
    /* the defines after the #extension lines */
    char *body = strstr(src, "layout(local_size_x");
    char full[8192];
    snprintf(full, sizeof full, "%.*s%s%s", (int)(body - src), src, defs, body);
    GLuint p = compile(full, "GL_NV_cooperative_matrix product (timed)");
    if (!p)
        return;
    size_t na = (size_t)rows * cols, nb = (size_t)tokens * cols;
    uint16_t *ha = malloc(na * 2), *hb = malloc(nb * 2);
    uint64_t s = 12345;
    for (size_t i = 0; i < na + nb; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        float v = (float)((s >> 40) % 2001) / 1000.0f - 1.0f; /* [-1, 1] */
        if (i < na)
            ha[i] = to_half(v);
        else
            hb[i - na] = to_half(v);
    }
    GLuint buf[3];
    gl.GenBuffers(3, buf);
    gl.BindBuffer(GL_SHADER_STORAGE_BUFFER, buf[0]);
    gl.BufferData(GL_SHADER_STORAGE_BUFFER, (GLsizeiptr)(na * 2), ha, GL_STATIC_DRAW);
    gl.BindBuffer(GL_SHADER_STORAGE_BUFFER, buf[1]);
    gl.BufferData(GL_SHADER_STORAGE_BUFFER, (GLsizeiptr)(nb * 2), hb, GL_STATIC_DRAW);
    gl.BindBuffer(GL_SHADER_STORAGE_BUFFER, buf[2]);
    gl.BufferData(GL_SHADER_STORAGE_BUFFER, (GLsizeiptr)((size_t)rows * tokens * 4), NULL,
                  GL_DYNAMIC_READ);
    for (GLuint i = 0; i < 3; i++)
        gl.BindBufferBase(GL_SHADER_STORAGE_BUFFER, i, buf[i]);
    gl.UseProgram(p);
    gl.DispatchCompute(rows / 64, tokens / 64, 1); /* warm-up */
    gl.Finish();
    int reps = 20;
    double t0 = now();
    for (int r = 0; r < reps; r++)
        gl.DispatchCompute(rows / 64, tokens / 64, 1);
    gl.Finish();
    double sec = (now() - t0) / reps;
    gl.MemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
    gl.BindBuffer(GL_SHADER_STORAGE_BUFFER, buf[2]);
    const float *c = gl.MapBufferRange(GL_SHADER_STORAGE_BUFFER, 0,
                                       (GLsizeiptr)((size_t)rows * tokens * 4), GL_MAP_READ_BIT);
    double worst = 0.0;
    for (int k = 0; c && k < 16; k++) {
        unsigned r = (unsigned)((k * 7919u) % rows), t = (unsigned)((k * 104729u) % tokens);
        double want = 0.0;
        for (unsigned i = 0; i < cols; i++)
            want += (double)from_half(ha[(size_t)r * cols + i]) * from_half(hb[(size_t)t * cols + i]);
        double e = fabs(c[(size_t)r * tokens + t] - want) / (fabs(want) + 1.0);
        worst = e > worst ? e : worst;
    }
    if (c)
        gl.UnmapBuffer(GL_SHADER_STORAGE_BUFFER);
    printf("  %u x %u x %u: %.3f ms, %.1f TFLOP/s; 16 entries within %.1e of the CPU's "
           "(relative, over |C| + 1)\n",
           rows, tokens, cols, sec * 1e3, 2.0 * rows * tokens * cols / sec / 1e12, worst);
    free(ha);
    free(hb);
}

/* path's bytes into buf (cap bytes at most), its length; 0 (said) when it
 * cannot be read or does not fit */
static size_t read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("  %s: cannot be read\n", path);
        return 0;
    }
    size_t n = fread(buf, 1, cap, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    if (more) {
        printf("  %s: larger than %zu bytes\n", path, cap);
        return 0;
    }
    return n;
}

/* A compute program from a SPIR-V file, 0 when the driver refuses it. */
static GLuint from_spirv(const char *path)
{
    static char bin[1 << 22];
    size_t n = read_file(path, bin, sizeof bin);
    if (!n)
        return 0;
    printf("  %s: specializing\n", path);
    GLuint s = gl.CreateShader(GL_COMPUTE_SHADER);
    gl.ShaderBinary(1, &s, 0x9551 /* GL_SHADER_BINARY_FORMAT_SPIR_V */, bin, (GLsizei)n);
    gl.SpecializeShader(s, "main", 0, NULL, NULL);
    return link_shader(s, path, "is specialized", "is not specialized");
}

/* The outer-product source (its #version line first) as GLSL for the
 * driver's compiler, with an om x on block (and shm words of shared memory
 * declared, if not 0), compiled. */
static GLuint outer_from_glsl(const char *src, int om, int on, int shm)
{
    const char *body = strchr(src, '\n');
    if (!body)
        return 0;
    static char full[1 << 16];
    char shm_def[32] = "";
    if (shm)
        snprintf(shm_def, sizeof shm_def, "\n#define SHM %d", shm);
    snprintf(full, sizeof full, "%.*s\n#define OM %d\n#define ON %d%s%s", (int)(body - src), src,
             om, on, shm_def, body);
    char what[64];
    if (shm)
        snprintf(what, sizeof what, "GLSL outer %dx%d, %d words shared", om, on, shm);
    else
        snprintf(what, sizeof what, "GLSL outer %dx%d", om, on);
    return compile(full, what);
}

/* TFLOP/s of a loop program doing flops a step (each of 32 an iteration) in
 * each invocation (best of 3 after one) */
static double time_loop(GLuint p, double flops)
{
    static GLuint buf[2];
    if (!buf[0]) {
        float pv[4 * 65];
        for (int i = 0; i < 4 * 65; i++)
            pv[i] = 0.25f + (float)i / 1024.0f; /* distinct in f16 */
        gl.GenBuffers(2, buf);
        gl.BindBuffer(GL_SHADER_STORAGE_BUFFER, buf[0]);
        gl.BufferData(GL_SHADER_STORAGE_BUFFER, sizeof pv, pv, GL_STATIC_DRAW);
        gl.BindBuffer(GL_SHADER_STORAGE_BUFFER, buf[1]);
        gl.BufferData(GL_SHADER_STORAGE_BUFFER, 16 << 20, NULL, GL_DYNAMIC_DRAW);
    }
    gl.BindBufferBase(GL_SHADER_STORAGE_BUFFER, 0, buf[0]);
    gl.BindBufferBase(GL_SHADER_STORAGE_BUFFER, 1, buf[1]);
    gl.UseProgram(p);
    /* iterations grow until a dispatch takes 50 ms (or reach 512), so that
     * a slow program (SPIR-V whose arrays stay in memory) still ends in
     * seconds; every multiprocessor stays full */
    const unsigned groups = 4096;
    unsigned iters = 2;
    double best = 1e30;
    for (;;) {
        gl.Uniform1ui(0, iters);
        best = 1e30;
        for (int r = 0; r < 4; r++) {
            gl.Finish();
            double t0 = now();
            gl.DispatchCompute(groups, 1, 1);
            gl.Finish();
            double t = now() - t0;
            if (r && t < best)
                best = t;
        }
        if (best > 50e-3 || iters >= 512)
            break;
        iters *= 4;
    }
    if (iters < 512)
        printf("    (%u iterations)\n", iters);
    return flops * 32.0 * iters * 128.0 * groups / best / 1e12;
}

/* an outer-product step: om x on pair products, 4 flops each */
static double outer_flops(int om, int on)
{
    return 4.0 * om * on;
}

/* --spirv: each file's loop (o_RxC in its name) as SPIR-V, and the source's
 * (bench/probe_spirv_outer.comp) as GLSL; m_N: N cooperative 16x16 by 16x8
 * products a subgroup step (bench/probe_spirv_coop.comp); other files: only
 * whether the driver takes them */
static int probe_spirv(const char *src_path, int n, char **files)
{
    static char src[1 << 15];
    size_t len = read_file(src_path, src, sizeof src - 1);
    if (!len)
        return 1;
    src[len] = '\0';
    /* its #version line first: the comments above it are for the reader */
    const char *version = strstr(src, "#version");
    if (!version) {
        printf("  %s: no #version line\n", src_path);
        return 1;
    }
    GLuint warm = outer_from_glsl(version, 4, 4, 0); /* (warms the clocks) */
    for (int i = 0; warm && i < 30; i++)
        time_loop(warm, outer_flops(4, 4));
    for (int a = 0; a < n; a++) {
        const char *base = strrchr(files[a], '/');
        base = base ? base + 1 : files[a];
        int om = 0, on = 0, cn = 0, shm = 0;
        if (sscanf(base, "m_%d", &cn) == 1 && cn > 0 && cn <= 64) {
            GLuint v = from_spirv(files[a]);
            if (v) /* 16 x 8 x 16 multiply-adds a subgroup of 32 */
                printf("    %.1f TFLOP/s\n", time_loop(v, cn * 2.0 * 16 * 8 * 16 / 32));
            continue;
        }
        if (sscanf(base, "o_%dx%d_s%d", &om, &on, &shm) < 2 || om < 1 || on < 1 ||
            om * on > 256 || shm < 0 || (shm && shm < 128) || shm > 12288) {
            from_spirv(files[a]); /* says whether it is taken */
            continue;
        }
        GLuint g = outer_from_glsl(version, om, on, shm);
        if (g)
            printf("    %.1f TFLOP/s\n", time_loop(g, outer_flops(om, on)));
        GLuint v = from_spirv(files[a]);
        if (v)
            printf("    %.1f TFLOP/s\n", time_loop(v, outer_flops(om, on)));
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* (lines reach a log before a driver crash) */
    if (argc > 1 && !strcmp(argv[1], "--spirv")) {
        if (argc < 3) {
            fprintf(stderr,
                    "probe_gl: --spirv SOURCE.comp [o_RxC.spv | m_N.spv | other.spv ...]\n");
            return 2;
        }
        EGLDisplay d = device_display();
        if (d == EGL_NO_DISPLAY || (make_context(d, EGL_OPENGL_API, 6) == EGL_NO_CONTEXT &&
                                    make_context(d, EGL_OPENGL_API, 5) == EGL_NO_CONTEXT)) {
            printf("no desktop OpenGL 4.5 or 4.6 context through an EGL device display\n");
            return 1;
        }
        printf("desktop OpenGL: %s | %s\n", gl.GetString(GL_VERSION), gl.GetString(GL_RENDERER));
        if (!has_ext("GL_ARB_gl_spirv"))
            printf("  no GL_ARB_gl_spirv: the SPIR-V files will be refused\n");
        return probe_spirv(argv[2], argc - 3, argv + 3);
    }
    unsigned rows = argc > 3 ? (unsigned)atoi(argv[1]) : 14336;
    unsigned tokens = argc > 3 ? (unsigned)atoi(argv[2]) : 512;
    unsigned cols = argc > 3 ? (unsigned)atoi(argv[3]) : 4096;
    if (rows % 64 || tokens % 64 || cols % 16) {
        fprintf(stderr, "probe_gl: ROWS and TOKENS a multiple of 64, COLS of 16\n");
        return 2;
    }
    EGLDisplay d = device_display();
    if (d == EGL_NO_DISPLAY) {
        printf("no EGL device display\n");
        return 1;
    }
    printf("EGL: %s %s\n", eglQueryString(d, EGL_VENDOR), eglQueryString(d, EGL_VERSION));
    if (make_context(d, EGL_OPENGL_ES_API, 0) != EGL_NO_CONTEXT) {
        printf("OpenGL ES: %s | %s\n", gl.GetString(GL_VERSION), gl.GetString(GL_RENDERER));
        compile(coop_es_src, "ES: GL_NV_cooperative_matrix");
    } else {
        printf("OpenGL ES: no 3.1 context (EGL error 0x%x)\n", eglGetError());
    }
    eglMakeCurrent(d, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    if (make_context(d, EGL_OPENGL_API, 6) == EGL_NO_CONTEXT &&
        make_context(d, EGL_OPENGL_API, 5) == EGL_NO_CONTEXT) {
        printf("desktop OpenGL: no 4.5 or 4.6 core context through this display (EGL error "
               "0x%x)\n", eglGetError());
        return 0;
    }
    printf("desktop OpenGL: %s | %s | GLSL %s\n", gl.GetString(GL_VERSION),
           gl.GetString(GL_RENDERER), gl.GetString(GL_SHADING_LANGUAGE_VERSION));
    const char *exts[] = { "GL_ARB_gl_spirv", "GL_ARB_spirv_extensions", "GL_NV_gpu_shader5",
                           "GL_AMD_gpu_shader_half_float", "GL_NV_shader_subgroup_partitioned",
                           "GL_KHR_shader_subgroup", "GL_NV_shader_buffer_load",
                           "GL_ARB_shader_ballot", "GL_NV_cooperative_matrix",
                           "GL_EXT_shader_integer_dot_product" };
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        printf("  %-46s %s\n", exts[i], has_ext(exts[i]) ? "yes" : "no");
    if (has_ext("GL_ARB_spirv_extensions")) {
        GLint n = 0;
        gl.GetIntegerv(GL_NUM_SPIR_V_EXTENSIONS_, &n);
        printf("  SPIR-V extensions the GL driver takes (%d):", n);
        for (GLint i = 0; i < n; i++)
            printf(" %s", gl.GetStringi(GL_SPIR_V_EXTENSIONS_, (GLuint)i));
        printf("\n");
    }
    compile(f16_src, "GLSL f16 arithmetic (explicit types)");
    compile(nv5_src, "GLSL f16vec2 arithmetic (GL_NV_gpu_shader5)");
    compile(int8_src, "GLSL int8 dot product");
    compile(coop_khr_src, "GLSL GL_KHR_cooperative_matrix");
    bench_coop(rows, tokens, cols);
    return 0;
}
