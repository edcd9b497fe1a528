#include "model/ref_ops.h"

#include <math.h>

void ref_rms_norm(float *y, const float *x, const float *w, size_t rows, size_t n, float eps)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double ss = 0.0; /* double: the reference should be the more exact side */
        for (size_t i = 0; i < n; i++)
            ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
        for (size_t i = 0; i < n; i++)
            y[r * n + i] = xr[i] * scale * w[i];
    }
}
