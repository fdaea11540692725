/* ps_sparse.h - the sparse tables a ps holds a shard of (issue 26).
 *
 * A table is sharded by row: this ps, shard k of nps, holds the ids with
 * sptable_owner(id, nps) == k, each row created on its first touch with
 * the deterministic values every process computes (sptable.h), so memory
 * grows with the rows touched, never with the declared size.
 *
 * This is the store alone; ps_spserve.c serves the SPARSE_* frames with
 * it. A sync table sums its pushes' rows until ps_sparse_apply_sync,
 * which the ps calls where it applies a dense global step (apply_sync in
 * ps_push.c).
 *
 * Not thread-safe: the ps's loop owns it.
 */
#ifndef DROVER_PS_SPARSE_H
#define DROVER_PS_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "numeric/nn_sparse.h"
#include "numeric/sptable.h"
#include "proto/wire_msgs.h"

typedef struct ps_sparse ps_sparse;

/* An empty store; NULL with DRV_ENOMEM. The caller owns it. */
ps_sparse *ps_sparse_new(void);
void ps_sparse_free(ps_sparse *s); /* NULL is fine */

/* (Re)creates table m->table from a decoded SPARSE_INIT, dropping the rows
 * it held. DRV_EINVAL (shard >= shards, a bad size, a bad optimizer, a
 * table number past PS_SPARSE_MAX_TABLES), DRV_ENOMEM. A table (re)made
 * here starts at its plateau schedule's unreduced rate: the coordinator
 * sends LR_SCALE again after a restore, as it does for the dense shards,
 * whose VAR_INIT resets theirs. */
#define PS_SPARSE_MAX_TABLES 1024
int ps_sparse_init(ps_sparse *s, const wire_msg_sparse_init *m);

/* LR_SCALE: the rate of every table whose optimizer has a plateau
 * schedule is multiplied by scale (in (0, 1]) from its next update on;
 * the other tables keep theirs. Returns how many tables took it. */
int ps_sparse_set_lr_scale(ps_sparse *s, double scale);

/* The rows of n ids (sorted, unique, below the declared rows, owned by
 * this shard) into out (n * dim floats); a row not held yet gives its
 * initial values and is not created: a row exists from its first push, so
 * an evaluator's pulls, or a step's that never pushed, hold nothing.
 * DRV_EINVAL (no such table, ids out of order or owned by another ps),
 * DRV_ERANGE (an id past the table, a size that overflows), DRV_ENOMEM;
 * nothing is created when the ids are refused. */
int ps_sparse_pull(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n, float *out);

/* Applies one push, grads n * dim floats (row r is ids[r]'s), with the
 * table's optimizer, row by row (optim_table_update), at the rate its
 * schedule gives for `step` (the ps's version: the pushes applied before
 * this one); in sync mode adds them to the step's sums instead. The same
 * checks as ps_sparse_pull. */
int ps_sparse_push(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                   const float *grads, uint64_t step);

/* Sync: one optimizer step per summed row of every sync table, with the
 * sum divided by `pushes` (the step's pushes, as the dense average is), at
 * the rate for `step` (the global steps applied before this one); rows no
 * push touched do not step. 0, DRV_ENOMEM. */
int ps_sparse_apply_sync(ps_sparse *s, uint32_t pushes, uint64_t step);

/* The table's row width, or -1 when there is no such table. */
int64_t ps_sparse_dim(const ps_sparse *s, uint32_t table);
/* The table itself (borrowed), or NULL: what SPARSE_DUMP reads. */
const sptable *ps_sparse_table(const ps_sparse *s, uint32_t table);

/* Puts n rows (ids as ps_sparse_pull's, their values n * dim floats) into
 * the table, each with fresh optimizer slots and a count of 0 (a held row
 * keeps its slots): SPARSE_LOAD. The same checks as ps_sparse_pull, before
 * anything changes. */
int ps_sparse_put_rows(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                       const float *rows);

/* Rows the table holds (-1 when there is no such table): what c:nodes()
 * is to show per table. */
int64_t ps_sparse_held(const ps_sparse *s, uint32_t table);

/* Which shard of how many this ps holds of the table (0 of 0: none). */
void ps_sparse_shard(const ps_sparse *s, uint32_t table, uint32_t *shard, uint32_t *shards);

/* CHECKPOINT and RESTORE name a ps's tables beside its variables: the item
 * (PS_SPARSE_VAR | table, the table's name), a var id no variable has
 * (ps_ckpt_sparse.c writes and reads the table's tensors). */
#define PS_SPARSE_VAR 0x80000000u

/* One table's rows as a checkpoint holds them: n ids, their values, the
 * optimizer's slot rows (nslots arrays, each n * dim floats, row r id
 * r's) and update counts. Borrowed for the call. */
typedef struct ps_sparse_rows {
  const int64_t *ids;
  size_t n;
  const float *values;
  const float *slots[SPTABLE_MAX_SLOTS];
  int nslots;
  const int64_t *counts;
} ps_sparse_rows;

/* Replaces every row of `table` with r's (a RESTORE after the table's
 * SPARSE_INIT): rows r does not hold go back to their initial values, and
 * the step's sums (sync) are dropped. Checked before anything changes:
 * DRV_EINVAL (no such table, an id twice or another ps's, a slot count
 * that is not the optimizer's), DRV_ERANGE (an id past the table),
 * DRV_ENOMEM. */
int ps_sparse_load(ps_sparse *s, uint32_t table, const ps_sparse_rows *r);

/* ps replicas (ps_repl_sparse.c): a table as REPL_SYNC streams it. Its
 * SPARSE_INIT fields, rows held and rows summed into the step into *out
 * (the table's number, plateau factor, held and acc set); -1 when there is
 * no such table. */
int ps_sparse_describe(const ps_sparse *s, uint32_t table, wire_msg_repl_table *out);
/* A table's plateau factor as its primary's (REPL_TABLE's lr_scale; 0:
 * none); -1 when there is no such table. */
int ps_sparse_set_table_scale(ps_sparse *s, uint32_t table, double scale);
/* The rows summed into the step being aggregated (sync), or NULL. */
const nn_spgrad *ps_sparse_acc(const ps_sparse *s, uint32_t table);
/* Adds n summed rows to the table's step sums (a replica's copy of its
 * primary's; the same checks as ps_sparse_pull). */
int ps_sparse_acc_add(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                      const float *rows);

#endif
