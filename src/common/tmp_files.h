/* Files written whole through a temporary name renamed into place
 * (path.tmp.PID), so that a failed write leaves nothing behind; and the
 * sweep of such names left by writers that are gone (a process killed by
 * SIGKILL cannot remove its own). */
#ifndef GLESLLM_COMMON_TMP_FILES_H
#define GLESLLM_COMMON_TMP_FILES_H

#include <stddef.h>

#include "glesllm.h"

/* The folder a file at path goes in ("." for a bare name, "/" for one at
 * the root), cut to n - 1 bytes. */
void path_folder(const char *path, char *dir, size_t n);

/* out = "path.tmp.PID"; an error where it does not fit in n bytes. */
glesllm_status tmp_name(const char *path, char *out, size_t n);

/* Removes path.tmp.PID files beside path whose process no longer runs.
 * Best effort: what cannot be read or removed is left. */
void tmp_sweep(const char *path);

#endif
