/* coord_ckpt_xfer.c - checkpoint files of a ps that cannot see the run
 * directory (coord_ckpt_route.c), carried over its data connection in
 * bounded pieces (wire_msgs.h, CKPT_FILE).
 *
 * In (a checkpoint): the CHECKPOINT told the ps to send its file; its
 * CKPT_FILE (size), CKPT_PIECEs in order (sent as the ps encodes them)
 * and CKPT_FILE_END (size, count, digest) come before its CHECKPOINT_OK.
 * Each piece is written to a temporary beside ps-<i>.safetensors and
 * hashed; at the end size, piece count and digest must be the ones the
 * ps sent, and only then the temporary is
 * fsynced and renamed (afile.h), as the ps does when it writes the file
 * itself. The writes, the hash and the commit run on libuv's worker
 * threads (recv_job), so a big shard does not stall the loop; a
 * CHECKPOINT_OK that comes before the commit ended waits for it.
 * Anything else fails that ps's file, so that checkpoint fails
 * as when a ps's disk is full; frames of a transfer nobody asked for are
 * refused (logged, dropped) and change nothing.
 *
 * Out (a RESTORE): the file of the manifest's checkpoint is read, checked
 * against the manifest's digest as it is read, and queued in pieces
 * before the RESTORE that names it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/afile.h"
#include "base/err.h"
#include "base/log.h"
#include "base/manifest.h"
#include "cluster/coord/coord_fit_int.h"
#include "proto/wire_msgs.h"

#define XFER_PIECE (4u << 20)

enum { XF_NONE, XF_EXPECT, XF_RECV, XF_COMMIT, XF_DONE, XF_FAILED };

/* A piece received, waiting for the writer. */
typedef struct piece {
  struct piece *next;
  size_t len;
  uint8_t data[];
} piece;

/* One file as it comes: its pieces are written to the temporary and
 * hashed on libuv's worker threads, a batch at a time and in order, and
 * at the end checked, fsynced and renamed there too; the loop only copies
 * each piece (a big shard's writes, hash and fsync would stall it; the
 * pieces a slow disk has not taken yet wait in memory). The job owns the
 * temporary. A transfer that ends meanwhile orphans it (x NULL): it is
 * freed, and its file removed, once its batch is done. */
typedef struct recv_job {
  uv_work_t work;
  struct coord_xfer *x; /* NULL once orphaned */
  coord_fit_state *f;
  int k, rc;
  afile file;
  manifest_digest d;
  char path[4200];
  char want[MANIFEST_DIGEST_MAX]; /* the digest CKPT_FILE_END sent: set before the last batch */
  piece *pending, **tail;         /* the loop's */
  piece *batch;                   /* the worker's, while busy */
  bool busy, ended, last, open, committed;
  char why[512];
} recv_job;

struct coord_xfer {
  int state;
  char path[4200];
  char digest[MANIFEST_DIGEST_MAX]; /* CKPT_FILE_END's */
  uint64_t size, got;
  uint32_t pieces;
  char why[512];
  recv_job *job;    /* from CKPT_FILE until the commit ended */
  wire_header ok_h; /* a CHECKPOINT_OK that came before the commit ended */
  uint8_t *ok;
};

static coord_xfer *xfer_of(coord_fit_state *f, int k) {
  if (k < 0 || k >= f->nps) return NULL;
  if (!f->xfer) f->xfer = calloc((size_t)f->nps, sizeof *f->xfer);
  return f->xfer ? &f->xfer[k] : NULL;
}

static void pieces_free(piece *p) {
  while (p) {
    piece *n = p->next;
    free(p);
    p = n;
  }
}

static void job_free(recv_job *j) {
  if (j->open) afile_abort(&j->file);
  if (j->committed && !j->x) unlink(j->path); /* the checkpoint was given up meanwhile */
  manifest_digest_drop(&j->d);
  pieces_free(j->pending);
  pieces_free(j->batch);
  free(j);
}

static void xfer_close(coord_xfer *x) {
  if (x->job) {
    x->job->x = NULL;
    if (!x->job->busy) job_free(x->job);
  }
  x->job = NULL;
  free(x->ok);
  x->ok = NULL;
}

void coord__xfer_abort(coord_fit_state *f, int k, const char *why) {
  coord_xfer *x = f->xfer && k >= 0 && k < f->nps ? &f->xfer[k] : NULL;
  if (!x || x->state == XF_NONE) return;
  xfer_close(x);
  if (!why) {
    x->state = XF_NONE;
    return;
  }
  x->state = XF_FAILED;
  snprintf(x->why, sizeof x->why, "%s", why);
}

void coord__xfer_free(coord_fit_state *f) {
  for (int k = 0; f->xfer && k < f->nps; k++) coord__xfer_abort(f, k, NULL);
  free(f->xfer);
  f->xfer = NULL;
}

int coord__xfer_expect(coord_fit_state *f, int k, const char *path) {
  coord_xfer *x = xfer_of(f, k);
  if (!x) return err_set(DRV_ENOMEM, "out of memory");
  xfer_close(x);
  memset(x, 0, sizeof *x);
  x->state = XF_EXPECT;
  snprintf(x->path, sizeof x->path, "%s", path);
  return 0;
}

/* The transfer fails: what it wrote goes, the CHECKPOINT_OK says so. */
static void failed(coord_xfer *x, int k, const char *fmt, const char *detail) {
  xfer_close(x);
  x->state = XF_FAILED;
  char what[256];
  snprintf(what, sizeof what, fmt, detail);
  snprintf(x->why, sizeof x->why, "ps:%d: its file did not come whole: %s", k, what);
  log_warn("%s", x->why);
}

/* ---- the worker's side: a batch written and hashed; the last checked
 * and committed ---- */

static void job_fail(recv_job *j, const char *why) {
  if (j->rc == 0) j->rc = DRV_EIO, snprintf(j->why, sizeof j->why, "%s", why);
}

static void job_finish(recv_job *j) {
  char got[MANIFEST_DIGEST_MAX];
  if (j->rc == 0 && (manifest_digest_end(&j->d, got) < 0 || strcmp(got, j->want) != 0))
    job_fail(j, "its bytes do not have the SHA-256 announced");
  if (j->rc < 0) return;
  j->open = false;
  if (afile_commit(&j->file, 0644) < 0) job_fail(j, err_msg());
  else j->committed = true;
}

static void job_work(uv_work_t *w) {
  recv_job *j = w->data;
  for (piece *p = j->batch; p && j->rc == 0; p = p->next) {
    if (afile_write(&j->file, p->data, p->len) < 0) job_fail(j, strerror(j->file.err));
    else if (manifest_digest_update(&j->d, p->data, p->len) < 0) job_fail(j, err_msg());
  }
  if (j->last) job_finish(j);
}

static void kick(recv_job *j);

/* The loop's side once the commit ended: the transfer's result, and its
 * CHECKPOINT_OK, held till now, handed on. */
static void job_ended(recv_job *j) {
  coord_xfer *x = j->x;
  coord_fit_state *f = j->f;
  int k = j->k;
  x->job = NULL;
  uint8_t *ok = x->ok; /* taken first: failed() drops what x holds */
  wire_header h = x->ok_h;
  x->ok = NULL;
  if (j->rc < 0) failed(x, k, "%s", j->why);
  else x->state = XF_DONE;
  job_free(j);
  if (ok) coord__ckpt_frame(f, k, &h, ok);
  free(ok);
}

static void job_done(uv_work_t *w, int status) {
  recv_job *j = w->data;
  pieces_free(j->batch);
  j->batch = NULL;
  j->busy = false;
  if (status < 0) job_fail(j, uv_strerror(status));
  if (!j->x) job_free(j);
  else if (j->last) job_ended(j);
  else if (j->rc < 0) failed(j->x, j->k, "%s", j->why); /* frees j */
  else kick(j);
}

/* The pieces so far to a worker (inline when none can be had). */
static void kick(recv_job *j) {
  if (j->busy || (!j->pending && !j->ended)) return;
  j->batch = j->pending;
  j->pending = NULL;
  j->tail = &j->pending;
  j->last = j->ended;
  j->busy = true;
  j->work.data = j;
  if (uv_queue_work(j->f->c->loop, &j->work, job_work, job_done) == 0) return;
  job_work(&j->work);
  job_done(&j->work, 0);
}

/* ---- the loop's side: the frames ---- */

static int on_file(coord_fit_state *f, coord_xfer *x, int k, const uint8_t *pl, uint32_t len) {
  wire_msg_ckpt_file m;
  char path[4200];
  if (wire_get_ckpt_file(pl, len, &m) < 0) return -1;
  if (wire_str_copy(m.path, path, sizeof path) < 0 || strcmp(path, x->path) != 0) return -1;
  if (m.size < 8) {
    failed(x, k, "%s", "a malformed CKPT_FILE");
    return 0;
  }
  x->size = m.size;
  recv_job *j = calloc(1, sizeof *j);
  if (!j) {
    failed(x, k, "%s", "out of memory");
    return 0;
  }
  *j = (recv_job){.x = x, .f = f, .k = k};
  j->tail = &j->pending;
  snprintf(j->path, sizeof j->path, "%s", x->path);
  x->job = j;
  if (manifest_digest_begin(&j->d, m.size) < 0 || afile_open(&j->file, j->path) < 0) {
    failed(x, k, "%s", err_msg());
    return 0;
  }
  j->open = true;
  x->state = XF_RECV;
  return 0;
}

static void on_piece(coord_xfer *x, int k, const uint8_t *pl, uint32_t len) {
  wire_msg_ckpt_piece m;
  char detail[160];
  if (wire_get_ckpt_piece(pl, len, &m) < 0 || m.offset != x->got ||
      m.data.len > x->size - x->got) {
    snprintf(detail, sizeof detail, "a piece at %" PRIu64 " of %u bytes after %" PRIu64 " of %"
             PRIu64, m.offset, m.data.len, x->got, x->size);
    failed(x, k, "%s", detail);
    return;
  }
  piece *p = malloc(sizeof *p + m.data.len);
  if (!p) {
    failed(x, k, "%s", "out of memory");
    return;
  }
  p->next = NULL;
  p->len = m.data.len;
  memcpy(p->data, m.data.p, m.data.len);
  *x->job->tail = p;
  x->job->tail = &p->next;
  x->got += m.data.len;
  x->pieces++;
  kick(x->job);
}

static void on_end(coord_xfer *x, int k, const uint8_t *pl, uint32_t len) {
  wire_msg_ckpt_file_end m;
  char detail[160];
  if (wire_get_ckpt_file_end(pl, len, &m) < 0 || m.size != x->size || x->got != x->size ||
      m.pieces != x->pieces || wire_str_copy(m.sha256, x->digest, sizeof x->digest) < 0) {
    snprintf(detail, sizeof detail, "%" PRIu64 " bytes in %u pieces came of %" PRIu64 " announced",
             x->got, x->pieces, x->size);
    failed(x, k, "%s", detail);
    return;
  }
  x->state = XF_COMMIT; /* its CHECKPOINT_OK waits for the commit */
  /* No batch of the job reads `want` before the last one, queued after this */
  snprintf(x->job->want, sizeof x->job->want, "%s", x->digest);
  x->job->ended = true;
  kick(x->job);
}

void coord__xfer_frame(coord_fit_state *f, int k, const wire_header *h, const uint8_t *pl) {
  coord_xfer *x = f->xfer && k >= 0 && k < f->nps ? &f->xfer[k] : NULL;
  int want = h->type == WIRE_CKPT_FILE ? XF_EXPECT : XF_RECV;
  if (x && x->state == XF_FAILED) return; /* the rest of a transfer failed already */
  if (!x || x->state != want ||
      (h->type == WIRE_CKPT_FILE && on_file(f, x, k, pl, h->len) < 0)) {
    log_warn("refused %s from ps:%d: no transfer of its is at that point", wire_type_name(h->type), k);
    rundir_event(&f->c->rd, "refused %s from ps:%d: no checkpoint asked for it", wire_type_name(h->type), k);
    return;
  }
  if (h->type == WIRE_CKPT_PIECE) on_piece(x, k, pl, h->len);
  else if (h->type == WIRE_CKPT_FILE_END) on_end(x, k, pl, h->len);
}

bool coord__xfer_hold(coord_fit_state *f, int k, const wire_header *h, const uint8_t *pl) {
  coord_xfer *x = f->xfer && k >= 0 && k < f->nps ? &f->xfer[k] : NULL;
  if (!x || x->state != XF_COMMIT || x->ok) return false;
  if (!(x->ok = malloc(h->len + 1))) return false; /* answered now: as a failed commit */
  memcpy(x->ok, pl, h->len);
  x->ok_h = *h;
  return true;
}

int coord__xfer_result(coord_fit_state *f, int k, int status, char *digest, uint64_t *size,
                       char *why, size_t n) {
  coord_xfer *x = f->xfer && k >= 0 && k < f->nps ? &f->xfer[k] : NULL;
  if (!x || x->state == XF_NONE) return 1; /* not through the coordinator */
  int rc = 0;
  if (status == 0 && x->state != XF_DONE) {
    snprintf(why, n, "%s", x->state == XF_FAILED ? x->why : "its file did not come");
    rc = -1;
  } else if (status == 0) {
    snprintf(digest, MANIFEST_DIGEST_MAX, "%s", x->digest);
    *size = x->size;
  }
  coord__xfer_abort(f, k, NULL);
  return rc;
}

/* ============================== out ======================================= */

/* The manifest's digest of file `name` in dir (manifest.h's form). */
static int manifest_digest_of(const char *dir, const char *name, char *out, uint64_t *size) {
  manifest m;
  int rc = manifest_read(dir, &m);
  for (int i = 0; rc == 0 && i < m.nfiles; i++) {
    const manifest_file *mf = &m.files[i];
    if (strcmp(mf->name, name) != 0) continue;
    *size = mf->size;
    if (mf->chunk && mf->chunks) { /* the prefix fits in 32 bytes: manifest_digest_end */
      int pre = snprintf(out, 32, MANIFEST_CHUNKED "%" PRIu64 ":", mf->chunk);
      size_t nh = strlen(mf->chunks);
      if (pre < 0 || pre >= 32 || nh > 64 * MANIFEST_MAX_CHUNKS) nh = 0, out[0] = '\0';
      else memcpy(out + pre, mf->chunks, nh + 1);
    } else
      snprintf(out, MANIFEST_DIGEST_MAX, "%s", mf->sha256);
    manifest_free(&m);
    return 0;
  }
  manifest_free(&m);
  return rc < 0 ? rc : err_set(DRV_EIO, "%s/%s is not in its manifest", dir, name);
}

static int send_pieces(conn *c, int fd, const char *path, uint64_t size, const char *want) {
  uint8_t *buf = malloc(XFER_PIECE);
  manifest_digest d;
  if (!buf || manifest_digest_begin(&d, size) < 0) {
    free(buf);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  uint64_t off = 0;
  uint32_t pieces = 0;
  int rc = 0;
  while (off < size && rc == 0) {
    size_t k = size - off < XFER_PIECE ? (size_t)(size - off) : XFER_PIECE;
    ssize_t r = pread(fd, buf, k, (off_t)off);
    if (r != (ssize_t)k) {
      rc = err_set(DRV_EIO, "cannot read '%s': %s", path, r < 0 ? strerror(errno) : "short");
      break;
    }
    manifest_digest_update(&d, buf, k);
    wire_wr w;
    wire_wr_init(&w);
    wire_put_ckpt_piece(&w, &(wire_msg_ckpt_piece){off, {buf, (uint32_t)k}});
    rc = conn_send_wr(c, &w, WIRE_CKPT_PIECE, 0);
    off += k, pieces++;
  }
  free(buf);
  char got[MANIFEST_DIGEST_MAX];
  if (rc < 0) manifest_digest_drop(&d);
  else if (manifest_digest_end(&d, got) < 0 || strcmp(got, want) != 0)
    rc = err_set(DRV_EIO, "'%s' does not match its manifest's SHA-256 any more", path);
  if (rc < 0) return rc;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ckpt_file_end(&w, &(wire_msg_ckpt_file_end){size, pieces, WIRE_STR(want)});
  return conn_send_wr(c, &w, WIRE_CKPT_FILE_END, 0);
}

int coord__xfer_send(coord_fit_state *f, int k, const char *dir, const char *path) {
  char digest[MANIFEST_DIGEST_MAX];
  uint64_t size = 0;
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  if (!f->ps[k]) return err_set(DRV_ENODE, "ps:%d is not connected", k);
  int rc = manifest_digest_of(dir, name, digest, &size);
  if (rc < 0) return rc;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size != size) {
    rc = err_set(DRV_EIO, "cannot read '%s': %s", path, fd < 0 ? strerror(errno) : "not of its manifest's size");
    if (fd >= 0) close(fd);
    return rc;
  }
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ckpt_file(&w, &(wire_msg_ckpt_file){size, WIRE_STR(path)});
  rc = conn_send_wr(f->ps[k], &w, WIRE_CKPT_FILE, 0);
  if (rc == 0) rc = send_pieces(f->ps[k], fd, path, size, digest);
  close(fd);
  if (rc == 0) log_info("sent %s to ps:%d (%" PRIu64 " bytes) for its restore", path, k, size);
  return rc;
}
