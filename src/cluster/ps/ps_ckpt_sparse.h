/* ps_ckpt_sparse.h - a ps's shards of sparse tables in its checkpoint file
 * (issue 26): CHECKPOINT copies every row the ps holds, RESTORE puts them
 * back after the tables' SPARSE_INIT.
 *
 * The coordinator names each table in CHECKPOINT and RESTORE with the item
 * (PS_SPARSE_VAR | table, NAME), NAME being PyTorch's name of the table's
 * weight. For that table the file holds, beside the dense shards:
 *   NAME.ids           I64 [held]       the ids of the rows this ps holds
 *   NAME.rows          F32 [held, dim]  their values, row r id r's
 *   optim.NAME.<s>     F32 [held, dim]  optimizer slot s (Adam's moments...)
 *   optim.NAME.count   I64 [held]       each row's update count
 *   metadata NAME.shard "K/N": written by ps K of N
 * as a model file and a state file of nn_tabfile.h name them, so that
 * `drover export` reads the tables back by name and no dense variable's
 * name can be one of them (a table is not a variable). The sync sums are
 * not written: a snapshot is taken between two global steps.
 */
#ifndef DROVER_PS_CKPT_SPARSE_H
#define DROVER_PS_CKPT_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/safetensors.h"
#include "cluster/ps/ps_sparse.h"

/* The copies of one snapshot: entries to write (their names, shapes and
 * data owned here) and metadata pairs (owned strings). */
typedef struct ps_spsnap {
  safetensors_entry *e;
  size_t n, cap;
  char **meta; /* alternating keys and values, nmeta strings */
  size_t nmeta;
  int64_t (*shapes)[2];
} ps_spsnap;

/* Copies every table s holds (s may be NULL: none), named by the (vars,
 * names) items of CHECKPOINT, into *out (zeroed first; ps_spsnap_free it,
 * also after a failure). DRV_EINVAL (a table the request does not name),
 * DRV_ENOMEM. */
int ps_spsnap_take(const ps_sparse *s, const uint32_t *vars, char *const *names, uint32_t n,
                   ps_spsnap *out);
void ps_spsnap_free(ps_spsnap *p);

/* RESTORE: every table s holds gets its rows, slots and counts from f,
 * found by the names the items give (ps_sparse_load: rows f does not hold
 * go back to their start). DRV_EINVAL, naming the tensor, when f lacks
 * one or it has the wrong dtype or shape; ps_sparse_load's errors. */
int ps_spsnap_restore(ps_sparse *s, const safetensors_file *f, const uint32_t *vars,
                      char *const *names, uint32_t n);

#endif
