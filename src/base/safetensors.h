/* safetensors.h - the safetensors file format: named float tensors and a
 * string map, written durably and read with every field checked.
 *
 * A file is (https://github.com/huggingface/safetensors, "Format"):
 *   8 bytes    N, the header length, unsigned little-endian
 *   N bytes    a JSON object, padded with spaces to a multiple of 8:
 *                "__metadata__": { "key": "value", ... }     (optional)
 *                "<name>": { "dtype": "F32", "shape": [2, 3],
 *                            "data_offsets": [BEGIN, END] }, ...
 *   the data   every tensor's bytes, little-endian, row-major; offsets are
 *              relative to the start of the data and the tensors tile it
 *              exactly: no gap, no overlap, nothing after the last one.
 * The writer writes F32 and I64 and lays tensors out as the reference
 * implementation does (I64 ones first, then by name), so the same tensors
 * give the same bytes. The reader takes F32, F64, F16, BF16 and I64 and
 * converts to float, keeping I64's exact values as well.
 *
 * Base layer: includes nothing of drover's but err.h and util.h; JSON goes
 * through jansson.
 */
#ifndef DROVER_SAFETENSORS_H
#define DROVER_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* More dimensions than this are refused by both sides. */
#define SAFETENSORS_MAX_DIM 8
/* The reference reader's bound on N; a larger header is corruption. */
#define SAFETENSORS_MAX_HEADER 100000000u

/* One tensor to write. Everything is borrowed for the call. */
typedef struct safetensors_entry {
  const char *name;     /* non-empty, not "__metadata__", unique */
  int ndim;             /* 0 (a scalar) .. SAFETENSORS_MAX_DIM */
  const int64_t *shape; /* ndim sizes, each >= 0 */
  const float *data;    /* product(shape) floats, contiguous */
  const int64_t *i64;   /* or, when not NULL, product(shape) int64 (dtype I64, e.g.
                           a table's row ids); data is then unused */
} safetensors_entry;

/* Writes `n` tensors and the metadata to `path`, replacing it atomically:
 * the bytes go to a temporary file beside it, which is fsynced, renamed
 * over `path`, and the directory fsynced, so a crash leaves the old file or
 * the new one, never a mix. `meta` is NULL or a NULL-ended list of
 * alternating keys and values ({"format", "pt", NULL}); keys are written
 * sorted. Returns 0, or a negative code whose message names `path` and
 * the reason ("No space left on device"); on failure the temporary is
 * removed and an existing `path` is untouched. */
int safetensors_write(const char *path, const safetensors_entry *t, size_t n,
                      const char *const *meta);
/* The same, also giving the file's digest (manifest.h: 64 hex digits of
 * its SHA-256, or for a file over 32 MiB "sha256-chunks:C:" and the hash
 * of each C bytes; digest has MANIFEST_DIGEST_MAX bytes) and size: other
 * threads hash the bytes from memory while this one writes them (a big
 * file's chunks in parallel), so a manifest need not read the file back. */
/* Where the time of a hashed write went, in ms (a ps logs it). */
typedef struct safetensors_times {
  double write;  /* the bytes into the page cache, their writeback started */
  double commit; /* fsync, rename, fsync of the directory */
  double hash;   /* then waiting for the hashing threads */
} safetensors_times;
/* times: NULL, or filled on success. */
int safetensors_write_hashed(const char *path, const safetensors_entry *t, size_t n,
                             const char *const *meta, char *digest, uint64_t *size,
                             safetensors_times *times);

/* The bytes safetensors_write would write, into *buf (malloc'ed, *len
 * bytes; the caller frees it), and their digest (as _write_hashed's):
 * for a file that travels instead of being written where it is made.
 * `name` names it in messages. */
int safetensors_encode(const char *name, const safetensors_entry *t, size_t n,
                       const char *const *meta, uint8_t **buf, size_t *len, char *digest);

/* The file's layout: the entries in the order their bytes follow the
 * header (by name; checked: sizes, no two alike) into *order, and the
 * padded header text (*hlen bytes, a multiple of 8) into *header; both
 * malloc'ed for the caller to free. For writers of the bytes elsewhere. */
int safetensors_layout(const char *name, const safetensors_entry *t, size_t n,
                       const char *const *meta, const safetensors_entry ***order, char **header,
                       size_t *hlen);

/* A file's bytes pulled in pieces, never whole in memory (safetensors_src.c):
 * for an upload that asks for its next bytes (a ps writing its shard to
 * HDFS), hashed as they pass. Everything in t stays borrowed until close. */
typedef struct safetensors_src safetensors_src;
/* *out, and the file's size into *size; 0 or an error (nothing to close). */
int safetensors_src_open(const char *name, const safetensors_entry *t, size_t n,
                         const char *const *meta, safetensors_src **out, uint64_t *size);
/* The next bytes into buf (at most cap): how many, 0 at the end
 * (webhdfs_read_fn's contract; `src` is a safetensors_src). */
long long safetensors_src_read(void *src, char *buf, size_t cap);
/* Frees s; the digest (manifest.h's form, MANIFEST_DIGEST_MAX bytes) of
 * all the bytes when every one was read, else DRV_ERANGE. A NULL digest:
 * the stream is given up, nothing is checked. */
int safetensors_src_close(safetensors_src *s, char *digest);

/* One tensor read back; owned by its safetensors_file. */
typedef struct safetensors_tensor {
  char *name;
  int ndim;
  int64_t shape[SAFETENSORS_MAX_DIM];
  int64_t numel;
  float *data; /* numel floats (malloc'ed; NULL when numel is 0) */
  int64_t *i64; /* dtype I64: the exact values too (malloc'ed), else NULL */
} safetensors_tensor;

typedef struct safetensors_file {
  safetensors_tensor *tensors; /* in the order of their data in the file */
  size_t n;
  char **meta; /* NULL-ended alternating keys and values; never NULL after a read */
} safetensors_file;

/* Reads and checks a whole file into *out (which the caller frees with
 * safetensors_free, also after a failure). Refused, with a message naming
 * the file and what is wrong: a header length past the end of the file or
 * over SAFETENSORS_MAX_HEADER, a header that is not a JSON object starting
 * with '{', a tensor entry with a missing, extra or mistyped field, an
 * unsupported dtype, a shape whose byte size overflows or differs from its
 * offsets, tensors that overlap or leave a gap, bytes after the last one,
 * and a metadata value that is not a string. */
int safetensors_read(const char *path, safetensors_file *out);
/* The same from len bytes in memory (a file received whole); `name`
 * names them in messages. buf is borrowed for the call. */
int safetensors_read_mem(const char *name, const void *buf, size_t len, safetensors_file *out);
void safetensors_free(safetensors_file *f);

/* The metadata value of `key`, or NULL. Borrowed from f. */
const char *safetensors_meta(const safetensors_file *f, const char *key);
/* The tensor named `name`, or NULL. Borrowed from f. */
const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name);

#endif
