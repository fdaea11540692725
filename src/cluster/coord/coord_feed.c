/* coord_feed.c - feed mode: the coordinator streams batches from a source
 * (a dataset, a Lua function, a stream of lines) to the workers' input
 * queues, as tasks of the queue's producer interface (coord_int.h).
 *
 * Backpressure is by credit: a worker holds at most FEED_WINDOW fed
 * batches (the producer's max_inflight); each RESULT gives one back, so a
 * slow worker simply gets fewer, and the coordinator reads the source only
 * while the queue holds less than one more batch per worker. The source is
 * read between two turns of the loop (coord__feed_tick), never from a
 * libuv callback: a Lua function may run there.
 *
 * Each batch is a task that carries its FEED_BATCH payload (encoded once,
 * its task id written in once queued; the queue sends it by reference,
 * without a copy, as often as it is sent), so the queue's rules hold for
 * it: a lost worker's batches go back to the front of the queue
 * and to another worker, and a batch counts once, from the RESULT of the
 * worker that holds it.
 *
 * feed_timeout is time without progress: a batch read or trained. When it
 * runs out, the fit fails naming the worker holding the oldest batch, or,
 * when none is out, the source and the workers waiting for it.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/blockcache.h"
#include "cluster/coord/coord_fit_int.h"
#include "base/err.h"
#include "base/le.h"
#include "base/log.h"
#include "proto/wire_msgs.h"

/* ============================== built-in source: a dataset ============== */

typedef struct ds_source {
  data_iter it;
  int64_t epochs;
  uint32_t epoch;
} ds_source;

static int ds_next(void *ud, tensor **x, tensor **y, uint32_t *epoch) {
  ds_source *s = ud;
  const tensor *bx, *by; /* the iterator's own: lent, not copied */
  int rc = data_iter_next(&s->it, &bx, &by);
  if (rc == 0) {
    if ((int64_t)s->epoch >= s->epochs) return 0;
    data_iter_reset(&s->it);
    s->epoch++;
    rc = data_iter_next(&s->it, &bx, &by);
  }
  if (rc <= 0) return rc;
  *x = (tensor *)bx;
  *y = (tensor *)by;
  *epoch = s->epoch;
  return 1;
}

static const nn_sparse *ds_sparse(void *ud, uint64_t *bound) {
  ds_source *s = ud;
  *bound = s->it.d->sp.bound;
  return data_iter_sparse(&s->it);
}

int coord_feed_source_dataset(coord_feed_source *s, const dataset *d, int64_t batch,
                              int64_t epochs, bool shuffle, uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
  ds_source *ds = calloc(1, sizeof *ds);
  if (!ds) return err_set(DRV_ENOMEM, "out of memory");
  int rc = data_iter_init(&ds->it, d, batch, shuffle, seed);
  if (rc < 0) {
    free(ds);
    return rc;
  }
  ds->it.views = true; /* in order: a batch is a view of the rows, no gather */
  s->share_x = true;    /* a shuffled batch held by a task makes tensor_resize
                           give the iterator a new block for the next one */
  ds->epochs = epochs;
  ds->epoch = 1;
  s->next = ds_next;
  s->sparse = data_has_sparse(d) ? ds_sparse : NULL;
  s->ud = ds;
  int64_t per = (d->n + batch - 1) / batch;
  if (__builtin_mul_overflow(per, epochs, &s->batches)) s->batches = 0;
  return 0;
}

void coord_feed_source_free(coord_feed_source *s) {
  if (!s || s->next != ds_next) return;
  ds_source *ds = s->ud;
  data_iter_free(&ds->it);
  free(ds);
  s->ud = NULL;
  s->next = NULL;
}

/* ============================== the producer ============================ */

/* A fed batch's RESULT (counted once by the queue): trained, then the
 * fit's accounting of a train step. */
static int feed_done(void *ud, int node, uint64_t id, const uint8_t *pl, uint32_t len) {
  coord_fit_state *f = ud;
  wire_msg_result m;
  char msg[512], name[32];
  int rc = wire_get_result(pl, len, &m);
  if (rc == 0) rc = wire_str_copy(m.message, msg, sizeof msg);
  if (rc < 0) return rc;
  if (m.status != 0 && f->cfg) {
    /* A failure of the batch itself (a lost ps is feed_again's): a fit
     * that would go on without it would not have trained every batch
     * once, so it fails. */
    coord__fail_fit(f, "%s: fed batch failed: %s",
                    coord__node_name(&f->c->nodes[node], name, sizeof name), msg);
    return 0;
  }
  if (m.status == 0) coord__feed_trained(f, node, id);
  return coord__step_done(ud, node, id, pl, len);
}

/* A fed batch that failed because a ps went away under it (lost, or the
 * worker's link to it broke) is fed again, as the shard mode runs such a
 * train step again: back to the front of the queue, to the first trainer
 * ready once the ps is back (feed_ready waits out the rollback). */
static bool feed_again(void *ud, int node, uint64_t id, const uint8_t *pl, uint32_t len) {
  coord_fit_state *f = ud;
  wire_msg_result m;
  char msg[1024], name[32];
  if (!f->cfg || wire_get_result(pl, len, &m) < 0 || m.status == 0 ||
      wire_str_copy(m.message, msg, sizeof msg) < 0)
    return false;
  if (!(f->ck.restoring || strstr(msg, "ps:")) || !coord__fit_running(f->c)) return false;
  log_warn("%s: fed batch (task %" PRIu64 ") lost with a ps, fed again: %s",
           coord__node_name(&f->c->nodes[node], name, sizeof name), id, msg);
  return true;
}

/* A fit's batches go to trainers set up for it; c:feed's to any trainer
 * that takes tasks (its scheduled functions read them). */
static bool feed_ready(void *ud, int node) {
  coord_fit_state *f = ud;
  if (!f->feed.src) return false;
  return f->feed.mode == WIRE_FEED_QUEUE ? !f->ck.restoring : coord__fit_ready(ud, node);
}

const coord_producer_ops coord__feed_tasks = {
    .what = "fed batch",
    .task_kind = 0,
    .max_inflight = FEED_WINDOW,
    .ready = feed_ready,
    .refill = NULL, /* the source is read between turns (coord__feed_tick) */
    .done = feed_done,
    .again = feed_again,
    .data_type = WIRE_FEED_BATCH,
};

static int slot_add(coord_feed_state *fd, uint64_t id, uint64_t seq, int feeder) {
  if (fd->nslots == fd->capslots) {
    int cap = fd->capslots ? 2 * fd->capslots : 32;
    feed_slot *ns = realloc(fd->slots, (size_t)cap * sizeof *ns);
    if (!ns) return err_set(DRV_ENOMEM, "out of memory");
    fd->slots = ns;
    fd->capslots = cap;
  }
  fd->slots[fd->nslots++] = (feed_slot){id, seq, feeder};
  return 0;
}

void coord__feed_trained(coord_fit_state *f, int node, uint64_t id) {
  coord_feed_state *fd = &f->feed;
  (void)node;
  for (int i = 0; i < fd->nslots; i++) {
    if (fd->slots[i].id != id) continue;
    int feeder = fd->slots[i].feeder;
    memmove(&fd->slots[i], &fd->slots[i + 1], (size_t)(fd->nslots - i - 1) * sizeof *fd->slots);
    fd->nslots--;
    fd->trained++;
    fd->last_progress = progress_now();
    if (feeder >= 0) coord__feeder_trained(f, feeder);
    return;
  }
}

/* The task's id into its payload, and the feed's counters: a batch queued. */
static int queued(coord_feed_state *fd, uint8_t *buf, int64_t id, uint32_t epoch) {
  if (id < 0) return (int)id;
  le_put(buf + WIRE_HEADER_SIZE, (uint64_t)id, 8); /* the payload's first field: the task */
  fd->seq++;
  fd->epoch = epoch;
  fd->last_progress = progress_now();
  return slot_add(fd, (uint64_t)id, fd->seq, -1);
}

/* A batch whose x the task keeps by a view (source.share_x): the frame's
 * fields and y are encoded, x's bytes go out from the rows themselves
 * (coord__sched_add_ref): the coordinator copies none of them. */
static int queue_shared(coord_fit_state *f, const tensor *x, const tensor *y, uint32_t epoch,
                        wire_bytes sp) {
  coord_feed_state *fd = &f->feed;
  wire_tensor xs = {.ndim = x->ndim}; /* the shape only: the data follows by reference */
  memcpy(xs.shape, x->shape, sizeof xs.shape);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_feed_batch(&w, &(wire_msg_feed_batch){.task = 0, .seq = fd->seq + 1, .epoch = epoch,
                                                 .mode = fd->mode, .x = xs, .y = {.t = y},
                                                 .sparse = sp});
  /* x's bytes go in before y and the ids */
  size_t tail = 1 + 8 * (size_t)y->ndim + (size_t)tensor_numel(y) * sizeof(float) + 4 + sp.len;
  size_t xbytes = (size_t)tensor_numel(x) * sizeof(float);
  tensor *hold = w.err || w.len < WIRE_HEADER_SIZE + tail || w.len > UINT32_MAX - xbytes
                     ? NULL : tensor_view(x);
  if (!hold) {
    wire_wr_free(&w);
    return err_set(DRV_ENOMEM, "feed: cannot encode batch %" PRIu64, fd->seq + 1);
  }
  uint8_t *buf = w.buf;
  int64_t id = coord__sched_add_ref(f->c, fd->producer, buf, (uint32_t)w.len, 0, hold,
                                    (uint32_t)(w.len - tail));
  return queued(fd, buf, id, epoch);
}

/* The ids of the batch the source gave last, encoded (*len 0: none). */
static int batch_ids(const coord_feed_state *fd, uint8_t **out, size_t *len) {
  *out = NULL;
  *len = 0;
  if (!fd->src->sparse) return 0;
  uint64_t bound = 0;
  const nn_sparse *sp = fd->src->sparse(fd->src->ud, &bound);
  int rc = data_sparse_batch_encode(sp, bound, out, len);
  if (rc < 0) return err_set(rc, "feed: batch %" PRIu64 "'s ids: %s", fd->seq + 1, err_msg());
  return 0;
}

/* A batch encoded whole into a cached block of its size (blockcache.h):
 * encoding into a fresh buffer each batch cost page faults and clears. */
static int queue_copied(coord_fit_state *f, const tensor *x, const tensor *y, uint32_t epoch,
                        wire_bytes sp) {
  coord_feed_state *fd = &f->feed;
  size_t block = 0, need = 0;
  wire_wr w = {0};
  if (!__builtin_mul_overflow((size_t)tensor_numel(x) + (size_t)tensor_numel(y), sizeof(float), &need) &&
      need <= SIZE_MAX - 4096 - sp.len &&
      (w.buf = blockcache_alloc(need + sp.len + 4096, &block))) {
    w.cap = block;
    w.len = WIRE_HEADER_SIZE;
  } else {
    block = 0;
    wire_wr_init(&w);
  }
  wire_put_feed_batch(&w, &(wire_msg_feed_batch){.task = 0,
                                                 .seq = fd->seq + 1,
                                                 .epoch = epoch,
                                                 .mode = fd->mode,
                                                 .x = {.t = x},
                                                 .y = {.t = y},
                                                 .sparse = sp});
  if (w.err || w.len > UINT32_MAX) {
    if (block && w.cap == block) blockcache_give(w.buf, block), w.buf = NULL;
    wire_wr_free(&w);
    return err_set(DRV_ENOMEM, "feed: cannot encode batch %" PRIu64, fd->seq + 1);
  }
  uint8_t *buf = w.buf;
  if (w.cap != block) block = 0; /* it grew (a realloc): malloc'ed now */
  int64_t id = coord__sched_add_block(f->c, fd->producer, buf, (uint32_t)w.len, block);
  return queued(fd, buf, id, epoch);
}

/* Queues one batch as a task carrying its FEED_BATCH payload (x, y and,
 * when the source has them, its ids). */
static int queue_batch(coord_fit_state *f, tensor *x, tensor *y, uint32_t epoch) {
  coord_feed_state *fd = &f->feed;
  char a[64], b[64];
  if (x->ndim < 2 || y->ndim < 1 || y->ndim > 2 || x->shape[0] != y->shape[0] || x->shape[0] < 1)
    return err_set(DRV_ESHAPE, "feed: batch %" PRIu64 " has x %s and y %s (x must be [n, ...], "
                   "y [n] or [n, k], n >= 1)", fd->seq + 1, tensor_shape_str(x, a, sizeof a),
                   tensor_shape_str(y, b, sizeof b));
  uint8_t *ids;
  size_t idlen;
  int rc = batch_ids(fd, &ids, &idlen);
  if (rc == 0 && idlen > UINT32_MAX / 2)
    rc = err_set(DRV_ERANGE, "feed: batch %" PRIu64 "'s ids are too large to send", fd->seq + 1);
  wire_bytes sp = {ids, (uint32_t)idlen};
  if (rc == 0 && LE_HOST && fd->src->share_x && tensor_is_contiguous(x))
    rc = queue_shared(f, x, y, epoch, sp);
  else if (rc == 0)
    rc = queue_copied(f, x, y, epoch, sp);
  free(ids);
  return rc;
}

int coord__feed_queue_raw(coord_fit_state *f, uint8_t *buf, uint32_t len, int feeder) {
  coord_feed_state *fd = &f->feed;
  int64_t id = coord__sched_add_data(f->c, fd->producer, buf, len);
  if (id < 0) return (int)id;
  le_put(buf + WIRE_HEADER_SIZE, (uint64_t)id, 8); /* the payload's first field: the task */
  fd->seq++;
  fd->last_progress = progress_now();
  return slot_add(fd, (uint64_t)id, fd->seq, feeder);
}

int coord__feed_check_ids(const wire_msg_feed_batch *m) {
  data_sparse s;
  char what[64];
  snprintf(what, sizeof what, "FEED_BATCH %" PRIu64 "'s ids", m->seq);
  int rc = data_sparse_batch_decode(&s, m->x.shape[0], m->sparse.p, m->sparse.len, what);
  data_sparse_free(&s);
  return rc;
}

/* ============================== the fit's side ========================== */

static void poll_cb(uv_poll_t *h, int status, int events) {
  (void)h, (void)status, (void)events; /* waking the loop is all it is for */
}

static void poll_closed(uv_handle_t *h) { free(h); }

static void poll_stop(coord_feed_state *fd) {
  if (!fd->poll) return;
  uv_close((uv_handle_t *)fd->poll, poll_closed);
  fd->poll = NULL;
}

int coord__feed_begin(coord_fit_state *f, const coord_feed_source *src, uint8_t mode) {
  coord_feed_state *fd = &f->feed;
  coord *c = f->c;
  if (src->external && mode != WIRE_FEED_TRAIN)
    return err_set(DRV_EINVAL, "cluster: feed = \"external\" feeds a fit");
  free(fd->slots);
  free(fd->trainers);
  int producer = fd->producer;
  struct coord_feeders *ext = fd->ext;
  memset(fd, 0, sizeof *fd);
  fd->producer = producer;
  fd->ext = ext;
  fd->mode = mode;
  if (!(fd->trainers = calloc((size_t)c->node_cap, sizeof *fd->trainers)))
    return err_set(DRV_ENOMEM, "out of memory");
  for (int i = 0; i < c->nnodes; i++) {
    if (coord__scaled_away(&c->nodes[i])) continue;
    if (c->nodes[i].role == ROLE_WORKER || c->nodes[i].role == ROLE_CHIEF) fd->trainers[fd->ntrainers++] = i;
  }
  fd->src = src;
  fd->last_progress = fd->rate_t = progress_now();
  if (src->external) {
    coord__feeders_begin(f);
    rundir_event(&c->rd, "feed: waiting for external feeders (FEED_OPEN on the control port %d)",
                 c->port);
  }
  if (src->fd >= 0 && (fd->poll = malloc(sizeof *fd->poll))) {
    /* a pipe or a socket wakes the loop; a regular file cannot be polled
     * (EPERM): it is read at the tick */
    if (uv_poll_init(f->c->loop, fd->poll, src->fd) == 0) {
      fd->poll->data = f;
      uv_poll_start(fd->poll, UV_READABLE, poll_cb);
    } else {
      free(fd->poll);
      fd->poll = NULL;
    }
  }
  return 0;
}

void coord__feed_relist(coord_fit_state *f) {
  coord_feed_state *fd = &f->feed;
  if (!fd->trainers) return;
  for (int t = 0; t < f->ntrainers; t++) fd->trainers[t] = f->trainers[t];
  fd->ntrainers = f->ntrainers;
}

/* Batches to read now: one more per trainer than they hold. */
static bool wants_more(const coord_fit_state *f) {
  const coord_feed_state *fd = &f->feed;
  if (fd->ended || fd->terminated || fd->src->external) return false;
  int64_t max = f->cfg && f->cfg->max_steps > 0 ? f->cfg->max_steps : 0;
  if (max > 0 && (int64_t)fd->seq >= max) return false;
  return coord__sched_queued(f->c, fd->producer) < (int64_t)fd->ntrainers;
}

/* "worker:1 (holds batch 7)", or the trainers waiting for a batch. */
static void who_waits(coord_fit_state *f, char *buf, size_t n) {
  coord_feed_state *fd = &f->feed;
  char name[32];
  for (int i = 0; i < fd->nslots; i++) {
    int node = coord__sched_owner(f->c, fd->producer, fd->slots[i].id);
    if (node < 0) continue;
    snprintf(buf, n, "waited for %s, which holds batch %" PRIu64 " and sent no result",
             coord__node_name(&f->c->nodes[node], name, sizeof name), fd->slots[i].seq);
    return;
  }
  if (fd->src->external && coord__feeders_direct_who(f, buf, n)) return;
  if (fd->src->external) {
    snprintf(buf, n, "no batch from an external feeder (feed = \"external\": FEED_OPEN on the "
                     "control port)");
    return;
  }
  size_t len = (size_t)snprintf(buf, n, "the feed gave no batch; waiting for one:");
  for (int t = 0; t < fd->ntrainers && len < n; t++)
    len += (size_t)snprintf(buf + len, n - len, " %s",
                            coord__node_name(&f->c->nodes[fd->trainers[t]], name, sizeof name));
}

static void sample_rate(coord_feed_state *fd, double now) {
  if (now - fd->rate_t < 1.0) return;
  fd->rate = (double)(fd->trained - fd->rate_n) / (now - fd->rate_t);
  fd->rate_t = now;
  fd->rate_n = fd->trained;
}

int coord__feed_tick(coord_fit_state *f) {
  coord_feed_state *fd = &f->feed;
  if (!fd->src) return 0;
  if (fd->src->external) {
    bool over;
    coord__feeders_tick(f);
    int rc = coord__feeders_check(f, &over);
    if (rc < 0) return rc;
    if (over && !fd->ended) {
      fd->ended = true;
      rundir_event(&f->c->rd, "feed: every feeder ended after %" PRIu64 " batches", fd->seq);
    }
  }
  while (wants_more(f)) {
    tensor *x = NULL, *y = NULL;
    uint32_t epoch = 1;
    int rc = fd->src->next(fd->src->ud, &x, &y, &epoch);
    if (rc == DRV_EAGAIN) break;
    if (rc == 0) {
      fd->ended = true;
      rundir_event(&f->c->rd, "feed: the source ended after %" PRIu64 " batches", fd->seq);
      break;
    }
    if (rc < 0) return err_set(rc, "feed: %s", err_msg());
    if (fd->mode == WIRE_FEED_TRAIN && coord__feed_ckpt_skip(f, fd->seq + 1)) {
      fd->seq++; /* `--resume`: trained before the checkpoint */
      fd->epoch = epoch;
      if (++f->feed_rs.skipped == 1 || fd->seq == f->feed_rs.skip)
        rundir_event(&f->c->rd, "feed: passing over batch %" PRIu64 " of %" PRIu64 ", trained "
                     "before the checkpoint", fd->seq, f->feed_rs.skip);
      continue;
    }
    if ((rc = queue_batch(f, x, y, epoch)) < 0) return rc; /* x, y: the source's */
  }
  double now = progress_now();
  sample_rate(fd, now);
  if (fd->src->timeout > 0 && now - fd->last_progress > fd->src->timeout && !coord__feed_over(f)) {
    char why[512];
    who_waits(f, why, sizeof why);
    rundir_event(&f->c->rd, "feed_timeout: no progress for %g s; %s", fd->src->timeout, why);
    return err_set(DRV_ETIMEDOUT, "feed_timeout: no progress for %g s (%" PRIu64 " batches read, "
                   "%" PRId64 " trained); %s", fd->src->timeout, fd->seq, fd->trained, why);
  }
  return 0;
}

bool coord__feed_over(const coord_fit_state *f) {
  const coord_feed_state *fd = &f->feed;
  int64_t max = f->cfg && f->cfg->max_steps > 0 ? f->cfg->max_steps : 0;
  if (fd->terminated) return true; /* what others hold was let go */
  if (fd->src && fd->src->external && coord__feeders_direct_pending(f)) return false;
  bool read_all = fd->ended || (max > 0 && (int64_t)fd->seq >= max);
  return read_all && coord__sched_queued(f->c, fd->producer) == 0 &&
         coord__sched_running(f->c, fd->producer) == 0;
}

void coord__feed_worker_end(coord_fit_state *f, int node) {
  coord_feed_state *fd = &f->feed;
  if (!fd->src || fd->terminated) return;
  char name[32];
  fd->terminated = true;
  /* the feed stops for everyone: queued batches go unread, and those other
   * workers hold are let go (their results ignored) */
  coord__sched_drop(f->c, fd->producer, true);
  fd->nslots = 0;
  rundir_event(&f->c->rd, "feed: %s terminated the feed after %" PRIu64 " batches",
               coord__node_name(&f->c->nodes[node], name, sizeof name), fd->seq);
}

void coord__feed_end(coord_fit_state *f, int rc) {
  coord_feed_state *fd = &f->feed;
  if (!fd->src) return;
  poll_stop(fd);
  if (fd->src->external) {
    coord__feeders_summary(f);
    coord__feeders_end(f, rc);
  }
  for (int t = 0; t < fd->ntrainers; t++) {
    wire_wr w;
    wire_wr_init(&w);
    wire_put_feed_end(&w, &(wire_msg_feed_end){.status = 0, .batches = fd->seq,
                                               .message = WIRE_STR("")});
    coord__send(f->c, fd->trainers[t], &w, WIRE_FEED_END, 0);
  }
  if (f->feed_rs.skipped)
    rundir_event(&f->c->rd, "feed: %" PRId64 " batches passed over (trained before the checkpoint)",
                 f->feed_rs.skipped);
  rundir_event(&f->c->rd, "feed: %" PRId64 " batches trained of %" PRIu64 " read", fd->trained,
               fd->seq - (uint64_t)f->feed_rs.skipped);
  free(f->feed_rs.redo);
  memset(&f->feed_rs, 0, sizeof f->feed_rs); /* for this fit only */
  fd->src = NULL;
  fd->nslots = 0;
}

void coord__feed_free(coord_fit_state *f) {
  poll_stop(&f->feed);
  coord__feed_ckpt_clear(f);
  free(f->feed_rs.redo);
  f->feed_rs.redo = NULL;
  coord__feeders_free(f);
  free(f->feed.slots);
  free(f->feed.trainers);
  f->feed.trainers = NULL;
  f->feed.slots = NULL;
}

void coord_feed_counts(const coord *c, int64_t *fed, int64_t *trained) {
  const coord_fit_state *f = c->fit;
  *fed = f ? (int64_t)f->feed.seq : 0;
  *trained = f ? f->feed.trained : 0;
}

int coord_feed_backlog(const coord *c, int i) {
  const coord_fit_state *f = c->fit;
  if (!f || !f->feed.src || i < 0 || i >= c->nnodes) return -1;
  int n = 0; /* the batches it holds: few (FEED_WINDOW per trainer, one queued each) */
  for (int k = 0; k < f->feed.nslots; k++)
    n += coord__sched_owner(c, f->feed.producer, f->feed.slots[k].id) == i;
  return n;
}

/* ============================== c:feed ================================== */

static bool turn_done(coord *c, void *arg) {
  (void)c;
  return *(int *)arg > 0 ? true : (++*(int *)arg, false);
}

int coord_feed(coord *c, const coord_feed_source *src, int64_t *fed, int64_t *taken) {
  *fed = *taken = 0;
  if (c->shut_down || c->shutting_down) return err_set(DRV_EINVAL, "cluster: it was shut down");
  if (c->failures) return err_set(DRV_ENODE, "cluster: %s", c->failure);
  coord_fit_state *f = coord__fit_state(c);
  if (!f) return err_set(DRV_ENOMEM, "out of memory");
  if (f->cfg || f->feed.src) return err_set(DRV_EINVAL, "cluster: a fit or a feed is running");
  int rc = coord__feed_begin(f, src, WIRE_FEED_QUEUE);
  if (rc < 0) return rc;
  rundir_event(&c->rd, "feed: to the input queues of %d workers", f->feed.ntrainers);
  while (rc == 0 && !coord__feed_over(f)) {
    if (c->sched.error_pending) { /* a scheduled function failed: nobody may read */
      rc = err_set(DRV_ECLOSURE, "feed stopped: %s", c->sched.error ? c->sched.error : "a closure failed");
      break;
    }
    if ((rc = coord__feed_tick(f)) < 0) break;
    coord__dispatch(c);
    int turn = 0;
    rc = coord__pump(c, turn_done, &turn, 0, true);
  }
  coord__sched_drop(c, f->feed.producer, true);
  *fed = (int64_t)f->feed.seq;
  *taken = f->feed.trained;
  coord__feed_end(f, rc);
  return rc;
}
