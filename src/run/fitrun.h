/* fitrun.h - an in-process run (exp:fit()): its run directory, like a
 * cluster run's (rundir.h), with run.lua and run.json (the script and its
 * arguments, for `drover run --resume`), metrics.jsonl (metrics.h),
 * TensorBoard events under events/train/, events.log, and checkpoints/
 * taken as the
 * experiment's checkpoint = { ... } says (ckpt.h).
 *
 * A checkpoint that fails (a full disk, an unwritable directory) is said
 * on stderr and in events.log and training goes on; the previous
 * checkpoints are untouched.
 */
#ifndef DROVER_FITRUN_H
#define DROVER_FITRUN_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "train/ckpt.h"
#include "run/events.h"
#include "run/metrics.h"
#include "run/tboard.h"
#include "base/rundir.h"
#include "train/train.h"

/* `drover stop` (graceful) sends an in-process run's process this signal:
 * a fit with checkpoints commits one at the end of its step, then the
 * process raises SIGINT at itself (the run ends as on Ctrl-C); without one
 * SIGINT comes at once (fitrun.c). `--now` sends SIGINT itself. */
#define FITRUN_STOP_SIGNAL SIGUSR1

/* checkpoint = { dir, every, every_seconds, keep, keep_best = { metric, mode } } */
typedef struct fitrun_ckpt {
  char dir[1024];       /* dir = "hdfs://..." as given, "" for the run directory's */
  char url[1024];       /* its webhdfs:// form (webhdfs_resolve), "" with none */
  int64_t every;        /* steps; 0: not by steps */
  double every_seconds; /* 0: not by time */
  int keep;             /* 0: all */
  char metric[64];      /* keep_best's metric, "" for none */
  bool max;             /* keep_best.mode == "max" */
} fitrun_ckpt;

typedef struct fitrun {
  rundir rd;
  char ckdir[2200]; /* <run>/checkpoints, or <checkpoint.dir>/<run's name> (rundir_ckdir) */
  metrics metrics; /* its rd is &rd */
  events_writer *ev;
  bool has_ckpt;    /* checkpoint = {...} was given */
  fitrun_ckpt ck;
  double t0, last_time; /* of the fit, of the last checkpoint */
  int64_t last_step;    /* of the last checkpoint, -1 none */
  bool requested;       /* exp:checkpoint() during a fit */
  tboard *tb;           /* TensorBoard over events/ (tensorboard = ...), or NULL */
  double tb_polled;     /* when it was last looked at */
} fitrun;

/* Creates base/<name>-<stamp>/ (or, with `resume`, reopens that run
 * directory) and writes run.lua (`script`, the script's text, may be
 * NULL) and run.json (`run_json`, may be NULL) unless resuming. With `tb`
 * (NULL: none), TensorBoard serves the run's events/ until fitrun_close;
 * when it cannot (tboard_check), nothing is made. */
int fitrun_open(fitrun *r, const char *base, const char *name, const char *resume,
                const char *script, const char *run_json, const tboard_opts *tb);
/* The URL of its TensorBoard, "" when none. */
const char *fitrun_tensorboard_url(const fitrun *r);
/* With ck->url, checkpoints go to <url>/<the run directory's name>:
 * recorded in the run directory (RUNDIR_CKPT_DIR) and said in events.log. */
void fitrun_set_ckpt(fitrun *r, const fitrun_ckpt *ck);
/* Restores s from the newest intact checkpoint (damaged newer ones are
 * reported by name). 1 restored, 0 none, < 0 error. */
int fitrun_restore(fitrun *r, ckpt_state *s);
/* A fit begins / ends (events.log: "fit N: started", "fit done: N steps";
 * rc DRV_EINTERRUPTED: "interrupted: the fit stopped at step N"; another
 * error: "error: fit stopped: why"). */
void fitrun_begin(fitrun *r, int64_t fit, int64_t from_step);
void fitrun_end(fitrun *r, const train_result *res, int rc);
/* After each progress call: a metrics.jsonl line and TensorBoard scalars. */
void fitrun_progress(fitrun *r, const train_progress *p);
/* At the end of each step: a checkpoint when one is due or requested;
 * once a second, whether TensorBoard still serves (tboard_run_poll). */
void fitrun_step_end(fitrun *r, ckpt_state *s);
/* At the end of a fit that finished (or was stopped by its progress
 * function): with checkpoint = {...}, a last checkpoint unless one of this
 * step is there already, so the newest checkpoint is the trained model.
 * `res` gives the final eval, which goes into its manifest for keep_best. */
void fitrun_fit_done(fitrun *r, ckpt_state *s, const train_result *res);
/* A checkpoint now. 0, or the failure (also logged). */
int fitrun_checkpoint(fitrun *r, ckpt_state *s);
void fitrun_close(fitrun *r);

#endif
