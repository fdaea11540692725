/* coord_ckpt.c - checkpoints of a cluster's variables and the rollback
 * after a lost ps (see docs/ARCHITECTURE.md, "The checkpoint commit
 * (cluster)").
 *
 * A checkpoint: the coordinator makes <run>/checkpoints/step-N/ and sends
 * CHECKPOINT to every ps that holds shards; each copies its shards between
 * two updates and writes ps-<i>.safetensors on a thread (tensor names are
 * PyTorch's; a split variable's rows are in each file's metadata). Once
 * every ps answered CHECKPOINT_OK, the coordinator commits with the
 * manifest (files, sizes, sha256; the step, epoch, version, fit and the
 * model's spec in its meta). A ps that failed (a full disk) fails that
 * checkpoint only: the directory is removed, the previous ones stay, and
 * training goes on. In sync training the coordinator first asks every ps
 * its version (they differ by at most one) and the snapshot is taken at
 * the next global step on every ps; in async training each ps snapshots
 * when the request arrives, so the shards of different ps may differ by
 * the pushes in flight then.
 *
 * The rollback: a ps lost during a fit stops the task stream; once the
 * coordinator restarted it and it registered again, every ps gets VAR_INIT
 * then RESTORE from the newest intact checkpoint of this fit (or the fit's
 * initial values when there is none yet), and the fit goes on from that
 * checkpoint's step.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/ckpt.h"
#include "cluster/coord/coord_fit_int.h"
#include "cluster/ps/ps_sparse.h"
#include "base/err.h"
#include "base/log.h"
#include "train/progress.h"
#include "proto/wire_msgs.h"

/* ============================== names ===================================== */

static int shards_on(const coord_fit_state *f, int ps) {
  int n = 0;
  for (int i = 0; i < f->nvars; i++)
    for (int s = 0; s < f->vars[i].nshards; s++) n += f->vars[i].sh[s].ps == ps;
  return n;
}

/* What a ps's CHECKPOINT and RESTORE name: its shards' variables and
 * every sparse table (each ps holds a shard of each); 0: it is in no
 * checkpoint. */
static int items_on(const coord_fit_state *f, int ps) { return shards_on(f, ps) + f->tables.n; }

/* The (var, name) items of the variables ps holds, in var order, then
 * (PS_SPARSE_VAR | table, its PyTorch name) for every table. */
typedef struct name_cursor {
  const coord_fit_state *f;
  int ps, var, table;
  nn_table_list tables; /* the model's tables under PyTorch's names */
} name_cursor;

static int cursor_open(name_cursor *nc, const coord_fit_state *f, int ps) {
  *nc = (name_cursor){.f = f, .ps = ps};
  if (f->tables.n == 0) return 0;
  int rc = f->args ? nn_collect_tables(f->args->model, true, &nc->tables)
                   : err_set(DRV_EINVAL, "cluster: the model of the fit is gone");
  if (rc == 0 && nc->tables.n != f->tables.n)
    rc = err_set(DRV_EINVAL, "cluster: the model has %d sparse tables, the fit placed %d",
                 nc->tables.n, f->tables.n);
  return rc;
}

static void cursor_close(name_cursor *nc) { nn_table_list_free(&nc->tables); }

static bool holds(const fvar *v, int ps) {
  for (int s = 0; s < v->nshards; s++)
    if (v->sh[s].ps == ps) return true;
  return false;
}

static void put_name(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  name_cursor *nc = ud;
  while (nc->var < nc->f->nvars && !holds(&nc->f->vars[nc->var], nc->ps)) nc->var++;
  if (nc->var == nc->f->nvars) {
    wire_put_item_var_name(w, &(wire_item_var_name){PS_SPARSE_VAR | (uint32_t)nc->table,
                                                   WIRE_STR(nc->tables.items[nc->table].name)});
    nc->table++;
    return;
  }
  wire_put_item_var_name(w, &(wire_item_var_name){(uint32_t)nc->var,
                                                 WIRE_STR(nc->f->torch.items[nc->var].name)});
  nc->var++;
}

static void ps_file(const char *dir, int ps, char *buf, size_t n) {
  rundir_ps_shards(buf, n, dir, ps);
}

/* ============================== taking one ================================ */

static void ckpt_dir(coord_fit_state *f, char *buf, size_t n) {
  if (f->c->ckdir[0]) snprintf(buf, n, "%s", f->c->ckdir);
  else snprintf(buf, n, "%s/" RUNDIR_CHECKPOINTS, f->c->rd.path);
}

static void remove_uncommitted(coord_fit_state *f) {
  char path[4200];
  for (int k = 0; k < f->nps; k++) coord__xfer_abort(f, k, NULL);
  if (ckfs_is_remote(f->ck.dir)) {
    ckfs_remove(f->ck.dir);
    return;
  }
  for (int k = 0; k < f->nps; k++) {
    ps_file(f->ck.dir, k, path, sizeof path);
    unlink(path);
  }
  rmdir(f->ck.dir);
}

static int write_phase(coord_fit_state *f, uint64_t at_version) {
  coord_ck *ck = &f->ck;
  char base[2200];
  ck->step = f->sync && at_version ? (int64_t)at_version * f->replicas : f->done;
  ckpt_dir(f, base, sizeof base);
  rundir_step(ck->dir, sizeof ck->dir, base, f->step_base + ck->step);
  manifest m;
  int there = ckfs_manifest_read(ck->dir, &m) == 0;
  manifest_free(&m);
  if (there) { /* a committed checkpoint of this step: kept as it is */
    ck->state = CK_IDLE;
    return 0;
  }
  int rc = ckfs_mkdirs(ck->dir);
  if (rc < 0) return rc;
  free(ck->sha), free(ck->size);
  ck->sha = calloc((size_t)f->nps + 1, sizeof *ck->sha);
  ck->size = calloc((size_t)f->nps + 1, sizeof *ck->size);
  if (!ck->sha || !ck->size) return err_set(DRV_ENOMEM, "out of memory");
  ck->waiting = 0;
  for (int k = 0; k < f->nps; k++) {
    int n = items_on(f, k);
    if (n == 0) continue;
    if (!f->ps[k]) return err_set(DRV_ENODE, "ps:%d is not connected", k);
    char path[4200];
    ps_file(ck->dir, k, path, sizeof path);
    name_cursor nc;
    uint8_t to = (uint8_t)coord__ckpt_route(f->c, k);
    if (to == WIRE_CKPT_COORD && (rc = coord__xfer_expect(f, k, path)) < 0) return rc;
    if ((rc = cursor_open(&nc, f, k)) < 0) return rc;
    wire_wr w;
    wire_wr_init(&w);
    wire_put_checkpoint(&w, &(wire_msg_checkpoint){at_version, WIRE_STR(path),
                                                   {(uint32_t)n, .put = put_name, .ud = &nc}, to});
    cursor_close(&nc);
    if ((rc = conn_send_wr(f->ps[k], &w, WIRE_CHECKPOINT, 0)) < 0) return rc;
    ck->waiting++;
  }
  ck->state = CK_WRITING;
  /* The trainers' data positions go with it, unless it is of the fit's
   * last step (a fit that ended needs none: the next one starts afresh). */
  ck->want_pos = f->looping && !f->feed.src &&
                 (f->sync ? (int64_t)at_version < f->sync_target : f->done < f->total);
  if (f->feed.src && (rc = coord__feed_ckpt_mark(f)) < 0) return rc; /* fed: the feed's position */
  return coord__pos_ask(f, at_version);
}

int coord__ckpt_begin(coord_fit_state *f, bool sync_boundary) {
  coord_ck *ck = &f->ck;
  if (ck->state != CK_IDLE) return err_set(DRV_EINVAL, "cluster: a checkpoint is being taken");
  if (!f->placed) return err_set(DRV_EINVAL, "cluster: nothing to checkpoint before a fit");
  if (ck->restoring) return err_set(DRV_EINVAL, "cluster: a ps is being restored");
  ck->failed = ck->passed = 0;
  ck->why[0] = '\0';
  ck->bytes = 0;
  ck->version = 0;
  if (!(f->sync && sync_boundary)) return write_phase(f, 0);
  ck->waiting = 0;
  for (int k = 0; k < f->nps; k++) {
    if (!f->ps[k]) return err_set(DRV_ENODE, "ps:%d is not connected", k);
    wire_wr w;
    wire_wr_init(&w);
    wire_put_pull(&w, &(wire_msg_pull){.min_version = 0}); /* no vars: its version */
    int rc = conn_send_wr(f->ps[k], &w, WIRE_PULL, CK_PROBE_REQ);
    if (rc < 0) return rc;
    ck->waiting++;
  }
  ck->state = CK_PROBING;
  return 0;
}

/* The workers the checkpoint's state is of: the fit's trainers but the
 * chief and the ones c:scale is adding (a sync fit's quorum takes them
 * only at its barrier). */
static int ckpt_workers(const coord_fit_state *f) {
  int k = 0;
  for (int t = 0; t < f->ntrainers; t++) {
    int i = f->trainers[t];
    if (f->c->nodes[i].role == ROLE_WORKER && !(f->sc.joining && f->sc.joining[i])) k++;
  }
  return k;
}

/* The commit: manifest.json naming every ps file, with in its meta what
 * a rollback or an export needs besides the files. */
static int commit(coord_fit_state *f) {
  coord_ck *ck = &f->ck;
  const char *files[COORD_MAX_PS_FILES + 1], *hexes[COORD_MAX_PS_FILES + 1];
  uint64_t sizes[COORD_MAX_PS_FILES + 1];
  char names[COORD_MAX_PS_FILES][32];
  int nf = 0;
  for (int k = 0; k < f->nps && nf < COORD_MAX_PS_FILES; k++)
    if (items_on(f, k)) {
      rundir_ps_shards(names[nf], sizeof names[nf], NULL, k);
      files[nf] = names[nf];
      hexes[nf] = ck->sha ? ck->sha[k] : NULL; /* hashed by the ps as it wrote */
      sizes[nf] = ck->size ? ck->size[k] : 0;
      nf++;
    }
  files[nf] = NULL;
  char step[32], epoch[32], version[32], fit[32], nps[16], acc_s[32], loss_s[32], sbase[32];
  char spec[8192], *owned = NULL;
  const coord_fit_args *a = f->args;
  if (!a || nn_spec(a->model, spec, sizeof spec) < 0) spec[0] = '\0';
  snprintf(step, sizeof step, "%" PRId64, ck->step);
  snprintf(sbase, sizeof sbase, "%" PRId64, f->step_base);
  snprintf(epoch, sizeof epoch, "%" PRId64, f->epoch_no ? f->epoch_no : 1);
  snprintf(version, sizeof version, "%" PRIu64, ck->version);
  snprintf(fit, sizeof fit, "%" PRId64, f->fit_no);
  snprintf(nps, sizeof nps, "%d", f->nps);
  const char *head[] = {"kind", "cluster", "step", step, "epoch", epoch, "version", version,
                        "fit", fit, "ps", nps, "mode", f->sync ? "sync" : "async",
                        "step_base", sbase, NN_SPEC_META_KEY, spec};
  const char **meta = calloc(48 + 2 * (size_t)f->ntrainers, sizeof *meta);
  if (!meta) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(meta, head, sizeof head);
  double acc = f->p.eval_accuracy, loss = f->p.eval_loss;
  int m = (int)(sizeof head / sizeof *head);
  if (isfinite(acc)) { /* for keep_best */
    snprintf(acc_s, sizeof acc_s, "%.9g", acc);
    meta[m++] = "eval_accuracy", meta[m++] = acc_s;
  }
  if (isfinite(loss)) {
    snprintf(loss_s, sizeof loss_s, "%.9g", loss);
    meta[m++] = "eval_loss", meta[m++] = loss_s;
  }
  char auc_s[32], ll_s[32];
  if (isfinite(f->p.eval_auc)) {
    snprintf(auc_s, sizeof auc_s, "%.9g", f->p.eval_auc);
    meta[m++] = "eval_auc", meta[m++] = auc_s;
  }
  if (isfinite(f->p.eval_logloss)) {
    snprintf(ll_s, sizeof ll_s, "%.9g", f->p.eval_logloss);
    meta[m++] = "eval_logloss", meta[m++] = ll_s;
  }
  char plateau[128];
  if (a && a->optim && a->optim->sched.kind == OSCHED_PLATEAU) { /* the evals' schedule state */
    optim_plateau_format(&f->plateau, plateau, sizeof plateau);
    meta[m++] = PLATEAU_META, meta[m++] = plateau;
  }
  char tables[16];
  if (f->tables.n) { /* each ps file holds its shard of them: see sparse_ps_count */
    snprintf(tables, sizeof tables, "%d", f->tables.n);
    meta[m++] = "sparse_tables", meta[m++] = tables;
  }
  char workers[16]; /* `--resume` goes on with as many (coord__ckpt_resume_workers) */
  snprintf(workers, sizeof workers, "%d", ckpt_workers(f));
  meta[m++] = "workers", meta[m++] = workers;
  char gsteps[32]; /* sync: planned with the count at the fit's start */
  snprintf(gsteps, sizeof gsteps, "%" PRId64, f->sync_target);
  if (f->sync) meta[m++] = "global_steps", meta[m++] = gsteps;
  char stop[128];
  if (f->stopper.seen) { /* early stopping's state, as in process */
    train_stopper_format(&f->stopper, stop, sizeof stop);
    meta[m++] = STOP_META, meta[m++] = stop;
  }
  meta[m] = NULL;
  int rc = coord__pos_meta(f, meta, &m, &owned);
  coord__feed_ckpt_meta(f, meta, &m);
  if (rc == 0) rc = ckfs_manifest_commit(ck->dir, files, sizes, hexes, meta);
  free(owned);
  free(meta);
  return rc;
}

void coord__ckpt_finish(coord_fit_state *f) {
  coord_ck *ck = &f->ck;
  coord *c = f->c;
  ck->state = CK_IDLE;
  ck->last_time = progress_now();
  if (ck->passed && !ck->failed) { /* sync: a ps passed the version: again, further ahead */
    remove_uncommitted(f);
    log_info("checkpoint step %" PRId64 ": a ps passed its version; asking again", ck->step);
    ck->requested = true;
    return;
  }
  if (ck->failed == 0 && commit(f) < 0) {
    ck->failed = 1;
    snprintf(ck->why, sizeof ck->why, "%s", err_msg());
  }
  coord__pos_clear(f);
  coord__feed_ckpt_clear(f);
  if (ck->failed) {
    remove_uncommitted(f);
    rundir_event(&c->rd, "checkpoint step %" PRId64 " failed: %s; the previous checkpoint is "
                 "kept and training goes on", ck->step, ck->why);
    log_warn("checkpoint step %" PRId64 " failed: %s", ck->step, ck->why);
    return;
  }
  ck->last_step = ck->step;
  rundir_event(&c->rd, "checkpoint step %" PRId64 ": %llu bytes from %d ps (version %llu)",
               ck->step, (unsigned long long)ck->bytes, f->nps, (unsigned long long)ck->version);
  if (f->has_ckpt) {
    char base[2200];
    ckpt_dir(f, base, sizeof base);
    ckpt_prune(base, f->ckpol.keep, f->ckpol.metric[0] ? f->ckpol.metric : NULL, f->ckpol.max);
  }
}

void coord__ckpt_frame(coord_fit_state *f, int ps, const wire_header *h, const uint8_t *pl) {
  coord_ck *ck = &f->ck;
  if (h->type == WIRE_RESTORE_OK) {
    wire_msg_restore_ok m;
    char msg[1024] = "";
    if (wire_get_restore_ok(pl, h->len, &m) == 0) wire_str_copy(m.message, msg, sizeof msg);
    if (m.status != 0) coord__fail_fit(f, "ps:%d could not restore: %s", ps, msg);
    coord__ps_replied(f, ps);
    return;
  }
  if (h->type == WIRE_PULL_REPLY) { /* a version probe */
    wire_msg_pull_reply m;
    if (ck->state != CK_PROBING || wire_get_pull_reply(pl, h->len, &m) < 0) return;
    if (m.version > ck->version) ck->version = m.version;
    if (--ck->waiting > 0) return;
    /* The ps moved on while the request travels: aim two steps ahead
     * (a ps already past it answers ERANGE and it is asked again). */
    uint64_t at = ck->version + 2;
    if ((int64_t)at > f->sync_target) at = (uint64_t)f->sync_target;
    if (write_phase(f, at) < 0) {
      ck->failed = 1;
      snprintf(ck->why, sizeof ck->why, "%s", err_msg());
      coord__ckpt_finish(f);
    }
    return;
  }
  wire_msg_checkpoint_ok m;
  char msg[900] = "";
  if (coord__xfer_hold(f, ps, h, pl)) return; /* its file is being committed */
  if (ck->state != CK_WRITING || wire_get_checkpoint_ok(pl, h->len, &m) < 0) return;
  wire_str_copy(m.message, msg, sizeof msg);
  char digest[MANIFEST_DIGEST_MAX] = "", why[600];
  uint64_t size = 0;
  int via = coord__xfer_result(f, ps, m.status, digest, &size, why, sizeof why);
  if (m.status == DRV_ERANGE) ck->passed++;
  else if (m.status != 0 && ck->failed++ == 0) snprintf(ck->why, sizeof ck->why, "ps:%d: %s", ps, msg);
  else if (m.status == 0 && via < 0 && ck->failed++ == 0) snprintf(ck->why, sizeof ck->why, "%s", why);
  ck->bytes += m.bytes;
  ck->version = m.version;
  if (ck->sha && ps >= 0 && ps < f->nps) {
    wire_str_copy(m.sha256, ck->sha[ps], sizeof ck->sha[ps]);
    ck->size[ps] = m.bytes;
    if (via == 0 && m.status == 0) { /* as it came and was checked here */
      snprintf(ck->sha[ps], sizeof ck->sha[ps], "%s", digest);
      ck->size[ps] = size;
    }
  }
  if (--ck->waiting == 0 && ck->pos_waiting == 0) coord__ckpt_finish(f);
}

bool coord__ckpt_idle(coord *c, void *arg) {
  (void)arg;
  return c->fit->ck.state == CK_IDLE;
}

int coord__ckpt_wait(coord_fit_state *f) {
  coord_ck *ck = &f->ck;
  double bound = coord__reply_bound(f);
  int rc = coord__pump(f->c, coord__ckpt_idle, NULL, bound, true);
  if (rc != DRV_ETIMEDOUT) return rc;
  /* Given up like a checkpoint a ps failed: the previous one is kept. */
  ck->failed++;
  snprintf(ck->why, sizeof ck->why, "no answer within %.0f s (%d %s, %d data positions "
           "outstanding)", bound, ck->waiting, ck->state == CK_PROBING ? "version probes" :
           "CHECKPOINT_OKs", ck->pos_waiting);
  ck->waiting = 0;
  if (ck->state == CK_PROBING) ck->state = CK_IDLE; /* nothing written yet */
  else coord__ckpt_finish(f);
  rundir_event(&f->c->rd, "checkpoint step %" PRId64 " failed: %s", ck->step, ck->why);
  return 0;
}

/* The fit's steps are all done but a trainer has not drawn the batch its
 * position waits for, and will not: that checkpoint is given up (the fit's
 * final one follows). */
static void abandon_if_over(coord_fit_state *f) {
  coord_ck *ck = &f->ck;
  bool over = f->sync ? f->sync_reached >= f->nps : f->done >= f->total;
  if (ck->state != CK_WRITING || ck->waiting > 0 || ck->pos_waiting == 0 || !over) return;
  ck->state = CK_IDLE;
  coord__pos_clear(f);
  remove_uncommitted(f);
  rundir_event(&f->c->rd, "checkpoint step %" PRId64 " abandoned: the fit ended before every "
               "worker reached it", ck->step);
}

/* Every ps link authenticated: one dialled again after a promotion or a
 * restart is still in its handshake for a moment, and a probe or
 * CHECKPOINT sent on it then reached the ps before AUTH, which drops
 * such a connection (seen hanging rc-07's fit). The checkpoint waits. */
static bool ps_links_ready(const coord_fit_state *f) {
  for (int k = 0; k < f->nps; k++)
    if (!f->ps[k] || !conn_is_ready(f->ps[k])) return false;
  return true;
}

void coord__ckpt_tick(coord_fit_state *f) {
  coord_ck *ck = &f->ck;
  abandon_if_over(f);
  if ((!f->has_ckpt && !ck->requested) || ck->state != CK_IDLE || ck->restoring) return;
  int64_t since = f->done - (ck->last_step > 0 ? ck->last_step : 0);
  bool due = ck->requested || (f->ckpol.every > 0 && since >= f->ckpol.every) ||
             (f->ckpol.every_seconds > 0 && progress_now() - ck->last_time >= f->ckpol.every_seconds);
  if (!due || f->done == ck->last_step || f->done == 0 || !ps_links_ready(f)) return;
  ck->requested = false;
  if (coord__ckpt_begin(f, true) < 0) {
    rundir_event(&f->c->rd, "checkpoint failed: %s; training goes on", err_msg());
    ck->last_time = progress_now();
  }
}

int coord_checkpoint(coord *c) {
  coord_fit_state *f = c->fit;
  if (!f || !f->placed) return err_set(DRV_EINVAL, "cluster: nothing to checkpoint before a fit");
  if (f->cfg) { /* during the fit (its progress function): between two steps */
    f->ck.requested = true;
    return 0;
  }
  int rc = coord__ckpt_begin(f, false);
  if (rc == 0) rc = coord__ckpt_wait(f);
  if (rc == 0 && f->ck.failed) rc = err_set(DRV_EIO, "checkpoint failed: %s", f->ck.why);
  return rc;
}

/* ============================== failover ================================== */

/* checkpoint.dir (an HDFS URL, resolved once by the settings): this run's
 * directory there, recorded in the run directory for --resume and export. */
static int ckpt_dir_begin(coord_fit_state *f) {
  coord *c = f->c;
  if (!f->has_ckpt || !f->ckpol.url[0]) {
    c->ckdir[0] = '\0';
    return 0;
  }
  int rc = rundir_set_ckdir(&c->rd, f->ckpol.url, c->ckdir, sizeof c->ckdir);
  if (rc < 0) c->ckdir[0] = '\0';
  return rc;
}

int coord__ckpt_fit_begin(coord_fit_state *f) {
  coord_ck *ck = &f->ck;
  coord__ckpt_fit_end(f);
  ck->initial = calloc((size_t)f->nvars + 1, sizeof *ck->initial);
  if (!ck->initial) return err_set(DRV_ENOMEM, "out of memory");
  for (int i = 0; i < f->nvars; i++) {
    size_t n = (size_t)tensor_numel(f->vars[i].value);
    if (!(ck->initial[i] = malloc(n * sizeof(float) + 1))) return err_set(DRV_ENOMEM, "out of memory");
    memcpy(ck->initial[i], tensor_data(f->vars[i].value), n * sizeof(float));
  }
  ck->last_step = -1;
  ck->last_time = progress_now();
  ck->requested = ck->restoring = false;
  int rc = ckpt_dir_begin(f);
  if (rc < 0) return rc;
  if (f->has_ckpt || f->c->resume) coord__route_say(f->c, f->nps);
  f->plateau = (optim_plateau){0}; /* before a resume, which may set it */
  f->stopper = (train_stopper){0};
  f->fit_no++;
  f->step_base += f->prev_steps;
  f->prev_steps = 0;
  return 0;
}

void coord__ckpt_fit_end(coord_fit_state *f) {
  coord_ck *ck = &f->ck;
  coord__xfer_free(f);
  free(ck->sha), free(ck->size);
  ck->sha = NULL, ck->size = NULL;
  for (int i = 0; ck->initial && i < f->nvars; i++) free(ck->initial[i]);
  free(ck->initial);
  ck->initial = NULL;
}

void coord__ckpt_abandon(coord_fit_state *f, int ps) {
  coord_ck *ck = &f->ck;
  if (ck->state != CK_IDLE) { /* that checkpoint will not be whole */
    /* Only a write made its directory: while probing, ck->dir is still
     * the previous checkpoint's, committed, the one a rollback needs. */
    if (ck->state == CK_WRITING) remove_uncommitted(f);
    ck->state = CK_IDLE;
    coord__pos_clear(f);
    coord__feed_ckpt_clear(f);
    rundir_event(&f->c->rd, "checkpoint step %" PRId64 " abandoned: ps:%d was lost", ck->step, ps);
  }
}

void coord__ckpt_ps_lost(coord_fit_state *f, int ps) {
  coord_ck *ck = &f->ck;
  if (!f->cfg) return;
  coord__ckpt_abandon(f, ps);
  if (ck->restoring) { /* lost during the restore: it waits for this one now */
    ck->lost_ps = ps;
    ck->lost_at = progress_now();
    return;
  }
  ck->restoring = true;
  ck->lost_ps = ps;
  ck->lost_at = progress_now();
  coord__sched_drop(f->c, f->producer, true); /* steps since the checkpoint run again */
  rundir_event(&f->c->rd, "ps:%d lost: training pauses until it is back", ps);
}

/* The plateau schedule's state as checkpoint m had it (m NULL: the fit's
 * start), and every ps told its scale again (their VAR_INIT reset it):
 * the evals after m run again and are observed from there. */
static void restore_plateau(coord_fit_state *f, const manifest *m, int64_t step) {
  const optim_cfg *o = f->args ? f->args->optim : NULL;
  if (!o || o->sched.kind != OSCHED_PLATEAU) return;
  optim_plateau pl = {0};
  if (m && !optim_plateau_parse(manifest_meta(m, PLATEAU_META), &pl))
    rundir_event(&f->c->rd, "the checkpoint of step %" PRId64 " has no plateau state: the "
                 "schedule starts afresh", step);
  f->plateau = pl;
  if (m && pl.seen)
    rundir_event(&f->c->rd, "plateau state from step %" PRId64 ": rate scale %g, best %g, %lld "
                 "bad evals", step, pl.scale > 0 ? pl.scale : 1.0, pl.best, (long long)pl.bad);
  if (pl.scale > 0) coord__send_lr_scale(f, 0); /* the steps after m have not run again yet */
}

/* Early stopping's state as checkpoint m had it (m NULL, or a checkpoint
 * written before any eval improved: afresh), for the same reason as the
 * plateau's: the evals after m run again. */
static void restore_stopper(coord_fit_state *f, const manifest *m) {
  if (!m || !train_stopper_parse(manifest_meta(m, STOP_META), &f->stopper))
    f->stopper = (train_stopper){0};
}

/* The newest intact checkpoint of this fit, or 0. */
static int newest(coord_fit_state *f, ckpt_entry *e, manifest *m) {
  char base[2200];
  ckpt_dir(f, base, sizeof base);
  if (ckpt_newest(base, e, NULL, NULL) != 1) return 0;
  if (ckfs_manifest_read(e->path, m) < 0) return 0;
  const char *kind = manifest_meta(m, "kind"), *fit = manifest_meta(m, "fit");
  return kind && strcmp(kind, "cluster") == 0 && fit && strtoll(fit, NULL, 10) == f->fit_no;
}

/* Every ps registered, and the lost one back (RESTORING) or, when only
 * its data connection broke, still there once a loss would have been
 * noticed (the heartbeat timeout). */
static bool all_ps_back(coord_fit_state *f) {
  coord *c = f->c;
  double grace = c->opts.heartbeat_timeout_ms / 1000.0 + 1.5;
  int lost = coord__ps_node(c, f->ck.lost_ps);
  for (int i = 0; i < c->nnodes; i++) {
    const coord_node *n = &c->nodes[i];
    if (n->role != ROLE_PS) continue;
    if (!c->ctl[i]) return false;
    if (i == lost && n->state != NODE_RESTORING &&
        progress_now() - f->ck.lost_at < grace)
      return false;
  }
  return true;
}

/* A ps was lost again while the rollback waited for it (its link closed
 * before it answered, or it was not connected): the restore starts over
 * once every ps is back. Any other failure, or a ps out of restarts
 * (c->failures), fails the fit. */
static bool lost_again(coord_fit_state *f, int rc) {
  coord *c = f->c;
  if (c->failures || rc != DRV_ENODE) return false;
  rundir_event(&c->rd, "the restore was interrupted (%s): it starts over once every ps is back",
               err_msg());
  return true;
}

static int send_restore(coord_fit_state *f, const char *dir, uint64_t version) {
  for (int k = 0; k < f->nps; k++) {
    int n = items_on(f, k);
    if (n == 0) continue;
    char path[4200] = "";
    if (dir) ps_file(dir, k, path, sizeof path);
    name_cursor nc;
    uint8_t from = dir ? (uint8_t)coord__ckpt_route(f->c, k) : WIRE_CKPT_PATH;
    int rc = from == WIRE_CKPT_COORD ? coord__xfer_send(f, k, dir, path) : 0;
    if (rc == 0) rc = cursor_open(&nc, f, k);
    if (rc < 0) return rc;
    wire_wr w;
    wire_wr_init(&w);
    wire_put_restore(&w, &(wire_msg_restore){version, WIRE_STR(path),
                                             {(uint32_t)n, .put = put_name, .ud = &nc}, from});
    cursor_close(&nc);
    rc = coord__ps_request(f, k, &w, WIRE_RESTORE, RESTORE_REQ);
    if (rc < 0) return rc;
  }
  return coord__wait_replies(f, "RESTORE_OK");
}

int coord__ckpt_restore_tick(coord_fit_state *f) {
  coord *c = f->c;
  coord_ck *ck = &f->ck;
  if (!ck->restoring || !all_ps_back(f)) return 0;
  ckpt_entry e;
  manifest m = {0};
  int have = newest(f, &e, &m);
  int64_t step = have ? strtoll(manifest_meta(&m, "step"), NULL, 10) : 0;
  uint64_t version = have ? strtoull(manifest_meta(&m, "version"), NULL, 10) : 0;
  const char *had = have ? manifest_meta(&m, "workers") : NULL;
  if (have)
    rundir_event(&c->rd, "restoring from step %" PRId64 " (%s)", step, e.path);
  else
    rundir_event(&c->rd, "no checkpoint yet: the ps restart from the initial values and the fit "
                 "starts over");
  if (had && atoi(had) != ckpt_workers(f)) /* scaled since: the quorum is of the workers now */
    rundir_event(&c->rd, "the checkpoint of step %" PRId64 " had %s workers: the fit goes on "
                 "with the %d it has now", step, had, ckpt_workers(f));
  coord__spec_all(c); /* workers reconnect to the restarted ps */
  /* The trainers first: once they have rolled back, nothing computed
   * before can reach a ps (a RESTORE closes the connections that pushed). */
  int rc = coord__pos_rollback(f, have ? &m : NULL);
  if (rc == 0) rc = coord__connect_ps(c);
  for (int i = 0; i < f->nvars && rc == 0 && !have; i++)
    memcpy(tensor_data(f->vars[i].value), ck->initial[i],
           (size_t)tensor_numel(f->vars[i].value) * sizeof(float));
  if (rc == 0) rc = coord__init_vars(f, f->args->optim);
  if (rc == 0) rc = coord__wait_replies(f, "VAR_INIT_OK");
  if (rc == 0) rc = send_restore(f, have ? e.path : NULL, version);
  if (rc == 0) restore_plateau(f, have ? &m : NULL, step); /* once the ps have their values */
  if (rc == 0) restore_stopper(f, have ? &m : NULL);
  manifest_free(&m);
  if (rc < 0 && lost_again(f, rc)) return 0; /* the next tick starts over */
  if (rc < 0) return rc;
  coord__sync_stop_again(f, -1); /* a cap VAR_INIT undid (a final target it carries) */
  coord__sched_drop(c, f->producer, true); /* nothing from before the rollback counts */
  coord__fit_taken_reset(f);
  f->done = f->produced = step;
  f->epoch_no = 0;
  ck->last_step = step;
  ck->last_time = progress_now();
  ck->restoring = false;
  for (int i = 0; i < c->nnodes; i++)
    if (c->nodes[i].state == NODE_RESTORING)
      coord__node_set_state(c, i, NODE_READY, ": restored from step %" PRId64, step);
  if (f->sync) rc = coord__send_sync_probes(f);
  rundir_event(&c->rd, "restored from step %" PRId64 ": training goes on", step);
  return rc;
}

/* ============================== resume ==================================== */

static void bad_ckpt(void *ud, const char *msg) {
  coord_fit_state *f = ud;
  fprintf(stderr, "drover: %s\n", msg);
  rundir_event(&f->c->rd, "%s", msg);
}

/* A checkpoint with sparse tables holds in ps-K's file the rows ps K
 * owned (sptable_owner over the ps count then): it resumes on as many ps
 * as wrote it, or is refused (its rows are not re-sharded). */
static int sparse_ps_count(const coord_fit_state *f, const manifest *m, int64_t step) {
  const char *nps = manifest_meta(m, "ps");
  int had = nps ? atoi(nps) : 0;
  if (f->tables.n == 0 || had == f->nps) return 0;
  return err_set(DRV_EINVAL, "cannot resume from the checkpoint of step %" PRId64 ": it was "
                 "written by %d ps and this cluster has %d; a model with sparse tables resumes "
                 "on as many ps as wrote its checkpoint (each ps's file holds the table rows it "
                 "owned; re-sharding them is not supported)", step, had, f->nps);
}

/* Sync: the fit's global steps were planned with the worker count at its
 * start; resumed with another count (c:scale, --workers) the plan of this
 * one differs: the checkpoint's stand, and every ps is told (SYNC_STOP
 * with a target). */
static int resume_global_steps(coord_fit_state *f, const manifest *m) {
  const char *g = manifest_meta(m, "global_steps");
  int64_t target = g ? strtoll(g, NULL, 10) : 0;
  if (!f->sync || target <= 0 || target == f->sync_target) return 0;
  rundir_event(&f->c->rd, "sync: %" PRId64 " global steps, as the fit planned them at its "
               "start (%" PRId64 " with the workers now)", target, f->sync_target);
  f->sync_target = target;
  f->p.total_steps = target * (int64_t)f->replicas;
  for (int k = 0; k < f->nps; k++) {
    wire_wr w;
    wire_wr_init(&w);
    wire_put_sync_stop(&w, &(wire_msg_sync_stop){.target = (uint64_t)target});
    if (!f->ps[k]) return err_set(DRV_ENODE, "ps:%d is not connected", k);
    int rc = conn_send_wr(f->ps[k], &w, WIRE_SYNC_STOP, 0);
    if (rc < 0) return rc;
  }
  return 0;
}

/* The newest intact checkpoint decides: none or of an earlier fit, this
 * fit starts afresh; of a later fit, this one is skipped; of this fit,
 * the trainers roll back, then every ps is restored (no ps was lost, so
 * no push from before can arrive). */
int coord__ckpt_resume(coord_fit_state *f) {
  coord *c = f->c;
  free(f->feed_rs.redo); /* a fed fit passes over nothing unless resumed now */
  memset(&f->feed_rs, 0, sizeof f->feed_rs);
  if (!c->resume) return 0;
  char base[2200];
  ckpt_dir(f, base, sizeof base);
  ckpt_entry e;
  manifest m = {0};
  const char *kind = NULL;
  if (ckpt_newest(base, &e, bad_ckpt, f) == 1 && ckfs_manifest_read(e.path, &m) == 0)
    kind = manifest_meta(&m, "kind");
  if (!kind || strcmp(kind, "cluster") != 0 || !manifest_meta(&m, "fit") ||
      !manifest_meta(&m, "step") || !manifest_meta(&m, "version")) {
    c->resume = false;
    manifest_free(&m);
    rundir_event(&c->rd, "resumed run: no cluster checkpoint; fit %" PRId64 " starts from the "
                 "beginning", f->fit_no);
    return 0;
  }
  int64_t fit = strtoll(manifest_meta(&m, "fit"), NULL, 10);
  int64_t step = strtoll(manifest_meta(&m, "step"), NULL, 10);
  uint64_t version = strtoull(manifest_meta(&m, "version"), NULL, 10);
  if (fit != f->fit_no) {
    manifest_free(&m);
    if (fit < f->fit_no) { /* this fit had not checkpointed yet */
      c->resume = false;
      rundir_event(&c->rd, "resumed run: fit %" PRId64 " starts from the beginning", f->fit_no);
      return 0;
    }
    f->skipped = true;
    rundir_event(&c->rd, "resumed run: fit %" PRId64 " skipped (it had ended before the "
                 "checkpoint of fit %" PRId64 ")", f->fit_no, fit);
    return 1;
  }
  int rc = sparse_ps_count(f, &m, step);
  if (rc < 0) {
    manifest_free(&m);
    return rc;
  }
  c->resume = false;
  const char *sbase = manifest_meta(&m, "step_base");
  f->step_base = sbase ? strtoll(sbase, NULL, 10) : 0;
  rc = coord__feed_ckpt_resume(f, &m); /* a fed fit: what to pass over, if it can */
  if (rc < 0) {
    manifest_free(&m);
    return rc;
  }
  rundir_event(&c->rd, "resuming fit %" PRId64 " from step %" PRId64 " (%s)", fit, step, e.path);
  rc = coord__pos_rollback(f, &m);
  if (rc == 0) rc = send_restore(f, e.path, version);
  if (rc == 0) restore_plateau(f, &m, step);
  if (rc == 0) restore_stopper(f, &m);
  if (rc == 0) rc = resume_global_steps(f, &m);
  manifest_free(&m);
  if (rc < 0) return rc;
  coord__fit_taken_reset(f);
  f->done = f->produced = step;
  f->epoch_no = 0;
  f->ck.last_step = step;
  f->ck.last_time = progress_now();
  return 0;
}

int coord__ckpt_plan(const coord *c, char *out, size_t n) {
  coord_fit_state *f = c->fit;
  if (!f || !f->cfg)
    return snprintf(out, n, "no fit is running: the run fails (its variables are lost)");
  ckpt_entry e;
  manifest m = {0};
  if (newest(f, &e, &m)) {
    const char *step = manifest_meta(&m, "step");
    int len = snprintf(out, n, "restore from step %s (checkpoint): the steps since then run "
                       "again", step ? step : "?");
    manifest_free(&m);
    return len;
  }
  manifest_free(&m);
  return snprintf(out, n, "no checkpoint: updates since the start are lost (the fit starts over)");
}

/* ============================== the worker count ========================== */

/* The "workers" of run directory dir's newest cluster checkpoint, 0 none. */
static int recorded_workers(const char *dir) {
  char base[2200];
  ckpt_entry e;
  manifest m = {0};
  int k = 0;
  rundir_ckdir(dir, base, sizeof base);
  if (ckpt_newest(base, &e, NULL, NULL) == 1 && ckfs_manifest_read(e.path, &m) == 0) {
    const char *kind = manifest_meta(&m, "kind"), *w = manifest_meta(&m, "workers");
    if (kind && strcmp(kind, "cluster") == 0 && w) k = atoi(w);
  }
  manifest_free(&m);
  return k;
}

int coord__ckpt_resume_workers(coord_opts *o, char *note, size_t n) {
  note[0] = '\0';
  if (!o->resume_dir) return 0;
  int want = o->resume_workers, had = o->count[ROLE_WORKER];
  const char *why = "--workers";
  if (want <= 0) {
    want = recorded_workers(o->resume_dir);
    why = "the count its newest checkpoint recorded";
  }
  if (want <= 0 || want == had) return 0;
  int lo = o->worker_min > 1 ? o->worker_min : 1, hi = o->worker_max ? o->worker_max : had;
  if (want < lo || want > hi)
    return err_set(DRV_EINVAL, "--resume: %d workers (%s) is outside the run's worker = "
                   "{ instances = %d, min = %d, max = %d }: between %d and %d", want, why, had,
                   o->worker_min, o->worker_max ? o->worker_max : had, lo, hi);
  o->count[ROLE_WORKER] = want;
  snprintf(note, n, "resumed with %d workers (%s; the script's cluster has %d)", want, why, had);
  return 0;
}
