/* ps_sparse.h - the sparse tables a ps holds a shard of (issue 26).
 *
 * A table is sharded by row: this ps, shard k of nps, holds the ids with
 * sptable_owner(id, nps) == k, each row created on its first touch with
 * the deterministic values every process computes (sptable.h), so memory
 * grows with the rows touched, never with the declared size.
 *
 * This is the store alone: SPARSE_INIT, SPARSE_PULL and SPARSE_PUSH are
 * not dispatched to it yet (no server accepts them: wire.h), and a push
 * in sync mode is refused (DRV_EUNSUPPORTED) until the ps sums row
 * gradients over its quorum as it does dense ones.
 *
 * Not thread-safe: the ps's loop owns it.
 */
#ifndef DROVER_PS_SPARSE_H
#define DROVER_PS_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/wire_msgs.h"

typedef struct ps_sparse ps_sparse;

/* An empty store; NULL with DRV_ENOMEM. The caller owns it. */
ps_sparse *ps_sparse_new(void);
void ps_sparse_free(ps_sparse *s); /* NULL is fine */

/* (Re)creates table m->table from a decoded SPARSE_INIT, dropping the rows
 * it held. DRV_EINVAL (shard >= shards, a bad size, a bad optimizer, a
 * table number past PS_SPARSE_MAX_TABLES), DRV_ENOMEM. */
#define PS_SPARSE_MAX_TABLES 1024
int ps_sparse_init(ps_sparse *s, const wire_msg_sparse_init *m);

/* The rows of n ids (sorted, unique, below the declared rows, owned by
 * this shard) into out (n * dim floats), created on first touch.
 * DRV_EINVAL (no such table, ids out of order or owned by another ps),
 * DRV_ERANGE (an id past the table, a size that overflows), DRV_ENOMEM;
 * nothing is created when the ids are refused. */
int ps_sparse_pull(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n, float *out);

/* Applies one push, grads n * dim floats (row r is ids[r]'s), with the
 * table's optimizer, row by row (optim_table_update). The same checks
 * as ps_sparse_pull; DRV_EUNSUPPORTED in sync mode. */
int ps_sparse_push(ps_sparse *s, uint32_t table, const uint64_t *ids, size_t n,
                   const float *grads);

/* Rows the table holds (-1 when there is no such table): what c:nodes()
 * is to show per table. */
int64_t ps_sparse_held(const ps_sparse *s, uint32_t table);

#endif
