/* data_int.h - internals shared by the dataset readers (data_read.c, the
 * text formats and these helpers; data_bin.c, the binary formats). Not part
 * of the public API: include data.h instead.
 */
#ifndef DROVER_DATA_INT_H
#define DROVER_DATA_INT_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"

/* Most elements a reader will allocate for x: a header or an index beyond
 * this is taken to be corrupt rather than a real dataset (2^34 floats is
 * already 64 GiB). */
#define DATA__MAX_ELEMS ((int64_t)1 << 34)
/* Longest field or token quoted back in a message. */
#define DATA__QUOTE_MAX 40

typedef struct filebuf {
  char *data; /* NUL-terminated copy of the file, owned */
  size_t len; /* bytes, not counting the NUL */
} filebuf;

/* Reads the whole file at `path` into fb; the caller frees fb->data (also
 * set to NULL on failure). Works for pipes as well as regular files. A
 * gzip file (by its magic bytes, whatever its name) is decompressed, so
 * every reader takes `.gz` files; corrupt or truncated ones are DRV_EPARSE
 * naming the byte of the compressed file.
 * "cannot open 'PATH': REASON" when the file cannot be opened. */
int data__read_all(const char *path, filebuf *fb);

/* Allocates zero-filled x [rows, cols] and y [rows], refusing absurd sizes
 * (DRV_ERANGE) before allocating. On failure both are NULL. */
int data__alloc_xy(const char *path, int64_t rows, int64_t cols, tensor **x, tensor **y);

/* Wraps x [n, f] and y [n] into a new dataset named after the last
 * component of `path`, working out `classes` from the labels. Takes
 * ownership of x and y: on failure both are freed. */
int data__wrap(tensor *x, tensor *y, const char *path, dataset **out);

#endif
