/* An embedded C project linking the installed engine through pkg-config:
 * .ci/run builds and runs this against `cmake --install`'s output. */
#include <glesllm.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(glesllm_strerror(GLESLLM_ERR_GPU_OUT_OF_MEMORY), "GPU out of memory") != 0)
        return 1;
    printf("linked glesllm %s through pkg-config\n", glesllm_version());
    return 0;
}
