/* nn_sparse.h - the id layers: embeddings read by id from a lazily-filled
 * table (sptable.h), with sparse gradients.
 *
 *   nn.EmbeddingBag(n, dim, {mode, bags, std})  reads the batch's ids
 *       (m->sparse, set by nn_set_sparse). bags "field" (the default when
 *       the batch has fields > 0): output [N, fields*dim], field j's row at
 *       columns j*dim ..; bags "all": output [N, dim], one bag over every
 *       entry of the example, each row weighted by its value when the batch
 *       has values (PyTorch's per_sample_weights). mode "mean" divides a
 *       bag by its entry count (an empty bag is zeros) and, as PyTorch,
 *       refuses weights. Rows are N(0, std^2), std 1 by default (PyTorch's
 *       nn.EmbeddingBag init).
 *   nn.SparseLinear(n, out, {std})  the "wide" part: y = sum over the
 *       example's entries of value * W[id] + bias; W is a table of n rows of
 *       out (zeros by default: std 0), bias a dense parameter [out] (zeros).
 *   nn.Embedding(n, dim, {sparse = true})  ids from x as nn.Embedding reads
 *       them (integral floats, [N, ...] -> [N, ..., dim]), rows from a table.
 *
 * Their x is the dense features (EmbeddingBag and SparseLinear only take N
 * from it and give it a zero gradient), so in a model they sit inside
 * nn.Concat next to nn.Identity() for the dense columns.
 *
 * A table is not a dense parameter: nn_collect_params leaves it out (every
 * dense path keeps working) and nn_collect_tables lists it. Backward leaves
 * a sparse gradient: the distinct ids touched since the last nn_zero_grad
 * and one accumulated row each, never an [n, dim] buffer. Training forwards
 * create the rows they read; evaluation forwards (nn_set_training false)
 * read a missing row's initial values without creating it.
 */
#ifndef DROVER_NN_SPARSE_H
#define DROVER_NN_SPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numeric/nn.h"
#include "numeric/sptable.h"

/* A table's gradient since the last nn_zero_grad: n distinct ids in the
 * order first touched, and n rows of dim floats (row i is ids[i]'s). */
typedef struct nn_spgrad {
  int64_t n, dim;
  uint64_t *ids;
  float *rows;
  size_t cap;      /* ids and rows allocated for cap entries */
  int64_t *map;    /* id -> position + 1 (0: empty), open addressing */
  size_t mapcap;   /* a power of two, or 0 */
} nn_spgrad;

/* One table of a model, as nn_collect_tables lists it: borrowed from the
 * module that owns both (the list must not outlive the model). */
typedef struct nn_table {
  char name[64];    /* "weight", qualified as parameters are: "1.2.weight" */
  const nn_module *owner;
  sptable *value;
  nn_spgrad *grad;
} nn_table;

typedef struct nn_table_list {
  nn_table *items;
  int n;
  size_t cap;
} nn_table_list;

typedef enum nn_bag_mode { NN_BAG_SUM, NN_BAG_MEAN } nn_bag_mode;
typedef enum nn_bags { NN_BAGS_AUTO, NN_BAGS_FIELD, NN_BAGS_ALL } nn_bags;
typedef struct nn_bag_opts {
  nn_bag_mode mode;
  nn_bags bags;  /* AUTO: per field when the batch has fields, else all */
  float std;     /* of the rows' initial values */
} nn_bag_opts;
#define NN_BAG_DEFAULTS ((nn_bag_opts){NN_BAG_SUM, NN_BAGS_AUTO, 1.0f})

/* Constructors: one reference, or NULL with err_msg(). n up to
 * SPTABLE_MAX_ROWS (2^40; nn_embedding_sparse: INT32_MAX as nn_embedding,
 * its ids being floats); the table's seed is drawn from r. */
nn_module *nn_embedding_bag(uint64_t n, int64_t dim, const nn_bag_opts *o, rng_t *r);
nn_module *nn_sparse_linear(uint64_t n, int64_t out, float std, rng_t *r);
nn_module *nn_embedding_sparse(int64_t n, int64_t dim, float std, rng_t *r);

/* An id layer as its spec carries it (nn_spec.c): the table's seed travels,
 * so another process (a worker, a ps, a loaded model) re-creates the same
 * rows. */
typedef enum nn_idkind { NN_ID_BAG, NN_ID_LINEAR, NN_ID_EMBEDDING } nn_idkind;
typedef struct nn_idlayer {
  nn_idkind kind;
  uint64_t rows;
  int64_t dim;   /* SparseLinear: its outputs */
  nn_bag_opts o; /* mode and bags for a bag; std for all three */
  uint64_t seed; /* the table's */
} nn_idlayer;
/* m's fields; DRV_EINVAL when m holds no table. */
int nn_idlayer_get(const nn_module *m, nn_idlayer *out);
/* A new id layer (one reference) with exactly those fields and no rows,
 * every field checked; NULL with a message. */
nn_module *nn_idlayer_new(const nn_idlayer *l);

/* Appends m's tables (recursively, in parameter order) to out, named as
 * nn_collect_params (torch_names false) or nn_torch_params names. */
int nn_collect_tables(nn_module *m, bool torch_names, nn_table_list *out);
void nn_table_list_free(nn_table_list *l); /* frees items, not tables */
/* Whether l's tables read their ids from x (nn.Embedding { sparse = true })
 * rather than from a batch's ids; a cluster refuses a model mixing both,
 * so the first table says. False for an empty list. */
bool nn_tables_read_x(const nn_table_list *l);
/* The first module of m's tree holding a table, or NULL. */
const nn_module *nn_find_table(const nn_module *m);
/* DRV_EUNSUPPORTED "sparse tables WHERE are not supported yet: nn.X holds
 * one" (where: "on a cluster") when m has a table, else 0: for the dense
 * paths that would silently lose one. */
int nn_refuse_tables(const nn_module *m, const char *where);

/* Whether `target` (a module in root's tree) reads root's input x
 * unchanged: root itself, the first module of an nn.Sequential on x, or a
 * branch of nn.Concat / nn.Sum on x, recursively. 1 when it does; 0 when
 * its input is computed, the module in front of it named in front (n
 * bytes; "nn.Linear (2)" style, as errors name modules);
 * DRV_EINVAL when target is not in root's tree. A cluster's worker gathers
 * an nn.Embedding { sparse = true } table's ids from x before its pull,
 * which only works for the first case. */
int nn_reads_x(const nn_module *root, const nn_module *target, char *front, size_t n);
/* The ids an nn.Embedding { sparse = true } (emb) reads from x, checked as
 * its forward checks them (same message), as n = numel(x) uint64 in
 * *ids (malloc'd, the caller frees; NULL when n is 0). */
int nn_embedding_ids(const nn_module *emb, const tensor *x, uint64_t **ids, size_t *n);

/* Forgets the gradient (n = 0); keeps the buffers. */
void nn_spgrad_clear(nn_spgrad *g);
/* Frees g's buffers. */
void nn_spgrad_free(nn_spgrad *g);
/* The row of `id`, added (zeroed) when new; NULL on DRV_ENOMEM. The row
 * is valid until the next call. */
float *nn_spgrad_row(nn_spgrad *g, uint64_t id);

#endif
