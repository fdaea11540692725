/* worker.c - the worker, chief and evaluator roles: the job queue, pull ->
 * compute (thread pool) -> push, and replies. The ps client connections
 * (links) are in worker_ps.c; SETUP parsing and the model/data state it
 * builds are in worker_setup.c.
 *
 * A job moves through phases:
 *   LINKS    wait until every ps holding a variable is connected
 *   PULL     one PULL per ps listing its variables; each reply is copied
 *            into the model's parameter rows (on the loop thread: a copy)
 *   COMPUTE  uv_queue_work: next batch, zero grads, forward/backward (or
 *            the evaluation); the loop keeps serving heartbeats meanwhile
 *   PUSH     one PUSH per ps with the gradient rows of its shards; the
 *            RESULT goes out once every ps acknowledged (PUSH_OK), so a
 *            reported step is an applied step
 *
 * Pipelining: one job at a time pulls or computes (w->cur), but once a
 * training job has sent its pushes, the next queued one starts its pull
 * while the first still waits for its PUSH_OKs: the worker no longer idles
 * for a round trip per step. This is safe because a ps serves the frames
 * of one connection in order: it applies the push before it serves the
 * pull queued behind it, so the pull sees the update exactly as if the
 * worker had waited (one worker still reproduces in-process training bit
 * for bit). The push frames hold copies of the gradients, so the next job
 * may overwrite parameters and gradients at once. A ps also replies in
 * order, so each link keeps its outstanding requests as a FIFO and a reply
 * must answer the oldest (worker_ps.c). SETUP starts only once no job is
 * started (it swaps the state they use).
 *
 * Sync training (wire.h, ps.c): each PUSH carries the version its values
 * were pulled at, and the pull behind it asks for a later version, which
 * a sync ps holds until its aggregated update is applied; a gradient the
 * ps drops as late is logged and counted, and the next pull simply gets
 * the newest values. Async ps ignore both, so the worker does not need to
 * know the mode.
 *
 * The methods of a scheduled function's `w` (l_worker.c) queue jobs
 * that run one phase each (pull, compute, push, or a copy of the next
 * batch), or all three for w:train_step, in the same queue and with the
 * same rules as TASKs; their outcome goes back to Lua instead of a reply.
 *
 * Replies go to the coordinator in the jobs' order: a job that is over
 * waits for the earlier ones (settle). A failure at any phase ends the job
 * with a negative status in its reply; losing a ps fails every job waiting
 * on it; replies to requests of a job already over are dropped.
 */
#include "cluster/worker/worker.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>
#include <string.h>

#include "net/conn.h"
#include "base/err.h"
#include "base/log.h"
#include "numeric/optim.h"
#include "train/train.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker_int.h"

/* ============================== jobs ===================================== */

static job *job_new(worker *w, int kind, uint32_t req) {
  job *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  j->w = w;
  j->kind = kind;
  j->req = req;
  j->correct = -1;
  j->loss = NAN;
  j->grad_norm = NAN;
  j->eval = (train_eval){NAN, NAN, NAN, NAN};
  return j;
}

static void job_free(job *j) {
  if (!j) return;
  worker__state_free(j->setup);
  free(j->payload);
  tensor_free(j->bx);
  tensor_free(j->by);
  tensor_free(j->fx);
  tensor_free(j->fy);
  data_sparse_free(&j->fsp);
  free(j);
}

static void enqueue(worker *w, job *j) {
  if (w->tail)
    w->tail->next = j;
  else
    w->head = j;
  w->tail = j;
  w->njobs++;
}

/* ============================== replies ================================== */

/* A train step whose gradient no ps applied (sync: late, or past the
 * last global step) is not a step of the fit: the coordinator does not
 * count it. One ps taking it is enough, as its batch then trained. */
static bool job_dropped(const job *j) {
  return j->rc == 0 && ((j->push_oks > 0 && j->pushes_taken == 0) || j->superseded);
}

static void reply(worker *w, job *j) {
  wire_wr m;
  wire_wr_init(&m);
  switch (j->kind) {
  case JOB_SETUP:
    if (j->rc < 0 && w->fatal) { /* the node reports it and stops */
      wire_wr_free(&m);
      w->fatal(w->ud, j->rc, j->msg);
      return;
    }
    if (j->rc < 0) {
      wire_put_error(&m, &(wire_msg_error){.code = j->rc, .message = WIRE_STR(j->msg)});
      w->send(w->ud, &m, WIRE_ERROR, 0);
      return;
    }
    w->send(w->ud, &m, WIRE_SETUP_OK, j->req);
    return;
  case JOB_TRAIN:
    if (j->direct) { /* a direct feeder's batch: acknowledged to the coordinator */
      wire_put_feed_ack(&m, &(wire_msg_feed_ack){.slot = j->slot,
                                                 .seq = j->id,
                                                 .status = j->rc,
                                                 .loss = j->rc < 0 ? NAN : (double)j->loss,
                                                 .correct = j->rc < 0 ? -1 : j->correct,
                                                 .examples = j->rc < 0 ? 0 : (uint64_t)j->examples,
                                                 .message = WIRE_STR(j->msg),
                                                 .grad_norm = j->rc < 0 ? NAN : j->grad_norm});
      w->send(w->ud, &m, WIRE_FEED_ACK, 0);
      return;
    }
    wire_put_result(&m, &(wire_msg_result){.task = j->id,
                                           .status = j->rc,
                                           .loss = j->rc < 0 ? NAN : (double)j->loss,
                                           .correct = j->rc < 0 ? -1 : j->correct,
                                           .examples = j->rc < 0 ? 0 : (uint64_t)j->examples,
                                           .message = WIRE_STR(j->msg),
                                           .dropped = job_dropped(j),
                                           .grad_norm = j->rc < 0 ? NAN : j->grad_norm});
    w->send(w->ud, &m, WIRE_RESULT, j->req);
    return;
  case JOB_EVAL:
    wire_put_eval_result(&m, &(wire_msg_eval_result){
                                 .step = j->id,
                                 .status = j->rc,
                                 .loss = j->rc < 0 ? NAN : j->eval.loss,
                                 .accuracy = j->rc < 0 ? NAN : j->eval.accuracy,
                                 .examples = j->rc < 0 ? 0 : (uint64_t)j->examples,
                                 .message = WIRE_STR(j->msg),
                                 .auc = j->rc < 0 ? NAN : j->eval.auc,
                                 .logloss = j->rc < 0 ? NAN : j->eval.logloss});
    w->send(w->ud, &m, WIRE_EVAL_RESULT, j->req);
    return;
  }
  wire_wr_free(&m);
}

/* Marks j over (its outcome is set): its outstanding requests are
 * forgotten (their replies will be dropped) and the next job may pull.
 * The reply goes out from worker__settle(), in order. */
static void job_over(worker *w, job *j) {
  j->done = true;
  for (int i = 0; i < w->nlinks; i++) {
    ps_link *l = w->links[i];
    for (int k = 0; l && k < l->nwaits; k++)
      if (l->waits[k].j == j) l->waits[k].j = NULL;
  }
  if (w->cur == j) w->cur = NULL;
}

void worker__finish(worker *w, job *j) {
  job_over(w, j);
  worker__settle(w);
}

/* Ends j with an error (once: a job already over keeps its outcome). */
__attribute__((format(printf, 4, 0)))
static void vdoom(worker *w, job *j, int rc, const char *fmt, va_list ap) {
  if (j->done) return;
  vsnprintf(j->msg, sizeof j->msg, fmt, ap);
  j->rc = rc < 0 ? rc : DRV_EIO;
  job_over(w, j);
}

__attribute__((format(printf, 4, 5)))
void worker__doom(worker *w, job *j, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdoom(w, j, rc, fmt, ap);
  va_end(ap);
}

__attribute__((format(printf, 4, 5)))
static void fail(worker *w, job *j, int rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdoom(w, j, rc, fmt, ap);
  va_end(ap);
  worker__settle(w);
}

static void go_push(worker *w, job *j);

/* A SETUP's state, built, replaces the worker's. */
static void swap_state(worker *w, job *j) {
  worker__state_free(w->st);
  w->st = j->setup;
  j->setup = NULL;
  for (int i = 0; i < w->nlinks; i++) /* a new fit starts at version 0 */
    if (w->links[i]) w->links[i]->pushed = false;
  worker__pos_reset(w);
  log_info("setup: %s", w->st->summary);
}

static void after_work_cb(uv_work_t *req, int status) {
  job *j = req->data;
  worker *w = j->w;
  w->in_pool = false;
  if (w->closed) { /* the node is going away: worker_close left this job to us */
    w->cur = NULL;
    w->njobs--;
    job_free(j);
    return;
  }
  worker__pos_idle(w); /* a POSITION for now, a ROLLBACK: before anything moves on */
  if (j->rolled_back) { /* computed from the state a ROLLBACK left: never pushed */
    fail(w, j, DRV_EIO, "rolled back to a checkpoint");
    return;
  }
  if (status < 0) {
    fail(w, j, DRV_EIO, "thread pool: %s", uv_strerror(status));
    return;
  }
  if (j->kind == JOB_SETUP && j->rc == 0) swap_state(w, j);
  if (j->rc < 0 || !(j->phases & JP_PUSH)) {
    worker__finish(w, j);
    return;
  }
  go_push(w, j);
}

static void go_compute(worker *w, job *j) {
  j->phase = PH_COMPUTE;
  if (j->kind == JOB_TRAIN && j->st->has_iter && !j->fx && !j->px)
    worker__pos_batch(w, j); /* it draws a batch (a fed one is not its shard's) */
  else if (j->kind == JOB_TRAIN && j->drawn)
    worker__pos_pulled(w, j); /* drawn before its pulls (sparse tables) */
  w->work.data = j;
  int rc = uv_queue_work(w->loop, &w->work, worker__work_cb, after_work_cb);
  if (rc < 0) {
    fail(w, j, DRV_EIO, "cannot queue work: %s", uv_strerror(rc));
    return;
  }
  w->in_pool = true;
}

/* ============================== pull and push ============================ */

/* The pull is complete: compute, or (a pull alone) the job is over. */
void worker__pulled(worker *w, job *j) {
  if (j->phases & (JP_COMPUTE | JP_BATCH))
    go_compute(w, j);
  else
    worker__finish(w, j);
}

static void put_part_var(wire_wr *w, void *ud, uint32_t k) {
  wire_put_item_var_id(w, &(wire_item_var_id){((const ps_part *)ud)->var[k]});
}

/* Sparse tables: the batch's ids first (worker_sparse.c). */
static int route_ids(worker *w, job *j) {
  if (!j->st->tables.n || !(j->phases & JP_COMPUTE)) return 0;
  return worker__sparse_route(w, j);
}

static void go_pull(worker *w, job *j) {
  wstate *st = j->st;
  j->phase = PH_PULL;
  j->waiting = 0;
  if (route_ids(w, j) < 0) {
    fail(w, j, DRV_EINVAL, "%s", err_msg());
    return;
  }
  int nps = worker__nps_involved(w, st);
  for (int p = 0; p < nps; p++) {
    if (!worker__involves(w, st, p)) continue;
    ps_link *l = w->links[p];
    uint64_t min_version = l->pushed ? l->pushed_version + 1 : 0;
    if (p < st->nparts && st->parts[p].n > 0) {
      const ps_part *part = &st->parts[p];
      wire_wr m;
      wire_wr_init(&m);
      wire_put_pull(&m, &(wire_msg_pull){min_version, {(uint32_t)part->n, .put = put_part_var,
                                                       .ud = (void *)part}});
      if (worker__link_send(l, &m, WIRE_PULL, WIRE_PULL_REPLY, j) < 0) {
        fail(w, j, DRV_EIO, "cannot send PULL to ps:%d: %s", p, err_msg());
        return;
      }
      j->waiting++;
    }
    int sent = 0;
    if (st->tables.n && st->offs && worker__sparse_pull(w, j, p, min_version, &sent) < 0) {
      fail(w, j, DRV_EIO, "cannot send SPARSE_PULL to ps:%d: %s", p, err_msg());
      return;
    }
    j->waiting += sent;
  }
  if (j->waiting == 0) worker__pulled(w, j); /* a model without parameters */
}

/* Sends j's pushes, then lets the next job pull behind them (see the file
 * comment) while j waits for its PUSH_OKs. */
static void go_push(worker *w, job *j) {
  wstate *st = j->st;
  j->phase = PH_PUSH;
  j->waiting = 0;
  if (st->tables.n && worker__sparse_push_prep(st) < 0) {
    fail(w, j, DRV_ENOMEM, "%s", err_msg());
    return;
  }
  int nps = worker__nps_involved(w, st);
  for (int p = 0; p < nps; p++) {
    static const ps_part none = {0};
    if (!worker__involves(w, st, p)) continue;
    /* with tables every ps gets a PUSH, empty when it holds no dense
     * variable: a sync ps sums the row gradients sent before it with it */
    const ps_part *part = p < st->nparts ? &st->parts[p] : &none;
    ps_link *l = w->links[p];
    if (!l || (!l->c && !w->ps_replicated)) { /* replicated: sent once connected again */
      fail(w, j, DRV_EIO, "lost the connection to ps:%d before pushing", p);
      return;
    }
    if (st->tables.n && worker__sparse_push(w, j, p) < 0) {
      fail(w, j, DRV_EIO, "cannot send SPARSE_PUSH to ps:%d: %s", p, err_msg());
      return;
    }
    if (worker__link_push(l, st, part, j) < 0) {
      fail(w, j, DRV_EIO, "cannot send PUSH to ps:%d: %s", p, err_msg());
      return;
    }
    l->pushed = true;
    l->pushed_version = l->version;
    j->waiting++;
  }
  if (st->tables.n) worker__sparse_step_done(st);
  if (w->cur == j) w->cur = NULL;
  if (j->waiting == 0) job_over(w, j);
  worker__settle(w);
}

/* Starts the pull once every ps the model lives on is connected. */
void worker__go_links(worker *w, job *j) {
  wstate *st = j->st;
  j->phase = PH_LINKS;
  int nps = worker__nps_involved(w, st);
  for (int p = 0; p < nps; p++) {
    if (!worker__involves(w, st, p)) continue;
    ps_link *l = p < w->nlinks ? w->links[p] : NULL;
    if (!l) {
      fail(w, j, DRV_EINVAL, "ps:%d is not in the cluster spec%s", p,
           w->have_spec ? "" : " (no SPEC received yet)");
      return;
    }
    if (!l->c && worker__link_reconnect(w, l)) return; /* link_ready resumes */
    if (!l->c && w->ps_replicated) return; /* a promotion's SPEC or worker_tick reconnects */
    if (!l->c) {
      fail(w, j, DRV_EIO, "not connected to ps:%d (%s:%d)%s%s", p, l->host, l->port,
           l->last_error[0] ? ": " : "", l->last_error);
      return;
    }
    if (!conn_is_ready(l->c)) return; /* link_ready resumes */
  }
  if (j->phases & JP_PULL)
    go_pull(w, j);
  else
    go_push(w, j);
}

/* ============================== running jobs ============================= */

static void start(worker *w, job *j) {
  if (j->kind == JOB_SETUP) { /* built on the thread pool, then swapped in */
    go_compute(w, j);
    return;
  }
  if (j->superseded) { /* sent before a SETUP { supersede }: never drawn */
    worker__finish(w, j);
    return;
  }
  if (!w->st) {
    fail(w, j, DRV_EINVAL, "%s",
         j->on_done ? "this worker has no model yet (run c:fit or c:setup first)"
                    : "no SETUP received yet");
    return;
  }
  if (j->rolled_back) {
    fail(w, j, DRV_EIO, "rolled back to a checkpoint");
    return;
  }
  if (j->kind == JOB_TRAIN && j->task_kind != WIRE_TASK_TRAIN_STEP && !j->fx) {
    fail(w, j, DRV_EINVAL, "unknown task kind %u", j->task_kind);
    return;
  }
  j->st = w->st;
  if (j->phases & (JP_PULL | JP_PUSH))
    worker__go_links(w, j);
  else
    go_compute(w, j); /* the ps are not involved */
}

/* Whether the first queued job may start now. */
static bool may_start(const worker *w) {
  const job *j = w->head;
  if (!j || w->closed || w->cur) return false;
  if (j->kind == JOB_SETUP) return w->nrun == 0; /* it swaps the state started jobs use */
  return w->nrun < WORKER_PIPE_MAX;
}

static void start_next(worker *w) {
  job *j = w->head;
  w->head = j->next;
  if (!w->head) w->tail = NULL;
  j->next = NULL;
  if (w->run_tail)
    w->run_tail->next = j;
  else
    w->run = j;
  w->run_tail = j;
  w->nrun++;
  w->cur = j;
  start(w, j);
}

/* Nothing runs, nothing is queued, no call is in flight. */
static bool drained(worker *w) {
  return w->nrun == 0 && !w->head && !(w->calls && w->calls->inflight && w->calls->inflight(w));
}

/* Sends the replies of the jobs over at the front of the started list, in
 * order; calls the drain callback once no job is started; starts queued
 * jobs when they may. A call from inside (a job that ends as it starts)
 * only makes the outer one go round again. */
void worker__settle(worker *w) {
  if (w->settling) {
    w->resettle = true;
    return;
  }
  w->settling = true;
  do {
    w->resettle = false;
    while (w->run && w->run->done) {
      job *j = w->run;
      w->run = j->next;
      if (!w->run) w->run_tail = NULL;
      w->nrun--;
      if (j->rc < 0 && !j->on_done) /* (a scheduled function's job fails in Lua) */
        log_warn("%s %llu failed: %s",
                 j->kind == JOB_EVAL ? "eval" : j->kind == JOB_SETUP ? "setup" : "task",
                 (unsigned long long)j->id, j->msg);
      if (j->kind == JOB_TRAIN && j->phases == JP_TRAIN && j->rc == 0) w->steps++;
      if (!w->closed && j->on_done)
        j->on_done(j); /* runs Lua, which may queue jobs: settle goes round again */
      else if (!w->closed)
        reply(w, j);
      w->njobs--;
      job_free(j);
    }
    if (w->idle && drained(w)) {
      void (*idle)(void *) = w->idle;
      w->idle = NULL;
      w->settling = false;
      idle(w->idle_ud); /* may close the worker */
      return;
    }
    if (may_start(w)) {
      start_next(w);
      w->resettle = true; /* perhaps another one */
    }
  } while (w->resettle);
  w->settling = false;
}

/* ============================== frames from the coordinator ============== */

/* A coordinator's train step (not a closure's, not a fed batch). */
static bool task_step(const job *j) {
  return j->kind == JOB_TRAIN && !j->on_done && !j->direct && !j->fx;
}

/* SETUP { supersede } (a sync fit's new shards at c:scale's barrier,
 * wire_msgs.h): the train steps sent before it that have not begun
 * computing end now, dropped: their pulls wait at the ps's barrier, and
 * what they would compute is the old shard's next batch. One computing
 * goes on (its gradient is of a version before the barrier). */
static void supersede(worker *w) {
  job *pooled = w->in_pool ? w->cur : NULL;
  int n = 0;
  for (job *j = w->run; j; j = j->next)
    if (task_step(j) && !j->done && j != pooled && (j->phase == PH_LINKS || j->phase == PH_PULL)) {
      j->superseded = true;
      job_over(w, j);
      n++;
    }
  for (job *j = w->head; j; j = j->next)
    if (task_step(j)) j->superseded = true, n++;
  if (n) log_info("new shards: %d train step%s sent before them dropped", n, n == 1 ? "" : "s");
}

int worker_setup(worker *w, uint32_t req, const uint8_t *payload, size_t len) {
  wire_msg_setup m;
  if (wire_get_setup(payload, len, &m) == 0 && m.supersede) supersede(w);
  job *j = job_new(w, JOB_SETUP, req);
  if (!j || !(j->payload = malloc(len ? len : 1))) {
    free(j);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  memcpy(j->payload, payload, len);
  j->payload_len = len;
  enqueue(w, j);
  worker__settle(w);
  return 0;
}

int worker_task(worker *w, uint32_t req, const uint8_t *payload, size_t len) {
  if (w->role == ROLE_EVALUATOR) return err_set(DRV_EINVAL, "TASK sent to an evaluator");
  wire_msg_task m; /* arg: unused by TRAIN_STEP */
  int rc = wire_get_task(payload, len, &m);
  if (rc < 0) return rc;
  job *j = job_new(w, JOB_TRAIN, req);
  if (!j) return err_set(DRV_ENOMEM, "out of memory");
  j->id = m.task;
  j->task_kind = m.kind;
  j->phases = JP_TRAIN;
  enqueue(w, j);
  worker__settle(w);
  return 0;
}

/* A decoded tensor view as a tensor of its own. */
static tensor *view_tensor(const wire_tensor *v) {
  tensor *t = tensor_new_uninit(v->ndim, v->shape); /* every element written now */
  if (t) wire_tensor_to(v, tensor_data(t));
  return t;
}

/* A FEED_BATCH's x, y and ids as its own; its ids checked against x's rows. */
static int fed_parts(const wire_msg_feed_batch *m, tensor **x, tensor **y, data_sparse *sp) {
  char what[64];
  snprintf(what, sizeof what, "FEED_BATCH %llu's ids", (unsigned long long)m->seq);
  int rc = data_sparse_batch_decode(sp, m->x.shape[0], m->sparse.p, m->sparse.len, what);
  if (rc < 0) return rc;
  *x = view_tensor(&m->x), *y = view_tensor(&m->y);
  if (!*x || !*y) {
    tensor_free(*x), tensor_free(*y);
    data_sparse_free(sp);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  return 0;
}

/* A FEED_BATCH from the coordinator (direct false) or a direct feeder. */
static int feed_batch(worker *w, uint32_t req, const uint8_t *payload, size_t len, bool direct,
                      uint32_t slot, uint64_t *seq) {
  if (w->role == ROLE_EVALUATOR) return err_set(DRV_EINVAL, "FEED_BATCH sent to an evaluator");
  wire_msg_feed_batch m;
  int rc = wire_get_feed_batch(payload, len, &m);
  if (rc < 0) return rc;
  if (direct && m.mode != WIRE_FEED_TRAIN)
    return err_set(DRV_EPROTO, "a direct feeder's FEED_BATCH must be mode TRAIN");
  if (seq) *seq = m.seq;
  if (m.x.ndim < 2 || m.y.ndim > 2 || m.x.shape[0] != m.y.shape[0] || m.x.shape[0] < 1)
    return err_set(DRV_ESHAPE, "FEED_BATCH %llu: x and y do not match (x [n, ...], y [n] or "
                   "[n, k], n >= 1)", (unsigned long long)m.seq);
  tensor *x = NULL, *y = NULL;
  data_sparse sp;
  if ((rc = fed_parts(&m, &x, &y, &sp)) < 0) return rc;
  if (m.mode == WIRE_FEED_QUEUE) return worker__fed_hold(w, req, m.task, x, y, &sp);
  job *j = job_new(w, JOB_TRAIN, req);
  if (!j) {
    tensor_free(x), tensor_free(y);
    data_sparse_free(&sp);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  j->id = direct ? m.seq : m.task;
  j->direct = direct;
  j->slot = slot;
  j->task_kind = WIRE_TASK_TRAIN_STEP;
  j->phases = JP_TRAIN;
  j->fx = x, j->fy = y;
  j->fsp = sp;
  enqueue(w, j);
  worker__settle(w);
  return 0;
}

int worker_feed_batch(worker *w, uint32_t req, const uint8_t *payload, size_t len) {
  return feed_batch(w, req, payload, len, false, 0, NULL);
}

int worker__direct_batch(worker *w, uint32_t slot, const uint8_t *payload, size_t len, uint64_t *seq) {
  if (w->closed) return err_set(DRV_EINVAL, "the node is shutting down");
  return feed_batch(w, 0, payload, len, true, slot, seq);
}

int worker_feed_end(worker *w, const uint8_t *payload, size_t len) {
  wire_msg_feed_end m;
  int rc = wire_get_feed_end(payload, len, &m);
  if (rc < 0) return rc;
  w->feed_ended = true;
  w->feeding = false;
  w->feed_ends++;
  worker__fed_wake(w);
  return 0;
}

int worker_eval(worker *w, uint32_t req, const uint8_t *payload, size_t len) {
  if (w->role != ROLE_EVALUATOR)
    return err_set(DRV_EINVAL, "EVAL sent to a %s", wire_role_name(w->role));
  wire_msg_eval m;
  int rc = wire_get_eval(payload, len, &m);
  if (rc < 0) return rc;
  job *j = job_new(w, JOB_EVAL, req);
  if (!j) return err_set(DRV_ENOMEM, "out of memory");
  j->id = m.step;
  j->eval_metrics = m.metrics;
  j->phases = JP_PULL | JP_COMPUTE;
  enqueue(w, j);
  worker__settle(w);
  return 0;
}

int worker_submit(worker *w, unsigned phases, void (*on_done)(job *j), void *ud) {
  /* Draining takes jobs still: they come from calls that were running
   * when the SHUTDOWN came, which finish within the grace (wire_msgs.h). */
  if (w->closed) return err_set(DRV_EINVAL, "the node is shutting down");
  job *j = job_new(w, JOB_TRAIN, 0);
  if (!j) return err_set(DRV_ENOMEM, "out of memory");
  j->task_kind = WIRE_TASK_TRAIN_STEP;
  j->phases = phases;
  j->on_done = on_done;
  j->ud = ud;
  enqueue(w, j);
  worker__settle(w);
  return 0;
}

int worker_submit_batch(worker *w, unsigned phases, tensor *x, tensor *y, data_sparse *sp,
                        void (*on_done)(job *j), void *ud) {
  job *j = w->closed ? NULL : job_new(w, JOB_TRAIN, 0);
  if (!j) {
    tensor_free(x), tensor_free(y);
    data_sparse_free(sp);
    return w->closed ? err_set(DRV_EINVAL, "the node is shutting down")
                     : err_set(DRV_ENOMEM, "out of memory");
  }
  j->task_kind = WIRE_TASK_TRAIN_STEP;
  j->phases = phases;
  j->on_done = on_done;
  j->ud = ud;
  j->fx = x, j->fy = y;
  j->fsp = *sp;
  *sp = (data_sparse){0};
  enqueue(w, j);
  worker__settle(w);
  return 0;
}

/* ============================== lifetime ================================= */

/* Fault injection for tests: DROVER_FAULT=slow:ROLE:INDEX:MS makes that
 * node sleep MS milliseconds after each train step's computation, a
 * straggler for the backup-worker tests (see node.c for hang:). */
static unsigned fault_slow_ms(int role, int index) {
  const char *f = getenv("DROVER_FAULT");
  char want[48];
  snprintf(want, sizeof want, "slow:%s:%d:", wire_role_name(role), index);
  if (!f || strncmp(f, want, strlen(want)) != 0) return 0;
  unsigned ms = (unsigned)strtoul(f + strlen(want), NULL, 10);
  if (ms) log_warn("DROVER_FAULT=%s: %u ms slower per train step", f, ms);
  return ms;
}

void worker_set_calls(worker *w, const worker_calls *calls) { w->calls = calls; }

void worker_set_fatal(worker *w, void (*fatal)(void *ud, int rc, const char *msg)) {
  w->fatal = fatal;
}

int worker_call(worker *w, uint32_t req, const uint8_t *payload, size_t len) {
  if (!w->calls) return err_set(DRV_EINVAL, "this node runs no Lua: it cannot take a CALL");
  return w->calls->call(w, req, payload, len);
}

worker *worker_new(uv_loop_t *loop, const keyring *keys, int role, int index,
                   worker_send_fn send, void *ud) {
  worker *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->loop = loop;
  w->keys = keys;
  w->role = role;
  w->index = index;
  /* PUSH.client: random per process, so that a restarted worker's pushes
   * (seq from 1 again) are not taken for ones a ps has seen; never 0 */
  if (getrandom(&w->client, sizeof w->client, 0) != (ssize_t)sizeof w->client)
    w->client = (uint32_t)getpid() ^ (uint32_t)uv_hrtime();
  if (w->client == 0) w->client = 1;
  w->send = send;
  w->ud = ud;
  w->slow_ms = fault_slow_ms(role, index);
  return w;
}

void worker__call_over(worker *w) {
  if (w->draining && w->idle && !w->closed) worker__settle(w);
}

static void drop_queue(worker *w) {
  while (w->head) {
    job *j = w->head;
    w->head = j->next;
    w->njobs--;
    job_free(j);
  }
  w->tail = NULL;
}

/* Queued jobs the coordinator sent (tasks, evals) go; those of running
 * calls stay: the calls finish. */
static void drop_queued_tasks(worker *w) {
  job **p = &w->head;
  w->tail = NULL;
  while (*p) {
    job *j = *p;
    if (j->on_done) {
      w->tail = j;
      p = &j->next;
      continue;
    }
    *p = j->next;
    w->njobs--;
    job_free(j);
  }
}

void worker_drain(worker *w, void (*idle)(void *ud), void *ud) {
  w->draining = true;
  drop_queued_tasks(w);
  if (drained(w)) {
    idle(ud);
    return;
  }
  w->idle = idle;
  w->idle_ud = ud;
}

void worker_close(worker *w) {
  if (!w || w->closed) return;
  w->closed = true;
  w->idle = NULL;
  drop_queue(w);
  worker__direct_close(w);
  if (w->calls) w->calls->close(w);
  /* Jobs waiting on the network are just dropped; one on the thread pool
   * stays w->cur until after_work_cb frees it. */
  job *pooled = w->in_pool ? w->cur : NULL;
  while (w->run) {
    job *j = w->run;
    w->run = j->next;
    if (j != pooled) {
      w->njobs--;
      job_free(j);
    }
  }
  w->run_tail = NULL;
  w->nrun = 0;
  w->cur = pooled;
  for (int i = 0; i < w->nlinks; i++) {
    ps_link *l = w->links[i];
    if (!l) continue;
    worker__link_forget(l);
    if (l->c) conn_close(l->c, "worker closing");
  }
}

void worker_free(worker *w) {
  if (!w) return;
  for (int i = 0; i < w->nlinks; i++) {
    if (w->links[i]) {
      worker__link_forget(w->links[i]); /* kept frames (ps replicas) */
      free(w->links[i]->waits);
    }
    free(w->links[i]);
  }
  free(w->links);
  if (w->closed) job_free(w->cur); /* a pooled job whose callback never ran */
  while (w->run) {
    job *j = w->run;
    w->run = j->next;
    job_free(j);
  }
  drop_queue(w);
  worker__fed_free(w);
  if (w->calls) w->calls->free(w); /* after the jobs: none calls back into them any more */
  worker__state_free(w->st);
  worker__predict_free(w);
  worker__direct_free(w);
  free(w);
}

int worker_pending(const worker *w) {
  int calls = w->calls && w->calls->inflight ? w->calls->inflight(w) : 0;
  return w->njobs + calls;
}
