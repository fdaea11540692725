/* fitrun.c - an in-process run's directory, metrics and checkpoints (see
 * fitrun.h).
 */
#include "run/fitrun.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "train/progress.h"

/* ============================== drover stop ============================== */
/* `drover stop` of an in-process run (ui/attach.c) has no coordinator to
 * ask: it sends the process FITRUN_STOP_SIGNAL. A fit with checkpoints
 * takes it as a request, as exp:checkpoint() from a progress function is
 * one: at the end of the step it is in (fitrun_step_end) a checkpoint of
 * that step is committed, then the process raises SIGINT at itself, and
 * the run ends exactly as on Ctrl-C (the fit "interrupted", the script's
 * status 130, the REPL's line interrupted), resumable from that
 * checkpoint. Without such a fit there is nothing to save: the handler
 * raises SIGINT at once. The handler is installed by the first fitrun_open,
 * before the process file that names the pid to signal exists, and stays:
 * a run directory may be reopened and several experiments may run. */
static volatile sig_atomic_t stop_fit;   /* a fit with checkpoints runs */
static volatile sig_atomic_t stop_asked; /* and a stop waits for its step's end */

static void on_stop_signal(int signo) {
  (void)signo;
  if (stop_fit) stop_asked = 1;
  else kill(getpid(), SIGINT);
}

static void catch_stop_signal(void) {
  static bool caught;
  if (caught) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; /* a write the signal lands in must not fail */
  caught = sigaction(FITRUN_STOP_SIGNAL, &sa, NULL) == 0;
}

/* The stop asked for, at the end of step s: its checkpoint, then Ctrl-C. */
static void stop_now(fitrun *r, ckpt_state *s) {
  stop_asked = stop_fit = 0;
  rundir_event(&r->rd, "stop requested (drover stop): a checkpoint of step %" PRId64
               ", then the run ends as on Ctrl-C", s->pos.step);
  if (s->pos.step != r->last_step && fitrun_checkpoint(r, s) < 0)
    rundir_event(&r->rd, "stop: no checkpoint of step %" PRId64 ": stopping without it",
                 s->pos.step);
  kill(getpid(), SIGINT);
}

/* ============================== the directory ============================ */

static int write_files(fitrun *r, const char *script, const char *run_json) {
  char pid[64];
  snprintf(pid, sizeof pid, "in-process %ld\n", (long)getpid());
  int rc = rundir_write(&r->rd, RUNDIR_PROCESS, pid, 0644);
  if (rc == 0 && script) rc = rundir_write(&r->rd, RUNDIR_RUN_LUA, script, 0644);
  if (rc == 0 && run_json) rc = rundir_write(&r->rd, RUNDIR_RUN_JSON, run_json, 0644);
  return rc;
}

int fitrun_open(fitrun *r, const char *base, const char *name, const char *resume,
                const char *script, const char *run_json, const tboard_opts *tb) {
  memset(r, 0, sizeof *r);
  r->last_step = -1;
  catch_stop_signal();
  int rc = tb ? tboard_check(tb) : 0;
  if (rc < 0) return rc;
  rc = resume ? rundir_open(resume, &r->rd) : rundir_create(base, name, &r->rd);
  if (rc == 0) rc = write_files(r, resume ? NULL : script, resume ? NULL : run_json);
  if (rc == 0 && tb) rc = tboard_run_start(&r->rd, tb, &r->tb);
  if (rc < 0) {
    rundir_close(&r->rd);
    return rc;
  }
  snprintf(r->ckdir, sizeof r->ckdir, "%s/" RUNDIR_CHECKPOINTS, r->rd.path);
  metrics_open(&r->metrics, &r->rd);
  /* events_open, not events_run_open: a script's output stays its own. */
  char path[1200];
  snprintf(path, sizeof path, "%s/" RUNDIR_TB_TRAIN, r->rd.path);
  if (events_open(path, ".train", &r->ev) < 0) {
    rundir_event(&r->rd, "summaries: %s; none are written", err_msg());
    r->ev = NULL;
  }
  rundir_event(&r->rd, resume ? "in-process run resumed: pid %ld" : "in-process run: pid %ld",
               (long)getpid());
  return 0;
}

const char *fitrun_tensorboard_url(const fitrun *r) { return r->tb ? tboard_url(r->tb) : ""; }

void fitrun_set_ckpt(fitrun *r, const fitrun_ckpt *ck) {
  r->has_ckpt = ck != NULL;
  if (ck) r->ck = *ck;
  if (!ck || !ck->url[0]) return;
  if (rundir_set_ckdir(&r->rd, ck->url, r->ckdir, sizeof r->ckdir) < 0)
    rundir_event(&r->rd, "checkpoints: %s", err_msg());
  rundir_event(&r->rd, "checkpoints go to %s (%s)", r->ckdir, ck->dir);
}

void fitrun_close(fitrun *r) {
  if (!r->rd.events) return;
  tboard_run_stop(&r->rd, &r->tb);
  rundir_event(&r->rd, "in-process run ended");
  metrics_close(&r->metrics);
  events_run_close(r->ev);
  r->ev = NULL;
  char path[1200];
  unlink(rundir_file(&r->rd, RUNDIR_PROCESS, path, sizeof path));
  rundir_close(&r->rd);
}

/* ============================== fits ===================================== */

static void bad_ckpt(void *ud, const char *msg) {
  fitrun *r = ud;
  fprintf(stderr, "drover: %s\n", msg);
  rundir_event(&r->rd, "%s", msg);
}

int fitrun_restore(fitrun *r, ckpt_state *s) {
  ckpt_entry e;
  int got = ckpt_newest(r->ckdir, &e, bad_ckpt, r);
  if (got <= 0) return got;
  int rc = ckpt_restore(e.path, s);
  if (rc < 0) return rc;
  r->last_step = s->pos.step;
  rundir_event(&r->rd, "restored from checkpoint step-%" PRId64, s->pos.step);
  return 1;
}

void fitrun_begin(fitrun *r, int64_t fit, int64_t from_step) {
  r->t0 = r->last_time = progress_now();
  r->requested = false;
  stop_asked = 0; /* one from before this fit began was answered then */
  stop_fit = r->has_ckpt;
  if (from_step > 0)
    rundir_event(&r->rd, "fit %" PRId64 ": resuming from step %" PRId64, fit + 1, from_step);
  else
    rundir_event(&r->rd, "fit %" PRId64 ": started", fit + 1);
}

void fitrun_end(fitrun *r, const train_result *res, int rc) {
  stop_fit = 0;
  if (stop_asked) { /* the fit ended with its step: its last checkpoint is taken */
    stop_asked = 0;
    kill(getpid(), SIGINT);
  }
  metrics_flush(&r->metrics);
  if (r->ev) events_flush(r->ev);
  if (rc == DRV_EINTERRUPTED) /* runs.c: "interrupted" whatever the process's exit */
    rundir_event(&r->rd, "interrupted: the fit stopped at step %" PRId64, res->steps);
  else if (rc < 0) rundir_event(&r->rd, "error: fit stopped: %s", err_msg());
  else rundir_event(&r->rd, "fit done: %" PRId64 " steps", res->steps);
}

/* ============================== metrics ================================== */

void fitrun_progress(fitrun *r, const train_progress *p) {
  if (p->is_eval) {
    train_eval e = train_progress_eval(p);
    metrics_eval_line(&r->metrics, p->elapsed, p->step, &e, p->metrics);
    metrics_eval_events(r->ev, p->step, &e, p->metrics);
    return;
  }
  metrics_step_line(&r->metrics, &(metrics_step){.time = p->elapsed, .step = p->step,
                                                 .epoch = p->epoch, .loss = p->batch_loss,
                                                 .accuracy = p->batch_accuracy, .examples = -1,
                                                 .lr = p->lr, .grad_norm = p->grad_norm});
  events_run_scalar(r->ev, "train/loss", p->step, p->batch_loss);
  events_run_scalar(r->ev, "train/accuracy", p->step, p->batch_accuracy);
  if (isfinite(p->lr)) events_run_scalar(r->ev, "train/learning_rate", p->step, p->lr);
  if (isfinite(p->grad_norm)) events_run_scalar(r->ev, "train/grad_norm", p->step, p->grad_norm);
}

/* ============================== checkpoints ============================== */

int fitrun_checkpoint(fitrun *r, ckpt_state *s) {
  char path[4096], v[6][48];
  const train_position *p = &s->pos;
  snprintf(v[0], sizeof v[0], "%" PRId64, p->step);
  snprintf(v[1], sizeof v[1], "%.17g", p->epoch_seen ? p->epoch_loss / (double)p->epoch_seen : NAN);
  snprintf(v[2], sizeof v[2], "%.17g", p->eval_loss);
  snprintf(v[3], sizeof v[3], "%.17g", p->eval_accuracy);
  snprintf(v[4], sizeof v[4], "%.17g", p->eval_auc);
  snprintf(v[5], sizeof v[5], "%.17g", p->eval_logloss);
  /* for keep_best; AUC and log loss only when the evals compute them */
  const char *metrics[13] = {"step", v[0], "loss", v[1], "eval_loss", v[2], "eval_accuracy", v[3]};
  int n = 8;
  if (isfinite(p->eval_auc)) metrics[n++] = "eval_auc", metrics[n++] = v[4];
  if (isfinite(p->eval_logloss)) metrics[n++] = "eval_logloss", metrics[n++] = v[5];
  r->last_time = progress_now();
  r->requested = false;
  int rc = ckpt_write(r->ckdir, s, metrics, path, sizeof path);
  if (rc < 0) {
    fprintf(stderr, "drover: checkpoint at step %" PRId64 " failed (training goes on, the "
            "previous checkpoints are kept): %s\n", p->step, err_msg());
    rundir_event(&r->rd, "checkpoint step-%" PRId64 " failed, training goes on: %s",
                 p->step, err_msg());
    return rc;
  }
  r->last_step = p->step;
  rundir_event(&r->rd, "checkpoint step-%" PRId64 " committed", p->step);
  int gone = ckpt_prune(r->ckdir, r->ck.keep, r->ck.metric[0] ? r->ck.metric : NULL, r->ck.max);
  if (gone > 0) rundir_event(&r->rd, "checkpoints: %d old removed (keep %d)", gone, r->ck.keep);
  return 0;
}

void fitrun_step_end(fitrun *r, ckpt_state *s) {
  if (r->tb && progress_now() - r->tb_polled >= 1.0) {
    r->tb_polled = progress_now();
    tboard_run_poll(&r->rd, &r->tb);
  }
  if (stop_asked) {
    stop_now(r, s);
    return;
  }
  bool due = r->requested;
  if (r->has_ckpt && s->pos.step != r->last_step) {
    if (r->ck.every > 0 && s->pos.step % r->ck.every == 0) due = true;
    if (r->ck.every_seconds > 0 && progress_now() - r->last_time >= r->ck.every_seconds) due = true;
  }
  if (due) fitrun_checkpoint(r, s);
}

void fitrun_fit_done(fitrun *r, ckpt_state *s, const train_result *res) {
  if (!r->has_ckpt || s->pos.step == r->last_step || s->pos.step == 0) return;
  /* The final eval is the model's; a resume from here recomputes it (or,
   * when the last step was evaluated, it is that step's). */
  s->pos.eval_loss = res->eval_loss;
  s->pos.eval_accuracy = res->eval_accuracy;
  s->pos.eval_auc = res->eval_auc;
  s->pos.eval_logloss = res->eval_logloss;
  fitrun_checkpoint(r, s);
}
