/* worker_pos.c - a worker's data position: what a cluster checkpoint
 * records of each worker and chief, and the rollback to it (ps failover,
 * `drover run --resume`).
 *
 * A position is the batches drawn since SETUP and the model's Dropout
 * generators, just before a batch is drawn. A sync checkpoint is of one
 * version of the parameters; the position that goes with it is the one
 * before the first batch the worker computed on values of that version or
 * later: every batch before it had its gradient in an earlier version (or
 * dropped as late), none after. So the worker remembers where it stood
 * before each of its last WPOS_RING batches, with the version each was
 * computed on, and answers from there, or waits for that batch. An async
 * checkpoint has no such point: it is asked for "now" (between two
 * batches).
 *
 * Everything here runs on the loop thread while no batch is on the thread
 * pool (go_compute records before queueing the work; the idle hook runs
 * after it), so the iterator and the generators are never read while a
 * compute changes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/le.h"
#include "base/log.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker_int.h"

#define RNG_BYTES 32 /* xoshiro256**: four u64, little-endian */

int worker__rngs(nn_module *m, rng_t **out, int max) {
  int n = 0;
  if (strcmp(m->ops->type, "Dropout") == 0 && n < max) out[n++] = &m->rng;
  for (int i = 0; i < m->nchildren && n < max; i++)
    n += worker__rngs(m->children[i], out + n, max - n);
  return n;
}

/* Where the data stands now into *p (version left to the caller). */
static void pos_now(worker *w, wpos *p) {
  rng_t *r[WPOS_MAX_RNG];
  p->batches = w->batches;
  p->nrng = w->st ? worker__rngs(w->st->model, r, WPOS_MAX_RNG) : 0;
  for (int i = 0; i < p->nrng; i++) p->rng[i] = *r[i];
}

static void send_pos(worker *w, uint32_t req, int status, const wpos *p, const char *msg) {
  uint8_t bytes[WPOS_MAX_RNG * RNG_BYTES];
  int nrng = p ? p->nrng : 0;
  for (int i = 0; i < nrng; i++)
    for (int k = 0; k < 4; k++) le_put(bytes + i * RNG_BYTES + 8 * k, p->rng[i].s[k], 8);
  wire_wr m;
  wire_wr_init(&m);
  wire_put_position_ok(&m, &(wire_msg_position_ok){status, p ? p->batches : 0, p ? p->version : 0,
                                                   {bytes, (uint32_t)(nrng * RNG_BYTES)},
                                                   WIRE_STR(msg)});
  w->send(w->ud, &m, WIRE_POSITION_OK, req);
}

/* The version of the values j computes on: its links' (sync: every ps
 * is at the same version). */
static uint64_t version_of(const worker *w, const job *j) {
  const wstate *st = j->st;
  uint64_t v = 0;
  for (int k = 0; k < w->nlinks; k++)
    if (worker__involves(w, st, k) && w->links[k] && w->links[k]->version > v)
      v = w->links[k]->version;
  return v;
}

/* A POSITION waiting for p's version is answered. */
static void pos_check(worker *w, const wpos *p) {
  if (w->pos_wanted && w->pos_at > 0 && p->version >= w->pos_at) {
    w->pos_wanted = false;
    send_pos(w, w->pos_req, 0, p, "");
  }
}

void worker__pos_batch(worker *w, job *j) {
  wpos *p = &w->ring[w->ring_next];
  p->version = version_of(w, j);
  pos_now(w, p);
  w->ring_next = (w->ring_next + 1) % WPOS_RING;
  if (w->nring < WPOS_RING) w->nring++;
  if (!j->drawn) pos_check(w, p); /* drawn before its pulls: once they are in */
  w->batches++;
}

void worker__pos_pulled(worker *w, job *j) {
  uint64_t b = j->drawn - 1;
  j->drawn = 0;
  for (int i = 1; i <= w->nring; i++) {
    wpos *p = &w->ring[(w->ring_next - i + WPOS_RING) % WPOS_RING];
    if (p->batches != b) continue;
    p->version = version_of(w, j);
    pos_check(w, p);
    return;
  }
}

void worker__pos_reset(worker *w) {
  w->batches = 0;
  w->nring = w->ring_next = 0;
  if (w->pos_wanted) send_pos(w, w->pos_req, DRV_EINVAL, NULL, "a SETUP came first");
  w->pos_wanted = false;
}

int worker_position(worker *w, uint32_t req, const uint8_t *payload, size_t len) {
  wire_msg_position m;
  int rc = wire_get_position(payload, len, &m);
  if (rc < 0) return rc;
  if (w->pos_wanted) send_pos(w, w->pos_req, DRV_EINVAL, NULL, "another POSITION came");
  w->pos_wanted = false;
  if (m.at_version == 0) { /* now: between two batches */
    if (w->in_pool) {
      w->pos_wanted = true, w->pos_at = 0, w->pos_req = req;
      return 0;
    }
    wpos p = {0};
    pos_now(w, &p);
    send_pos(w, req, 0, &p, "");
    return 0;
  }
  /* The oldest remembered batch of that version or later, unless the ring
   * is full and already starts past it (the one wanted was forgotten). */
  for (int i = 0; i < w->nring; i++) {
    const wpos *p = &w->ring[(w->ring_next - w->nring + i + WPOS_RING) % WPOS_RING];
    if (p->version < m.at_version) continue;
    if (i == 0 && w->nring == WPOS_RING) {
      send_pos(w, req, DRV_ERANGE, NULL, "that version is past");
      return 0;
    }
    send_pos(w, req, 0, p, "");
    return 0;
  }
  w->pos_wanted = true, w->pos_at = m.at_version, w->pos_req = req;
  return 0;
}

/* ============================== rollback ================================= */

static int seek(worker *w) {
  wstate *st = w->st;
  if (!st || !st->has_iter) return 0;
  rng_t *r[WPOS_MAX_RNG];
  int n = worker__rngs(st->model, r, WPOS_MAX_RNG);
  if (w->rb_nrng && w->rb_nrng != n)
    return err_set(DRV_EINVAL, "ROLLBACK: %d Dropout generators for a model with %d", w->rb_nrng, n);
  int64_t nb = (st->data->n + st->batch - 1) / st->batch; /* batches per epoch */
  uint64_t b = w->rb_batches;
  int rc = data_iter_seek(&st->it, (int64_t)(b / (uint64_t)nb), (int64_t)(b % (uint64_t)nb) * st->batch);
  if (rc < 0) return rc;
  for (int i = 0; i < n; i++) *r[i] = w->rb_nrng ? w->rb_rng[i] : st->init_rng[i];
  return 0;
}

/* The rollback itself, once nothing is on the thread pool. */
static void rollback_now(worker *w) {
  w->rb_wanted = false;
  int rc = seek(w);
  char msg[512] = "";
  if (rc < 0) {
    snprintf(msg, sizeof msg, "%s", err_msg());
    log_error("rollback: %s", msg);
  } else {
    w->batches = w->rb_batches;
    log_info("rolled back to batch %llu", (unsigned long long)w->batches);
  }
  w->nring = w->ring_next = 0;
  wire_wr m;
  wire_wr_init(&m);
  wire_put_rollback_ok(&m, &(wire_msg_rollback_ok){rc < 0 ? rc : 0, WIRE_STR(msg)});
  w->send(w->ud, &m, WIRE_ROLLBACK_OK, w->rb_req);
}

void worker__pos_idle(worker *w) {
  if (w->in_pool) return;
  if (w->pos_wanted && w->pos_at == 0) {
    wpos p = {0};
    pos_now(w, &p);
    w->pos_wanted = false;
    send_pos(w, w->pos_req, 0, &p, "");
  }
  if (w->rb_wanted) rollback_now(w);
}

int worker_rollback(worker *w, uint32_t req, const uint8_t *payload, size_t len) {
  wire_msg_rollback m;
  int rc = wire_get_rollback(payload, len, &m);
  if (rc < 0) return rc;
  if (m.rng.len % RNG_BYTES || m.rng.len > WPOS_MAX_RNG * RNG_BYTES)
    return err_set(DRV_EPARSE, "ROLLBACK: %u bytes of generators", m.rng.len);
  w->rb_nrng = (int)(m.rng.len / RNG_BYTES);
  for (int i = 0; i < w->rb_nrng; i++)
    for (int k = 0; k < 4; k++) w->rb_rng[i].s[k] = le_get(m.rng.p + i * RNG_BYTES + 8 * k, 8);
  w->rb_batches = m.batches;
  w->rb_req = req;
  w->rb_wanted = true;
  if (w->pos_wanted) send_pos(w, w->pos_req, DRV_EINVAL, NULL, "rolled back first");
  w->pos_wanted = false;
  /* Every train step in hand was computed (or would be) from the state
   * being left: each fails, and its replies from the ps are dropped. The
   * one on the thread pool fails when it comes back (after_work_cb). */
  job *pooled = w->in_pool ? w->cur : NULL;
  for (job *j = w->run; j; j = j->next)
    if (j->kind == JOB_TRAIN) {
      j->rolled_back = true;
      if (j != pooled) worker__doom(w, j, DRV_EIO, "rolled back to a checkpoint");
    }
  for (job *j = w->head; j; j = j->next)
    if (j->kind == JOB_TRAIN) j->rolled_back = true; /* fails as it starts */
  worker__links_reset(w);
  if (!w->in_pool) rollback_now(w);
  worker__settle(w);
  return 0;
}
