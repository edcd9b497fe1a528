/* Internal error reporting: a status code plus a per-thread message.
 *
 * Library functions fail with `return err_set(GLESLLM_ERR_X, "fmt", ...)`,
 * which records the message for glesllm_last_error() and returns the code.
 * err_prefix() prepends context ("loading model: ") to the current message
 * while a failure travels up the stack.
 */
#ifndef GLESLLM_COMMON_ERROR_H
#define GLESLLM_COMMON_ERROR_H

#include "glesllm.h"

#if defined(__GNUC__)
#define GLESLLM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define GLESLLM_PRINTF(a, b)
#endif

glesllm_status err_set(glesllm_status status, const char *fmt, ...) GLESLLM_PRINTF(2, 3);
glesllm_status err_prefix(glesllm_status status, const char *fmt, ...) GLESLLM_PRINTF(2, 3);
void err_clear(void);

#endif
