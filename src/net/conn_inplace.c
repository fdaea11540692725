/* conn_inplace.c - frames written and read where they lie in a same-host
 * link's ring (conn.h: conn_send_reserve, conn_set_in_place), so that a
 * large tensor crosses between two processes with no copy of its own:
 * the sender encodes it into the ring, the receiver uses it from there.
 *
 * Writing needs no trust: the room is the sender's until the commit
 * publishes it. Reading does: the peer may rewrite its ring at any moment,
 * so the frame's header and every field of its payload but the tensors'
 * floats are copied out (wire_copy_tensor_meta) and checked in the copy,
 * which is what on_frame parses; only float values, which change nothing
 * but the values, are read from the ring. Every other frame, and a frame
 * that is not whole in the ring, is copied into the read buffer as usual.
 */
#include "net/conn.h"
#include "net/conn_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "proto/wire_msgs.h"

/* Smaller frames are copied: the in-place path's checks cost more than
 * a copy of a few KB. */
#define IN_PLACE_MIN (64u << 10)
/* A private copy above this is freed after its frame (as conn.c's). */
#define IN_PLACE_RETAIN (32u << 20)

/* ---- writing ---------------------------------------------------------------- */

uint8_t *conn_send_reserve(conn *c, size_t len) {
  if (c->closing || c->shutting) {
    err_set(DRV_EIO, "conn %s is closing", c->peer);
    return NULL;
  }
  if (c->resv) {
    err_set(DRV_EINVAL, "conn %s: a reservation is open already", c->peer);
    return NULL;
  }
  if (len > UINT32_MAX - WIRE_HEADER_SIZE) {
    err_set(DRV_ERANGE, "a payload of %zu bytes does not fit a frame", len);
    return NULL;
  }
  uint8_t *p = c->link && c->state == ST_READY ? conn__link_reserve(c, WIRE_HEADER_SIZE + len)
                                               : NULL; /* before: held (conn.c) */
  if (c->closing) { /* the link found its ring corrupted */
    err_set(DRV_EIO, "conn %s is closing", c->peer);
    return NULL;
  }
  c->resv_ring = p != NULL;
  if (!p && !(p = malloc(WIRE_HEADER_SIZE + len))) {
    err_set(DRV_ENOMEM, "out of memory for a frame of %zu bytes", len);
    return NULL;
  }
  c->resv = p;
  c->resv_len = len;
  return p + WIRE_HEADER_SIZE;
}

int conn_send_commit(conn *c, uint8_t type, uint32_t req) {
  uint8_t *p = c->resv, hdr[WIRE_HEADER_SIZE];
  if (!p) return err_set(DRV_EINVAL, "conn %s: nothing reserved to commit", c->peer);
  c->resv = NULL;
  wire_header h = {.type = type, .flags = 0, .req = req, .len = (uint32_t)c->resv_len};
  wire_header_encode(&h, hdr);
  memcpy(p, hdr, sizeof hdr); /* built aside: the room is written, not read */
  if (!c->resv_ring) return conn_send(c, p, WIRE_HEADER_SIZE + c->resv_len);
  if (c->closing) return err_set(DRV_EIO, "conn %s is closing", c->peer);
  conn__link_commit(c, WIRE_HEADER_SIZE + c->resv_len);
  return 0;
}

void conn_send_cancel(conn *c) {
  if (c->resv && !c->resv_ring) free(c->resv);
  c->resv = NULL; /* ring room: nothing was published */
}

/* ---- reading ---------------------------------------------------------------- */

void conn_set_in_place(conn *c, bool on) { c->in_place = on; }

const void *conn_in_place(const conn *c, const void *p) {
  const uint8_t *b = p;
  if (!c->ip_src || !c->rbuf || b < c->rbuf || b >= c->rbuf + c->ip_len) return p;
  return c->ip_src + (b - c->rbuf);
}

void conn_payload_copy(const conn *c, const uint8_t *pl, size_t len, uint8_t *dst) {
  if (!c->ip_src || pl != c->rbuf || len != c->ip_len) {
    memcpy(dst, pl, len);
    return;
  }
  /* The floats from the ring, then the checked fields over them again. */
  memcpy(dst, c->ip_src, len);
  wire_copy_tensor_meta(c->ip_type, dst, c->rbuf, len);
}

/* The read buffer holds at least n bytes (it is empty: nothing is kept). */
static int rbuf_fit(conn *c, size_t n) {
  if (c->rcap >= n) return 0;
  uint8_t *p = malloc(n);
  if (!p) return err_set(DRV_ENOMEM, "no memory for a frame of %zu bytes", n);
  free(c->rbuf);
  c->rbuf = p;
  c->rcap = n;
  return 0;
}

/* Whether the header (a private copy) names a frame to read in place. */
static bool wanted(const conn *c, const wire_header *h) {
  return c->in_place && (h->type == WIRE_PUSH || h->type == WIRE_PULL_REPLY) &&
         h->len >= IN_PLACE_MIN;
}

int conn__frame_in_place(conn *c, const uint8_t *frame, size_t avail, size_t whole,
                         size_t *took) {
  uint8_t hb[WIRE_HEADER_SIZE];
  wire_header h;
  *took = 0;
  if (!c->in_place || c->state != ST_READY || c->shutting || c->opaque || c->have_hdr ||
      c->rstart != c->rend || avail < WIRE_HEADER_SIZE)
    return IP_NO;
  memcpy(hb, frame, sizeof hb);
  /* A bad header is refused by the usual path, which reads it again. */
  if (wire_header_decode(hb, c->max_frame, true, &h) < 0) return IP_NO;
  size_t n = WIRE_HEADER_SIZE + (size_t)h.len;
  if (!wanted(c, &h)) {
    *took = n; /* copied alone: a large frame behind it stays in place */
    return IP_NO;
  }
  if (!conn__accepted(c, &h)) return IP_TOOK; /* closed: refused at its header, as ever */
  if (avail < n) {
    *took = n;
    return n <= whole ? IP_WAIT : IP_NO;
  }
  c->rstart = c->rend = 0;
  if (rbuf_fit(c, h.len) < 0) {
    conn__fail(c, DRV_ENOMEM, "%s from %s", err_msg(), c->peer);
    return IP_TOOK;
  }
  if (wire_copy_tensor_meta(h.type, c->rbuf, frame + WIRE_HEADER_SIZE, h.len) < 0)
    return IP_NO; /* the usual path copies it whole and says what is wrong */
  c->ip_src = frame + WIRE_HEADER_SIZE;
  c->ip_len = h.len;
  c->ip_type = h.type;
  conn__dispatch(c, &h, c->rbuf);
  c->ip_src = NULL;
  *took = n;
  if (c->rcap > IN_PLACE_RETAIN) {
    free(c->rbuf);
    c->rbuf = NULL;
    c->rcap = 0;
  }
  return IP_TOOK;
}
