/* ps_ckpt_xfer.c - a checkpoint file that travels over the coordinator's
 * connection instead of being written or read by the ps (the run
 * directory is not visible where it runs: coord_ckpt_route.c decides).
 *
 * Out (CHECKPOINT to WIRE_CKPT_COORD): the write thread encoded the
 * snapshot into one buffer (the file's bytes, hashed); it goes as
 * CKPT_FILE, CKPT_PIECEs of at most ps->repl_piece bytes sent straight
 * from the buffer, at most XFER_INFLIGHT queued at once (the next one
 * when one is written: the loop never waits for the whole file, and the
 * memory is the one buffer), then CKPT_FILE_END.
 *
 * In (RESTORE from WIRE_CKPT_COORD): CKPT_FILE announces size and digest,
 * the pieces fill one buffer in order while being hashed, CKPT_FILE_END
 * checks both; RESTORE then reads the tensors from it (ps_ckpt.c). A
 * replica gets the same frames from its primary (REPL), in the same order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/manifest.h"
#include "cluster/ps/ps_int.h"
#include "proto/wire_msgs.h"

#define XFER_INFLIGHT 2
#define XFER_MAX_FILE ((uint64_t)1 << 40) /* far beyond any shard: a corrupt size */

/* ============================== out ======================================= */

typedef struct xfer_slot {
  struct ps_xfer_out *x;
  uint8_t pre[12]; /* the piece's offset and byte count, encoded */
  bool busy;
} xfer_slot;

struct ps_xfer_out {
  ps_server *ps;
  conn *c;
  bool dead;     /* its connection is gone */
  uint8_t *buf;  /* the file (owned) */
  size_t len, off;
  uint32_t pieces;
  int inflight;
  xfer_slot slot[XFER_INFLIGHT];
  ps_xfer_fin fin;
  void *ud;
};

static void out_finish(ps_xfer_out *x, int status, const char *why) {
  if (x->ps->tx == x) x->ps->tx = NULL;
  free(x->buf);
  ps_xfer_fin fin = x->fin;
  void *ud = x->ud;
  free(x);
  fin(ud, status, why);
}

static void out_pump(ps_xfer_out *x);

static void piece_done(void *arg) {
  xfer_slot *s = arg;
  ps_xfer_out *x = s->x;
  s->busy = false;
  x->inflight--;
  out_pump(x);
}

static int send_piece(ps_xfer_out *x, xfer_slot *s) {
  size_t k = x->len - x->off < x->ps->repl_piece ? x->len - x->off : x->ps->repl_piece;
  /* the fields before the bytes: offset, then the bytes' length */
  for (int i = 0; i < 8; i++) s->pre[i] = (uint8_t)((uint64_t)x->off >> (8 * i));
  for (int i = 0; i < 4; i++) s->pre[8 + i] = (uint8_t)((uint32_t)k >> (8 * i));
  conn_piece p[2] = {{s->pre, sizeof s->pre}, {x->buf + x->off, k}};
  s->busy = true;
  s->x = x;
  x->inflight++;
  x->off += k;
  x->pieces++;
  return conn_send_refv(x->c, WIRE_CKPT_PIECE, 0, p, 2, piece_done, s);
}

/* The next pieces while fewer than XFER_INFLIGHT wait to be written; the
 * end once all are. */
static void out_pump(ps_xfer_out *x) {
  for (int i = 0; i < XFER_INFLIGHT && !x->dead && x->off < x->len; i++)
    if (!x->slot[i].busy && send_piece(x, &x->slot[i]) < 0) x->dead = true;
  if (x->inflight > 0) return;
  if (x->dead) {
    out_finish(x, DRV_EIO, "the coordinator's connection closed during the transfer");
    return;
  }
  if (x->off < x->len) return;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ckpt_file_end(&w, &(wire_msg_ckpt_file_end){x->len, x->pieces});
  int rc = conn_send_wr(x->c, &w, WIRE_CKPT_FILE_END, 0);
  out_finish(x, rc, rc < 0 ? "the coordinator's connection closed during the transfer" : "");
}

int ps__xfer_send(ps_server *ps, conn *c, const char *path, uint8_t *buf, size_t len,
                  const char *digest, ps_xfer_fin fin, void *ud) {
  ps_xfer_out *x = calloc(1, sizeof *x);
  if (!x) {
    free(buf);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  *x = (ps_xfer_out){.ps = ps, .c = c, .buf = buf, .len = len, .fin = fin, .ud = ud};
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ckpt_file(&w, &(wire_msg_ckpt_file){len, WIRE_STR(digest), WIRE_STR(path)});
  int rc = conn_send_wr(c, &w, WIRE_CKPT_FILE, 0);
  if (rc < 0) {
    free(buf);
    free(x);
    return rc;
  }
  ps->tx = x;
  out_pump(x);
  return 0;
}

void ps__xfer_peer_gone(ps_server *ps, const conn *c) {
  if (ps->tx && ps->tx->c == c) ps->tx->dead = true; /* its last writes' done finish it */
}

/* ============================== in ======================================== */

struct ps_xfer_in {
  char path[4096];
  char digest[MANIFEST_DIGEST_MAX]; /* announced */
  uint8_t *buf;
  uint64_t size, got;
  uint32_t pieces;
  manifest_digest d;
  bool whole; /* CKPT_FILE_END came and everything matched */
};

void ps__xfer_drop(ps_server *ps) {
  ps_xfer_in *x = ps->rx;
  if (!x) return;
  manifest_digest_drop(&x->d);
  free(x->buf);
  free(x);
  ps->rx = NULL;
}

static int on_file(ps_server *ps, const uint8_t *pl, uint32_t len) {
  wire_msg_ckpt_file m;
  int rc = wire_get_ckpt_file(pl, len, &m);
  if (rc < 0) return rc;
  ps__xfer_drop(ps); /* one at a time: a new one replaces what came before */
  if (m.size < 8 || m.size > XFER_MAX_FILE || m.size > SIZE_MAX)
    return err_set(DRV_EPARSE, "CKPT_FILE of %llu bytes", (unsigned long long)m.size);
  ps_xfer_in *x = calloc(1, sizeof *x);
  if (!x) return err_set(DRV_ENOMEM, "out of memory");
  ps->rx = x;
  if ((rc = wire_str_copy(m.path, x->path, sizeof x->path)) < 0 ||
      (rc = wire_str_copy(m.sha256, x->digest, sizeof x->digest)) < 0)
    return rc;
  if (!(x->buf = malloc((size_t)m.size)))
    return err_set(DRV_ENOMEM, "out of memory for a checkpoint of %llu bytes",
                   (unsigned long long)m.size);
  x->size = m.size;
  return manifest_digest_begin(&x->d, m.size);
}

static int on_piece(ps_server *ps, const uint8_t *pl, uint32_t len) {
  wire_msg_ckpt_piece m;
  int rc = wire_get_ckpt_piece(pl, len, &m);
  if (rc < 0) return rc;
  ps_xfer_in *x = ps->rx;
  if (!x || x->whole) return err_set(DRV_EPARSE, "CKPT_PIECE without a CKPT_FILE before it");
  if (m.offset != x->got || m.data.len > x->size - x->got)
    return err_set(DRV_EPARSE, "CKPT_PIECE of %u bytes at %llu: %llu of %llu came so far",
                   m.data.len, (unsigned long long)m.offset, (unsigned long long)x->got,
                   (unsigned long long)x->size);
  memcpy(x->buf + x->got, m.data.p, m.data.len);
  x->got += m.data.len;
  x->pieces++;
  return manifest_digest_update(&x->d, m.data.p, m.data.len);
}

static int on_end(ps_server *ps, const uint8_t *pl, uint32_t len) {
  wire_msg_ckpt_file_end m;
  int rc = wire_get_ckpt_file_end(pl, len, &m);
  if (rc < 0) return rc;
  ps_xfer_in *x = ps->rx;
  if (!x || x->whole) return err_set(DRV_EPARSE, "CKPT_FILE_END without a CKPT_FILE before it");
  if (m.size != x->size || x->got != x->size || m.pieces != x->pieces)
    return err_set(DRV_EPARSE, "CKPT_FILE_END: %llu bytes in %u pieces came, %llu in %u sent",
                   (unsigned long long)x->got, x->pieces, (unsigned long long)m.size, m.pieces);
  char got[MANIFEST_DIGEST_MAX];
  if ((rc = manifest_digest_end(&x->d, got)) < 0) return rc;
  if (strcmp(got, x->digest) != 0)
    return err_set(DRV_EPARSE, "%s: the bytes that came do not have the digest announced", x->path);
  x->whole = true;
  log_info("checkpoint file %s came from the coordinator: %llu bytes in %u pieces", x->path,
           (unsigned long long)x->size, x->pieces);
  return 0;
}

int ps__xfer_frame(ps_server *ps, const wire_header *h, const uint8_t *pl) {
  int rc = h->type == WIRE_CKPT_FILE    ? on_file(ps, pl, h->len)
           : h->type == WIRE_CKPT_PIECE ? on_piece(ps, pl, h->len)
                                        : on_end(ps, pl, h->len);
  if (rc < 0) { /* that transfer fails; a RESTORE from it then fails */
    log_warn("checkpoint transfer refused: %s", err_msg());
    ps__xfer_drop(ps);
  }
  return rc;
}

int ps__xfer_take(ps_server *ps, const char *path, const uint8_t **buf, size_t *len) {
  ps_xfer_in *x = ps->rx;
  if (!x || !x->whole || strcmp(x->path, path) != 0)
    return err_set(DRV_EIO, "RESTORE: %s did not come whole from the coordinator", path);
  *buf = x->buf;
  *len = (size_t)x->size;
  return 0;
}
