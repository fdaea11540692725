/* manifest.h - what commits a checkpoint: manifest.json in its directory,
 * naming every file of it with its size and SHA-256 (libsodium).
 *
 *   { "format": "drover-manifest-1",
 *     "files": [ { "name": "model.safetensors", "size": 1234,
 *                  "sha256": "9f86d0..." },
 *                { "name": "ps-0.safetensors", "size": 158000000,
 *                  "chunk": 33554432, "sha256_chunks": ["3a1f...", ...] },
 *                ... ],
 *     "meta": { "step": "120", "eval_accuracy": "0.93", ... } }
 *
 * A big file written by a hashing writer (safetensors_write_hashed) has
 * the SHA-256 of each `chunk` bytes of it (the last one shorter) instead
 * of one of the whole: the chunks are hashed in parallel, so the hash
 * keeps up with the write (one SHA-256 stream is slower than an fsync'd
 * sequential write on a fast disk). `dd bs=C skip=i count=1 | sha256sum`
 * checks chunk i by hand.
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

#include <stddef.h>
#include <stdint.h>

#define MANIFEST_NAME "manifest.json"
#define MANIFEST_MAX_FILES 16

/* A file's digest as a writer gives it (manifest_commit_hashed): 64 hex
 * digits, the SHA-256 of the whole file, or "sha256-chunks:C:" and 64 hex
 * digits per C-byte chunk. At most MANIFEST_MAX_CHUNKS chunks. */
#define MANIFEST_MAX_CHUNKS 56
#define MANIFEST_DIGEST_MAX (32 + 64 * MANIFEST_MAX_CHUNKS + 1)
#define MANIFEST_CHUNKED "sha256-chunks:"

typedef struct manifest_file {
  char name[64];  /* a plain name inside the directory */
  uint64_t size;
  char sha256[65]; /* lower-case hex; "" when the file has chunk hashes */
  uint64_t chunk;  /* bytes per chunk hash, 0: none */
  char *chunks;    /* 64 hex digits per chunk (owned), or NULL */
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
 * hashed them as it wrote): sizes[i] and hexes[i] (a digest, above) for
 * files[i]; a NULL or malformed hexes[i] is hashed from the file. */
int manifest_commit_hashed(const char *dir, const char *const *files, const uint64_t *sizes,
                           const char *const *hexes, const char *const *meta);

/* The manifest's text as manifest_commit_hashed would write it, into
 * *text (malloc'ed, the caller frees): for a directory that is not a local
 * one (HDFS, train/ckfs.h), where the caller stores it. `dir` names it in
 * messages and is where files without a hash are read from. */
int manifest_encode(const char *dir, const char *const *files, const uint64_t *sizes,
                    const char *const *hexes, const char *const *meta, char **text);
/* Parses a manifest's text (len bytes, read from `name`) into *m, as
 * manifest_read does a file. */
int manifest_parse(const char *name, const char *text, size_t len, manifest *m);
/* 1 when `digest` (manifest_digest_end's form) is what f says, else 0. */
int manifest_digest_matches(const manifest_file *f, const char *digest);

/* Reads dir/manifest.json into *m (freed with manifest_free, also after a
 * failure). DRV_EIO with errno ENOENT when there is none: no checkpoint. */
int manifest_read(const char *dir, manifest *m);
/* Checks every file against *m: present, of its size, of its hash. The
 * message names the file and what differs. */
int manifest_verify(const char *dir, const manifest *m);
void manifest_free(manifest *m);
/* The chunk size a hashing writer uses for a file of `size` bytes: 0 when
 * one SHA-256 of the whole is enough (up to 32 MiB), else at least 32 MiB
 * and large enough for at most MANIFEST_MAX_CHUNKS chunks. */
uint64_t manifest_chunk_size(uint64_t size);
/* A digest (above) computed as the bytes of a file of a known size come
 * in, in order and in pieces of any length: what a receiver of a file
 * over the wire checks against its sender's (coord_ckpt_xfer.c). */
typedef struct manifest_digest {
  uint64_t size, chunk, at; /* the file's size, manifest_chunk_size, bytes so far */
  void *h;                  /* the running sha256_ctx's EVP context, or NULL */
  uint64_t nchunks;         /* finished */
  char hexes[64 * MANIFEST_MAX_CHUNKS + 1];
} manifest_digest;
/* 0, or DRV_ENOMEM. manifest_digest_end or _drop frees it. */
int manifest_digest_begin(manifest_digest *d, uint64_t size);
/* Bytes past `size` are refused (DRV_ERANGE, nothing hashed). */
int manifest_digest_update(manifest_digest *d, const void *buf, size_t len);
/* The digest into out (MANIFEST_DIGEST_MAX bytes); DRV_ERANGE when fewer
 * than `size` bytes came. Frees d's hash either way. */
int manifest_digest_end(manifest_digest *d, char *out);
void manifest_digest_drop(manifest_digest *d);
/* The meta value of `key`, or NULL (borrowed from m). */
const char *manifest_meta(const manifest *m, const char *key);

#endif
