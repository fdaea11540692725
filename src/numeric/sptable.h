/* sptable.h - a lazily-filled table of float rows addressed by uint64 ids.
 *
 * The weights an id layer reads (nn.EmbeddingBag, nn.SparseLinear,
 * nn.Embedding { sparse = true }) may be declared far larger than memory:
 * hashed categorical ids live in [0, 2^24 .. 2^40), and one batch touches a
 * few thousand of them. A table holds only the rows touched so far: a row
 * exists from its first touch, so memory is proportional to the rows ever
 * touched, never to the declared size.
 *
 * A new row's values are a pure function of (the table's seed, the row id):
 * any process (a worker, a ps, a resumed run) re-creates the same row
 * without being told. Element j of row `id` is, with u64(c) =
 * smix(x + (c + 1) * 0x9e3779b97f4a7c15), x = smix(seed ^ smix(id)) and
 * smix splitmix64's output function:
 *   pair k = j / 2 from u1 = ((u64(2k) >> 11) + 1) / 2^53 and
 *   u2 = (u64(2k + 1) >> 11) / 2^53 by Box-Muller: r = sqrt(-2 ln u1),
 *   element 2k = std r cos(2 pi u2), element 2k + 1 = std r sin(2 pi u2).
 * std == 0 gives zeros (the "wide" part's weights).
 *
 * Each held row has an index (0, 1, ... in the order rows were created):
 * its values, its optimizer slot rows (as many as sptable_set_slots asked
 * for, each dim floats) and its update count. Indices never change and row
 * memory never moves (rows live in fixed-size arenas), so a pointer to a
 * row stays valid until the table is freed. Iterating indices 0 .. held-1
 * is the stable order checkpoints use.
 *
 * Not thread-safe; one table per owner.
 */
#ifndef DROVER_SPTABLE_H
#define DROVER_SPTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Declared sizes up to 2^40 rows; rows of up to 2^20 floats. */
#define SPTABLE_MAX_ROWS (1ULL << 40)
#define SPTABLE_MAX_DIM (1LL << 20)
#define SPTABLE_MAX_SLOTS 2

typedef struct sptable sptable;

/* A table of `rows` declared rows of `dim` floats, initialised N(0, std^2)
 * from `seed` as above. NULL on bad sizes (DRV_EINVAL) or no memory
 * (DRV_ENOMEM), with a message. The caller owns it: sptable_free. */
sptable *sptable_new(uint64_t rows, int64_t dim, float std, uint64_t seed);
void sptable_free(sptable *t); /* NULL is fine */

uint64_t sptable_rows(const sptable *t); /* declared */
int64_t sptable_dim(const sptable *t);
float sptable_std(const sptable *t);
uint64_t sptable_seed(const sptable *t);
int64_t sptable_held(const sptable *t);  /* rows created so far */
/* Bytes the table holds: its arenas and its index (what RSS grows by). */
size_t sptable_bytes(const sptable *t);

/* Writes the initial values of row `id` (dim floats) into out: what the row
 * is or would be when created. */
void sptable_init_row(const sptable *t, uint64_t id, float *out);

/* The index of row `id`, creating it on first touch (values from the seed,
 * slots from sptable_set_slots' initial values, count 0). DRV_ERANGE when
 * id >= rows, DRV_ENOMEM; both with a message. */
int64_t sptable_get(sptable *t, uint64_t id);
/* The same, the row's values set to `row` (dim floats) whether it was
 * held or not: a worker's copy of rows pulled from the ps. */
int64_t sptable_put(sptable *t, uint64_t id, const float *row);
/* The index of row `id` when held, else -1; never creates (export, eval). */
int64_t sptable_find(const sptable *t, uint64_t id);

/* Row index k's id, values, slot s and update count; k in 0 .. held-1
 * (unchecked), s < sptable_nslots. Pointers into the table's arenas: valid
 * until sptable_free. */
uint64_t sptable_id(const sptable *t, int64_t k);
float *sptable_value(const sptable *t, int64_t k);
float *sptable_slot(const sptable *t, int64_t k, int s);
int64_t *sptable_count(const sptable *t, int64_t k);

/* Forgets every row (held becomes 0; memory is kept for the rows to come):
 * what a load does before it puts a file's rows in. */
void sptable_clear(sptable *t);

/* The held rows in index order, for files: their ids (held of them), their
 * values (which < 0) or slot `which` (held * dim floats), their counts. */
void sptable_copy_ids(const sptable *t, int64_t *out);
void sptable_copy_rows(const sptable *t, int which, float *out);
void sptable_copy_counts(const sptable *t, int64_t *out);

/* Gives every row `nslots` optimizer slot rows (0 .. SPTABLE_MAX_SLOTS),
 * slot s of every row (held or future) starting at init[s]. Rows already
 * held get fresh slots; their counts restart at 0. An optimizer calls it
 * when it binds the table. DRV_EINVAL, DRV_ENOMEM. */
int sptable_set_slots(sptable *t, int nslots, const float *init);
int sptable_nslots(const sptable *t);

/* Sharding on a cluster: of nps ps nodes, ps k holds the rows whose
 * fmix64(id) mod nps == k (MurmurHash3's 64-bit finalizer), so that ids
 * that are not hashed (user numbers, item numbers) spread evenly too.
 * Workers, ps nodes and the coordinator all route by this one function.
 * nps == 0 is treated as 1. */
uint32_t sptable_owner(uint64_t id, uint32_t nps);

/* A worker's routing of a batch's ids: the n ids (any order, repeats
 * allowed) sorted by owner (sptable_owner over nps), then by id, each
 * once, into out (room for n); ps k's are out[offs[k] .. offs[k + 1])
 * (offs has nps + 1 entries; nps >= 1). Returns the unique count, or
 * DRV_EINVAL (nps 0), DRV_ENOMEM. */
int64_t sptable_route(const uint64_t *ids, size_t n, uint32_t nps, uint64_t *out, size_t *offs);

/* Checks the ids of a request on a table of `rows` declared rows of `dim`
 * floats before anything is allocated: n ids strictly increasing (sorted,
 * unique), each below rows, and n * dim * 4 bytes (the rows they carry)
 * representable in a size_t. 0, or DRV_EINVAL (order, dim) / DRV_ERANGE
 * (an id out of range, a size that overflows) with a message naming
 * `what`. */
int sptable_check_ids(uint64_t rows, int64_t dim, const uint64_t *ids, size_t n,
                      const char *what);

#endif
