/* frost/frost.h — the engine API as a C ABI, for embedding Frost in robots, Rust or Python.
 *
 * One opaque frost_model holds a loaded hybrid LM (Qwen3.5 layout), N live sessions (each a full
 * static buffer set) and the capsule verbs over them: snapshot, restore, fork, rollback, release,
 * tier moves and capsule files. Capsules are named by frost_capsule_id values (never 0), so a
 * stale or unknown id is a clean FROST_ERR_NOT_FOUND rather than a dangling pointer.
 *
 * Conventions (as in frost/exec.h): every call returns a frost_status; on failure nothing changed
 * unless the comment says otherwise, and frost_last_error() names the cause. Nothing exits or
 * aborts. A frost_model may be used from several threads, but calls on it are serialised by the
 * caller (one thread owns the device, see architecture.md).
 */
#ifndef FROST_FROST_H
#define FROST_FROST_H

#include <stddef.h>
#include <stdint.h>

#include "frost/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FROST_API_VERSION 1
uint32_t frost_api_version(void); /* FROST_API_VERSION of the library actually linked */

typedef struct frost_model frost_model;
typedef uint64_t frost_capsule_id; /* 0 is never a valid id */

typedef enum frost_tier {
    FROST_TIER_DEVICE = 0, /* device memory (async D2D copies) */
    FROST_TIER_HOST = 1,   /* pinned host memory */
    FROST_TIER_DISK = 2    /* a checksummed capsule file bound to this deployment */
} frost_tier;

typedef struct frost_model_options {
    frost_backend backend; /* FROST_BACKEND_CPU (default) or FROST_BACKEND_CUDA */
    int device;            /* CUDA device index; 0 for cpu */
    int max_seq_len;       /* tokens per session (KV capacity); default 4096 */
    int sessions;          /* live sessions (buffer sets); default 1 */
    int prefill_chunk;     /* C_p, a positive multiple of 64, or 0 (the default): 256 on the CPU;
                              on CUDA 8192 for bf16 MoE models and bf16 dense ones of hidden
                              size > 2048, 4096 for quantized and hidden 1024-2048 models (and
                              MoE ones below hidden 1024), 2048 for dense ones below hidden 1024;
                              at most max_seq_len */
    const char* capsule_dir; /* folder for disk-tier capsules (NULL: disk tier needs explicit paths
                                through frost_capsule_save/load); leftover temp files there are
                                removed at load */
} frost_model_options;

/* Fills *opts with the defaults above. */
void frost_model_options_default(frost_model_options* opts);

/* Loads MODEL_DIR (config.json + safetensors), builds the engine and captures its graphs, and
 * fingerprints the deployment (SHA-256 of config + weights, cached beside the model). */
frost_status frost_model_load(const char* model_dir, const frost_model_options* opts, frost_model** out);
/* Releases the model, its sessions and every capsule (and the disk files it wrote). NULL ignored. */
void frost_model_free(frost_model* model);

/* Pure getters; -1 / 0 for a NULL model. */
int frost_model_sessions(const frost_model* model);
int frost_model_vocab_size(const frost_model* model);
int frost_model_max_seq_len(const frost_model* model);
int frost_model_alignment(const frost_model* model); /* capsule alignment unit A (64) */
/* The deployment fingerprint: model digest as 64 hex digits + NUL into buf[65]. */
frost_status frost_model_fingerprint(const frost_model* model, char buf[65]);

/* ---- sessions ------------------------------------------------------------------------------ */

typedef struct frost_sampling {
    float temperature; /* <= 0: greedy */
    int top_k;         /* 0: off */
    float top_p;       /* 1: off; (0, 1] */
    uint64_t seed;     /* sampler seed; setting it restarts the RNG counter */
} frost_sampling;
void frost_sampling_default(frost_sampling* s); /* greedy */

/* Empties the session (position 0) and applies `sampling` (NULL: greedy). */
frost_status frost_session_reset(frost_model* model, int session, const frost_sampling* sampling);
/* Changes the sampling of a live session. */
frost_status frost_session_set_sampling(frost_model* model, int session, const frost_sampling* sampling);
/* Appends ids[0..n) to the session (prefill; chunks on the absolute C_p grid) and writes the token
 * sampled after them to *next (may be NULL). */
frost_status frost_session_prefill(frost_model* model, int session, const int32_t* ids, size_t n, int32_t* next);
/* One decode step from the last sampled token; writes the next sampled token to *next. */
frost_status frost_session_decode(frost_model* model, int session, int32_t* next);
/* Tokens folded into the session's state (its position P); -1 for a bad session. */
int64_t frost_session_position(const frost_model* model, int session);
/* Copies min(cap, vocab) floats of the logits the last step sampled from; *n = vocab. */
frost_status frost_session_logits(frost_model* model, int session, float* out, size_t cap, size_t* n);
/* Copies min(cap, P) token ids of the session's journal ([0, P)); *n = P. */
frost_status frost_session_tokens(const frost_model* model, int session, int32_t* out, size_t cap, size_t* n);

/* ---- capsules ------------------------------------------------------------------------------ */

/* Freezes the session at its position P (must be a multiple of the alignment unit, else
 * FROST_ERR_STATE naming the aligned boundary) on `tier`. The session continues unchanged.
 * Disk tier: a new file in capsule_dir. FROST_ERR_OUT_OF_MEMORY when the tier has no room. */
frost_status frost_capsule_snapshot(frost_model* model, int session, frost_tier tier, frost_capsule_id* out);
/* Prefills ids[0..n) from the session's position p0 with a capsule taken at the aligned boundary
 * Pa = floor((p0 + n) / A) * A on the way (the remaining ids are kept in the capsule and
 * re-prefilled by every restore); *next = token sampled after all n ids (may be NULL). */
frost_status frost_capsule_prefill_and_snapshot(frost_model* model, int session, const int32_t* ids, size_t n,
                                                frost_tier tier, frost_capsule_id* out, int32_t* next);
/* Copies the capsule into the session and continues from it (no recapture, no prefix recompute);
 * *next = token sampled after the capsule's requested boundary (may be NULL). Unknown id
 * (NOT_FOUND), another deployment (INCOMPATIBLE), a damaged file (CORRUPT) or no room (OUT_OF_MEMORY)
 * leave the session untouched. A prefill after it starts at the requested boundary: on CUDA the
 * chunked delta rule folds its state on the 64-token grid, so that equals a cold prefill of the
 * whole prompt bit for bit only where the boundary is on the grid; to append, prefer
 * frost_capsule_restore_append. */
frost_status frost_capsule_restore(frost_model* model, frost_capsule_id id, int session, int32_t* next);
/* Restore + append suffix[0..n) with the capsule's remainder and the suffix prefilled as one run
 * from the aligned boundary, so the result is bitwise equal to a cold prefill of the whole prompt
 * even when the capsule's boundary was not aligned. `sampling` (NULL: keep the capsule's) is
 * applied before that prefill. *next = token sampled after the suffix (may be NULL). */
frost_status frost_capsule_restore_append(frost_model* model, frost_capsule_id id, int session, const int32_t* suffix,
                                          size_t n, const frost_sampling* sampling, int32_t* next);
/* Restores the capsule into sessions[0..n) (distinct); next[i] (may be NULL) gets each one's token. */
frost_status frost_capsule_fork(frost_model* model, frost_capsule_id id, const int* sessions, size_t n,
                                int32_t* next);
/* Restores an earlier boundary of the same session (its journal must start with the capsule's ids). */
frost_status frost_capsule_rollback(frost_model* model, int session, frost_capsule_id id, int32_t* next);
/* Drops the capsule (and the disk file the model wrote for it). */
frost_status frost_capsule_release(frost_model* model, frost_capsule_id id);
/* Promotes or demotes the capsule; on failure it stays where it was. Disk needs capsule_dir. */
frost_status frost_capsule_move(frost_model* model, frost_capsule_id id, frost_tier tier);
/* Writes the capsule as a crash-safe file at `path` (from any tier). */
frost_status frost_capsule_save(frost_model* model, frost_capsule_id id, const char* path);
/* Validates the file at `path` against this deployment (every length, offset, checksum) and imports
 * it on `tier` (disk: refers to the file, never deletes it). */
frost_status frost_capsule_load(frost_model* model, const char* path, frost_tier tier, frost_capsule_id* out);

typedef struct frost_capsule_info {
    frost_tier tier;
    int64_t requested_boundary; /* P asked for */
    int64_t stored_boundary;    /* Pa = floor(P / alignment) * alignment */
    int alignment;
    size_t n_remainder;         /* P - Pa token ids re-prefilled at restore */
    uint64_t bytes_kv, bytes_recurrent, bytes_conv, bytes_cursor, bytes_total;
    size_t n_buffers;
    int checksums_valid;        /* 0 only for a device-tier capsule on a GPU backend */
    int64_t created_unix_ms;
    char prefix_digest[65];     /* SHA-256 hex over salt + token ids [0, P) */
    char model_digest[65];      /* deployment fingerprint (model digest) */
} frost_capsule_info;
frost_status frost_capsule_get_info(const frost_model* model, frost_capsule_id id, frost_capsule_info* out);
/* Token ids [0, P) of the capsule (stored ids then the remainder): min(cap, P) copied, *n = P. */
frost_status frost_capsule_tokens(const frost_model* model, frost_capsule_id id, int32_t* out, size_t cap, size_t* n);
/* Buffer i of the capsule: name (copied into name[name_cap], NUL-terminated), bytes and XXH64. */
frost_status frost_capsule_buffer(const frost_model* model, frost_capsule_id id, size_t i, char* name, size_t name_cap,
                                  uint64_t* bytes, uint64_t* checksum);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FROST_FROST_H */
