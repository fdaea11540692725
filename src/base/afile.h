/* afile.h - a file replaced whole or not at all.
 *
 * The bytes go to a temporary beside the target (created exclusively,
 * 0600, so even a secret is never briefly readable by others); commit
 * sets the final mode, fsyncs, closes, renames over the target and fsyncs
 * the directory. A reader sees the old file or the new one, never a part;
 * a crash leaves at most a stray "<path>.tmp-*". Errors name the target
 * and the step that failed ("cannot write 'x': write failed: No space left
 * on device"), and the temporary is removed. Base layer.
 *
 * Big files: the bytes reach the kernel in write(2)s of at most
 * AFILE_PIECE ending at multiples of it, and every AFILE_WRITEBACK bytes
 * the device is told to start writing them (sync_file_range), so the
 * fsync of the commit finds little left to do. Why both: see afile.c.
 */
#ifndef DROVER_AFILE_H
#define DROVER_AFILE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest write(2) (and its alignment in the file), and how many
 * bytes written start their writeback. */
#define AFILE_PIECE (1u << 20)
#define AFILE_WRITEBACK (8u << 20)

typedef struct afile {
  int fd;        /* the temporary: write here (or with afile_write) */
  int err;       /* first errno a write hit, 0 while none */
  uint64_t pos;  /* bytes written so far (by afile_write) */
  uint64_t started; /* bytes whose writeback was started */
  const char *path; /* the target; borrowed until commit or abort */
  char tmp[PATH_MAX + 48];
} afile;

/* Creates the temporary for `path`. 0, or a negative code with a message. */
int afile_open(afile *f, const char *path);

/* Writes all of buf (in pieces, starting their writeback: see above;
 * writes made to f->fd directly do neither). A failure is remembered for
 * afile_commit (which then fails naming it) and returned as -1; later
 * writes do nothing. */
int afile_write(afile *f, const void *buf, size_t len);

/* Sets `mode` exactly (regardless of the umask), then fsync, close,
 * rename, fsync of the directory. 0, or a negative code with a message;
 * on failure the temporary is gone and the old target is untouched. */
int afile_commit(afile *f, mode_t mode);

/* Closes and removes the temporary; the target is untouched. */
void afile_abort(afile *f);

#endif
