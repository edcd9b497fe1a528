/* The GL basics below everything else in gpu/: error names and reports
 * (GL_CALL in gpu_internal.h), extension lookup. */
#include <string.h>

#include "gpu/gpu_internal.h"

const char *gpu_gl_error_name(GLenum err)
{
    switch (err) {
    case GL_NO_ERROR: return "GL_NO_ERROR";
    case GL_INVALID_ENUM: return "GL_INVALID_ENUM";
    case GL_INVALID_VALUE: return "GL_INVALID_VALUE";
    case GL_INVALID_OPERATION: return "GL_INVALID_OPERATION";
    case GL_INVALID_FRAMEBUFFER_OPERATION: return "GL_INVALID_FRAMEBUFFER_OPERATION";
    case GL_OUT_OF_MEMORY: return "GL_OUT_OF_MEMORY";
    }
    return "unknown GL error";
}

glesllm_status gpu_gl_error_report(GLenum err, const char *call, const char *file, int line)
{
    gpu_gl_clear_errors();
    if (err == GL_OUT_OF_MEMORY)
        return err_set(GLESLLM_ERR_GPU_OUT_OF_MEMORY,
                       "GPU out of memory (GL_OUT_OF_MEMORY) in %s at %s:%d; use a smaller model or "
                       "context size",
                       call, file, line);
    return err_set(GLESLLM_ERR_GL, "%s failed with %s at %s:%d", call, gpu_gl_error_name(err), file,
                   line);
}

bool gpu_has_gl_extension(const char *name)
{
    GLint n = 0;
    glGetIntegerv(GL_NUM_EXTENSIONS, &n);
    for (GLint i = 0; i < n; i++) {
        const char *e = (const char *)glGetStringi(GL_EXTENSIONS, (GLuint)i);
        if (e && strcmp(e, name) == 0)
            return true;
    }
    return false;
}
