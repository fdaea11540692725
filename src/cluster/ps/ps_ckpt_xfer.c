/* ps_ckpt_xfer.c - a checkpoint file that travels over the coordinator's
 * connection instead of being written or read by the ps (the run
 * directory is not visible where it runs: coord_ckpt_route.c decides).
 *
 * Out (CHECKPOINT to WIRE_CKPT_COORD): a pipeline. CKPT_FILE announces
 * the size; then a worker thread encodes the next piece of the file
 * (safetensors_src: straight from the snapshot, hashed as it is handed
 * out) while the loop writes the ones before it, at most XFER_INFLIGHT
 * pieces of ps->repl_piece bytes existing at once (one being encoded,
 * the others queued on the socket): the first piece leaves after one
 * piece's encode, not the whole file's, and the memory is those pieces.
 * CKPT_FILE_END carries the digest, known once the last piece is hashed.
 * One piece is encoded at a time, each job queued from the completion of
 * the one before, so the stream's state is never touched by two threads.
 *
 * In (RESTORE from WIRE_CKPT_COORD): CKPT_FILE announces the size, the
 * pieces fill one buffer in order while being hashed, CKPT_FILE_END
 * checks size, count and digest; RESTORE then reads the tensors from it
 * (ps_ckpt.c). A replica gets the same frames from its primary (REPL), in
 * the same order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "base/manifest.h"
#include "base/safetensors.h"
#include "cluster/ps/ps_int.h"
#include "proto/wire_msgs.h"

#define XFER_INFLIGHT 3
#define XFER_MAX_FILE ((uint64_t)1 << 40) /* far beyond any shard: a corrupt size */

/* ============================== out ======================================= */

enum { SLOT_FREE, SLOT_ENCODING, SLOT_SENDING };

typedef struct xfer_slot {
  uv_work_t work;
  struct ps_xfer_out *x;
  uint8_t pre[12]; /* the piece's offset and byte count, encoded */
  uint8_t *buf;    /* ps->repl_piece bytes (owned), allocated on first use */
  size_t len;
  int state, rc;
  char why[256];   /* rc's message, from the worker thread */
} xfer_slot;

struct ps_xfer_out {
  ps_server *ps;
  conn *c;
  bool dead;     /* its connection is gone */
  safetensors_src *src; /* borrowed data; closed here */
  uint64_t size, off;   /* the file's bytes; handed to encodes so far */
  uint32_t pieces;
  int busy;      /* slots not free */
  bool encoding; /* a job holds src */
  bool bad_digest;
  int status;    /* the first failure */
  uint64_t t0, t_first, t_encoded; /* uv_hrtime: the start, the first piece queued, the last encoded */
  char why[512];
  xfer_slot slot[XFER_INFLIGHT];
  ps_xfer_fin fin;
  void *ud;
};

static void out_fail(ps_xfer_out *x, int status, const char *why) {
  if (x->status < 0) return;
  x->status = status;
  snprintf(x->why, sizeof x->why, "%s", why);
}

/* The end: CKPT_FILE_END with the digest unless something failed (the
 * receiver then fails the file on the CHECKPOINT_OK's status), and fin. */
static void out_finish(ps_xfer_out *x) {
  char digest[MANIFEST_DIGEST_MAX] = "";
  int rc = safetensors_src_close(x->src, x->status == 0 ? digest : NULL);
  if (rc < 0) out_fail(x, rc, err_msg());
  if (x->status == 0) {
    char sent[MANIFEST_DIGEST_MAX];
    snprintf(sent, sizeof sent, "%s", digest);
    if (x->bad_digest) sent[0] = sent[0] == '0' ? '1' : '0'; /* fault injection */
    wire_wr w;
    wire_wr_init(&w);
    wire_put_ckpt_file_end(&w, &(wire_msg_ckpt_file_end){x->size, x->pieces, WIRE_STR(sent)});
    if (conn_send_wr(x->c, &w, WIRE_CKPT_FILE_END, 0) < 0)
      out_fail(x, DRV_EIO, "the coordinator's connection closed during the transfer");
  }
  if (x->status == 0) /* the times show the pipeline: the first piece left before the last was made */
    log_info("checkpoint file streamed: %llu bytes in %u pieces, the first queued after %.3f ms, "
             "the last encoded after %.3f ms", (unsigned long long)x->size, x->pieces,
             (double)(x->t_first - x->t0) / 1e6, (double)(x->t_encoded - x->t0) / 1e6);
  if (x->ps->tx == x) x->ps->tx = NULL;
  for (int i = 0; i < XFER_INFLIGHT; i++) free(x->slot[i].buf);
  ps_xfer_fin fin = x->fin;
  void *ud = x->ud;
  int status = x->status;
  char why[512];
  snprintf(why, sizeof why, "%s", x->why);
  free(x);
  fin(ud, status, why, status == 0 ? digest : "");
}

static void out_pump(ps_xfer_out *x);

static void piece_written(void *arg) {
  xfer_slot *s = arg;
  s->state = SLOT_FREE;
  s->x->busy--;
  out_pump(s->x);
}

/* The worker's side: the next s->len bytes of the file into s->buf. */
static void encode_work(uv_work_t *w) {
  xfer_slot *s = w->data;
  if (!s->buf && !(s->buf = malloc(s->x->ps->repl_piece))) {
    s->rc = DRV_ENOMEM;
    snprintf(s->why, sizeof s->why, "out of memory for a piece of the checkpoint");
    return;
  }
  long long got = safetensors_src_read(s->x->src, (char *)s->buf, s->len);
  if (got == (long long)s->len) return;
  s->rc = got < 0 ? (int)got : DRV_EIO;
  snprintf(s->why, sizeof s->why, "%s", got < 0 ? err_msg() : "the encoder ended early");
}

/* The loop's side: the piece encoded goes on the socket (in order: one
 * encode at a time), and the next encode starts. */
static void encode_done(uv_work_t *w, int status) {
  xfer_slot *s = w->data;
  ps_xfer_out *x = s->x;
  x->encoding = false;
  if (status < 0 && s->rc == 0) s->rc = DRV_EIO, snprintf(s->why, sizeof s->why, "%s", uv_strerror(status));
  if (s->rc < 0 || x->dead) {
    out_fail(x, s->rc < 0 ? s->rc : DRV_EIO,
             s->rc < 0 ? s->why : "the coordinator's connection closed during the transfer");
    s->state = SLOT_FREE, x->busy--;
    out_pump(x);
    return;
  }
  uint64_t off = x->off - s->len;
  if (x->off == x->size) x->t_encoded = uv_hrtime();
  for (int i = 0; i < 8; i++) s->pre[i] = (uint8_t)(off >> (8 * i));
  for (int i = 0; i < 4; i++) s->pre[8 + i] = (uint8_t)((uint32_t)s->len >> (8 * i));
  conn_piece p[2] = {{s->pre, sizeof s->pre}, {s->buf, s->len}};
  s->state = SLOT_SENDING;
  x->pieces++;
  if (conn_send_refv(x->c, WIRE_CKPT_PIECE, 0, p, 2, piece_written, s) < 0) {
    x->dead = true; /* its done callback still comes */
    out_fail(x, DRV_EIO, "the coordinator's connection closed during the transfer");
  }
  if (x->pieces == 1) x->t_first = uv_hrtime();
  out_pump(x);
}

/* The next encode when none runs and a slot is free; the end once every
 * piece was written (or, after a failure, once nothing is in flight). */
static void out_pump(ps_xfer_out *x) {
  bool more = x->status == 0 && !x->dead && x->off < x->size;
  for (int i = 0; more && !x->encoding && i < XFER_INFLIGHT; i++) {
    xfer_slot *s = &x->slot[i];
    if (s->state != SLOT_FREE) continue;
    uint64_t left = x->size - x->off;
    *s = (xfer_slot){.x = x, .buf = s->buf, .state = SLOT_ENCODING,
                     .len = left < x->ps->repl_piece ? (size_t)left : x->ps->repl_piece};
    s->work.data = s;
    x->off += s->len;
    x->busy++;
    x->encoding = true;
    if (uv_queue_work(x->ps->loop, &s->work, encode_work, encode_done) < 0) {
      encode_work(&s->work); /* no thread to be had: inline */
      encode_done(&s->work, 0);
    }
    return;
  }
  if (x->busy > 0) return;
  if (x->dead) out_fail(x, DRV_EIO, "the coordinator's connection closed during the transfer");
  out_finish(x);
}

int ps__xfer_stream(ps_server *ps, conn *c, const char *path, safetensors_src *src,
                    uint64_t size, bool bad_digest, ps_xfer_fin fin, void *ud) {
  ps_xfer_out *x = calloc(1, sizeof *x);
  if (!x) {
    safetensors_src_close(src, NULL);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  *x = (ps_xfer_out){.ps = ps, .c = c, .src = src, .size = size, .bad_digest = bad_digest,
                     .fin = fin, .ud = ud};
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ckpt_file(&w, &(wire_msg_ckpt_file){size, WIRE_STR(path)});
  int rc = conn_send_wr(c, &w, WIRE_CKPT_FILE, 0);
  if (rc < 0) {
    safetensors_src_close(src, NULL);
    free(x);
    return rc;
  }
  ps->tx = x;
  x->t0 = uv_hrtime();
  out_pump(x);
  return 0;
}

void ps__xfer_peer_gone(ps_server *ps, const conn *c) {
  if (ps->tx && ps->tx->c == c) ps->tx->dead = true; /* its jobs' and writes' ends finish it */
}

/* ============================== in ======================================== */

struct ps_xfer_in {
  char path[4096];
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
  if ((rc = wire_str_copy(m.path, x->path, sizeof x->path)) < 0) return rc;
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
  char got[MANIFEST_DIGEST_MAX], want[MANIFEST_DIGEST_MAX];
  if ((rc = wire_str_copy(m.sha256, want, sizeof want)) < 0) return rc;
  if ((rc = manifest_digest_end(&x->d, got)) < 0) return rc;
  if (strcmp(got, want) != 0)
    return err_set(DRV_EPARSE, "%s: the bytes that came do not have the digest sent", x->path);
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
