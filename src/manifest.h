/* manifest.h - what commits a checkpoint: manifest.json in its directory,
 * naming every file of it with its size and SHA-256 (libsodium).
 *
 *   { "format": "drover-manifest-1",
 *     "files": [ { "name": "model.safetensors", "size": 1234,
 *                  "sha256": "9f86d0..." }, ... ],
 *     "meta": { "step": "120", "eval_accuracy": "0.93", ... } }
 *
 * It is written last, to a temporary beside it that is fsynced, renamed
 * over manifest.json, and the directory fsynced: a crash leaves no
 * manifest or a whole one. A directory without a manifest is not a
 * checkpoint; one whose files differ from their manifest (truncated, a
 * flipped bit) is corrupt, and manifest_verify names the file.
 *
 * Base layer: jansson and sha256.h, nothing else of drover's but err.h.
 */
#ifndef DROVER_MANIFEST_H
#define DROVER_MANIFEST_H

#include <stdint.h>

#define MANIFEST_NAME "manifest.json"
#define MANIFEST_MAX_FILES 16

typedef struct manifest_file {
  char name[64];  /* a plain name inside the directory */
  uint64_t size;
  char sha256[65]; /* lower-case hex */
} manifest_file;

typedef struct manifest {
  manifest_file files[MANIFEST_MAX_FILES];
  int nfiles;
  char **meta; /* NULL-ended alternating keys and values; owned */
} manifest;

/* The SHA-256 of a file's bytes as hex, and its size. DRV_EIO names it. */
int manifest_hash_file(const char *path, char hex[65], uint64_t *size);

/* Hashes `files` (a NULL-ended list of names in `dir`) and commits
 * dir/manifest.json with them and `meta` (NULL or a NULL-ended list of
 * alternating keys and values, all borrowed). Returns 0, or a negative
 * code whose message names the file and the reason ("No space left on
 * device"); then no manifest.json was written (an old one is untouched). */
int manifest_commit(const char *dir, const char *const *files, const char *const *meta);
/* The same, with the files' sizes and hashes known already (their writer
 * hashed them as it wrote): sizes[i] and hexes[i] (64 hex digits) for
 * files[i]; a NULL or malformed hexes[i] is hashed from the file. */
int manifest_commit_hashed(const char *dir, const char *const *files, const uint64_t *sizes,
                           const char *const *hexes, const char *const *meta);

/* Reads dir/manifest.json into *m (freed with manifest_free, also after a
 * failure). DRV_EIO with errno ENOENT when there is none: no checkpoint. */
int manifest_read(const char *dir, manifest *m);
/* Checks every file against *m: present, of its size, of its hash. The
 * message names the file and what differs. */
int manifest_verify(const char *dir, const manifest *m);
void manifest_free(manifest *m);
/* The meta value of `key`, or NULL (borrowed from m). */
const char *manifest_meta(const manifest *m, const char *key);

#endif
