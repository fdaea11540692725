/* l_settings.h - an experiment's settings, checked and read in one place.
 *
 * drover.experiment { ... } (lua/experiment.lua) hands its description to
 * lsettings_new, which checks every field and returns the experiment's
 * fields with their defaults filled in. Every fit (exp:fit, c:fit, c:setup)
 * reads them again through lsettings_read: a script may change a field in
 * between (exp.train.epochs = 5), so the same checks run then, and give the
 * same messages. Each error names the field and the value:
 *   experiment: train.batch must be a positive integer (got 2.5)
 * Numbers follow the rule of option tables (l_opts.h).
 */
#ifndef DROVER_L_SETTINGS_H
#define DROVER_L_SETTINGS_H

#include <lua.h>
#include <stdbool.h>

#include "run/fitrun.h"
#include "train/train.h"

/* What a fit needs of an experiment. The stack indices hold the values
 * read (0: absent); lsettings_read pushes them and they stay there while
 * the caller uses them. */
typedef struct lsettings {
  train_cfg cfg; /* batch, epochs, shuffle, max_steps (exp.train), seed,
                    eval and eval_every (exp.eval), stop, progress output
                    (stdout unless verbose = false); on_progress unset */
  int model, loss, optimizer; /* a drover.Module, Loss, Optimizer */
  int train_data, eval_data;  /* drover.Datasets */
  int progress;               /* exp.progress, a function */
  int train_feed;             /* exp.train.feed (any feed source), 0 none:
                                 train_data is then set */
  double feed_timeout;        /* exp.train.feed_timeout, 0 none given */
  bool shuffle_given;         /* exp.train.shuffle was set (not the default) */
  int feeders;                /* exp.train.feeders (feed = "external"), 0 none given */
  int64_t eval_batch;         /* exp.eval.batch: exp:evaluate's (train.batch unless given) */
  bool sync;                  /* mode = "sync" */
  int backup_workers;         /* sync: gradients a step may go without */
  bool has_ckpt;              /* checkpoint = { ... } was given: ck */
  fitrun_ckpt ck;
  bool tensorboard;           /* tensorboard = true or { ... }: tb */
  tboard_opts tb;
} lsettings;

/* drover.train.settings(description) -> the experiment's fields: the
 * description checked (unknown fields included), defaults filled in, and
 * `checkpoint` as `checkpointing` (exp:checkpoint() is a method). */
int lsettings_new(lua_State *L);

/* Reads the experiment at idx (a drover.experiment { ... }) into *s,
 * pushing the values it refers to; raises "experiment: FIELD ..." for a
 * field that is wrong now. */
void lsettings_read(lua_State *L, int idx, lsettings *s);
/* The metric names at idx (a list: { "auc", "logloss" }) as BINEVAL_*
 * bits; raises naming the known ones for anything else. */
unsigned lsettings_metrics(lua_State *L, int idx);

#endif
