/* Kernel programs: the embedded glsl/ sources, #define variants, #include of
 * snippets, compile and link with readable errors, and the program cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/glsl_sources.h"
#include "gpu/gpu_internal.h"

const char *gpu_kernel_source(const char *name)
{
    for (size_t i = 0; i < glsl_source_count; i++)
        if (strcmp(glsl_sources[i].name, name) == 0)
            return glsl_sources[i].text;
    return NULL;
}

/* ---- a growable string ---------------------------------------------------- */

typedef struct strbuf {
    char *p;
    size_t len, cap;
    bool oom;
} strbuf;

static void sb_add(strbuf *s, const char *t, size_t n)
{
    if (s->oom)
        return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 1024;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *p = realloc(s->p, cap);
        if (!p) {
            s->oom = true;
            return;
        }
        s->p = p;
        s->cap = cap;
    }
    memcpy(s->p + s->len, t, n);
    s->len += n;
    s->p[s->len] = '\0';
}

static void sb_str(strbuf *s, const char *t) { sb_add(s, t, strlen(t)); }

/* Appends `src` with `#include "x"` lines replaced by the embedded snippet,
 * and a `#version` line dropped (the assembler writes its own). */
static glesllm_status add_resolved(strbuf *s, const char *owner, const char *src, int depth)
{
    if (depth > 4)
        return err_set(GLESLLM_ERR_SHADER, "kernel %s: #include nested too deeply", owner);
    const char *line = src;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char *p = line;
        while (p < line + n && (*p == ' ' || *p == '\t'))
            p++;
        if (strncmp(p, "#include", 8) == 0) {
            const char *q1 = memchr(p, '"', n - (size_t)(p - line));
            const char *q2 = q1 ? memchr(q1 + 1, '"', n - (size_t)(q1 + 1 - line)) : NULL;
            char inc[128];
            if (!q1 || !q2 || (size_t)(q2 - q1 - 1) >= sizeof inc)
                return err_set(GLESLLM_ERR_SHADER, "kernel %s: malformed #include line", owner);
            memcpy(inc, q1 + 1, (size_t)(q2 - q1 - 1));
            inc[q2 - q1 - 1] = '\0';
            const char *text = gpu_kernel_source(inc);
            if (!text)
                return err_set(GLESLLM_ERR_SHADER, "kernel %s includes %s, which is not embedded",
                               owner, inc);
            glesllm_status st = add_resolved(s, inc, text, depth + 1);
            if (st != GLESLLM_OK)
                return st;
        } else if (strncmp(p, "#version", 8) != 0) {
            sb_add(s, line, n);
            sb_add(s, "\n", 1);
        }
        line += n + (end ? 1 : 0);
    }
    return GLESLLM_OK;
}

glesllm_status gpu_program_assemble(const char *name, const char *source, const char *defines,
                                    char **out)
{
    *out = NULL;
    strbuf s = { 0 };
    sb_str(&s, "#version 310 es\n");
    for (const char *d = defines; d && *d;) {
        const char *end = strchr(d, '\n');
        size_t n = end ? (size_t)(end - d) : strlen(d);
        if (n > 0) {
            sb_str(&s, "#define ");
            sb_add(&s, d, n);
            sb_add(&s, "\n", 1);
        }
        d += n + (end ? 1 : 0);
    }
    glesllm_status st = add_resolved(&s, name, source, 0);
    if (st == GLESLLM_OK && s.oom)
        st = err_set(GLESLLM_ERR_NO_MEMORY, "out of memory assembling kernel %s", name);
    if (st != GLESLLM_OK) {
        free(s.p);
        return st;
    }
    *out = s.p;
    return GLESLLM_OK;
}

/* The first source line an info log points at (Mesa "0:12(3)", NVIDIA
 * "0(12)", ANGLE/Mali "ERROR: 0:12:"), or 0. */
static int error_line(const char *log)
{
    for (const char *p = log; *p; p++) {
        if (p[0] == '0' && (p[1] == ':' || p[1] == '(') && (p == log || p[-1] < '0' || p[-1] > '9')) {
            const char *q = p + 2;
            int v = 0;
            while (*q >= '0' && *q <= '9' && v < 1000000)
                v = v * 10 + (*q++ - '0');
            if (q > p + 2 && v > 0)
                return v;
        }
    }
    return 0;
}

/* "<log>\n  10 | line\n> 12 | bad line\n..." lines around the first error. */
static void numbered_context(strbuf *s, const char *source, int at)
{
    int from = at > 0 ? at - 3 : 1, to = at > 0 ? at + 3 : 1 << 30;
    int lineno = 1;
    for (const char *line = source; *line; lineno++) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        if (lineno >= from && lineno <= to) {
            char num[32];
            snprintf(num, sizeof num, "%c%4d | ", lineno == at ? '>' : ' ', lineno);
            sb_str(s, num);
            sb_add(s, line, n);
            sb_add(s, "\n", 1);
        }
        line += n + (end ? 1 : 0);
    }
}

static glesllm_status shader_error(const char *name, const char *what, const char *log,
                                   const char *source)
{
    strbuf s = { 0 };
    int at = error_line(log);
    numbered_context(&s, source, at);
    glesllm_status st =
        err_set(GLESLLM_ERR_SHADER, "kernel %s failed to %s:\n%s\n%s%s", name, what, log,
                at ? "source around the error:\n" : "source:\n", s.p ? s.p : "(out of memory)");
    free(s.p);
    return st;
}

static char *info_log(GLuint obj, bool program)
{
    GLint n = 0;
    if (program)
        glGetProgramiv(obj, GL_INFO_LOG_LENGTH, &n);
    else
        glGetShaderiv(obj, GL_INFO_LOG_LENGTH, &n);
    char *log = calloc((size_t)(n > 0 ? n : 0) + 1, 1);
    if (log && n > 0) {
        if (program)
            glGetProgramInfoLog(obj, n, NULL, log);
        else
            glGetShaderInfoLog(obj, n, NULL, log);
    }
    return log;
}

static glesllm_status compile_and_link(gpu_context *ctx, const char *name, const char *source,
                                       GLuint prog)
{
    GLuint sh = glCreateShader(GL_COMPUTE_SHADER);
    if (!sh)
        return err_set(GLESLLM_ERR_GL, "glCreateShader(GL_COMPUTE_SHADER) failed with %s",
                       gpu_gl_error_name(glGetError()));
    glShaderSource(sh, 1, &source, NULL);
    glCompileShader(sh);
    GLint ok = 0;
    glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
    if (!ok) {
        char *log = info_log(sh, false);
        glesllm_status st = shader_error(name, "compile", log ? log : "", source);
        free(log);
        glDeleteShader(sh);
        return st;
    }
    glAttachShader(prog, sh);
    if (ctx->cache_on)
        glProgramParameteri(prog, GL_PROGRAM_BINARY_RETRIEVABLE_HINT, GL_TRUE);
    glLinkProgram(prog);
    glDetachShader(prog, sh);
    glDeleteShader(sh);
    glGetProgramiv(prog, GL_LINK_STATUS, &ok);
    if (!ok) {
        char *log = info_log(prog, true);
        glesllm_status st = shader_error(name, "link", log ? log : "", source);
        free(log);
        return st;
    }
    return GLESLLM_OK;
}

glesllm_status gpu_program_build_source(gpu_context *ctx, const char *name, const char *source,
                                        const char *defines, gpu_program *out)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    glesllm_status st = gpu_program_assemble(name, source, defines, &text);
    if (st != GLESLLM_OK)
        return st;
    gpu_gl_clear_errors();
    GLuint prog = glCreateProgram();
    bool cached = ctx->cache_on && gpu_cache_load(ctx, text, prog);
    if (!cached) {
        if (ctx->cache_on) {
            /* a failed glProgramBinary may leave the object unusable */
            glDeleteProgram(prog);
            prog = glCreateProgram();
        }
        st = compile_and_link(ctx, name, text, prog);
        if (st == GLESLLM_OK && ctx->cache_on)
            gpu_cache_store(ctx, text, prog);
    }
    free(text);
    if (st != GLESLLM_OK) {
        glDeleteProgram(prog);
        return st;
    }
    out->id = prog;
    out->from_cache = cached;
    snprintf(out->name, sizeof out->name, "%s", name);
    out->params_location = glGetUniformLocation(prog, "u_params");
    GLint size[3] = { 0, 0, 0 };
    glGetProgramiv(prog, GL_COMPUTE_WORK_GROUP_SIZE, size);
    for (int i = 0; i < 3; i++)
        out->local_size[i] = (uint32_t)size[i];
    GLint binary = 0;
    glGetProgramiv(prog, GL_PROGRAM_BINARY_LENGTH, &binary);
    out->binary_bytes = binary > 0 ? (uint32_t)binary : 0;
    GLenum e = glGetError();
    if (e != GL_NO_ERROR) {
        glDeleteProgram(prog);
        memset(out, 0, sizeof *out);
        return err_set(GLESLLM_ERR_GL, "kernel %s: querying the linked program failed with %s",
                       name, gpu_gl_error_name(e));
    }
    return GLESLLM_OK;
}

glesllm_status gpu_program_build(gpu_context *ctx, const char *name, const char *defines,
                                 gpu_program *out)
{
    const char *src = gpu_kernel_source(name);
    if (!src) {
        memset(out, 0, sizeof *out);
        return err_set(GLESLLM_ERR_SHADER, "no embedded kernel named %s", name);
    }
    return gpu_program_build_source(ctx, name, src, defines, out);
}

void gpu_program_destroy(gpu_program *prog)
{
    if (prog && prog->id)
        glDeleteProgram(prog->id);
    if (prog)
        memset(prog, 0, sizeof *prog);
}
