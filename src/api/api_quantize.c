/* glesllm_quantize: quant/quantize_model.h behind the public interface. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "common/tmp_files.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/quantize_model.h"

typedef struct relay {
    const glesllm_quantize_params *p;
} relay;

static void on_tensor(void *ud, uint64_t index, uint64_t count, const char *name, uint32_t from,
                      uint32_t to, uint64_t done, uint64_t total)
{
    const glesllm_quantize_params *p = ((relay *)ud)->p;
    p->on_tensor(p->ud, index, count, name, ggml_type_name(from), ggml_type_name(to), done, total);
}

static void on_note(void *ud, const char *msg)
{
    const glesllm_quantize_params *p = ((relay *)ud)->p;
    p->on_note(p->ud, msg);
}

glesllm_status glesllm_quantize(const char *in, const char *out,
                                const glesllm_quantize_params *params)
{
    if (!in || !out || !params || !params->type)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "quantize: NULL input, output or type");
    int ft = quant_ftype_from_name(params->type);
    if (ft < 0)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "unknown type '%s'; choose Q4_0, Q8_0, Q4_K, Q6_K or Q4_K_M", params->type);
    struct stat si, so;
    if (stat(in, &si) == 0 && stat(out, &so) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino)
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT,
                       "the output would replace the input; give another path");
    /* (checked now, not after all the work) */
    if (stat(out, &so) == 0 && S_ISDIR(so.st_mode))
        return err_set(GLESLLM_ERR_INVALID_ARGUMENT, "the output %s is a folder; give a file path",
                       out);
    char dir[4096];
    path_folder(out, dir, sizeof dir);
    if (access(dir, W_OK | X_OK) != 0)
        return err_set(GLESLLM_ERR_IO, "cannot write a file in '%s' (for %s): %s", dir, out,
                       strerror(errno));
    /* a file run would refuse is refused before any work: its output would
     * not run either */
    gguf_file *f;
    glesllm_status st = gguf_open(in, &f); /* (its errors name the path) */
    if (st)
        return st;
    model checked;
    if ((st = model_open(f, &checked)) == GLESLLM_OK)
        model_close(&checked);
    gguf_close(f);
    if (st)
        return err_prefix(st, "%s: ", in);
    relay r = { params };
    quant_model_callbacks cb = { params->on_tensor ? on_tensor : NULL,
                                 params->on_note ? on_note : NULL, &r, params->cancel,
                                 params->threads };
    return quant_model(in, out, (quant_ftype)ft, &cb);
}
