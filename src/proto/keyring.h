/* keyring.h - a node's key file: the keys one node holds (auth.h).
 *
 * The coordinator writes it as keys/<role>-<index>.key in the run
 * directory (mode 0600) before each start of the node, which reads it from
 * $DROVER_SECRET_FILE and removes it (node.c: the keys live on in its
 * memory only). One
 * key a line, a word, for `ps` a ps index, and 64 lowercase hex digits,
 * separated by one space, each line ending in a newline:
 *
 *   coord <hex>     the key this node proves to the coordinator,
 *                   auth_node_key(secret, role, index); exactly one
 *   root <hex>      a ps only: its root R_i = auth_ps_root(secret, i),
 *                   which checks its clients' keys; at most one
 *   ps <k> <hex>    the key this node proves at ps k,
 *                   auth_node_key(R_k, role, index); one per k
 *
 * Nothing else: no blank lines, no comments, no other spelling. A file
 * that is not exactly what the coordinator writes is more likely the
 * wrong file than a key file in another spelling, and the error names the
 * file and the line.
 */
#ifndef DROVER_KEYRING_H
#define DROVER_KEYRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/auth.h"

/* The most ps keys one file may hold (two processes per ps group, each
 * group a ps index under 2^16). */
#define KEYRING_MAX_PS 65536u

typedef struct keyring_ps {
  uint32_t ps;
  auth_secret key;
} keyring_ps;

typedef struct keyring {
  auth_secret coord; /* proves this node to the coordinator */
  bool has_root;
  auth_secret root; /* a ps's own root (has_root) */
  keyring_ps *ps;   /* owned; sorted by ps, no two alike */
  size_t nps;
} keyring;

/* Reads a key file into *k (zeroed first; keyring_free it after, on
 * failure too). Refuses a file group or others may read or write, and
 * any malformed line ("key file 'x' line 3: ..."). */
int keyring_load(const char *path, keyring *k);
/* Loads the file named by $DROVER_SECRET_FILE. */
int keyring_from_env(keyring *k);
/* Writes k (ps entries in the order given) to a new 0600 file at path
 * (auth_file_write: never an existing one), fsynced when `sync`. */
int keyring_write(const keyring *k, const char *path, bool sync);
/* The key to prove at ps `ps`, or NULL when the file holds none (k as
 * keyring_load left it: sorted). */
const auth_secret *keyring_ps_key(const keyring *k, uint32_t ps);
/* Zeroes every key and frees the ps entries; k stays usable (empty). */
void keyring_free(keyring *k);

#endif
