/* fuzz_ring.c - libFuzzer target for the reading side of a same-host link:
 * a shared-memory ring (src/net/shm_ring.c) whose indices and bytes a
 * hostile peer chose, read out with shm_ring_read in pieces and parsed into
 * frames as conn does (wire_header_decode, then wire_validate_payload on
 * each whole frame).
 *
 * Input: tail u64 (the reader's own index), delta u32, flags u8, then the
 * bytes the peer wrote, placed in the ring from the tail on (so that they
 * wrap when the tail is near the end). The head is tail + delta (bit 0 of
 * flags: as is, so mostly impossible; else modulo a ring and a bit); bit 1
 * parses as after authentication; the rest seeds the read sizes and what
 * the peer does between reads (moves its head, scribbles over the
 * reader's published index or over unread bytes). Checked, beyond ASan
 * and UBSan: a read never returns more than asked nor more than the ring
 * holds, returns exactly the ring's bytes (across the wrap), fails only
 * when the peer's index is impossible, and never changes because of what
 * the peer wrote over the reader's published index. The ring's memory is
 * a heap block of exactly its size, so any access past it is caught. The
 * producer side is driven the same way once (a hostile consumer index).
 * Some turns read in place instead, as conn_inplace.c does: a whole PUSH
 * or PULL_REPLY at the ring's head is copied but for its floats
 * (wire_copy_tensor_meta), which must succeed exactly when the frame
 * validates, and the copy must still validate after the peer scribbled
 * over the ring.
 *
 * Built with -DFUZZ_RING_SEEDS instead, this file writes the seed corpus:
 * wire_sample frames of every type behind tails that wrap them, the
 * handshake's frames unauthenticated, and impossible indices. `make fuzz`
 * runs it (tests/fuzz/README).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/shm_ring.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

/* Smaller than a link's smallest ring (SHM_RING_MIN): the code does not
 * depend on the size beyond its being a power of two, and inputs of a few
 * KB then wrap it, fast. */
#define SIZE 4096u
#define MASK (SIZE - 1)
#define HEAD_BYTES 13 /* tail u64, delta u32, flags u8 */
#define MAX_FRAME (1u << 20)

#ifndef FUZZ_RING_SEEDS

static uint64_t get_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* conn.c's reading, reduced: a buffer of what arrived, frames cut from it. */
typedef struct parser {
  uint8_t *buf;
  size_t len, cap;
  bool authed, have_hdr, dead;
  wire_header cur;
} parser;

static void parse(parser *ps) {
  while (!ps->dead) {
    if (!ps->have_hdr) {
      if (ps->len < WIRE_HEADER_SIZE) return;
      if (wire_header_decode(ps->buf, MAX_FRAME, ps->authed, &ps->cur) < 0) {
        ps->dead = true; /* conn closes the link here */
        return;
      }
      ps->have_hdr = true;
    }
    if (ps->len - WIRE_HEADER_SIZE < ps->cur.len) return;
    /* the payload in a block of its own size: a validator reading one byte
     * too far is caught */
    uint8_t *p = malloc(ps->cur.len ? ps->cur.len : 1);
    if (!p) abort();
    memcpy(p, ps->buf + WIRE_HEADER_SIZE, ps->cur.len);
    (void)wire_validate_payload(ps->cur.type, p, ps->cur.len);
    free(p);
    size_t used = WIRE_HEADER_SIZE + ps->cur.len;
    memmove(ps->buf, ps->buf + used, ps->len - used);
    ps->len -= used;
    ps->have_hdr = false;
  }
}

static void feed(parser *ps, const uint8_t *p, size_t n) {
  if (ps->dead || n == 0) return;
  if (ps->len + n > ps->cap) {
    ps->cap = (ps->len + n) * 2;
    ps->buf = realloc(ps->buf, ps->cap);
    if (!ps->buf) abort();
  }
  memcpy(ps->buf + ps->len, p, n);
  ps->len += n;
  parse(ps);
}

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* What the peer does between two reads. */
static void peer_moves(shm_ring *r, uint64_t *rng) {
  uint64_t v = next(rng);
  switch (v % 8) {
  case 0: /* writes more (whatever is in the ring), maybe too much */
    atomic_fetch_add(&r->h->head, (v >> 8) % (SIZE + 2));
    break;
  case 1: /* scribbles over the reader's published index */
    atomic_store(&r->h->tail, v);
    break;
  case 2: /* scribbles over unread bytes */
    r->data[(r->pos + (v >> 8)) & MASK] = (uint8_t)(v >> 40);
    break;
  default:
    break;
  }
}

/* A whole PUSH or PULL_REPLY at the head read in place: true when one was
 * (and consumed). */
static bool read_in_place(shm_ring *r, parser *ps, uint64_t *rng) {
  const uint8_t *p;
  wire_header h;
  ssize_t avail = shm_ring_peek(r, &p);
  if (!ps->authed || ps->len || ps->have_hdr || avail < (ssize_t)WIRE_HEADER_SIZE ||
      wire_header_decode(p, MAX_FRAME, ps->authed, &h) < 0 ||
      (h.type != WIRE_PUSH && h.type != WIRE_PULL_REPLY) ||
      (size_t)avail - WIRE_HEADER_SIZE < h.len)
    return false;
  uint8_t *dst = malloc(h.len ? h.len : 1);
  if (!dst) abort();
  bool valid = wire_validate_payload(h.type, p + WIRE_HEADER_SIZE, h.len) == 0;
  bool copied = wire_copy_tensor_meta(h.type, dst, p + WIRE_HEADER_SIZE, h.len) == 0;
  if (copied != valid) __builtin_trap(); /* in place or copied: the same frames pass */
  peer_moves(r, rng);
  if (copied && wire_validate_payload(h.type, dst, h.len) < 0) __builtin_trap();
  free(dst);
  shm_ring_consume(r, WIRE_HEADER_SIZE + h.len);
  return true;
}

/* Reads the ring out; returns false once a read failed (the link closes). */
static bool read_once(shm_ring *r, parser *ps, uint64_t *rng, uint8_t *tmp) {
  if (next(rng) % 4 == 0 && read_in_place(r, ps, rng)) return true;
  uint64_t head = atomic_load(&r->h->head), pos = r->pos;
  size_t want = 1 + (size_t)(next(rng) % (next(rng) & 1 ? 64 : SIZE + 16));
  ssize_t k = shm_ring_read(r, tmp, want);
  if (k < 0) {
    if (head - pos <= SIZE) __builtin_trap(); /* refused a possible index */
    return false;
  }
  if (head - pos > SIZE) __builtin_trap(); /* took an impossible one */
  if ((size_t)k > want || (uint64_t)k > head - pos || r->pos != pos + (uint64_t)k)
    __builtin_trap();
  if ((size_t)k < want && (uint64_t)k != head - pos) __builtin_trap(); /* left bytes behind */
  for (ssize_t i = 0; i < k; i++)
    if (tmp[i] != r->data[(pos + (uint64_t)i) & MASK]) __builtin_trap();
  if (k > 0 && atomic_load(&r->h->tail) != r->pos) __builtin_trap(); /* published its own */
  feed(ps, tmp, (size_t)k);
  return true;
}

/* The producer's side once: a consumer index the peer chose. */
static void write_once(uint8_t *mem, uint64_t pos, uint64_t tail, const uint8_t *p, size_t n) {
  shm_ring w;
  shm_ring_attach_flat(&w, mem, SIZE);
  w.pos = pos;
  atomic_store(&w.h->tail, tail);
  ssize_t k = shm_ring_write(&w, p, n);
  uint64_t used = pos - tail, room = used <= SIZE ? SIZE - used : 0;
  if (k < 0 ? used <= SIZE : (used > SIZE || (uint64_t)k != (n < room ? n : room)))
    __builtin_trap();
  if (k > 0 && atomic_load(&w.h->head) != pos + (uint64_t)k) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t *mem, tmp[SIZE + 16];
  if (size < HEAD_BYTES) return 0;
  if (!mem && !(mem = malloc(sizeof(shm_ring_hdr) + SIZE))) abort();
  memset(mem, 0, sizeof(shm_ring_hdr) + SIZE);
  uint64_t tail = get_le(data, 8), delta = get_le(data + 8, 4), rng;
  uint8_t flags = data[12];
  const uint8_t *bytes = data + HEAD_BYTES;
  size_t n = size - HEAD_BYTES;
  shm_ring r;
  shm_ring_attach_flat(&r, mem, SIZE);
  r.pos = tail;
  for (size_t i = 0; i < n && i < SIZE; i++) r.data[(tail + i) & MASK] = bytes[i];
  atomic_store(&r.h->head, tail + (flags & 1 ? delta : delta % (SIZE + 2)));
  atomic_store(&r.h->tail, tail);
  rng = (uint64_t)flags << 32 | (delta ^ 0x9e3779b9u) | 1;
  parser ps = {.authed = flags & 2};
  for (int turn = 0; turn < 64 && read_once(&r, &ps, &rng, tmp); turn++) {
    if (shm_ring_readable(&r) == 0 && !shm_ring_reader_sleep(&r)) __builtin_trap();
    peer_moves(&r, &rng);
  }
  free(ps.buf);
  write_once(mem, tail, tail - delta, bytes, n);
  return 0;
}

#else /* FUZZ_RING_SEEDS: write the seed corpus */

static int write_seed(const char *dir, const char *name, uint64_t tail, uint32_t delta,
                      uint8_t flags, const uint8_t *p, size_t n) {
  char path[4096];
  uint8_t head[HEAD_BYTES];
  for (int i = 0; i < 8; i++) head[i] = (uint8_t)(tail >> (8 * i));
  for (int i = 0; i < 4; i++) head[8 + i] = (uint8_t)(delta >> (8 * i));
  head[12] = flags;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(head, 1, sizeof head, f) != sizeof head || fwrite(p, 1, n, f) != n ||
      fclose(f) != 0) {
    fprintf(stderr, "seeds_ring: cannot write %s\n", path);
    return -1;
  }
  return 0;
}

static const uint8_t all_types[] = {
#define XX(num, NAME, name, pre_auth, max, from) num,
    WIRE_TYPE_MAP(XX)
#undef XX
};
#define NTYPES (sizeof all_types)

int main(int argc, char **argv) {
  /* tails: the start, a header straddling the end, the index's own wrap */
  static const uint64_t tails[] = {0, SIZE - 7, UINT64_MAX - 20};
  char name[128];
  if (argc != 2) {
    fprintf(stderr, "usage: seeds_ring DIR\n");
    return 2;
  }
  for (size_t i = 0; i < NTYPES; i++) {
    wire_wr w;
    if (wire_sample(all_types[i], 0, &w) < 0) return 1;
    bool pre = all_types[i] == WIRE_HELLO || all_types[i] == WIRE_AUTH ||
               all_types[i] == WIRE_AUTH_OK;
    for (size_t t = 0; t < sizeof tails / sizeof tails[0]; t++) {
      size_t n = w.len < SIZE ? w.len : SIZE;
      snprintf(name, sizeof name, "ring-%s-%zu", wire_type_name(all_types[i]), t);
      if (write_seed(argv[1], name, tails[t], (uint32_t)n, pre ? 0 : 2, w.buf, n) < 0)
        return 1;
    }
    /* a head one past a whole ring: impossible */
    snprintf(name, sizeof name, "bad-%s", wire_type_name(all_types[i]));
    if (write_seed(argv[1], name, 5, SIZE + 1, 3, w.buf, w.len < 256 ? w.len : 256) < 0)
      return 1;
    wire_wr_free(&w);
  }
  return 0;
}

#endif
