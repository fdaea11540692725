/* coord_sched.c - the coordinator's task queue, ClusterCoordinator-style:
 * closures (c:schedule) and train steps (c:fit) wait in one FIFO, go to
 * idle workers, come back to the front of the queue when their worker is
 * lost (at-least-once), and keep their outcome until the future lets go.
 *
 * A task is a CALL (a closure_encode'd Lua function, answered by
 * CALL_RESULT) or a producer's (TASK of the producer's kind, answered by
 * RESULT, which the producer accounts for: the fit's train steps are
 * coord_fit.c's). The queue knows producers only by their ops
 * (coord_producer_ops, coord_int.h). Both kinds share the ids,
 * the queue, the per-node in-flight limits, the retry on loss and the
 * "counted once" rule: a task completes the first time a result for it
 * comes from the node that holds it; a result from anyone else (a node
 * since declared lost) is ignored.
 *
 * Errors follow TensorFlow's ClusterCoordinator: the first closure that
 * raises is remembered; every closure still queued is cancelled; the
 * error is raised once, by the next schedule, join or done. Closures
 * running elsewhere finish and keep their results.
 *
 * Tasks live in an array indexed by id - base. A task is freed once it is
 * over and released (its future collected, or a train step counted); the
 * array drops its freed prefix now and then, so memory follows the tasks
 * still referenced, not the run's total.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "base/blockcache.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

/* Closures in flight per worker: enough to hide the round trip when they
 * are short; a producer's tasks have the producer's limit. */
#define CALL_INFLIGHT_PER_WORKER 16

/* ============================== the table ================================ */

static task *task_get(coord_sched *s, uint64_t id) {
  if (id < s->base || id - s->base >= (uint64_t)s->n) return NULL;
  task *t = &s->t[id - s->base];
  return t->state == TS_FREE ? NULL : t;
}

static bool over(const task *t) {
  return t->state == TS_DONE || t->state == TS_FAILED || t->state == TS_CANCELLED;
}

/* Drops the freed prefix once it is worth a memmove. */
static void compact(coord_sched *s) {
  int64_t k = 0;
  while (k < s->n && s->t[k].state == TS_FREE) k++;
  if (k == s->n) {
    s->base += (uint64_t)k;
    s->n = 0;
    return;
  }
  if (k < 1024 || k < s->n / 2) return;
  memmove(s->t, s->t + k, (size_t)(s->n - k) * sizeof *s->t);
  s->n -= k;
  s->base += (uint64_t)k;
}

/* A produced task's data, shared by the task and the writes sending it:
 * freed by whichever lets go last (a write may outlive its task, when the
 * task is dropped while its frame is still going out). */
typedef struct task_buf {
  int refs;
  uint32_t len;
  uint8_t *p;   /* WIRE_HEADER_SIZE bytes of room, then the payload */
  size_t block; /* p is a blockcache block of this size (0: malloc'ed) */
  tensor *ref;  /* NULL, or bytes sent from where they are: the payload is
                   p[.. split), ref's elements, p[split .. len) */
  uint32_t split;
} task_buf;

static void buf_unref(void *arg) {
  task_buf *b = arg;
  if (b && --b->refs == 0) {
    if (b->block) blockcache_give(b->p, b->block);
    else free(b->p);
    tensor_free(b->ref);
    free(b);
  }
}

static void task_free(coord_sched *s, task *t) {
  buf_unref(t->buf);
  t->buf = NULL;
  free(t->data);
  t->data = NULL;
  t->len = 0;
  t->state = TS_FREE;
  if (t == &s->t[0]) compact(s);
}

static int64_t task_new(coord_sched *s, uint8_t kind, uint8_t *data, uint32_t len) {
  if (s->base == 0) s->base = 1; /* ids start at 1: "closure 1" is the first */
  if (s->n == s->cap) {
    int64_t cap = s->cap ? 2 * s->cap : 256;
    task *nt = realloc(s->t, (size_t)cap * sizeof *nt);
    if (!nt) return err_set(DRV_ENOMEM, "out of memory");
    s->t = nt;
    s->cap = cap;
  }
  task *t = &s->t[s->n++];
  *t = (task){.kind = kind, .state = TS_QUEUED, .owner = -1, .ran_on = -1, .data = data,
               .len = len};
  return (int64_t)(s->base + (uint64_t)(s->n - 1));
}

/* ============================== the queue ================================ */

static int queue_grow(coord_sched *s) {
  if (s->qlen < s->qcap) return 0;
  int64_t cap = s->qcap ? 2 * s->qcap : 256;
  uint64_t *nq = malloc((size_t)cap * sizeof *nq);
  if (!nq) return err_set(DRV_ENOMEM, "out of memory");
  for (int64_t i = 0; i < s->qlen; i++) nq[i] = s->q[(s->qhead + i) % s->qcap];
  free(s->q);
  s->q = nq;
  s->qcap = cap;
  s->qhead = 0;
  return 0;
}

static void count(coord_sched *s, const task *t, int delta_queued, int delta_running) {
  s->queued += delta_queued, s->running += delta_running;
  if (t->kind == TK_CALL)
    s->calls_queued += delta_queued, s->calls_running += delta_running;
  else
    s->prod[t->producer].queued += delta_queued, s->prod[t->producer].running += delta_running;
}

static int push_back(coord_sched *s, uint64_t id) {
  int rc = queue_grow(s);
  if (rc < 0) return rc;
  s->q[(s->qhead + s->qlen++) % s->qcap] = id;
  return 0;
}

static int push_front(coord_sched *s, uint64_t id) {
  int rc = queue_grow(s);
  if (rc < 0) return rc;
  s->qhead = (s->qhead + s->qcap - 1) % s->qcap;
  s->q[s->qhead] = id;
  s->qlen++;
  return 0;
}

static uint64_t queue_front(const coord_sched *s) { return s->q[s->qhead]; }

static void pop_front(coord_sched *s) {
  s->qhead = (s->qhead + 1) % s->qcap;
  s->qlen--;
}

/* Removes from the queue every task for which drop(s, t, arg) says so. */
static void queue_filter(coord_sched *s, bool (*drop)(coord_sched *s, task *t, const void *arg),
                         const void *arg) {
  int64_t kept = 0;
  for (int64_t i = 0; i < s->qlen; i++) {
    uint64_t id = s->q[(s->qhead + i) % s->qcap];
    task *t = task_get(s, id);
    if (t && drop(s, t, arg)) continue;
    s->q[(s->qhead + kept++) % s->qcap] = id;
  }
  s->qlen = kept;
}

/* ============================== dispatch ================================= */

static bool is_trainer(const coord_node *n) {
  return n->role == ROLE_WORKER || n->role == ROLE_CHIEF;
}

/* The least busy node that may take task t now, or -1; ties go
 * round-robin so that short closures spread over the workers. */
static int pick_node(coord *c, const task *t) {
  coord_sched *s = &c->sched;
  const coord_producer_ops *ops = t->kind == TK_CALL ? NULL : s->prod[t->producer].ops;
  void *ud = ops ? s->prod[t->producer].ud : NULL;
  int limit = ops ? ops->max_inflight : CALL_INFLIGHT_PER_WORKER;
  int best = -1;
  for (int k = 0; k < c->nnodes; k++) {
    int i = (s->rr + k) % c->nnodes;
    coord_node *n = &c->nodes[i];
    if (!is_trainer(n) || !c->ctl[i] || !(coord__state_flags(n->state) & NS_TASKS)) continue;
    if (n->inflight >= limit) continue;
    if (ops && ops->ready && !ops->ready(ud, i)) continue;
    if (best < 0 || n->inflight < c->nodes[best].inflight) best = i;
    if (n->inflight == 0) break; /* none is less busy: 10,000 nodes need not all be seen */
  }
  if (best >= 0) s->rr = (best + 1) % c->nnodes;
  return best;
}

static void flush_node(coord *c, int i);

/* A task with data: the frames batched for node so far, then its data as
 * a frame of its own, by reference. */
static void send_data(coord *c, int node, const task *t, uint8_t type) {
  task_buf *b = t->buf;
  flush_node(c, node); /* in order */
  if (!c->ctl[node]) return; /* gone: the retry covers it */
  b->refs++;
  if (!b->ref) {
    conn_send_ref(c->ctl[node], type, 0, b->p + WIRE_HEADER_SIZE, b->len - WIRE_HEADER_SIZE,
                  buf_unref, b);
    return;
  }
  conn_piece parts[3] = {{b->p + WIRE_HEADER_SIZE, b->split - WIRE_HEADER_SIZE},
                         {tensor_data(b->ref), (size_t)tensor_numel(b->ref) * sizeof(float)},
                         {b->p + b->split, b->len - b->split}};
  conn_send_refv(c->ctl[node], type, 0, parts, 3, buf_unref, b);
}

/* Appends task t's frame to node's batch: the tasks one dispatch sends to
 * a node go out in one write (one syscall, not one per closure). The
 * batch's first frame uses the header room wire_wr reserves. */
static void batch_task(coord *c, int node, uint64_t id, const task *t) {
  coord_sched *s = &c->sched;
  const coord_producer_ops *ops = t->kind == TK_CALL ? NULL : s->prod[t->producer].ops;
  if (ops && ops->data_type && t->buf) {
    send_data(c, node, t, ops->data_type);
    return;
  }
  static const uint8_t room[WIRE_HEADER_SIZE];
  wire_wr *w = &s->out[node];
  if (!w->buf) {
    wire_wr_init(w);
    if (!s->is_touched[node]) { /* flush_batches visits these only */
      s->is_touched[node] = true;
      s->touched[s->ntouched++] = node;
    }
  }
  size_t at = 0;
  if (w->len > WIRE_HEADER_SIZE) {
    at = w->len;
    wire_wr_raw(w, room, sizeof room);
  }
  uint8_t type;
  if (t->kind == TK_CALL) {
    wire_put_call(w, &(wire_msg_call){id, {t->data, (uint32_t)t->len}});
    type = WIRE_CALL;
  } else if (ops->put) {
    ops->put(s->prod[t->producer].ud, id, w, &type);
  } else {
    wire_put_task(w, &(wire_msg_task){.task = id, .kind = ops->task_kind});
    type = WIRE_TASK;
  }
  if (w->err) return; /* flush_batches drops it */
  wire_header h = {type, 0, 0, (uint32_t)(w->len - at - WIRE_HEADER_SIZE)};
  wire_header_encode(&h, w->buf + at);
}

static void flush_node(coord *c, int i) {
  wire_wr *w = &c->sched.out[i];
  if (!w->buf) return;
  if (w->err || !c->ctl[i]) {
    /* The node went away meanwhile (its tasks were requeued), or out of
     * memory: the coordinator's log says so and the silence timer or the
     * retry covers the tasks. */
    if (w->err) log_error("cannot send tasks to node %d: out of memory", i);
    wire_wr_free(w);
  } else {
    conn_send(c->ctl[i], w->buf, w->len);
  }
  w->buf = NULL;
  w->len = w->cap = 0;
  w->err = 0;
}

/* Only the nodes this dispatch wrote to: with 10,000 nodes a pass over
 * all of them per dispatch was most of a closure's cost. */
static void flush_batches(coord *c) {
  coord_sched *s = &c->sched;
  for (int k = 0; k < s->ntouched; k++) {
    flush_node(c, s->touched[k]);
    s->is_touched[s->touched[k]] = false;
  }
  s->ntouched = 0;
}

void coord__dispatch(coord *c) {
  coord_sched *s = &c->sched;
  if (s->dispatching) return; /* a producer's refill may come back here */
  s->later = false;
  if (!s->touched && (!(s->touched = calloc((size_t)c->node_cap, sizeof *s->touched)) ||
                      !(s->is_touched = calloc((size_t)c->node_cap, sizeof *s->is_touched)))) {
    free(s->touched); /* is_touched is NULL here */
    s->touched = NULL;
    coord__fail(c, "cannot dispatch tasks: out of memory");
    return;
  }
  if (!s->out && !(s->out = calloc((size_t)c->node_cap, sizeof *s->out))) {
    coord__fail(c, "cannot dispatch tasks: out of memory");
    return;
  }
  s->dispatching = true;
  for (int p = 0; p < s->nprod; p++)
    if (s->prod[p].ops && s->prod[p].ops->refill) s->prod[p].ops->refill(s->prod[p].ud);
  while (s->qlen > 0) {
    uint64_t id = queue_front(s);
    task *t = task_get(s, id);
    if (!t || t->state != TS_QUEUED) { /* cancelled or dropped while queued */
      pop_front(s);
      continue;
    }
    int node = pick_node(c, t);
    if (node < 0) break; /* FIFO: the head waits for a worker */
    pop_front(s);
    t->state = TS_RUNNING;
    t->owner = t->ran_on = node;
    t->runs++;
    count(s, t, -1, +1);
    c->nodes[node].inflight++; /* BUSY follows (coord_node_status) */
    batch_task(c, node, id, t);
  }
  flush_batches(c);
  s->dispatching = false;
}

/* Results arrive in bursts (one read holds many frames): the queue is
 * served once per loop iteration, after the reads, so a burst's
 * replacements share a write per node. */
static void on_check(uv_check_t *h) {
  coord *c = h->data;
  if (c->sched.later) coord__dispatch(c);
}

void coord__dispatch_later(coord *c) {
  coord_sched *s = &c->sched;
  s->later = true;
  if (s->check) return;
  if (!(s->check = malloc(sizeof *s->check))) {
    coord__dispatch(c);
    return;
  }
  uv_check_init(c->loop, s->check);
  s->check->data = c;
  uv_check_start(s->check, on_check);
  uv_unref((uv_handle_t *)s->check); /* never what keeps a loop running */
}

static void free_handle(uv_handle_t *h) { free(h); }

void coord__sched_close(coord *c) {
  if (!c->sched.check) return;
  uv_close((uv_handle_t *)c->sched.check, free_handle);
  c->sched.check = NULL;
}

/* ============================== outcomes ================================= */

/* The node gave back a task it held: one fewer in flight (at none it
 * shows READY again). */
static void node_returned(coord *c, int node) {
  coord_node *n = &c->nodes[node];
  if (n->inflight > 0) n->inflight--;
}

/* A result for task id of `kind` came from node: 1 when it completes the
 * task (the node held it), 0 when it is to be ignored. */
static int task_complete(coord *c, int node, uint64_t id, uint8_t kind) {
  coord_sched *s = &c->sched;
  task *t = task_get(s, id);
  if (!t || t->kind != kind || t->state != TS_RUNNING || t->owner != node) {
    log_info("a result for task %" PRIu64 " that node %d does not hold; ignored", id, node);
    return 0;
  }
  node_returned(c, node);
  count(s, t, 0, -1);
  t->state = TS_DONE;
  t->owner = -1;
  s->done++;
  return 1;
}

static bool cancel_queued_call(coord_sched *s, task *t, const void *arg) {
  (void)arg;
  if (t->kind != TK_CALL || t->state != TS_QUEUED) return false;
  count(s, t, -1, 0);
  free(t->data);
  t->data = NULL;
  t->len = 0;
  t->state = TS_CANCELLED;
  s->cancelled++;
  if (t->released) task_free(s, t);
  return true;
}

/* The first failure: kept for the next schedule/join/done, and the
 * closures still queued are cancelled. */
static void first_error(coord *c, uint64_t id, const char *msg) {
  coord_sched *s = &c->sched;
  if (s->error_pending) return;
  s->error_pending = true;
  s->error_id = id;
  free(s->error);
  s->error = strdup(msg);
  int64_t before = s->cancelled;
  queue_filter(s, cancel_queued_call, NULL);
  if (s->cancelled > before)
    rundir_event(&c->rd, "cancel %" PRId64 " queued closure%s after closure %" PRIu64 " failed",
                 s->cancelled - before, s->cancelled - before == 1 ? "" : "s", id);
}

static int on_call_result(coord *c, int node, const uint8_t *pl, uint32_t len) {
  wire_msg_call_result m;
  int rc = wire_get_call_result(pl, len, &m);
  if (rc < 0) return rc;
  uint64_t id = m.task;
  int32_t status = m.status;
  const uint8_t *data = m.data.p;
  uint32_t n = m.data.len;
  if (!task_complete(c, node, id, TK_CALL)) return 0;
  coord_sched *s = &c->sched;
  task *t = task_get(s, id);
  char name[32];
  coord__node_name(&c->nodes[node], name, sizeof name);
  free(t->data);
  t->data = NULL;
  t->len = 0;
  if (status != 0) {
    t->state = TS_FAILED;
    s->done--;
    s->failed++;
    /* The message says where it ran: "closure 7 failed on worker:1: ..." */
    size_t cap = (size_t)n + 64;
    char *msg = malloc(cap);
    if (msg) {
      int k = snprintf(msg, cap, "closure %" PRIu64 " failed on %s: ", id, name);
      memcpy(msg + k, data, n);
      msg[k + (int)n] = '\0';
      t->data = (uint8_t *)msg;
      t->len = (uint32_t)strlen(msg);
    }
    rundir_event(&c->rd, "closure %" PRIu64 " failed on %s", id, name);
    first_error(c, id, msg ? msg : "a closure failed (out of memory for its message)");
  } else if (n > 0 && !t->released) {
    if (!(t->data = malloc(n))) return err_set(DRV_ENOMEM, "out of memory");
    memcpy(t->data, data, n);
    t->len = n;
  }
  if (t->released) task_free(s, t);
  coord__dispatch_later(c);
  return 0;
}

static void note_retries(coord *c, int node, int64_t n, const char *what);

/* A completed task back to the front of the queue (its producer's again()). */
static int run_again(coord *c, int node, task *t, uint64_t id) {
  coord_sched *s = &c->sched;
  s->done--;
  t->state = TS_QUEUED;
  count(s, t, +1, 0);
  int rc = push_front(s, id);
  if (rc < 0) {
    coord__fail(c, "cannot requeue task %" PRIu64 ": out of memory", id);
    return rc;
  }
  s->retried++;
  note_retries(c, node, 1, s->prod[t->producer].ops->what);
  coord__dispatch_later(c);
  return 0;
}

/* RESULT of a producer's task: counted once (only the node holding the
 * task completes it), then the producer's unless it let the task go. */
static int on_result(coord *c, int node, uint8_t type, const uint8_t *pl, uint32_t len) {
  coord_sched *s = &c->sched;
  /* the id is the queue's; the rest, the producer's */
  uint64_t id;
  int rc;
  if (type == WIRE_PREDICT_RESULT) {
    wire_msg_predict_result m;
    rc = wire_get_predict_result(pl, len, &m);
    id = m.task;
  } else {
    wire_msg_result m;
    rc = wire_get_result(pl, len, &m);
    id = m.task;
  }
  if (rc < 0) return rc;
  if (!task_complete(c, node, id, TK_PRODUCED)) return 0;
  task *t = task_get(s, id);
  int p = t->producer;
  bool released = t->released;
  const coord_producer_ops *ops = s->prod[p].ops;
  if (!released && ops && ops->again && ops->again(s->prod[p].ud, node, id, pl, len))
    return run_again(c, node, t, id);
  task_free(s, t);
  if (!released && s->prod[p].ops) rc = s->prod[p].ops->done(s->prod[p].ud, node, id, pl, len);
  coord__dispatch_later(c);
  return rc;
}

int coord__sched_frame(coord *c, int node, const wire_header *h, const uint8_t *pl) {
  if (h->type == WIRE_RESULT || h->type == WIRE_PREDICT_RESULT)
    return on_result(c, node, h->type, pl, h->len);
  return on_call_result(c, node, pl, h->len);
}

/* ============================== losses =================================== */

/* "retry 3 closures of worker:1", "retry 1 train step of worker:1" */
static void note_retries(coord *c, int node, int64_t n, const char *what) {
  if (!n) return;
  char name[32];
  size_t len = strlen(what);
  bool es = len > 2 && strcmp(what + len - 2, "ch") == 0; /* "fed batches" */
  rundir_event(&c->rd, "retry %" PRId64 " %s%s of %s", n, what, n == 1 ? "" : es ? "es" : "s",
               coord__node_name(&c->nodes[node], name, sizeof name));
}

void coord__sched_node_lost(coord *c, int node) {
  coord_sched *s = &c->sched;
  int64_t calls = 0, produced[COORD_MAX_PRODUCERS] = {0};
  /* Back to the front of the queue in id order: walk backwards. */
  for (int64_t i = s->n - 1; i >= 0; i--) {
    task *t = &s->t[i];
    if (t->state != TS_RUNNING || t->owner != node) continue;
    count(s, t, +1, -1);
    t->state = TS_QUEUED;
    t->owner = -1;
    if (t->kind == TK_PRODUCED && t->released) { /* its producer let it go */
      count(s, t, -1, 0);
      task_free(s, t);
      continue;
    }
    if (push_front(s, s->base + (uint64_t)i) < 0) {
      coord__fail(c, "cannot requeue task %" PRIu64 ": out of memory", s->base + (uint64_t)i);
      return;
    }
    s->retried++;
    if (t->kind == TK_CALL) calls++;
    else produced[t->producer]++;
  }
  c->nodes[node].inflight = 0;
  note_retries(c, node, calls, "closure");
  for (int p = 0; p < s->nprod; p++)
    if (s->prod[p].ops) note_retries(c, node, produced[p], s->prod[p].ops->what);
  /* The requeued tasks may be the last work: no result will come to
   * serve the queue, so it is served now (another node may be idle; the
   * restarted one is served when it takes tasks, coord__node_set_state). */
  if (calls || s->qlen) coord__dispatch_later(c);
}

/* ============================== producers ================================ */

/* A removed producer's slot is taken again once none of its tasks is
 * left (a released task still running counts against its slot when it
 * ends), so a run may fit and predict any number of times, a few at once. */
int coord__sched_add_producer(coord *c, const coord_producer_ops *ops, void *ud) {
  coord_sched *s = &c->sched;
  int p = 0;
  while (p < s->nprod && (s->prod[p].ops || s->prod[p].queued || s->prod[p].running)) p++;
  if (p == COORD_MAX_PRODUCERS)
    return err_set(DRV_ERANGE, "the task queue takes %d producers at once", COORD_MAX_PRODUCERS);
  s->prod[p].ops = ops;
  s->prod[p].ud = ud;
  if (p == s->nprod) s->nprod++;
  return p;
}

void coord__sched_remove_producer(coord *c, int p) {
  if (p < 0 || p >= c->sched.nprod || !c->sched.prod[p].ops) return;
  coord__sched_drop(c, p, true);
  c->sched.prod[p].ops = NULL;
  c->sched.prod[p].ud = NULL;
}

int64_t coord__sched_add(coord *c, int p) { return coord__sched_add_data(c, p, NULL, 0); }

int coord__sched_owner(const coord *c, int p, uint64_t id) {
  task *t = task_get((coord_sched *)&c->sched, id);
  return t && t->kind == TK_PRODUCED && t->producer == p && t->state == TS_RUNNING ? t->owner : -1;
}

int64_t coord__sched_add_data(coord *c, int p, uint8_t *data, uint32_t len) {
  return coord__sched_add_block(c, p, data, len, 0);
}

int64_t coord__sched_add_block(coord *c, int p, uint8_t *data, uint32_t len, size_t block) {
  return coord__sched_add_ref(c, p, data, len, block, NULL, 0);
}

int64_t coord__sched_add_ref(coord *c, int p, uint8_t *data, uint32_t len, size_t block,
                             tensor *ref, uint32_t split) {
  coord_sched *s = &c->sched;
  task_buf *b = NULL;
  bool bad = len < WIRE_HEADER_SIZE || (ref && (split < WIRE_HEADER_SIZE || split > len));
  if (data && (bad || !(b = malloc(sizeof *b)))) {
    if (block) blockcache_give(data, block);
    else free(data);
    tensor_free(ref);
    return err_set(bad ? DRV_EINVAL : DRV_ENOMEM, "a task's data: %s",
                   bad ? "no header room, or a split outside it" : "out of memory");
  }
  if (!data) tensor_free(ref), ref = NULL;
  if (b) *b = (task_buf){1, len, data, block, ref, split};
  int64_t id = task_new(s, TK_PRODUCED, NULL, 0);
  if (id < 0) {
    buf_unref(b);
    return id;
  }
  task_get(s, (uint64_t)id)->buf = b;
  task *t = task_get(s, (uint64_t)id);
  t->producer = (uint8_t)p;
  int rc = push_back(s, (uint64_t)id);
  if (rc < 0) {
    task_free(s, t);
    return rc;
  }
  count(s, t, +1, 0);
  return id;
}

/* arg: the producer whose tasks go */
static bool drop_queued(coord_sched *s, task *t, const void *arg) {
  if (t->kind != TK_PRODUCED || t->producer != *(const int *)arg) return false;
  count(s, t, -1, 0);
  task_free(s, t);
  return true;
}

void coord__sched_drop(coord *c, int p, bool all) {
  coord_sched *s = &c->sched;
  queue_filter(s, drop_queued, &p);
  if (!all) return;
  for (int64_t i = 0; i < s->n; i++) { /* still running: freed when they end */
    task *t = &s->t[i];
    if (t->kind == TK_PRODUCED && t->producer == p && t->state == TS_RUNNING) t->released = true;
  }
}

int64_t coord__sched_queued(const coord *c, int p) { return c->sched.prod[p].queued; }
int64_t coord__sched_running(const coord *c, int p) { return c->sched.prod[p].running; }

/* ============================== the public side ========================== */

static int pending_error(coord *c) {
  coord_sched *s = &c->sched;
  if (!s->error_pending) return 0;
  s->error_pending = false; /* raised once, as TensorFlow does */
  return err_set(DRV_ECLOSURE, "%s", s->error ? s->error : "a closure failed");
}

static int cluster_state(coord *c) {
  if (c->failures) return err_set(DRV_ENODE, "%s", c->failure);
  if (c->shut_down || c->shutting_down) return err_set(DRV_EINVAL, "the cluster was shut down");
  return 0;
}

static bool queue_has_room(coord *c, void *arg) {
  (void)arg;
  return c->sched.calls_queued < c->opts.max_queue || c->sched.error_pending;
}

int64_t coord_schedule(coord *c, const void *closure, size_t n) {
  coord_sched *s = &c->sched;
  int rc;
  if ((rc = cluster_state(c)) < 0 || (rc = pending_error(c)) < 0) return rc;
  if (n > UINT32_MAX) return err_set(DRV_ERANGE, "a closure of %zu bytes", n);
  if (!queue_has_room(c, NULL)) {
    coord__dispatch(c);
    if ((rc = coord__pump(c, queue_has_room, NULL, 0, true)) < 0) return rc;
    if ((rc = pending_error(c)) < 0) return rc;
  }
  uint8_t *copy = malloc(n ? n : 1);
  if (!copy) return err_set(DRV_ENOMEM, "out of memory");
  memcpy(copy, closure, n);
  int64_t id = task_new(s, TK_CALL, copy, (uint32_t)n);
  if (id < 0) {
    free(copy);
    return id;
  }
  task *t = task_get(s, (uint64_t)id);
  if ((rc = push_back(s, (uint64_t)id)) < 0) {
    task_free(s, t);
    return rc;
  }
  count(s, t, +1, 0);
  s->scheduled++;
  coord__dispatch(c);
  /* Let results in now and then, so a long loop of schedule calls keeps
   * the workers fed without waiting for the queue to fill. */
  if ((s->scheduled & 31) == 0) uv_run(c->loop, UV_RUN_NOWAIT);
  return id;
}

static bool call_over(coord *c, void *arg) {
  task *t = task_get(&c->sched, *(uint64_t *)arg);
  return !t || over(t);
}

int coord_fetch(coord *c, int64_t id, const uint8_t **res, size_t *n) {
  coord_sched *s = &c->sched;
  uint64_t uid = (uint64_t)id;
  task *t = task_get(s, uid);
  if (!t || t->kind != TK_CALL) return err_set(DRV_EINVAL, "no closure %" PRId64, id);
  if (!over(t)) {
    coord__dispatch(c);
    int rc = coord__pump(c, call_over, &uid, 0, true);
    if (rc < 0) return rc;
    t = task_get(s, uid);
  }
  switch (t->state) {
  case TS_DONE:
    *res = t->data;
    *n = t->len;
    return 0;
  case TS_FAILED:
    return err_set(DRV_ECLOSURE, "%s", t->data ? (const char *)t->data : "the closure failed");
  default:
    return err_set(DRV_ECANCELLED,
                   "closure %" PRId64 " was cancelled: closure %" PRIu64
                   " failed before it could run", id, s->error_id);
  }
}

static bool calls_over(coord *c, void *arg) {
  (void)arg;
  coord_sched *s = &c->sched;
  return s->error_pending || (s->calls_queued == 0 && s->calls_running == 0);
}

int coord_join(coord *c) {
  int rc = cluster_state(c);
  if (rc < 0) return rc;
  coord__dispatch(c);
  if ((rc = coord__pump(c, calls_over, NULL, 0, true)) < 0) return rc;
  return pending_error(c);
}

int coord_done(coord *c) {
  int rc = cluster_state(c);
  if (rc < 0) return rc;
  uv_run(c->loop, UV_RUN_NOWAIT);
  if ((rc = pending_error(c)) < 0) return rc;
  return c->sched.calls_queued == 0 && c->sched.calls_running == 0;
}

void coord_release(coord *c, int64_t id) {
  task *t = task_get(&c->sched, (uint64_t)id);
  if (!t || t->kind != TK_CALL) return;
  t->released = true;
  if (over(t)) task_free(&c->sched, t);
}

const char *coord_call_state(coord *c, int64_t id) {
  static const char *const names[] = {"queued", "running", "done", "failed", "cancelled"};
  task *t = task_get(&c->sched, (uint64_t)id);
  return t && t->state < TS_FREE ? names[t->state] : "unknown";
}

const char *coord_call_info(coord *c, int64_t id, int *runs, int *node) {
  task *t = task_get(&c->sched, (uint64_t)id);
  *runs = t ? (int)t->runs : 0;
  *node = t ? t->ran_on : -1;
  return coord_call_state(c, id);
}

void coord_queue_stats(const coord *c, coord_queue *q) {
  const coord_sched *s = &c->sched;
  *q = (coord_queue){.queued = s->queued,
                     .capacity = c->opts.max_queue,
                     .running = s->running,
                     .done = s->done,
                     .failed = s->failed,
                     .retried = s->retried,
                     .cancelled = s->cancelled};
}

void coord__sched_free(coord *c) {
  coord_sched *s = &c->sched;
  for (int64_t i = 0; i < s->n; i++) {
    free(s->t[i].data);
    buf_unref(s->t[i].buf);
  }
  free(s->t);
  free(s->q);
  free(s->error);
  for (int i = 0; s->out && i < c->nnodes; i++) wire_wr_free(&s->out[i]);
  free(s->out);
  free(s->touched);
  free(s->is_touched);
  memset(s, 0, sizeof *s);
}
