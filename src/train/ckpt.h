/* ckpt.h - training checkpoints: a fit's whole state in a directory
 * <checkpoints>/step-<N>/ that a resumed fit continues from exactly.
 *
 *   model.safetensors  the parameters under PyTorch's names, the model's
 *                      spec in __metadata__ (nn_save): drover.nn.load and
 *                      safetensors.torch.load_file both read it
 *   state.safetensors  the optimizer's slots ("optim.<param>.<slot>") and,
 *                      in __metadata__, the position (step, epoch, data
 *                      position, the epoch's sums), the optimizer's update
 *                      count and description, the fit's number and seed,
 *                      and the RNG states (the process's and each
 *                      Dropout's), floats in C99 hex so they come back
 *                      bit for bit
 *   manifest.json      written last; commits the two (manifest.h)
 *
 * A step directory without a manifest is not a checkpoint: a crash or a
 * full disk while writing leaves the previous checkpoints as they were.
 *
 * The checkpoints directory of ckpt_write, ckpt_list, ckpt_newest,
 * ckpt_prune and ckpt_restore's step may be an HDFS URL (ckfs.h): the
 * files are written to a local temporary directory, then uploaded with
 * the manifest last (committed by RENAME); a restore reads them back.
 * ckpt_save and ckpt_open (exp:save, drover.experiment.load) take a local
 * directory only, and refuse a URL saying so.
 */
#ifndef DROVER_CKPT_H
#define DROVER_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/manifest.h"
#include "train/ckfs.h"
#include "numeric/nn.h"
#include "numeric/optim.h"
#include "numeric/rng.h"
#include "train/train.h"

#define CKPT_MODEL "model.safetensors"
#define CKPT_STATE "state.safetensors"

/* A fit's state. Everything is borrowed. */
typedef struct ckpt_state {
  nn_module *model;
  optim_t *opt;   /* bound to the model's parameters (nn_collect_params order) */
  rng_t *rng;     /* the process's generator (drover.seed); may be NULL */
  train_position pos;
  int64_t fit;    /* which fit of the experiment, 0-based */
  uint64_t seed;  /* that fit's shuffling seed */
} ckpt_state;


/* Writes s as <dir>/step-<pos.step>/ (creating dir), `metrics` (NULL or a
 * NULL-ended key/value list: "eval_accuracy", "0.93") going into its
 * manifest for keep_best. A committed checkpoint of that step already
 * there is kept as it is. On failure (a full disk, an unwritable
 * directory) the step directory is removed, the others are untouched, and
 * the message names the file and the reason. `path` (may be NULL) gets the
 * step directory. */
int ckpt_write(const char *dir, const ckpt_state *s, const char *const *metrics, char *path,
               size_t n);

/* Writes s into `dir` itself (created when missing) as model.safetensors,
 * state.safetensors and manifest.json, with `meta` (NULL or a NULL-ended
 * key/value list, borrowed) in the manifest: exp:save. A manifest already
 * there is removed first, so a failure part way leaves no save rather than
 * a mix of two. Returns 0 or a negative code naming the file and the reason. */
int ckpt_save(const char *dir, const ckpt_state *s, const char *const *meta);

/* Reads dir's manifest into *m and checks the files against it (a save or
 * a step directory). *m is freed by the caller with manifest_free, also
 * after a failure, whose message names the directory or the damaged file. */
int ckpt_open(const char *dir, manifest *m);

/* Restores s->model, s->opt, s->rng and fills s->pos, s->fit, s->seed
 * from the step directory `path`, which must fit the model and optimizer
 * (checked before anything changes). */
int ckpt_restore(const char *path, ckpt_state *s);

/* The committed checkpoints (a manifest present, not checked) in dir,
 * oldest first, into *out (malloc'ed, the caller frees). No directory: 0
 * entries. Returns the count or a negative code. */
int ckpt_list(const char *dir, ckpt_entry **out);

/* The newest checkpoint in dir whose files match their manifest, into
 * *found. Each newer one that does not is passed to `bad` (may be NULL)
 * with the reason, naming it, and passed over. Returns 1 when one was
 * found, 0 when none. */
int ckpt_newest(const char *dir, ckpt_entry *found,
                void (*bad)(void *ud, const char *msg), void *ud);

/* Leaves the newest `keep` checkpoints (keep 0: all) and, with `metric`,
 * also the one whose manifest has the best value of it (highest when
 * `max`); removes the others and any uncommitted step directory. Returns
 * the number removed. */
int ckpt_prune(const char *dir, int keep, const char *metric, bool max);

#endif
