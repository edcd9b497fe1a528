/* Session files: the KV cache of a model's first positions (a recurrent
 * model's state after them) and the token ids
 * that made them, so a later run whose prompt starts with the same tokens
 * skips their prefill (`glesllm run --prompt-cache FILE`).
 *
 * Layout (little-endian; K and V as the cache holds them, F16):
 *   char     magic[8]      "GLESKVC\0"
 *   uint32   version       SESSION_VERSION
 *   uint32   n_layer, n_head_kv, head_dim, n_vocab
 *   uint64   fingerprint   of the model's shapes, types and weight bytes
 *   uint32   n_tokens
 *   uint32   window_from   version 3 only: the first position whose K/V the
 *                          sliding-window layers hold (their ring keeps only
 *                          the last ones: gpu_model_kv_ring; zeros before it)
 *   int32    tokens[n_tokens]
 *   per layer: uint16 K[n_tokens][n_head_kv * head_dim], then V likewise;
 *              a Mamba block's layer: float its states after n_tokens - 1
 *              and n_tokens tokens (gpu_model_state_io), none for no tokens
 *   uint64   checksum      of every byte before it (32-bit words, FNV-1a's step)
 * A file that is not one is GLESLLM_ERR_FORMAT; one written for another
 * model (or another quantization of it: its fingerprint), by another
 * version, cut short or damaged (its checksum) GLESLLM_ERR_STATE_MISMATCH. */
#ifndef GLESLLM_MODEL_SESSION_H
#define GLESLLM_MODEL_SESSION_H

#include <stdint.h>
#include <stdio.h>

#include "model/gpu_model.h"

/* Version 3 is written for models with a ring, version 2 (no window_from)
 * for the others; both are read. */
#define SESSION_VERSION 3

/* Writes positions [0, n) of gm's cache (n <= gpu_model_n_past) and the ids
 * that made them to path, through a temporary file renamed at the end. */
glesllm_status session_save(gpu_model *gm, const char *path, const int32_t *tokens, uint32_t n);

/* Reads a session file written for this model and puts the longest common
 * prefix of its tokens and want[0..n_want) into gm's cache (positions 0 ..
 * *n_loaded - 1; gpu_model_n_past becomes *n_loaded) and their ids into
 * the token slots. A file that is not one, or is not usable (above), is an
 * error naming it. */
glesllm_status session_load(gpu_model *gm, const char *path, const int32_t *want, uint32_t n_want,
                            uint32_t *n_loaded);

/* The same on streams (a file, or memory through fmemopen): session_read
 * with want NULL loads every position the stream holds (at most the
 * context's), naming the stream `name` in errors; session_bytes is what
 * session_write writes for n positions. */
glesllm_status session_read(gpu_model *gm, FILE *f, const char *name, const int32_t *want,
                            uint32_t n_want, uint32_t *n_loaded);
glesllm_status session_write(gpu_model *gm, FILE *f, const int32_t *tokens, uint32_t n);
uint64_t session_bytes(const gpu_model *gm, uint32_t n);

#endif
