/* ps_int.h - the parameter server's state, shared by ps.c (VAR_INIT, PULL,
 * PUSH, the connections) and ps_ckpt.c (CHECKPOINT and RESTORE). Not a
 * public API: the role is ps.h. */
#ifndef DROVER_PS_INT_H
#define DROVER_PS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/safetensors.h"
#include "net/conn.h"
#include "cluster/ps/ps.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

typedef struct ps_blob {
  int refs;
  uint8_t *payload; /* PULL_REPLY payload for this shard alone */
  size_t len;       /* its bytes */
  size_t hdr;       /* bytes before the floats: version, count, var, ndim, dims */
  size_t item;      /* where the shard's list item (var id, tensor) starts */
  float *data;      /* the values, 64-byte aligned, inside payload */
  void *mem;        /* the allocation */
} ps_blob;

typedef struct shard {
  uint32_t var;
  int ndim;
  int64_t shape[TENSOR_MAXDIM];
  size_t n;         /* elements */
  uint64_t row0;    /* first row of the whole variable held here (informative) */
  optim_cfg cfg;
  float *slots[OPTIM_MAX_SLOTS];
  int64_t updates;  /* this shard's update count: optim_update's t */
  double lr_scale;  /* a plateau schedule's factor (LR_SCALE); 0 means 1 */
  ps_blob *val;
  float *acc;       /* sync: the sum of this version's gradients (aligned) */
  uint32_t acc_n;   /* gradients in it */
} shard;

/* A PULL waiting for the ps's version to reach min_version (sync). */
typedef struct held_pull {
  struct peer *pe;
  uint32_t req;
  uint64_t min_version;
  uint8_t *payload; /* a copy of the request */
  uint32_t len;
  bool probe;       /* of no variables: the coordinator waiting for a version */
  uint8_t type;     /* WIRE_PULL or WIRE_SPARSE_PULL */
} held_pull;

/* A SPARSE_PUSH kept until its sender's PUSH (ps_spserve.c). */
typedef struct sp_pending {
  uint8_t *payload; /* a copy (owned) */
  uint32_t len;
} sp_pending;

/* A conn's ud is the server before authentication and its peer after;
 * both start with a tag so that on_close can tell which. */
enum { TAG_SERVER = 0x5053, TAG_PEER = 0x5045 };

/* An authenticated data connection (its conn's ud; before authentication
 * the ud is the server itself). */
typedef struct peer {
  int tag;     /* TAG_PEER */
  ps_server *ps;
  conn *c;
  bool doomed; /* rejected: its ERROR is going out, then it closes */
  bool pushed; /* it sent a PUSH: a RESTORE closes it (ps_ckpt.c) */
  uint32_t next_client; /* PUSH_ID: the next PUSH's (0: none) */
  uint64_t next_seq;
  sp_pending *sp; /* SPARSE_PUSHes waiting for this peer's PUSH (owned) */
  int nsp, capsp;
} peer;

/* Primary: a frame forwarded to the replica, applied here (and answered)
 * once the replica's REPL_OK for it comes back (ps_repl.c). */
typedef struct repl_pending {
  struct peer *pe;  /* who sent it; NULL once its connection closed */
  uint32_t req;
  uint8_t type;
  uint8_t *payload; /* a copy (owned) */
  uint32_t len;
  uint64_t seq;
  uint32_t client;  /* a PUSH's PUSH_ID (0: none) */
  uint64_t push_seq;
} repl_pending;

typedef struct peer_list {
  peer **items;
  int n, cap;
} peer_list;

struct ps_server {
  int tag; /* TAG_SERVER */
  uv_loop_t *loop;
  const keyring *keys;       /* its root checks every client's key; its ps keys
                                dial the replica (borrowed) */
  uint32_t index;
  conn_server *server;
  conn_opts opts;
  shard *shards; /* sorted by var id */
  int nshards, capshards;
  peer_list peers; /* authenticated data connections */
  uint64_t pushes;
  /* sync training (see the file comment) */
  bool sync;
  uint32_t replicas;
  uint64_t target, version, dropped;
  uint32_t agg;        /* gradients summed for this version */
  bool capped;         /* SYNC_STOP cap: at the target, gradients of it still summed */
  /* c:scale's barrier (ps_push.c, "barrier"): trainers' PULLs of version
   * hold_at or later wait for the new quorum (0: none); from it on the
   * workers of index leave_from and up are gone (0: none); the highest
   * version a trainer's PULL got (served: one did) since VAR_INIT/RESTORE */
  uint64_t hold_at, served_hi;
  bool served;
  uint32_t leave_from, leave_pending; /* pending: said by the barrier, from its quorum on */
  held_pull *held;
  int nheld, capheld;
  float *scratch;  /* aligned copy of one incoming gradient */
  size_t scratch_cap;
  bool stopping;
  struct ps_sparse *sparse; /* sparse tables' shards (ps_spserve.c), NULL before SPARSE_INIT */
  /* sync: an LR_SCALE waiting for the version to reach lr_scale_after
   * (lr_scale_next 0: none); VAR_INIT drops it (ps.c) */
  double lr_scale_next;
  uint64_t lr_scale_after;
  /* The SPARSE_PUSHes that go with the next PUSH applied (owned): its
   * sender's, staged right before it, here as on a replica (ps_spserve.c) */
  sp_pending *spq;
  int nspq, capspq;
  /* checkpoints and failover (ps_ckpt.c) */
  struct ps_ckpt *ck;  /* the CHECKPOINT in progress (one at a time), or NULL */
  struct ps_xfer_out *tx; /* its file on its way to the coordinator (ps_ckpt_xfer.c) */
  struct ps_xfer_in *rx;  /* a file coming from the coordinator for a RESTORE */
  bool restored;       /* a RESTORE rolled the version back: see must_hold */
  struct ps_restore *rs; /* a RESTORE from HDFS whose file a thread reads (ps_ckpt.c) */
  /* The last snapshot's buffers, kept for the next one (ps_ckpt.c): a
   * copy into memory already mapped is several times faster than into
   * fresh pages, and the copy is what training waits for. */
  float **spare;
  size_t *spare_n;     /* floats in each */
  size_t nspare;
  /* ps replicas (ps_repl.c) */
  int role;            /* WIRE_PS_ALONE, _PRIMARY or _REPLICA */
  uint64_t token;      /* the proof the coordinator gave primary and replica */
  char repl_host[64];  /* primary: where its replica listens */
  int repl_port;
  conn *repl;          /* primary: the connection to the replica, or NULL */
  uint32_t repl_ps;    /* primary: the replica's ps index */
  conn_opts repl_opts;
  bool repl_live;      /* the replica has the state: frames go through it */
  uint64_t repl_seq;   /* the last frame forwarded */
  repl_pending *pend;  /* forwarded, not acknowledged, oldest first */
  int npend, cappend;
  struct peer *primary; /* replica: the connection that proved the token */
  bool synced;         /* replica: its primary's state is loaded */
  struct repl_stage *stage; /* replica: a streamed REPL_SYNC being received (ps_repl_sync.c) */
  size_t repl_piece;   /* primary: the largest REPL_PIECE's floats, in bytes */
  uint32_t *cl_id;     /* per client (PUSH.client): the last seq taken */
  uint64_t *cl_seq;
  int ncl, capcl;
  ps_role_fn on_role;  /* replica synced: node.c tells the coordinator */
  void *on_role_ud;
};


/* ps.c */
int ps__blob_own(shard *s);           /* a shard's values no PULL reply shares */
/* The shard of variable var (binary search): its index, or -(insertion
 * point) - 1 when the ps holds none. */
int ps__shard_find(const ps_server *ps, uint32_t var);
/* n rounded up to 64 bytes: shard and blob sizes for aligned_alloc. */
static inline size_t ps__round64(size_t n) { return (n + 63) & ~(size_t)63; }
/* PUSH (ps_push.c): checked, applied or accumulated, answered PUSH_OK on
 * c (NULL: a replica applying its primary's forward). client, seq: the
 * PUSH_ID before it (0: none). */
int ps__on_push(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl,
                uint32_t client, uint64_t seq);
/* "[d0, d1, ...]" into buf (n bytes); returns buf. */
const char *ps__shape_str(int ndim, const int64_t *shape, char *buf, size_t n);
void ps__serve_held(ps_server *ps);   /* answers PULLs a version unblocked */
void ps__lr_scale_tick(ps_server *ps); /* sync: a waiting LR_SCALE, once its step is applied */
/* Sync: every update of the fit is applied (a SYNC_STOP cap is not the
 * end yet: the final target may lie one further). */
static inline bool ps__sync_done(const ps_server *ps) {
  return ps->version >= ps->target && !ps->capped;
}
/* SYNC_STOP (wire_msgs.h): a sync fit's target lowered by the coordinator
 * stopping it early. */
int ps__on_sync_stop(ps_server *ps, const wire_header *h, const uint8_t *pl);
/* A shard of var with these values (copied; value->data NULL: zeros),
 * its optimizer slots as optim_slots_init makes them; *s is cleared
 * first. */
int ps__shard_make(shard *s, uint32_t var, uint64_t row0, const optim_cfg *cfg,
                   const wire_tensor *value);
void ps__shard_clear(shard *s);
int ps__store_shard(ps_server *ps, const shard *s); /* takes *s over */
/* VAR_INIT, PUSH, RESTORE or SYNC_STOP, applied; c NULL: nobody to answer (a
 * replica applying its primary's frame, or a client gone meanwhile). */
int ps__apply(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl, uint32_t client,
              uint64_t seq);
/* ERROR {code, msg} to pe, then its connection closes. */
void ps__reject(peer *pe, int code, const char *msg);

/* ps_spserve.c: sparse tables (SPARSE_* frames; ps_sparse.h the store) */
int ps__on_sparse_init(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl);
/* SPARSE_PULL's reply (its payload checked here), now or once held. */
int ps__sparse_pull_reply(ps_server *ps, conn *c, uint32_t req, const uint8_t *pl, uint32_t len);
/* Checked and kept on pe until its PUSH (async too: a PUSH resent after
 * a failover is known by its PUSH_ID, and its rows with it). */
int ps__on_sparse_push(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl);
/* pe's PUSH came: its kept SPARSE_PUSHes go ahead of it, forwarded to the
 * replica (replicating) or staged for it here. */
int ps__sparse_with_push(ps_server *ps, peer *pe);
/* One SPARSE_PUSH payload (owned: taken over) staged for the next PUSH. */
int ps__sparse_stage(ps_server *ps, uint8_t *payload, uint32_t len);
int ps__sparse_stage_copy(ps_server *ps, const uint8_t *pl, uint32_t len); /* a REPL's */
/* The staged rows applied (async) or summed into the step (sync), at the
 * ps's version; the stage emptied. */
int ps__sparse_staged_apply(ps_server *ps);
void ps__sparse_staged_drop(ps_server *ps); /* their PUSH came late, again or bad */
void ps__sparse_pending_drop(peer *pe); /* a RESTORE: pushes from before are not taken */
void ps__sparse_pending_free(peer *pe);
int ps__on_sparse_dump(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl);
int ps__on_sparse_load(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl);

/* ps_repl.c */
/* The frames a primary forwards (REPL) and a replica applies: what
 * changes a ps's state, in the order the primary received them. A
 * SPARSE_PUSH goes with its sender's PUSH, right before it. */
static inline bool ps__replicated_type(uint8_t t) {
  switch (t) {
  case WIRE_VAR_INIT: case WIRE_PUSH: case WIRE_RESTORE: case WIRE_SYNC_STOP:
  case WIRE_LR_SCALE: case WIRE_CKPT_FILE: case WIRE_CKPT_PIECE: case WIRE_CKPT_FILE_END:
  case WIRE_SPARSE_INIT: case WIRE_SPARSE_LOAD: case WIRE_SPARSE_PUSH: return true;
  default: return false;
  }
}
/* Primary with a live replica: forwards the frame and keeps it until the
 * replica's REPL_OK (1); 0: not replicating, apply it now. */
int ps__repl_forward(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl,
                     uint32_t client, uint64_t seq);
/* The same for a payload already copied (owned): 1, taken over; 0, not
 * replicating, still the caller's. */
int ps__repl_forward_owned(ps_server *ps, peer *pe, uint8_t type, uint8_t *payload, uint32_t len);
/* REPL_SYNC or REPL on a data connection (a replica's). */
int ps__repl_frame(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl);
void ps__repl_peer_gone(ps_server *ps, const peer *pe);
/* Whether client's push seq was taken already; ps__client_note records it. */
bool ps__client_seen(const ps_server *ps, uint32_t client, uint64_t seq);
int ps__client_note(ps_server *ps, uint32_t client, uint64_t seq);
void ps__repl_stop(ps_server *ps); /* closes the replica link (ps_stop) */
void ps__repl_free(ps_server *ps);
/* Replica: tells the coordinator (node.c) that a sync ended: status 0, or
 * the error; msg says what was taken. */
void ps__repl_notify(ps_server *ps, int status, bool synced, const char *msg);

/* ps_repl_sync.c: the whole state, streamed in bounded frames */
/* DROVER_REPL_PIECE into *out, or the default (4 MiB); negative, with
 * the message, when set to anything but a multiple of 4 in 4..64 MiB
 * (ps_start refuses to start then). */
int ps__repl_piece_bytes(size_t *out);
/* Primary: queues REPL_SYNC, per shard REPL_SHARD and its REPL_PIECEs
 * (at most ps->repl_piece bytes of floats each), then REPL_SYNC_END on c,
 * all from the state as it is now (one snapshot: nothing runs on the
 * loop meanwhile). */
int ps__repl_send_sync(ps_server *ps, conn *c);
/* Replica: one frame of that stream from pe. The state being received
 * is kept apart (ps->stage) and replaces the replica's only at
 * REPL_SYNC_END; an error drops it (the caller closes pe's connection). */
int ps__repl_sync_frame(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl);
void ps__repl_sync_drop(ps_server *ps); /* a stream abandoned (its peer gone) */
const peer *ps__repl_stage_from(const ps_server *ps); /* who sends the stream */

/* ps_repl_sparse.c: the sparse tables in that stream */
/* Primary: per table REPL_TABLE and its REPL_ROWS on c; *tables how many. */
int ps__repl_send_tables(ps_server *ps, conn *c, uint32_t *frames, uint32_t *tables);
/* Replica: REPL_TABLE or REPL_ROWS into *st (created on the first). */
typedef struct repl_tstage repl_tstage;
int ps__repl_tables_frame(repl_tstage **st, const wire_header *h, const uint8_t *pl);
/* REPL_SYNC_END announced `tables`: all of them whole, the store built
 * (NULL: none) into *out, the caller's. */
int ps__repl_tables_end(repl_tstage *st, uint32_t tables, struct ps_sparse **out);
void ps__repl_tables_free(repl_tstage *st); /* NULL is fine */

/* ps_ckpt.c */
void ps__ckpt_version_reached(ps_server *ps); /* a sync CHECKPOINT waits for a version */
void ps__ckpt_peer_gone(ps_server *ps, const peer *pe);
int ps__on_checkpoint(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl);
/* RESTORE: applied now, or from HDFS on the coordinator's request once a
 * worker thread read the file (ps->rs meanwhile; RESTORE_OK then). */
int ps__on_restore(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl);
typedef struct ps_restore ps_restore;
void ps__restore_peer_gone(ps_server *ps, const conn *c); /* its RESTORE_OK goes nowhere */
void ps__ckpt_free_spare(ps_server *ps); /* at ps_free */

/* ps_ckpt_xfer.c: checkpoint files over the coordinator's connection */
typedef struct ps_xfer_out ps_xfer_out;
typedef struct ps_xfer_in ps_xfer_in;
/* Called once from the loop: the file was queued whole (status 0, its
 * digest, manifest.h's form) or could not be (why says so; digest ""). */
typedef void (*ps_xfer_fin)(void *ud, int status, const char *why, const char *digest);
/* Streams `size` bytes from src (taken over: closed here; the memory it
 * reads must live until fin) as the file `path`: CKPT_FILE, the pieces
 * as worker threads encode them, CKPT_FILE_END with the digest, on c.
 * bad_digest (fault injection) sends a digest the bytes do not have. A
 * negative return: nothing was sent and fin is not called. */
int ps__xfer_stream(ps_server *ps, conn *c, const char *path, safetensors_src *src,
                    uint64_t size, bool bad_digest, ps_xfer_fin fin, void *ud);
void ps__xfer_peer_gone(ps_server *ps, const conn *c); /* the sending stops */
/* CKPT_FILE, CKPT_PIECE or CKPT_FILE_END from the coordinator (or the
 * primary's REPL of one); an error drops the file being received. */
int ps__xfer_frame(ps_server *ps, const wire_header *h, const uint8_t *pl);
/* The file `path` received whole (borrowed until ps__xfer_drop). */
int ps__xfer_take(ps_server *ps, const char *path, const uint8_t **buf, size_t *len);
void ps__xfer_drop(ps_server *ps);

/* ps_accept.c: the frames a data connection may send, by its identity
 * (static tables; valid for the process's life). */
const conn_accept *ps__accept(const conn *c);
/* The same for a peer that proved capability cap (and, a node, role). */
const conn_accept *ps__accept_as(auth_cap cap, int role);

#endif
