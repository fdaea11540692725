/* ps_ckpt.c - a ps's CHECKPOINT and RESTORE: a snapshot of its shards
 * taken on the loop between two updates and written by a thread as one
 * safetensors file, and a rollback of every shard to such a file (ps
 * failover). Where the file goes (CHECKPOINT `to`): written at the path,
 * streamed to HDFS, or streamed to the coordinator in pieces encoded by
 * worker threads as they go (ps_ckpt_xfer.c). See
 * ps_int.h for the state it shares with ps.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/manifest.h"
#include "numeric/optim.h"
#include "cluster/ps/ps_int.h"
#include "cluster/ps/ps_ckpt_sparse.h"
#include "base/safetensors.h"
#include "base/webhdfs.h"
#include "proto/wire_msgs.h"

/* A CHECKPOINT in progress: the request, then the snapshot (copies of the
 * shards' values and slots, taken on the loop between two updates) that
 * a thread writes as one safetensors file, so updates go on meanwhile. */
typedef struct ps_ckpt {
  uv_work_t work;
  ps_server *ps;
  peer *pe;         /* who asked; NULL once its connection closed */
  uint32_t req;
  uint64_t at_version, version;
  uint8_t to;       /* WIRE_CKPT_PATH, _COORD or _HDFS */
  char path[4096];
  uint32_t nnames;
  uint32_t *vars;   /* var ids and their names, as the request gave them */
  char **names;
  size_t n;         /* dense tensors in the snapshot: e[0 .. n) */
  size_t ne;        /* all of them: then the sparse tables' (sp's) */
  safetensors_entry *e;
  ps_spsnap sp;     /* the copies of the sparse tables' rows */
  char **tnames;    /* e[i].name, owned */
  float **data;     /* e[i].data, owned */
  size_t *sizes;    /* floats in data[i] */
  char **meta;      /* NULL-ended, owned */
  int status;
  char msg[1024];
  uint64_t bytes;
  char sha256[MANIFEST_DIGEST_MAX]; /* of the file, hashed as it was written */
  double pause_ms;  /* the copy: how long updates waited */
  double write_ms;  /* the write on the thread; to the coordinator, the stream */
  uint64_t t_start; /* when the stream to the coordinator started (uv_hrtime) */
  safetensors_times times; /* where write_ms went */
} ps_ckpt;

void ps__ckpt_free_spare(ps_server *ps) {
  for (size_t i = 0; i < ps->nspare; i++) free(ps->spare[i]);
  free(ps->spare), free(ps->spare_n);
  ps->spare = NULL, ps->spare_n = NULL;
  ps->nspare = 0;
}

/* A buffer of n floats kept from the last snapshot, or NULL. */
static float *take_spare(ps_server *ps, size_t n) {
  for (size_t i = 0; i < ps->nspare; i++)
    if (ps->spare[i] && ps->spare_n[i] == n) {
      float *p = ps->spare[i];
      ps->spare[i] = NULL;
      return p;
    }
  return NULL;
}

/* k's buffers become the spares of the next snapshot (the old spares go). */
static void keep_spare(ps_ckpt *k) {
  ps_server *ps = k->ps;
  ps__ckpt_free_spare(ps);
  if (!k->n || !(ps->spare = calloc(k->n, sizeof *ps->spare)) ||
      !(ps->spare_n = calloc(k->n, sizeof *ps->spare_n))) {
    free(ps->spare);
    ps->spare = NULL;
    return;
  }
  for (size_t i = 0; i < k->n; i++) {
    ps->spare[i] = k->data[i];
    ps->spare_n[i] = k->sizes[i];
    k->data[i] = NULL;
  }
  ps->nspare = k->n;
}

static void ckpt_free(ps_ckpt *k) {
  if (!k) return;
  if (k->ps && !k->ps->stopping && k->n) keep_spare(k);
  for (uint32_t i = 0; i < k->nnames; i++) free(k->names[i]);
  for (size_t i = 0; i < k->n; i++) free(k->tnames[i]), free(k->data[i]);
  free(k->sizes);
  ps_spsnap_free(&k->sp);
  for (size_t i = 0; k->meta && k->meta[i]; i++) free(k->meta[i]);
  free(k->vars), free(k->names), free(k->e), free(k->tnames), free(k->data), free(k->meta);
  free(k);
}

/* Reads the (var, name) items of CHECKPOINT or RESTORE into vars/names. */
static int read_names(const wire_items *items, uint32_t **vars, char ***names) {
  *vars = calloc((size_t)items->n + 1, sizeof **vars);
  *names = calloc((size_t)items->n + 1, sizeof **names);
  if (!*vars || !*names) return err_set(DRV_ENOMEM, "out of memory");
  wire_rd r = wire_items_reader(items);
  for (uint32_t i = 0; i < items->n; i++) {
    wire_item_var_name it;
    wire_get_item_var_name(&r, &it);
    (*vars)[i] = it.var;
    if (!((*names)[i] = malloc(it.name.len + 1))) return err_set(DRV_ENOMEM, "out of memory");
    wire_str_copy(it.name, (*names)[i], it.name.len + 1);
  }
  return 0;
}

static const char *name_of(uint32_t var, const uint32_t *vars, char *const *names, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (vars[i] == var) return names[i];
  return NULL;
}

static int add_tensor(ps_ckpt *k, const shard *s, const char *name, const float *src) {
  size_t i = k->n;
  k->data[i] = take_spare(k->ps, s->n);
  if (!k->data[i]) k->data[i] = malloc(s->n * sizeof(float) + 1);
  if (!(k->tnames[i] = strdup(name)) || !k->data[i])
    return err_set(DRV_ENOMEM, "out of memory for a checkpoint of var %u", s->var);
  k->sizes[i] = s->n;
  memcpy(k->data[i], src, s->n * sizeof(float));
  k->e[i] = (safetensors_entry){k->tnames[i], s->ndim, s->shape, k->data[i], NULL};
  k->n++;
  return 0;
}

static int add_meta(ps_ckpt *k, size_t *m, const char *key, const char *fmt, ...) {
  char val[128];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(val, sizeof val, fmt, ap);
  va_end(ap);
  if (!(k->meta[*m] = strdup(key)) || !(k->meta[*m + 1] = strdup(val)))
    return err_set(DRV_ENOMEM, "out of memory");
  *m += 2;
  return 0;
}

/* The sparse tables' entries and metadata after the dense ones. */
static int add_sparse(ps_ckpt *k, size_t *m) {
  memcpy(k->e + k->n, k->sp.e, k->sp.n * sizeof *k->e);
  k->ne = k->n + k->sp.n;
  for (size_t i = 0; i < k->sp.nmeta; i++)
    if (!(k->meta[(*m)++] = strdup(k->sp.meta[i]))) return err_set(DRV_ENOMEM, "out of memory");
  return 0;
}

/* The copy: every shard's values, slots ("optim.<name>.<k>") and, in the
 * metadata, its first row and update count; then the rows of the sparse
 * tables (ps_ckpt_sparse.h). The shape of a tensor is the shard's, not
 * the whole variable's (export.c merges the ps files). */
static int snapshot(ps_server *ps, ps_ckpt *k) {
  size_t cap = 0;
  for (int i = 0; i < ps->nshards; i++) cap += 1 + (size_t)optim_nslots(&ps->shards[i].cfg);
  int rc = ps_spsnap_take(ps->sparse, k->vars, k->names, k->nnames, &k->sp);
  if (rc < 0) return rc;
  k->e = calloc(cap + k->sp.n + 1, sizeof *k->e);
  k->tnames = calloc(cap + 1, sizeof *k->tnames);
  k->data = calloc(cap + 1, sizeof *k->data);
  k->sizes = calloc(cap + 1, sizeof *k->sizes);
  k->meta = calloc(4 * (size_t)ps->nshards + 3 + k->sp.nmeta, sizeof *k->meta);
  if (!k->e || !k->tnames || !k->data || !k->sizes || !k->meta)
    return err_set(DRV_ENOMEM, "out of memory");
  size_t m = 0;
  rc = add_meta(k, &m, "version", "%llu", (unsigned long long)ps->version);
  for (int i = 0; i < ps->nshards && rc == 0; i++) {
    const shard *s = &ps->shards[i];
    const char *name = name_of(s->var, k->vars, k->names, k->nnames);
    if (!name) return err_set(DRV_EINVAL, "CHECKPOINT: no name for var %u", s->var);
    char key[600];
    rc = add_tensor(k, s, name, s->val->data);
    for (int j = 0; j < optim_nslots(&s->cfg) && rc == 0; j++) {
      snprintf(key, sizeof key, "optim.%s.%d", name, j);
      rc = add_tensor(k, s, key, s->slots[j]);
    }
    snprintf(key, sizeof key, "%s.row0", name);
    if (rc == 0) rc = add_meta(k, &m, key, "%llu", (unsigned long long)s->row0);
    snprintf(key, sizeof key, "%s.updates", name);
    if (rc == 0) rc = add_meta(k, &m, key, "%lld", (long long)s->updates);
  }
  if (rc == 0) rc = add_sparse(k, &m);
  k->version = ps->version;
  return rc;
}

static void ckpt_reply(ps_ckpt *k) {
  if (!k->pe || k->pe->doomed) return;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_checkpoint_ok(&w, &(wire_msg_checkpoint_ok){k->status, k->version, k->bytes,
                                                       WIRE_STR(k->msg), WIRE_STR(k->sha256)});
  conn_send_wr(k->pe->c, &w, WIRE_CHECKPOINT_OK, k->req);
}

/* To HDFS: the file's bytes stream from the snapshot to the DataNode as
 * the upload asks for them (never whole in memory), hashed as they go. */
static int write_hdfs(ps_ckpt *k) {
  safetensors_src *src;
  uint64_t size;
  int rc = safetensors_src_open(k->path, k->e, k->ne, (const char *const *)k->meta, &src, &size);
  if (rc < 0) return rc;
  rc = webhdfs_create_stream(k->path, (int64_t)size, safetensors_src_read, src, 1, 0);
  int hc = safetensors_src_close(src, k->sha256);
  if (rc == 0 && hc < 0) rc = hc;
  k->bytes = rc == 0 ? size : 0;
  return rc;
}

static void ckpt_write_cb(uv_work_t *wk) {
  ps_ckpt *k = wk->data;
  uint64_t t0 = uv_hrtime();
  if (k->to == WIRE_CKPT_HDFS)
    k->status = write_hdfs(k);
  else
    k->status = safetensors_write_hashed(k->path, k->e, k->ne, (const char *const *)k->meta,
                                         k->sha256, &k->bytes, &k->times);
  k->write_ms = (double)(uv_hrtime() - t0) / 1e6;
  if (k->status < 0) snprintf(k->msg, sizeof k->msg, "%s", err_msg());
}

/* The last step of either way: CHECKPOINT_OK, and the next one may come. */
static void ckpt_done(ps_ckpt *k) {
  ckpt_reply(k);
  if (k->ps->ck == k) k->ps->ck = NULL;
  ckpt_free(k);
}

static void sent_cb(void *ud, int status, const char *why, const char *digest) {
  ps_ckpt *k = ud;
  k->write_ms = (double)(uv_hrtime() - k->t_start) / 1e6;
  if (status < 0) {
    k->status = status;
    k->bytes = 0;
    snprintf(k->msg, sizeof k->msg, "%s", why);
    log_warn("checkpoint %s failed: %s", k->path, k->msg);
  } else {
    snprintf(k->sha256, sizeof k->sha256, "%s", digest);
    log_info("checkpoint %s: version %llu, %llu bytes sent to the coordinator, training paused "
             "%.2f ms for the copy, encoded and queued in %.1f ms", k->path,
             (unsigned long long)k->version, (unsigned long long)k->bytes, k->pause_ms, k->write_ms);
  }
  ckpt_done(k);
}

/* Fault injection for tests (test_ckpt_remote.sh): DROVER_FAULT=
 * ckpt-bad-digest:ps:I sends a digest the bytes do not have. */
static bool fault(const ps_server *ps, const char *what) {
  const char *f = getenv("DROVER_FAULT");
  char want[64];
  snprintf(want, sizeof want, "%s:ps:%u", what, ps->index);
  return f && strcmp(f, want) == 0;
}

/* To the coordinator: the file streams from the snapshot as worker
 * threads encode it; the answer once its end is queued (sent_cb). */
static int stream_file(ps_ckpt *k) {
  if (!k->pe || k->pe->doomed) return err_set(DRV_EIO, "the coordinator's connection closed");
  safetensors_src *src;
  int rc = safetensors_src_open(k->path, k->e, k->ne, (const char *const *)k->meta, &src, &k->bytes);
  if (rc < 0) return rc;
  k->t_start = uv_hrtime();
  return ps__xfer_stream(k->ps, k->pe->c, k->path, src, k->bytes, fault(k->ps, "ckpt-bad-digest"),
                         sent_cb, k);
}

static void ckpt_after_cb(uv_work_t *wk, int status) {
  ps_ckpt *k = wk->data;
  if (status < 0 && k->status == 0) {
    k->status = DRV_EIO;
    snprintf(k->msg, sizeof k->msg, "%.900s: %s", k->path, uv_strerror(status));
  }
  if (k->status < 0) log_warn("checkpoint %s failed: %s", k->path, k->msg);
  else if (k->to == WIRE_CKPT_HDFS)
    log_info("checkpoint %s: version %llu, %llu bytes, training paused %.2f ms for the copy, "
             "streamed to HDFS (hashed as it went) in %.1f ms", k->path,
             (unsigned long long)k->version, (unsigned long long)k->bytes, k->pause_ms, k->write_ms);
  else log_info("checkpoint %s: version %llu, %llu bytes, training paused %.2f ms for the copy, "
                "written in %.1f ms (writes %.1f, fsync and rename %.1f, then the hash %.1f)",
                k->path, (unsigned long long)k->version, (unsigned long long)k->bytes,
                k->pause_ms, k->write_ms, k->times.write, k->times.commit, k->times.hash);
  ckpt_done(k);
}

/* Takes the copy now and starts the write; a failure is answered at once. */
static void ckpt_take(ps_server *ps, ps_ckpt *k) {
  uint64_t t0 = uv_hrtime();
  int rc = snapshot(ps, k);
  k->pause_ms = (double)(uv_hrtime() - t0) / 1e6;
  k->work.data = k; /* taken: ps__ckpt_version_reached and _peer_gone leave it be */
  if (rc == 0 && k->to == WIRE_CKPT_COORD) rc = stream_file(k);
  else if (rc == 0 && uv_queue_work(ps->loop, &k->work, ckpt_write_cb, ckpt_after_cb) < 0)
    rc = err_set(DRV_EIO, "cannot start the write");
  if (rc == 0) return;
  k->status = rc;
  snprintf(k->msg, sizeof k->msg, "%s", err_msg());
  ckpt_reply(k);
  ps->ck = NULL;
  ckpt_free(k);
}

/* Sync: the version just moved on; a CHECKPOINT waiting for it is taken
 * now, before any gradient of the next version is summed. */
void ps__ckpt_version_reached(ps_server *ps) {
  ps_ckpt *k = ps->ck;
  if (k && !k->work.data && (k->at_version <= ps->version || ps__sync_done(ps)))
    ckpt_take(ps, k);
}

void ps__ckpt_peer_gone(ps_server *ps, const peer *pe) {
  if (ps->ck && ps->ck->pe == pe) ps->ck->pe = NULL;
  if (ps->ck && !ps->ck->work.data && !ps->ck->pe) { /* not taken yet: nobody wants it */
    ckpt_free(ps->ck);
    ps->ck = NULL;
  }
}

int ps__on_checkpoint(ps_server *ps, peer *pe, const wire_header *h, const uint8_t *pl) {
  wire_msg_checkpoint m;
  int rc = wire_get_checkpoint(pl, h->len, &m);
  if (rc < 0) return rc;
  ps_ckpt *k = calloc(1, sizeof *k);
  if (!k) return err_set(DRV_ENOMEM, "out of memory");
  *k = (ps_ckpt){.ps = ps, .pe = pe, .req = h->req, .at_version = m.at_version,
                 .nnames = m.names.n, .to = m.to};
  if ((rc = wire_str_copy(m.path, k->path, sizeof k->path)) < 0 ||
      (rc = read_names(&m.names, &k->vars, &k->names)) < 0) {
    ckpt_free(k);
    return rc;
  }
  if (ps->ck) { /* one at a time: this one fails, the ps goes on */
    k->status = DRV_EINVAL;
    snprintf(k->msg, sizeof k->msg, "a checkpoint is being written already");
  } else if (ps->sync && m.at_version && m.at_version < ps->version && ps->version < ps->target) {
    k->status = DRV_ERANGE; /* the coordinator asks again */
    snprintf(k->msg, sizeof k->msg, "version %llu is past (the ps is at %llu)",
             (unsigned long long)m.at_version, (unsigned long long)ps->version);
  }
  if (k->status < 0) {
    ckpt_reply(k);
    ckpt_free(k);
    return 0;
  }
  ps->ck = k;
  if (!ps->sync || m.at_version == 0 || m.at_version <= ps->version || ps__sync_done(ps))
    ckpt_take(ps, k);
  return 0;
}

/* Loads shard s's values, slots and update count named `name` from f. */
static int restore_shard(shard *s, const safetensors_file *f, const char *name) {
  char key[600];
  const safetensors_tensor *t = safetensors_find(f, name);
  if (!t || t->numel != (int64_t)s->n)
    return err_set(DRV_EINVAL, "RESTORE: %s is %s in the checkpoint", name,
                   t ? "of another size" : "missing");
  int rc = ps__blob_own(s);
  if (rc < 0) return rc;
  memcpy(s->val->data, t->data, s->n * sizeof(float));
  for (int j = 0; j < optim_nslots(&s->cfg); j++) {
    snprintf(key, sizeof key, "optim.%s.%d", name, j);
    const safetensors_tensor *sl = safetensors_find(f, key);
    if (!sl || sl->numel != (int64_t)s->n)
      return err_set(DRV_EINVAL, "RESTORE: %s is missing or of another size", key);
    memcpy(s->slots[j], sl->data, s->n * sizeof(float));
  }
  snprintf(key, sizeof key, "%s.updates", name);
  const char *u = safetensors_meta(f, key);
  s->updates = u ? strtoll(u, NULL, 10) : 0;
  s->acc_n = 0;
  return 0;
}

/* A shard's file from HDFS (OPEN), whole: a restore needs all of it. */
static int read_hdfs(const char *url, safetensors_file *f) {
  char *buf;
  size_t len;
  *f = (safetensors_file){0};
  int rc = webhdfs_read_all(url, &buf, &len, SIZE_MAX / 2);
  if (rc < 0) return rc;
  rc = safetensors_read_mem(url, buf, len, f);
  free(buf);
  return rc;
}

/* The checkpoint file: read at path, or the one that came for it. */
static int read_file(ps_server *ps, const char *path, uint8_t from, safetensors_file *f) {
  const uint8_t *buf;
  size_t len;
  if (from == WIRE_CKPT_HDFS) return read_hdfs(path, f);
  if (from != WIRE_CKPT_COORD) return safetensors_read(path, f);
  int rc = ps__xfer_take(ps, path, &buf, &len);
  if (rc == 0) rc = safetensors_read_mem(path, buf, len, f);
  else *f = (safetensors_file){0};
  return rc;
}

/* Every shard and every sparse table's rows from f (freed here). */
static int apply_file(ps_server *ps, safetensors_file *f, const uint32_t *vars,
                      char *const *names, uint32_t n) {
  int rc = 0;
  for (int i = 0; i < ps->nshards && rc == 0; i++) {
    const char *name = name_of(ps->shards[i].var, vars, names, n);
    rc = name ? restore_shard(&ps->shards[i], f, name)
              : err_set(DRV_EINVAL, "RESTORE: no name for var %u", ps->shards[i].var);
  }
  if (rc == 0) rc = ps_spsnap_restore(ps->sparse, f, vars, names, n);
  safetensors_free(f);
  return rc;
}

/* A RESTORE's end, either way: the version rolls back, RESTORE_OK (a
 * replica applying its primary's RESTORE has no c and answers nothing). */
static int restore_end(ps_server *ps, conn *c, uint32_t req, uint64_t version, const char *path,
                       int rc) {
  char msg[1024] = "";
  if (rc < 0) {
    snprintf(msg, sizeof msg, "%s", err_msg());
    log_warn("restore from %s failed: %s", path, msg);
  } else {
    ps->version = version;
    ps->agg = 0;
    ps->served = false; /* versions from `version` again (a barrier's hold_at stays) */
    ps->restored = true;
    log_info("restored from %s: version %llu", path, (unsigned long long)ps->version);
    /* A PUSH still unread on a worker's connection was computed before
     * the rollback: closing those connections drops it unread (the
     * workers, rolled back already, connect again for their next step). */
    for (int i = 0; i < ps->peers.n; i++) {
      ps__sparse_pending_drop(ps->peers.items[i]); /* row gradients waiting for such a PUSH */
      if (ps->peers.items[i]->c != c && ps->peers.items[i]->pushed)
        conn_close(ps->peers.items[i]->c, "restored: pushes from before are not taken");
    }
  }
  ps__serve_held(ps); /* the PULLs that waited for the read, too */
  if (!c) return 0;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_restore_ok(&w, &(wire_msg_restore_ok){rc < 0 ? rc : 0, WIRE_STR(msg)});
  return conn_send_wr(c, &w, WIRE_RESTORE_OK, req);
}

/* A RESTORE from HDFS on the coordinator's request: its file is read by a
 * worker thread (a slow or hung NameNode or DataNode must not stall the
 * loop: heartbeats, replies), then applied on the loop. Meanwhile PULLs
 * wait (ps.c, must_hold) and a PUSH is taken as before a synchronous
 * RESTORE (the values it changed are overwritten, its connection closed).
 * A replica applying its primary's RESTORE reads on its loop: the frames
 * after it must apply after it. */
struct ps_restore {
  uv_work_t work;
  ps_server *ps;
  conn *c;  /* who asked; NULL once its connection closed */
  uint32_t req, n;
  uint64_t version;
  char path[4096];
  uint32_t *vars;
  char **names;
  safetensors_file f;
  int rc;
  char why[1024];
};

static void restore_free(ps_restore *r) {
  for (uint32_t i = 0; r->names && i < r->n; i++) free(r->names[i]);
  free(r->vars), free(r->names);
  free(r);
}

static void restore_read_cb(uv_work_t *w) {
  ps_restore *r = w->data;
  if ((r->rc = read_hdfs(r->path, &r->f)) < 0) snprintf(r->why, sizeof r->why, "%s", err_msg());
}

static void restore_after_cb(uv_work_t *w, int status) {
  ps_restore *r = w->data;
  ps_server *ps = r->ps;
  ps->rs = NULL;
  int rc = r->rc < 0 ? err_set(r->rc, "%s", r->why)
           : status < 0 ? err_set(DRV_EIO, "%s: %s", r->path, uv_strerror(status)) : 0;
  if (ps->stopping) { /* its shards are gone */
    safetensors_free(&r->f);
    restore_free(r);
    return;
  }
  if (rc == 0) rc = apply_file(ps, &r->f, r->vars, r->names, r->n);
  else safetensors_free(&r->f);
  restore_end(ps, r->c, r->req, r->version, r->path, rc);
  restore_free(r);
}

void ps__restore_peer_gone(ps_server *ps, const conn *c) {
  if (ps->rs && ps->rs->c == c) ps->rs->c = NULL;
}

/* Starts the read of an HDFS RESTORE; r is owned here from then on. */
static int restore_queue(ps_server *ps, ps_restore *r) {
  if (ps->rs) return err_set(DRV_EINVAL, "RESTORE: a restore is being read already");
  r->work.data = r;
  if (uv_queue_work(ps->loop, &r->work, restore_read_cb, restore_after_cb) < 0)
    return err_set(DRV_EIO, "RESTORE: cannot start the read");
  ps->rs = r;
  log_info("restore from %s: reading it on a worker thread", r->path);
  return 0;
}

int ps__on_restore(ps_server *ps, conn *c, const wire_header *h, const uint8_t *pl) {
  wire_msg_restore m;
  int rc = wire_get_restore(pl, h->len, &m);
  if (rc < 0) return rc;
  ps_restore *r = calloc(1, sizeof *r);
  if (!r) return err_set(DRV_ENOMEM, "out of memory");
  *r = (ps_restore){.ps = ps, .c = c, .req = h->req, .n = m.names.n, .version = m.version};
  if ((rc = wire_str_copy(m.path, r->path, sizeof r->path)) == 0)
    rc = read_names(&m.names, &r->vars, &r->names);
  if (rc == 0 && c && r->path[0] && m.from == WIRE_CKPT_HDFS && (rc = restore_queue(ps, r)) == 0)
    return 0;
  if (rc == 0 && r->path[0]) { /* no path: no checkpoint yet, the values VAR_INIT gave */
    rc = read_file(ps, r->path, m.from, &r->f);
    ps__xfer_drop(ps);
    rc = rc == 0 ? apply_file(ps, &r->f, r->vars, r->names, r->n) : (safetensors_free(&r->f), rc);
  }
  rc = restore_end(ps, c, h->req, m.version, r->path, rc);
  restore_free(r);
  return rc;
}
