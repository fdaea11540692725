/* worker_ps.c - a worker's client connections to the ps (links): connecting
 * to the ps a SPEC lists, sending requests, the FIFO of requests each link
 * still expects a reply to, the PULL/PUSH payloads, and what a reply or a
 * lost connection means for the job waiting on it. The phases and the
 * pipelining that relies on the FIFO are in worker.c.
 */
#include "cluster/worker/worker.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/conn.h"
#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker_int.h"

/* ============================== requests ================================= */

/* The request's bytes as kept for a failover (ps replicas): a PUSH goes
 * with its SPARSE_PUSHes (l->pre, taken) and a PUSH_ID before it, so that
 * a ps that took it already (or the replica it was) knows it again, rows
 * and all. Consumes m. */
static int kept_frame(worker *w, ps_link *l, wire_wr *m, uint8_t type, uint32_t req,
                      link_wait *wt) {
  wire_wr id;
  wire_wr_init(&id);
  bool push = type == WIRE_PUSH;
  if (push) wire_put_push_id(&id, &(wire_msg_push_id){w->client, ++w->push_seq});
  int rc = wire_wr_finish(m, type, req);
  if (rc == 0 && push) rc = wire_wr_finish(&id, WIRE_PUSH_ID, 0);
  size_t sp = push ? l->npre : 0, pre = push ? id.len : 0;
  if (rc == 0 && !(wt->frame = malloc(sp + pre + m->len))) rc = err_set(DRV_ENOMEM, "out of memory");
  if (rc == 0) {
    if (sp) memcpy(wt->frame, l->pre, sp);
    if (pre) memcpy(wt->frame + sp, id.buf, pre);
    memcpy(wt->frame + sp + pre, m->buf, m->len);
    wt->len = sp + pre + m->len;
  }
  if (push) { /* sent with this PUSH, or not at all */
    free(l->pre);
    l->pre = NULL;
    l->npre = 0;
  }
  wire_wr_free(&id);
  wire_wr_free(m);
  return rc;
}

/* Room for one more expected reply on l, and the next request id; 0 or
 * DRV_ENOMEM. */
static int wait_room(ps_link *l, uint32_t *req) {
  if (l->nwaits == l->capwaits) {
    int cap = l->capwaits ? 2 * l->capwaits : WORKER_PIPE_MAX;
    link_wait *nw = realloc(l->waits, (size_t)cap * sizeof *nw);
    if (!nw) return err_set(DRV_ENOMEM, "out of memory");
    l->waits = nw;
    l->capwaits = cap;
  }
  if (++l->next_req == 0) l->next_req = 1; /* 0 is for unsolicited frames */
  *req = l->next_req;
  return 0;
}

/* Sends m (consumed) as a request of job j on link l, expecting `reply`
 * back; on failure nothing stays expected. With ps replicas the request
 * is kept (and sent once connected, when the link is down). */
int worker__link_send(ps_link *l, wire_wr *m, uint8_t type, uint8_t reply, job *j) {
  worker *w = l->w;
  uint32_t req;
  if (wait_room(l, &req) < 0) {
    wire_wr_free(m);
    return DRV_ENOMEM;
  }
  link_wait wt = {.req = req, .type = reply, .j = j};
  int rc = 0;
  if (w->ps_replicated) { /* kept until answered: a failover sends it again */
    if ((rc = kept_frame(w, l, m, type, req, &wt)) < 0) return rc;
    uint8_t *copy = l->c && conn_is_ready(l->c) ? malloc(wt.len) : NULL;
    if (copy) { /* else sent once connected (link_ready) */
      memcpy(copy, wt.frame, wt.len);
      rc = conn_send(l->c, copy, wt.len); /* takes the copy */
    }
  } else {
    rc = conn_send_wr(l->c, m, type, req);
  }
  if (rc < 0) {
    free(wt.frame);
    return rc;
  }
  l->waits[l->nwaits++] = wt;
  return 0;
}

void worker__link_forget(ps_link *l) {
  for (int k = 0; k < l->nwaits; k++) free(l->waits[k].frame);
  l->nwaits = 0;
  free(l->pre);
  l->pre = NULL;
  l->npre = 0;
}

/* Forgets request k (its reply came). */
static void link_pop(ps_link *l, int k) {
  free(l->waits[k].frame);
  memmove(&l->waits[k], &l->waits[k + 1], (size_t)(--l->nwaits - k) * sizeof *l->waits);
}

/* ============================== payloads ================================= */

/* Copies one PULL_REPLY into the model's parameter rows; its version
 * goes to *version. Its floats may lie in c's ring (read in place). */
static int take_pull_reply(const conn *c, const job *j, int p, const uint8_t *pl, size_t len,
                           uint64_t *version) {
  const wstate *st = j->st;
  const ps_part *part = &st->parts[p];
  wire_msg_pull_reply m;
  int rc = wire_get_pull_reply(pl, len, &m);
  if (rc < 0) return rc;
  *version = m.version;
  uint32_t count = m.vars.n;
  if (count != (uint32_t)part->n)
    return err_set(DRV_EPARSE, "PULL_REPLY from ps:%d has %u variables, expected %d", p, count,
                   part->n);
  wire_rd r = wire_items_reader(&m.vars);
  for (int k = 0; k < part->n; k++) {
    wire_item_var_tensor it;
    wire_get_item_var_tensor(&r, &it);
    uint32_t var = it.var;
    int nd = it.value.ndim;
    const int64_t *shape = it.value.shape;
    const void *data = conn_in_place(c, it.value.data);
    if (var != part->var[k])
      return err_set(DRV_EPARSE, "PULL_REPLY from ps:%d: var %u where var %u was expected", p,
                     var, part->var[k]);
    const wvar *v = &st->vars[var];
    const wshard *s = &v->shards[part->shard[k]];
    bool same = nd == v->ndim && (uint64_t)shape[0] == s->rows;
    for (int d = 1; same && d < nd; d++) same = shape[d] == v->dims[d];
    if (!same)
      return err_set(DRV_ESHAPE, "PULL_REPLY from ps:%d: var %u (%s) has the wrong shape", p,
                     var, v->name);
    memcpy(tensor_data(v->value) + s->row0 * v->row_elems, data,
           (size_t)s->rows * v->row_elems * sizeof(float));
  }
  return 0;
}

/* PUSH for ps p: the gradient rows of each of its shards, as tensors
 * [rows, dims[1..]] (written field by field: a row range of a contiguous
 * gradient is contiguous, so the floats go in as one raw copy; the wire is
 * little-endian like every host drover runs on). */
typedef struct push_parts {
  const wstate *st;
  const ps_part *part;
} push_parts;

static void put_grad(wire_wr *w, void *ud, uint32_t k) {
  const push_parts *pp = ud;
  const wvar *v = &pp->st->vars[pp->part->var[k]];
  const wshard *s = &v->shards[pp->part->shard[k]];
  wire_item_var_tensor it = {.var = pp->part->var[k],
                             .value = {.ndim = v->ndim,
                                       .data = tensor_data(v->grad) + s->row0 * v->row_elems}};
  it.value.shape[0] = (int64_t)s->rows;
  for (int d = 1; d < v->ndim; d++) it.value.shape[d] = v->dims[d];
  wire_put_item_var_tensor(w, &it);
}

void worker__write_push(const wstate *st, const ps_part *part, uint64_t version, wire_wr *m) {
  push_parts pp = {st, part};
  wire_put_push(m, &(wire_msg_push){version, {(uint32_t)part->n, .put = put_grad, .ud = &pp}});
}

/* The PUSH payload's bytes for `part`, as wire_put_push lays them out:
 * version, count, then per variable its id, ndim, dims and floats. */
static size_t push_bytes(const wstate *st, const ps_part *part) {
  size_t n = 8 + 4;
  for (int k = 0; k < part->n; k++) {
    const wvar *v = &st->vars[part->var[k]];
    const wshard *s = &v->shards[part->shard[k]];
    n += 4 + 1 + 8 * (size_t)v->ndim + 4 * (size_t)s->rows * v->row_elems;
  }
  return n;
}

int worker__link_push(ps_link *l, const wstate *st, const ps_part *part, job *j) {
  wire_wr m;
  uint32_t req;
  if (l->w->ps_replicated) { /* a kept frame: encoded aside */
    wire_wr_init(&m);
    worker__write_push(st, part, l->version, &m);
    return worker__link_send(l, &m, WIRE_PUSH, WIRE_PUSH_OK, j);
  }
  size_t len = push_bytes(st, part);
  int rc = wait_room(l, &req);
  uint8_t *p = rc < 0 ? NULL : conn_send_reserve(l->c, len);
  if (!p) return rc < 0 ? rc : DRV_EIO;
  wire_wr_init_fixed(&m, p - WIRE_HEADER_SIZE, WIRE_HEADER_SIZE + len);
  worker__write_push(st, part, l->version, &m);
  if (m.err || m.len != WIRE_HEADER_SIZE + len) {
    conn_send_cancel(l->c);
    return err_set(DRV_EINVAL, "PUSH for ps:%d: %zu bytes encoded where %zu were reserved",
                   l->index, m.len - WIRE_HEADER_SIZE, len);
  }
  if ((rc = conn_send_commit(l->c, WIRE_PUSH, req)) < 0) return rc;
  l->waits[l->nwaits++] = (link_wait){.req = req, .type = WIRE_PUSH_OK, .j = j};
  return 0;
}

/* ============================== connections ============================== */

static void link_ready(conn *c) {
  ps_link *l = conn_ud(c);
  worker *w = l->w;
  if (l->c != c) return;
  l->last_error[0] = '\0';
  l->attempts = 0;
  conn_set_in_place(c, true); /* PULL_REPLY's floats: take_pull_reply */
  log_info("connected to ps:%d at %s", l->index, conn_peer(c));
  for (int k = 0; k < l->nwaits; k++) { /* kept requests (ps replicas), in order */
    uint8_t *copy = malloc(l->waits[k].len);
    if (!copy) {
      conn_close(c, "out of memory");
      return;
    }
    memcpy(copy, l->waits[k].frame, l->waits[k].len);
    conn_send(c, copy, l->waits[k].len);
  }
  if (l->nwaits) log_info("sent %d requests to ps:%d again", l->nwaits, l->index);
  if (w->cur && w->cur->phase == PH_LINKS) worker__go_links(w, w->cur);
}

/* Fails every job waiting on a reply from l (its connection is gone) and
 * forgets the requests. The caller settles. */
static void link_fail_waits(worker *w, ps_link *l, const char *why) {
  for (int k = 0; k < l->nwaits; k++)
    if (l->waits[k].j) worker__doom(w, l->waits[k].j, DRV_EIO, "ps:%d: %s", l->index, why);
  worker__link_forget(l);
}

/* What losing link l means for the started jobs: those waiting on it
 * fail; one waiting for links looks again (it may not need this ps). A
 * job computing notices the missing link when it pushes. */
static void link_lost(worker *w, ps_link *l) {
  log_warn("lost ps:%d (%s:%d): %s", l->index, l->host, l->port, l->last_error);
  if (w->closed) return;
  if (w->ps_replicated) { /* its requests wait for the group's primary */
    if (l->nwaits) log_info("keeping %d requests for ps:%d", l->nwaits, l->index);
    return;
  }
  link_fail_waits(w, l, l->last_error);
  if (w->cur && w->cur->phase == PH_LINKS) worker__go_links(w, w->cur);
  worker__settle(w);
}

/* Closes a link's connection ourselves (after a protocol error). */
static void link_drop(worker *w, ps_link *l) {
  conn *c = l->c;
  l->c = NULL; /* link_close then ignores it */
  conn_close(c, l->last_error);
  link_lost(w, l);
}

/* Counts a gradient the ps dropped as late (sync training); false then. */
static bool note_push_ok(worker *w, const ps_link *l, const uint8_t *pl, size_t len) {
  wire_msg_push_ok m;
  if (wire_get_push_ok(pl, len, &m) < 0 || m.applied) return true;
  uint64_t version = m.step;
  w->dropped++;
  log_info("ps:%d dropped a late gradient (the ps is at version %" PRIu64 "): %" PRIu64
           " dropped", l->index, version, w->dropped);
  return false;
}

static void link_frame(conn *c, const wire_header *h, const uint8_t *pl) {
  ps_link *l = conn_ud(c);
  worker *w = l->w;
  if (l->c != c || w->closed) return;
  if (h->type == WIRE_ERROR) {
    wire_rd_error(pl, h->len, l->last_error, sizeof l->last_error);
    wire_msg_error m;
    /* replicated: a replica not promoted yet (DRV_ENODE) keeps the
     * requests for the primary; any other refusal fails their jobs */
    bool fails = w->ps_replicated && (wire_get_error(pl, h->len, &m) < 0 || m.code != DRV_ENODE);
    if (fails) link_fail_waits(w, l, l->last_error);
    link_drop(w, l);
    if (fails) worker__settle(w);
    return;
  }
  /* Replies come in request order, except that a held (sync) PULL's may
   * overtake, and a replicated ps answers a PUSH only once its replica has
   * it, so later PULLs may overtake that: matched by request id. */
  int k = 0;
  while (k < l->nwaits && l->waits[k].req != h->req) k++;
  if (k == l->nwaits || h->type != l->waits[k].type) {
    snprintf(l->last_error, sizeof l->last_error, "unexpected %s (request %u) from the ps",
             wire_type_name(h->type), h->req);
    link_drop(w, l);
    return;
  }
  job *j = l->waits[k].j;
  link_pop(l, k);
  bool taken = h->type == WIRE_PUSH_OK && note_push_ok(w, l, pl, h->len);
  if (!j) return; /* the reply to a job that already failed */
  if (h->type == WIRE_PUSH_OK) j->push_oks++, j->pushes_taken += taken;
  int rc = 0;
  if (h->type == WIRE_PULL_REPLY) rc = take_pull_reply(c, j, l->index, pl, h->len, &l->version);
  else if (h->type == WIRE_SPARSE_PULL_REPLY)
    rc = worker__sparse_take(j, l->index, pl, h->len, &l->version);
  if (rc < 0) {
    snprintf(l->last_error, sizeof l->last_error, "%s", err_msg());
    worker__doom(w, j, DRV_EIO, "ps:%d: %s", l->index, l->last_error);
    link_drop(w, l);
    return;
  }
  if (--j->waiting > 0) return;
  if (j->phase == PH_PULL)
    worker__pulled(w, j);
  else
    worker__finish(w, j);
}

static void link_close(conn *c, int err, const char *why) {
  ps_link *l = conn_ud(c);
  worker *w = l->w;
  (void)err;
  if (l->c != c) return; /* a connection this link already dropped or replaced */
  l->c = NULL;
  if (w->closed) return;
  if (!l->last_error[0])
    snprintf(l->last_error, sizeof l->last_error, "%s", why && why[0] ? why : "connection closed");
  link_lost(w, l);
}

static const conn_cbs link_cbs = {link_ready, link_frame, link_close};

static int link_connect(worker *w, ps_link *l) {
  const auth_secret *key = keyring_ps_key(w->keys, l->proc);
  if (!key) {
    snprintf(l->last_error, sizeof l->last_error, "this node's key file holds no key for ps:%u",
             (unsigned)l->proc);
    log_error("cannot connect to ps:%d: %s", l->index, l->last_error);
    return err_set(DRV_EINVAL, "%s", l->last_error);
  }
  l->opts = (conn_opts){.secret = key, .who = AUTH_WHO_NODE, .role = (uint8_t)w->role,
                        .index = (uint32_t)w->index, .cbs = &link_cbs, .ud = l};
  l->last_error[0] = '\0';
  if (!w->ps_replicated) l->pushed = false; /* perhaps a new ps process: no version to wait for */
  int rc = conn_connect(w->loop, l->host, l->port, &l->opts, &l->c);
  if (rc < 0) {
    l->c = NULL;
    snprintf(l->last_error, sizeof l->last_error, "%s", err_msg());
    log_error("cannot connect to ps:%d at %s:%d: %s", l->index, l->host, l->port, err_msg());
  }
  return rc;
}

#define RECONNECT_FIRST_MS 100
#define RECONNECT_MAX_MS 5000

bool worker__link_reconnect(worker *w, ps_link *l) {
  uint64_t now = uv_now(w->loop);
  if (l->c || !l->host[0] || now < l->retry_at) return false;
  uint64_t wait = (uint64_t)RECONNECT_FIRST_MS << (l->attempts < 6 ? l->attempts : 6);
  l->retry_at = now + (wait < RECONNECT_MAX_MS ? wait : RECONNECT_MAX_MS);
  l->attempts++;
  char why[256];
  snprintf(why, sizeof why, "%s", l->last_error);
  log_info("connecting to ps:%d at %s:%d again (attempt %d)%s%s", l->index, l->host, l->port,
           l->attempts, why[0] ? " after: " : "", why);
  return link_connect(w, l) == 0;
}

void worker__links_reset(worker *w) {
  for (int i = 0; i < w->nlinks; i++) {
    ps_link *l = w->links[i];
    if (!l) continue;
    if (l->c) {
      conn *old = l->c;
      l->c = NULL; /* link_close then ignores it */
      conn_close(old, "rolled back");
    }
    link_fail_waits(w, l, "rolled back");
    l->pushed = false;
    l->version = 0;
    l->attempts = 0;
    l->retry_at = 0;
    l->last_error[0] = '\0';
  }
}

void worker_tick(worker *w) {
  if (!w->ps_replicated || w->closed) return;
  /* A lost link waits for no job's next need: its kept requests, or a job
   * waiting for links, are only resumed by a connection (within the
   * back-off). */
  for (int p = 0; p < w->nlinks; p++) {
    ps_link *l = w->links[p];
    if (l && !l->c && l->host[0]) worker__link_reconnect(w, l);
  }
}

/* Appends ",ps:A=T" or ",ps:A-B=T" (no comma first) to out[*len], whole
 * or, when it does not fit (with room for the mark), ",..." once. */
static void put_range(char *out, size_t n, size_t *len, uint32_t a, uint32_t b, const char *t) {
  char e[64];
  const char *sep = *len ? "," : "";
  if (a == b) snprintf(e, sizeof e, "%sps:%u=%s", sep, (unsigned)a, t);
  else snprintf(e, sizeof e, "%sps:%u-%u=%s", sep, (unsigned)a, (unsigned)b, t);
  size_t k = strlen(e);
  if (*len >= n) return; /* cut already */
  if (*len + k + 4 < n) {
    memcpy(out + *len, e, k + 1);
    *len += k;
  } else {
    snprintf(out + *len, n - *len, ",...");
    *len = n;
  }
}

typedef struct link_up {
  uint32_t proc;
  const char *t; /* conn_transport's (static) */
} link_up;

static int by_proc(const void *a, const void *b) {
  uint32_t x = ((const link_up *)a)->proc, y = ((const link_up *)b)->proc;
  return (x > y) - (x < y);
}

void worker_links(const worker *w, char *out, size_t n) {
  size_t len = 0;
  int k = 0;
  if (n) out[0] = '\0';
  link_up *up = w->nlinks ? malloc((size_t)w->nlinks * sizeof *up) : NULL;
  if (!up) return; /* none, or no memory for a summary: shown as none */
  for (int p = 0; p < w->nlinks; p++) {
    const ps_link *l = w->links[p];
    if (l && l->c && conn_is_ready(l->c)) up[k++] = (link_up){l->proc, conn_transport(l->c)};
  }
  /* by process: after a failover a group's is its replica's, out of order */
  qsort(up, (size_t)k, sizeof *up, by_proc);
  for (int i = 0, j; i < k; i = j) {
    for (j = i + 1; j < k && up[j].proc == up[j - 1].proc + 1 && strcmp(up[j].t, up[i].t) == 0;)
      j++;
    put_range(out, n, &len, up[i].proc, up[j - 1].proc, up[i].t);
  }
  free(up);
}

int worker_spec(worker *w, const node_addr *nodes, int n, bool ps_replicated) {
  w->ps_replicated = ps_replicated;
  for (int i = 0; i < n; i++) {
    const node_addr *a = &nodes[i];
    if (a->role != ROLE_PS) continue;
    if (a->index >= WORKER_MAX_PS)
      return err_set(DRV_ERANGE, "SPEC: ps index %u is over the limit %d", a->index,
                     WORKER_MAX_PS);
    int p = (int)a->index;
    if (p >= w->nlinks) {
      ps_link **nl = realloc(w->links, (size_t)(p + 1) * sizeof *nl);
      if (!nl) return err_set(DRV_ENOMEM, "out of memory");
      for (int k = w->nlinks; k <= p; k++) nl[k] = NULL;
      w->links = nl;
      w->nlinks = p + 1;
    }
    ps_link *l = w->links[p];
    if (!l) {
      if (!(l = calloc(1, sizeof *l))) return err_set(DRV_ENOMEM, "out of memory");
      l->w = w;
      l->index = p;
      w->links[p] = l;
    } else if (l->c && strcmp(l->host, a->host) == 0 && l->port == a->port && l->proc == a->proc) {
      continue; /* already connected (or connecting) there */
    } else if (l->c) {
      conn *old = l->c;
      l->c = NULL; /* link_close then ignores it */
      conn_close(old, "the ps moved");
      if (!w->ps_replicated) link_fail_waits(w, l, "the ps moved");
    }
    snprintf(l->host, sizeof l->host, "%s", a->host);
    l->port = a->port;
    l->proc = a->proc;
    l->attempts = 0; /* a new spec: connect now, back-off afresh */
    l->retry_at = 0;
    link_connect(w, l);
  }
  w->have_spec = true;
  worker__settle(w); /* replies of jobs failed above */
  return 0;
}
