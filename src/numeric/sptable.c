/* sptable.c - the lazily-filled row table: an open-addressing index from ids
 * to row indices, rows in fixed-size arenas ("chunks") that never move, and
 * the counter-based row initialiser (see sptable.h).
 */
#include "numeric/sptable.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"

#define GOLDEN 0x9e3779b97f4a7c15ULL
/* A chunk holds 2^shift rows, sized so that its values are at most 64K
 * floats: small tables stay small, and a chunk never needs a huge block. */
#define CHUNK_FLOATS (1 << 16)

typedef struct chunk {
  uint64_t *ids;
  int64_t *counts;
  float *vals;
  float *slots[SPTABLE_MAX_SLOTS];
} chunk;

/* An index cell: k == -1 is empty. */
typedef struct cell {
  uint64_t id;
  int64_t k;
} cell;

struct sptable {
  uint64_t rows, seed;
  int64_t dim, held;
  float std;
  int nslots;
  float slot_init[SPTABLE_MAX_SLOTS];
  int shift;           /* rows per chunk: 2^shift */
  chunk *chunks;
  size_t nchunks, capchunks;
  cell *map;
  size_t mapcap;       /* a power of two */
  size_t bytes;        /* of the chunks' arrays */
};

/* splitmix64's output function (MurmurHash3's fmix64 constants differ;
 * either mixes well: this one is the generator's, see sptable.h). */
static uint64_t smix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* ---- initial values --------------------------------------------------------- */

void sptable_init_row(const sptable *t, uint64_t id, float *out) {
  if (t->std == 0.0f) {
    memset(out, 0, (size_t)t->dim * sizeof *out);
    return;
  }
  uint64_t x = smix(t->seed ^ smix(id));
  for (int64_t j = 0; j < t->dim; j += 2) {
    uint64_t c = (uint64_t)j; /* 2k for pair k = j / 2 */
    double u1 = ((double)(smix(x + (c + 1) * GOLDEN) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(smix(x + (c + 2) * GOLDEN) >> 11) * (1.0 / 9007199254740992.0);
    double r = sqrt(-2.0 * log(u1)), a = 2.0 * M_PI * u2;
    out[j] = (float)((double)t->std * r * cos(a));
    if (j + 1 < t->dim) out[j + 1] = (float)((double)t->std * r * sin(a));
  }
}

/* ---- construction ------------------------------------------------------------- */

sptable *sptable_new(uint64_t rows, int64_t dim, float std, uint64_t seed) {
  if (rows == 0 || rows > SPTABLE_MAX_ROWS || dim <= 0 || dim > SPTABLE_MAX_DIM) {
    err_set(DRV_EINVAL, "sparse table: %llu rows of %lld must be 1..2^40 rows of 1..2^20",
            (unsigned long long)rows, (long long)dim);
    return NULL;
  }
  if (!(std >= 0.0f) || !isfinite(std)) {
    err_set(DRV_EINVAL, "sparse table: std %g must be a finite number >= 0", (double)std);
    return NULL;
  }
  sptable *t = calloc(1, sizeof *t);
  if (!t) {
    err_set(DRV_ENOMEM, "out of memory creating a sparse table");
    return NULL;
  }
  t->rows = rows;
  t->dim = dim;
  t->std = std;
  t->seed = seed;
  while (t->shift < 10 && (dim << (t->shift + 1)) <= CHUNK_FLOATS) t->shift++;
  return t;
}

static void chunk_free(chunk *c) {
  free(c->ids);
  free(c->counts);
  free(c->vals);
  for (int s = 0; s < SPTABLE_MAX_SLOTS; s++) free(c->slots[s]);
}

void sptable_free(sptable *t) {
  if (!t) return;
  for (size_t i = 0; i < t->nchunks; i++) chunk_free(&t->chunks[i]);
  free(t->chunks);
  free(t->map);
  free(t);
}

uint64_t sptable_rows(const sptable *t) { return t->rows; }
int64_t sptable_dim(const sptable *t) { return t->dim; }
float sptable_std(const sptable *t) { return t->std; }
uint64_t sptable_seed(const sptable *t) { return t->seed; }
int64_t sptable_held(const sptable *t) { return t->held; }
int sptable_nslots(const sptable *t) { return t->nslots; }

size_t sptable_bytes(const sptable *t) {
  return t->bytes + t->mapcap * sizeof(cell) + t->capchunks * sizeof(chunk);
}

/* ---- rows by index --------------------------------------------------------------- */

static chunk *chunk_of(const sptable *t, int64_t k) { return &t->chunks[k >> t->shift]; }
static int64_t within(const sptable *t, int64_t k) { return k & ((1LL << t->shift) - 1); }

uint64_t sptable_id(const sptable *t, int64_t k) { return chunk_of(t, k)->ids[within(t, k)]; }

float *sptable_value(const sptable *t, int64_t k) {
  return chunk_of(t, k)->vals + within(t, k) * t->dim;
}

float *sptable_slot(const sptable *t, int64_t k, int s) {
  return chunk_of(t, k)->slots[s] + within(t, k) * t->dim;
}

int64_t *sptable_count(const sptable *t, int64_t k) {
  return &chunk_of(t, k)->counts[within(t, k)];
}

static size_t chunk_floats(const sptable *t) { return (size_t)t->dim << t->shift; }

static float *alloc_floats(sptable *t, size_t n) {
  float *p = malloc(n * sizeof *p);
  if (p) t->bytes += n * sizeof *p;
  return p;
}

/* Slot rows of a whole chunk, each element at its initial value. */
static int chunk_slots(sptable *t, chunk *c) {
  size_t n = chunk_floats(t);
  for (int s = 0; s < t->nslots; s++) {
    if (!c->slots[s] && !(c->slots[s] = alloc_floats(t, n))) return DRV_ENOMEM;
    for (size_t i = 0; i < n; i++) c->slots[s][i] = t->slot_init[s];
  }
  return 0;
}

static int add_chunk(sptable *t) {
  if (util_grow_zeroed(&t->chunks, &t->capchunks, t->nchunks + 1, sizeof *t->chunks, 16) < 0)
    return DRV_ENOMEM;
  chunk *c = &t->chunks[t->nchunks];
  size_t rows = (size_t)1 << t->shift;
  c->ids = malloc(rows * sizeof *c->ids);
  c->counts = calloc(rows, sizeof *c->counts);
  c->vals = alloc_floats(t, chunk_floats(t));
  t->bytes += rows * (sizeof *c->ids + sizeof *c->counts);
  int rc = c->ids && c->counts && c->vals ? chunk_slots(t, c) : DRV_ENOMEM;
  t->nchunks++; /* even when partial: sptable_free frees what it holds */
  return rc;
}

int sptable_set_slots(sptable *t, int nslots, const float *init) {
  if (nslots < 0 || nslots > SPTABLE_MAX_SLOTS || (nslots && !init))
    return err_set(DRV_EINVAL, "sparse table: %d optimizer slots (0..%d)", nslots,
                   SPTABLE_MAX_SLOTS);
  t->nslots = nslots;
  for (int s = 0; s < nslots; s++) t->slot_init[s] = init[s];
  for (size_t i = 0; i < t->nchunks; i++) {
    chunk *c = &t->chunks[i];
    if (chunk_slots(t, c) < 0)
      return err_set(DRV_ENOMEM, "out of memory for a sparse table's optimizer slots");
    memset(c->counts, 0, ((size_t)1 << t->shift) * sizeof *c->counts);
  }
  return 0;
}

/* ---- the index --------------------------------------------------------------------- */

static size_t probe(const cell *map, size_t cap, uint64_t id) {
  size_t i = (size_t)smix(id ^ GOLDEN) & (cap - 1);
  while (map[i].k >= 0 && map[i].id != id) i = (i + 1) & (cap - 1);
  return i;
}

int64_t sptable_find(const sptable *t, uint64_t id) {
  if (!t->mapcap) return -1;
  return t->map[probe(t->map, t->mapcap, id)].k;
}

/* Doubles the index (at most 70% full keeps linear probes short). */
static int grow_map(sptable *t) {
  size_t cap = t->mapcap ? t->mapcap * 2 : 64;
  if (cap > SIZE_MAX / sizeof(cell)) return DRV_ENOMEM;
  cell *map = malloc(cap * sizeof *map);
  if (!map) return DRV_ENOMEM;
  for (size_t i = 0; i < cap; i++) map[i].k = -1;
  for (size_t i = 0; i < t->mapcap; i++)
    if (t->map[i].k >= 0) map[probe(map, cap, t->map[i].id)] = t->map[i];
  free(t->map);
  t->map = map;
  t->mapcap = cap;
  return 0;
}

/* Row `id` as row index held; its values `row` (dim floats) or, NULL,
 * its initial ones. */
static int64_t create(sptable *t, uint64_t id, const float *row) {
  int64_t k = t->held;
  if ((size_t)(k >> t->shift) >= t->nchunks && add_chunk(t) < 0) return DRV_ENOMEM;
  chunk *c = chunk_of(t, k);
  int64_t w = within(t, k);
  c->ids[w] = id;
  c->counts[w] = 0;
  if (row) memcpy(c->vals + w * t->dim, row, (size_t)t->dim * sizeof *row);
  else sptable_init_row(t, id, c->vals + w * t->dim);
  for (int s = 0; s < t->nslots; s++)
    for (int64_t j = 0; j < t->dim; j++) c->slots[s][w * t->dim + j] = t->slot_init[s];
  t->held++;
  return k;
}

static int64_t get_or_put(sptable *t, uint64_t id, const float *row) {
  if (id >= t->rows)
    return err_set(DRV_ERANGE, "id %llu is outside the table's %llu rows",
                   (unsigned long long)id, (unsigned long long)t->rows);
  if ((size_t)(t->held + 1) * 10 > t->mapcap * 7 && grow_map(t) < 0)
    return err_set(DRV_ENOMEM, "out of memory growing a sparse table's index");
  size_t i = probe(t->map, t->mapcap, id);
  if (t->map[i].k >= 0) {
    if (row) memcpy(sptable_value(t, t->map[i].k), row, (size_t)t->dim * sizeof *row);
    return t->map[i].k;
  }
  int64_t k = create(t, id, row);
  if (k < 0)
    return err_set(DRV_ENOMEM, "out of memory for a sparse table's rows (%lld held, %zu bytes)",
                   (long long)t->held, sptable_bytes(t));
  t->map[i] = (cell){id, k};
  return k;
}

int64_t sptable_get(sptable *t, uint64_t id) { return get_or_put(t, id, NULL); }

int64_t sptable_put(sptable *t, uint64_t id, const float *row) { return get_or_put(t, id, row); }

void sptable_clear(sptable *t) {
  for (size_t i = 0; i < t->mapcap; i++) t->map[i].k = -1;
  t->held = 0;
}

void sptable_copy_ids(const sptable *t, int64_t *out) {
  for (int64_t k = 0; k < t->held; k++) out[k] = (int64_t)sptable_id(t, k);
}

void sptable_copy_rows(const sptable *t, int which, float *out) {
  size_t d = (size_t)t->dim;
  for (int64_t k = 0; k < t->held; k++)
    memcpy(out + (size_t)k * d, which < 0 ? sptable_value(t, k) : sptable_slot(t, k, which),
           d * sizeof *out);
}

void sptable_copy_counts(const sptable *t, int64_t *out) {
  for (int64_t k = 0; k < t->held; k++) out[k] = *sptable_count(t, k);
}


uint32_t sptable_owner(uint64_t id, uint32_t nps) {
  return nps > 1 ? (uint32_t)(util_fmix64(id) % nps) : 0;
}

int sptable_check_ids(uint64_t rows, int64_t dim, const uint64_t *ids, size_t n,
                      const char *what) {
  if (dim < 1 || dim > SPTABLE_MAX_DIM)
    return err_set(DRV_EINVAL, "%s: row size %lld is outside 1..%lld", what, (long long)dim,
                   (long long)SPTABLE_MAX_DIM);
  if (n > SIZE_MAX / 4 / (size_t)dim)
    return err_set(DRV_ERANGE, "%s: %zu rows of %lld floats overflow a size", what, n,
                   (long long)dim);
  for (size_t i = 0; i < n; i++) {
    if (ids[i] >= rows)
      return err_set(DRV_ERANGE, "%s: id %llu is outside the table's %llu rows", what,
                     (unsigned long long)ids[i], (unsigned long long)rows);
    if (i > 0 && ids[i] <= ids[i - 1])
      return err_set(DRV_EINVAL, "%s: ids are not sorted and unique (id %llu after %llu)", what,
                     (unsigned long long)ids[i], (unsigned long long)ids[i - 1]);
  }
  return 0;
}

typedef struct routed {
  uint32_t owner;
  uint64_t id;
} routed;

static int by_owner_then_id(const void *a, const void *b) {
  const routed *x = a, *y = b;
  if (x->owner != y->owner) return x->owner < y->owner ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

int64_t sptable_route(const uint64_t *ids, size_t n, uint32_t nps, uint64_t *out, size_t *offs) {
  if (nps == 0) return err_set(DRV_EINVAL, "sparse routing over 0 ps nodes");
  routed *r = n ? malloc(n * sizeof *r) : NULL;
  if (n && !r) return err_set(DRV_ENOMEM, "out of memory routing %zu ids", n);
  for (size_t i = 0; i < n; i++) r[i] = (routed){sptable_owner(ids[i], nps), ids[i]};
  if (n) qsort(r, n, sizeof *r, by_owner_then_id);
  size_t u = 0;
  for (uint32_t k = 0; k <= nps; k++) offs[k] = 0;
  for (size_t i = 0; i < n; i++) {
    if (i > 0 && r[i].id == r[i - 1].id) continue; /* equal ids share an owner: adjacent */
    out[u++] = r[i].id;
    offs[r[i].owner + 1]++;
  }
  for (uint32_t k = 0; k < nps; k++) offs[k + 1] += offs[k];
  free(r);
  return (int64_t)u;
}
