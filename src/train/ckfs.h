/* ckfs.h - where checkpoints are kept: a local directory, or an HDFS
 * directory reached through WebHDFS (base/webhdfs.h: no JVM). Every
 * operation a checkpoint writer, reader or pruner does on its directory
 * goes through here, chosen by the directory's name (a webhdfs:// or
 * hdfs:// URL, else a path), so ckpt.c, the coordinator and export read
 * the same whichever it is.
 *
 * A step directory is committed by its manifest.json (manifest.h). Locally
 * it is written through a temporary, fsynced and renamed; on HDFS (no
 * fsync: a file is durable once its upload ends) it is uploaded as
 * manifest.json.tmp and committed by RENAME, atomic in the namespace.
 *
 * Calls on HDFS block (webhdfs.h's bounds); errors name the URL.
 */
#ifndef DROVER_CKFS_H
#define DROVER_CKFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/manifest.h"

/* One step directory ("step-<N>") found in a checkpoints directory. */
typedef struct ckpt_entry {
  int64_t step;
  char path[4096]; /* dir/step-<N>: a path or a URL, as dir was */
} ckpt_entry;

/* 1 when dir is an HDFS URL (kept there), 0 for a local path. */
int ckfs_is_remote(const char *dir);

/* The step directories of dir (committed only, unless `all`), oldest
 * first, into *out (malloc'ed, the caller frees; NULL with none). A
 * missing dir has none. The count, or a negative code. */
int ckfs_list(const char *dir, ckpt_entry **out, bool all);
/* Whether the step directory has a manifest (not checked). */
bool ckfs_committed(const char *step);
/* mkdir -p of dir. */
int ckfs_mkdirs(const char *dir);
/* Removes the step directory and its files (best effort). */
void ckfs_remove(const char *step);
/* manifest_read / manifest_verify / manifest_commit_hashed of a step
 * directory, wherever it is (see manifest.h; on HDFS, verify reads every
 * file through OPEN). */
int ckfs_manifest_read(const char *step, manifest *m);
int ckfs_manifest_verify(const char *step, const manifest *m);
int ckfs_manifest_commit(const char *step, const char *const *files, const uint64_t *sizes,
                         const char *const *hexes, const char *const *meta);

/* Copies the local directory `local`'s `files` (a NULL-ended list of
 * names) and then, committing them, its manifest.json to the step
 * directory `step` (an HDFS URL; created). A failure leaves `step`
 * uncommitted (the caller removes it). */
int ckfs_publish(const char *local, const char *step, const char *const *files);

/* A local directory holding step's files and manifest: for a local step
 * the step itself (*copied 0); for an HDFS one, a fresh directory under
 * $TMPDIR (else /tmp) they were read into (*copied 1), which the caller
 * removes with ckfs_drop_copy. `local` gets its path. */
int ckfs_fetch(const char *step, char *local, size_t n, int *copied);
void ckfs_drop_copy(const char *local);

/* A fresh empty local directory under $TMPDIR for files on their way to
 * HDFS, into buf; removed with ckfs_drop_copy. */
int ckfs_tmpdir(char *buf, size_t n);

#endif
