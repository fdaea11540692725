/* nn_tabfile.h - a model's sparse tables in safetensors files: the held
 * rows only, by id, so a file is as large as what a fit touched, never as
 * the declared table (2^40 rows).
 *
 * For a table NAME (PyTorch's name of its weight, "0.1.weight"):
 *   model file   NAME.ids   I64 [held]        the rows' ids
 *                NAME.rows  F32 [held, dim]   their values, in that order
 *   state file   optim.NAME.ids    I64 [held]
 *                optim.NAME.<s>    F32 [held, dim]  optimizer slot s
 *                optim.NAME.count  I64 [held]       each row's update count
 * A row absent from the file is at its initial value, which the table's
 * seed (in the model's spec) gives. Loading replaces a table's rows
 * wholesale: rows held before and absent from the file go back to their
 * initial values.
 */
#ifndef DROVER_NN_TABFILE_H
#define DROVER_NN_TABFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/safetensors.h"
#include "numeric/nn.h"

/* `drover export` writes a table for PyTorch instead: NAME as F32
 * [rows, dim] (nn.EmbeddingBag's weight), every row, the ones never
 * touched at their initial values. A model file holding that form loads
 * too (every row becomes held). */

/* Entries to write, with the copies they point into (owned). */
typedef struct nn_tabfile {
  safetensors_entry *e;
  size_t n;
  void **bufs;           /* every copy, freed by nn_tabfile_free */
  size_t nbufs;
  char (*names)[96];
  int64_t (*shapes)[2];
} nn_tabfile;

/* m's tables as model-file entries (state false) or as the optimizer's
 * state entries (state true: each table's nslots slots and counts). A
 * model without tables gives n = 0. DRV_ENOMEM with a message. */
int nn_tabfile_entries(nn_module *m, bool state, nn_tabfile *out);
void nn_tabfile_free(nn_tabfile *t);
/* The dense form of m's tables; DRV_ERANGE, naming the table and its size,
 * when one would take more than max_bytes. */
int nn_tabfile_dense(nn_module *m, size_t max_bytes, nn_tabfile *out);

/* Whether `name` is one of the entries m's tables would have in such a
 * file (the dense checks skip them). */
bool nn_tabfile_owns(nn_module *m, bool state, const char *name);

/* Checks f's entries for m's tables (present, dtypes, shapes, ids inside
 * the table and never twice), naming `path` in the message; 0 or an error
 * with nothing changed. */
int nn_tabfile_check(nn_module *m, bool state, const safetensors_file *f, const char *path);
/* A cluster checkpoint's ps file (cluster/ps/ps_ckpt_sparse.h): each
 * holds NAME.ids and NAME.rows of the rows one ps owned. Adds f's rows of
 * m's tables to what they hold, clearing nothing (a file after another);
 * a table f does not name is left as it is. Checked first as
 * nn_tabfile_check does (ids inside the table, none twice in f, rows of
 * the table's width), naming `path`; 0 or an error. */
int nn_tabfile_merge(nn_module *m, const safetensors_file *f, const char *path);

/* Puts checked entries in: the model file's rows (every table cleared
 * first), or the state's slots and counts onto rows the model file put
 * in (an id it did not: DRV_EINVAL). */
int nn_tabfile_load(nn_module *m, bool state, const safetensors_file *f, const char *path);

#endif
