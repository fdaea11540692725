/* embed.h - files from lua/ and themes/ compiled into the binary.
 *
 * The table is generated at build time by tools/embed.c from the source
 * tree; paths are as in the tree ("lua/pretty.lua"). The data is static and
 * NUL-terminated; never free it.
 */
#ifndef DROVER_EMBED_H
#define DROVER_EMBED_H

#include <stddef.h>

typedef struct embed_file {
  const char *path;
  const char *data;
  size_t len;
} embed_file;

/* Terminated by an entry with path == NULL. */
extern const embed_file embed_files[];

/* The embedded file at `path`, or NULL. */
const embed_file *embed_find(const char *path);

#endif
