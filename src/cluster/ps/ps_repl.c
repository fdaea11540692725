/* ps_repl.c - ps replicas: chain replication of a ps's shards to a hot
 * copy on another ps process, so that a primary's loss loses no
 * acknowledged update (docs/ARCHITECTURE.md, "ps replicas").
 *
 * The coordinator gives each group a primary and a replica with PS_ROLE
 * and one random token. The primary connects to the replica's data port
 * (authenticated like every connection), streams its whole state
 * (REPL_SYNC with the token, then bounded frames: ps_repl_sync.c; a
 * replica takes replication frames from that connection only), then
 * forwards every VAR_INIT, PUSH, RESTORE, SYNC_STOP, LR_SCALE, SPARSE_INIT
 * and SPARSE_LOAD it receives, in arrival order, as REPL {seq, type,
 * frame}, and a worker's SPARSE_PUSHes right before its PUSH (the rows go
 * with that PUSH: ps_spserve.c). It applies such
 * a frame itself, and answers its client, only when the replica's
 * REPL_OK for it comes back: so the primary's state is always a prefix of
 * the replica's, every value a client pulled and every PUSH_OK it got is
 * on the replica, and a promoted replica goes on from there. Both run the
 * same code on the same frames in the same order (ps__apply), so their
 * shards stay bit for bit the same. A push its client sends again after a
 * failover is recognised by (client, seq) and answered without applying
 * it twice (ps__client_seen; the table is part of the replicated state).
 *
 * Losing the replica: the primary applies what it forwarded and goes on
 * alone until the coordinator names a new replica.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "numeric/optim.h"
#include "cluster/ps/ps_int.h"

/* ============================== clients' pushes =========================== */

static int client_find(const ps_server *ps, uint32_t client) {
  for (int i = 0; i < ps->ncl; i++)
    if (ps->cl_id[i] == client) return i;
  return -1;
}

bool ps__client_seen(const ps_server *ps, uint32_t client, uint64_t seq) {
  int i = client_find(ps, client);
  return i >= 0 && seq <= ps->cl_seq[i];
}

int ps__client_note(ps_server *ps, uint32_t client, uint64_t seq) {
  int i = client_find(ps, client);
  if (i >= 0) {
    if (seq > ps->cl_seq[i]) ps->cl_seq[i] = seq;
    return 0;
  }
  if (ps->ncl == ps->capcl) {
    int cap = ps->capcl ? 2 * ps->capcl : 16;
    uint32_t *ni = realloc(ps->cl_id, (size_t)cap * sizeof *ni);
    if (ni) ps->cl_id = ni;
    uint64_t *ns = ni ? realloc(ps->cl_seq, (size_t)cap * sizeof *ns) : NULL;
    if (!ns) return err_set(DRV_ENOMEM, "out of memory for the clients table");
    ps->cl_seq = ns;
    ps->capcl = cap;
  }
  ps->cl_id[ps->ncl] = client;
  ps->cl_seq[ps->ncl++] = seq;
  return 0;
}

/* ============================== primary =================================== */

/* Applies a forwarded frame here and answers its client (the replica has
 * it, or is gone). */
static void apply_pending(ps_server *ps, repl_pending *p) {
  wire_header h = {.type = p->type, .req = p->req, .len = p->len};
  peer *pe = p->pe && !p->pe->doomed ? p->pe : NULL;
  int rc = ps__apply(ps, pe ? pe->c : NULL, &h, p->payload, p->client, p->push_seq);
  if (rc < 0 && pe) ps__reject(pe, rc, err_msg());
  else if (rc < 0) log_warn("a forwarded %s failed: %s", wire_type_name(p->type), err_msg());
  free(p->payload);
}

/* The replica is gone: what was forwarded is applied here, in order, and
 * the primary goes on alone until the coordinator names another. */
static void replica_gone(ps_server *ps, const char *why) {
  int n = ps->npend;
  ps->repl_live = false;
  ps->npend = 0; /* apply_pending may forward nothing now: repl_live is off */
  for (int i = 0; i < n; i++) apply_pending(ps, &ps->pend[i]);
  if (!ps->stopping)
    log_warn("replica %s:%d lost (%s): %d forwarded frames applied here; serving alone",
             ps->repl_host, ps->repl_port, why, n);
}

static void drop_replica(ps_server *ps, const char *why);

/* Whether frames go through the replica now (one whose connection is
 * closing is gone already: dropped here, its frames applied). */
static bool replicating(ps_server *ps) {
  if (!ps->repl_live || !ps->repl) return false;
  /* A replica whose connection is closing (it died; the close callback
   * has not run yet) is gone already: the frame is applied here, never
   * refused to its client. */
  if (!conn_is_ready(ps->repl)) {
    drop_replica(ps, "its connection is closing");
    return false;
  }
  return true;
}

/* Sends REPL of copy (owned once this returns 1) and keeps it pending;
 * 0: the replica is gone (dropped here), copy still the caller's. */
static int forward_copy(ps_server *ps, peer *pe, uint32_t req, uint8_t type, uint8_t *copy,
                        uint32_t len, uint32_t client, uint64_t push_seq) {
  if (ps->npend == ps->cappend) {
    int cap = ps->cappend ? 2 * ps->cappend : 16;
    repl_pending *np = realloc(ps->pend, (size_t)cap * sizeof *np);
    if (!np) return err_set(DRV_ENOMEM, "out of memory");
    ps->pend = np;
    ps->cappend = cap;
  }
  uint64_t seq = ++ps->repl_seq;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_repl(&w, &(wire_msg_repl){seq, type, client, push_seq, {copy, len}});
  if (conn_send_wr(ps->repl, &w, WIRE_REPL, 0) < 0) {
    drop_replica(ps, err_msg());
    return 0;
  }
  ps->pend[ps->npend++] = (repl_pending){pe, req, type, copy, len, seq, client, push_seq};
  return 1;
}

int ps__repl_forward(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl,
                     uint32_t client, uint64_t push_seq) {
  if (!replicating(ps)) return 0;
  uint8_t *copy = malloc((size_t)h->len + 1);
  if (!copy) return err_set(DRV_ENOMEM, "out of memory");
  conn_payload_copy(pe->c, pl, h->len, copy); /* a PUSH read in place: its floats too */
  int rc = forward_copy(ps, pe, h->req, h->type, copy, h->len, client, push_seq);
  if (rc <= 0) free(copy);
  return rc;
}

int ps__repl_forward_owned(ps_server *ps, peer *pe, uint8_t type, uint8_t *payload, uint32_t len) {
  if (!replicating(ps)) return 0;
  return forward_copy(ps, pe, 0, type, payload, len, 0, 0);
}

static void repl_ready(conn *c) {
  ps_server *ps = conn_ud(c);
  if (ps->repl != c) return;
  if (ps__repl_send_sync(ps, c) < 0) {
    log_warn("cannot send the state to the replica: %s", err_msg());
    conn_close(c, "sync failed");
    return;
  }
  ps->repl_live = true;
  log_info("replicating to %s:%d from version %llu (%d shards)", ps->repl_host, ps->repl_port,
           (unsigned long long)ps->version, ps->nshards);
}

static void repl_frame(conn *c, const wire_header *h, const uint8_t *pl) {
  ps_server *ps = conn_ud(c);
  wire_msg_repl_ok m;
  if (ps->repl != c) return;
  if (h->type != WIRE_REPL_OK || wire_get_repl_ok(pl, h->len, &m) < 0 || ps->npend == 0 ||
      m.seq != ps->pend[0].seq) {
    log_warn("replica sent %s out of turn; dropping it", wire_type_name(h->type));
    conn_close(c, "protocol error");
    return;
  }
  repl_pending p = ps->pend[0];
  memmove(&ps->pend[0], &ps->pend[1], (size_t)--ps->npend * sizeof *ps->pend);
  apply_pending(ps, &p);
}

static void repl_close(conn *c, int err, const char *why) {
  ps_server *ps = conn_ud(c);
  (void)err;
  if (ps->repl != c) return;
  ps->repl = NULL;
  replica_gone(ps, why && why[0] ? why : "closed");
}

static const conn_cbs repl_cbs = {repl_ready, repl_frame, repl_close};

/* Drops the replica connection (applying what it holds). */
static void drop_replica(ps_server *ps, const char *why) {
  conn *c = ps->repl;
  if (!c) return;
  ps->repl = NULL; /* repl_close then ignores it */
  conn_close(c, why);
  replica_gone(ps, why);
}

/* ============================== replica =================================== */

void ps__repl_notify(ps_server *ps, int status, bool synced, const char *msg) {
  if (ps->on_role) ps->on_role(ps->on_role_ud, status, synced, ps->version, msg);
}

int ps__repl_frame(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl) {
  if (ps->role != WIRE_PS_REPLICA)
    return err_set(DRV_EPERM, "%s: this ps is no replica", wire_type_name(h->type));
  if (h->type != WIRE_REPL) return ps__repl_sync_frame(ps, pe, h, pl);
  if (pe != ps->primary || !ps->synced)
    return err_set(DRV_EPERM, "REPL from a connection that is not this replica's primary");
  wire_msg_repl m;
  int rc = wire_get_repl(pl, h->len, &m);
  if (rc < 0) return rc;
  if (!ps__replicated_type(m.type))
    return err_set(DRV_EPARSE, "REPL of %s", wire_type_name(m.type));
  if ((rc = wire_validate_payload(m.type, m.frame.p, m.frame.len)) < 0) return rc;
  wire_header ih = {.type = m.type, .len = m.frame.len};
  /* A frame the primary will refuse is refused here the same way and
   * changes nothing on either side. */
  if (ps__apply(ps, NULL, &ih, m.frame.p, m.client, m.push_seq) < 0)
    log_info("replicated %s refused: %s", wire_type_name(m.type), err_msg());
  wire_wr w;
  wire_wr_init(&w);
  wire_put_repl_ok(&w, &(wire_msg_repl_ok){m.seq});
  return conn_send_wr(pe->c, &w, WIRE_REPL_OK, 0);
}

void ps__repl_peer_gone(ps_server *ps, const peer *pe) {
  if (ps->stage && ps__repl_stage_from(ps) == pe) { /* its state's stream cut short */
    ps__repl_sync_drop(ps);
    if (!ps->stopping)
      ps__repl_notify(ps, DRV_EIO, true, "the primary's connection closed before the whole state came");
  }
  for (int i = 0; i < ps->npend; i++)
    if (ps->pend[i].pe == pe) ps->pend[i].pe = NULL;
  if (ps->primary == pe) {
    ps->primary = NULL;
    if (!ps->stopping && ps->role == WIRE_PS_REPLICA)
      log_warn("lost the primary's connection: waiting for a promotion or a new primary");
  }
}

/* ============================== roles ===================================== */

int ps_set_role(ps_server *ps, int role, uint64_t token, const char *host, int port,
                uint32_t replica) {
  if (ps->stopping) return 0;
  switch (role) {
  case WIRE_PS_ALONE:
    drop_replica(ps, "no replica any more");
    ps__repl_sync_drop(ps); /* a stream under way has no use now */
    if (ps->role == WIRE_PS_REPLICA) {
      if (!ps->synced) return err_set(DRV_EINVAL, "promoted before it had its primary's state");
      log_info("promoted: serving as primary from version %llu", (unsigned long long)ps->version);
      if (ps->primary && !ps->primary->doomed) /* the old primary must not write here */
        ps__reject(ps->primary, DRV_ENODE, "this replica was promoted");
      ps->primary = NULL;
    }
    ps->role = role;
    return 0;
  case WIRE_PS_PRIMARY: {
    /* As itself, with its key at that replica (not a root): the replica
     * takes REPL_SYNC and REPL from ps identities only (ps__accept). */
    const auth_secret *key = keyring_ps_key(ps->keys, replica);
    if (!key)
      return err_set(DRV_EINVAL, "PS_ROLE: this ps's key file holds no key for its replica ps:%u",
                     (unsigned)replica);
    drop_replica(ps, "another replica");
    ps->role = role;
    ps->token = token;
    snprintf(ps->repl_host, sizeof ps->repl_host, "%s", host);
    ps->repl_port = port;
    ps->repl_ps = replica;
    ps->repl_opts = (conn_opts){.secret = key, .who = AUTH_WHO_NODE, .role = ROLE_PS,
                                .index = ps->index, .cbs = &repl_cbs, .ud = ps};
    int rc = conn_connect(ps->loop, host, port, &ps->repl_opts, &ps->repl);
    if (rc < 0) ps->repl = NULL;
    return rc;
  }
  case WIRE_PS_REPLICA:
    drop_replica(ps, "now a replica");
    ps->role = role;
    ps->token = token;
    ps->synced = false;
    ps->primary = NULL;
    log_info("replica: waiting for the primary's state");
    ps__repl_notify(ps, 0, false, ""); /* the coordinator now tells the primary */
    return 0;
  default: return err_set(DRV_EINVAL, "PS_ROLE: role %d", role);
  }
}

void ps_on_role(ps_server *ps, ps_role_fn fn, void *ud) {
  ps->on_role = fn;
  ps->on_role_ud = ud;
}

void ps__repl_stop(ps_server *ps) { drop_replica(ps, "ps stopping"); }

void ps_links(const ps_server *ps, char *out, size_t n) {
  if (ps && ps->repl && conn_is_ready(ps->repl))
    snprintf(out, n, "ps:%u=%s", (unsigned)ps->repl_ps, conn_transport(ps->repl));
  else if (n)
    out[0] = '\0';
}

void ps__repl_free(ps_server *ps) {
  ps__repl_sync_drop(ps);
  for (int i = 0; i < ps->npend; i++) free(ps->pend[i].payload);
  free(ps->pend);
  free(ps->cl_id);
  free(ps->cl_seq);
  ps->pend = NULL;
  ps->npend = 0;
}
