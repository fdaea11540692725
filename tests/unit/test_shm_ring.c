/* test_shm_ring.c - the shared-memory byte ring of same-host links
 * (shm_ring.c): the region's checks (size, seals), writing and reading
 * across the wrap and across two mappings of one region, full and empty,
 * indices past 2^64, the sleep and wake flags, and indices a hostile peer
 * made impossible. */
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "net/shm_ring.h"

#define SIZE SHM_RING_MIN

/* One region mapped twice, as two processes see it: ring 0's writer on
 * one mapping, its reader on the other. */
typedef struct two_views {
  int fd;
  void *a, *b;
  size_t len;
  shm_ring w, r;
} two_views;

static void views_open(two_views *v) {
  size_t len;
  CHECK_OK(shm_region_create(SIZE, &v->fd));
  CHECK_OK(shm_region_map(v->fd, SIZE, &v->a, &v->len));
  CHECK_OK(shm_region_map(v->fd, SIZE, &v->b, &len));
  CHECK(v->a != v->b);
  shm_ring_attach(&v->w, v->a, SIZE, 0, true);
  shm_ring_attach(&v->r, v->b, SIZE, 0, false);
}

static void views_close(two_views *v) {
  munmap(v->a, v->len);
  munmap(v->b, v->len);
  close(v->fd);
}

static void pattern(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 131u + seed * 7u + (i >> 9));
}

/* ---- the region ------------------------------------------------------------ */

TEST(shm_ring_sizes) {
  CHECK(shm_ring_size_ok(SHM_RING_MIN));
  CHECK(shm_ring_size_ok(SHM_RING_MAX));
  CHECK(shm_ring_size_ok(2u << 20));
  CHECK(!shm_ring_size_ok(SHM_RING_MIN / 2));
  CHECK(!shm_ring_size_ok((uint64_t)SHM_RING_MAX * 2));
  CHECK(!shm_ring_size_ok(100000));
  CHECK(!shm_ring_size_ok(0));
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  CHECK_INT_EQ(shm_region_bytes(SIZE), 2 * (page + SIZE)); /* a header a page */
  CHECK_INT_EQ(shm_region_map_bytes(SIZE), 2 * (page + 2 * SIZE)); /* data twice */
  CHECK_INT_EQ(sizeof(shm_ring_hdr) % 64, 0); /* each index on its own line */
}

TEST(shm_region_create_and_map_check_what_they_get) {
  int fd, other, p[2], seals;
  void *base;
  size_t len;
  CHECK_ERR(shm_region_create(1000, &fd), DRV_EINVAL, "a power of two");
  CHECK_OK(shm_region_create(SIZE, &fd));
  CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
  seals = fcntl(fd, F_GET_SEALS);
  CHECK((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
        (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
  CHECK(ftruncate(fd, 4096) < 0); /* nobody can shrink it under a mapping */
  /* a region is mapped only for the ring size it was made for */
  CHECK_ERR(shm_region_map(fd, 2 * SIZE, &base, &len), DRV_EPARSE, "is not of");
  CHECK_ERR(shm_region_map(fd, 100000, &base, &len), DRV_EPARSE, "ring size 100000 refused");
  CHECK_OK(shm_region_map(fd, SIZE, &base, &len));
  CHECK_INT_EQ(len, shm_region_map_bytes(SIZE));
  /* fresh: both rings empty, nobody waiting */
  for (int which = 0; which < 2; which++) {
    shm_ring r;
    shm_ring_attach(&r, base, SIZE, which, false);
    CHECK_INT_EQ(shm_ring_readable(&r), 0);
    CHECK_INT_EQ(atomic_load(&r.h->reader_waiting), 0);
    CHECK_INT_EQ(atomic_load(&r.h->writer_waiting), 0);
  }
  munmap(base, len);
  close(fd);
  /* not sealed against resizing, or not a memfd at all */
  other = memfd_create("unsealed", MFD_CLOEXEC);
  CHECK(other >= 0);
  CHECK_INT_EQ(ftruncate(other, (off_t)shm_region_bytes(SIZE)), 0);
  CHECK_ERR(shm_region_map(other, SIZE, &base, &len), DRV_EPARSE, "not a memfd sealed");
  close(other);
  CHECK_INT_EQ(pipe(p), 0);
  CHECK_ERR(shm_region_map(p[0], SIZE, &base, &len), DRV_EPARSE, "not a memfd sealed");
  close(p[0]);
  close(p[1]);
}

/* ---- moving bytes ---------------------------------------------------------- */

TEST(shm_ring_wraps_fills_and_empties) {
  two_views v;
  static uint8_t in[2 * SIZE], out[2 * SIZE];
  size_t got = 0;
  views_open(&v);
  pattern(in, sizeof in, 1);
  CHECK_INT_EQ(shm_ring_read(&v.r, out, sizeof out), 0); /* empty */
  /* three quarters in and out: the next write wraps */
  CHECK_INT_EQ(shm_ring_write(&v.w, in, SIZE / 4 * 3), SIZE / 4 * 3);
  CHECK_INT_EQ(shm_ring_readable(&v.r), SIZE / 4 * 3);
  CHECK_INT_EQ(shm_ring_read(&v.r, out, sizeof out), SIZE / 4 * 3);
  CHECK(memcmp(in, out, SIZE / 4 * 3) == 0);
  /* more than the room: as much as fits, then full */
  CHECK_INT_EQ(shm_ring_write(&v.w, in, sizeof in), SIZE);
  CHECK_INT_EQ(shm_ring_write(&v.w, in, 1), 0);
  CHECK_INT_EQ(shm_ring_readable(&v.r), SIZE);
  /* read back in odd pieces across the wrap */
  while (got < SIZE) {
    ssize_t k = shm_ring_read(&v.r, out + got, 1000);
    CHECK(k > 0 && k <= 1000);
    got += (size_t)k;
  }
  CHECK(memcmp(in, out, SIZE) == 0);
  CHECK_INT_EQ(shm_ring_read(&v.r, out, 1), 0);
  /* a little room frees a little */
  CHECK_INT_EQ(shm_ring_write(&v.w, in, SIZE), SIZE);
  CHECK_INT_EQ(shm_ring_read(&v.r, out, 10), 10);
  CHECK_INT_EQ(shm_ring_write(&v.w, in + SIZE, 100), 10);
  views_close(&v);
}

/* In place: a span reserved across the wrap is one span in memory (the
 * data is mapped twice), its bytes land at the ring's start, the reader
 * sees nothing before the commit and then all of it as one span. */
TEST(shm_ring_in_place_across_the_wrap) {
  two_views v;
  static uint8_t in[SIZE];
  const uint8_t *p;
  int err;
  views_open(&v);
  pattern(in, sizeof in, 3);
  CHECK_INT_EQ(shm_ring_write(&v.w, in, SIZE - 100), SIZE - 100);
  static uint8_t sink[SIZE];
  CHECK_INT_EQ(shm_ring_read(&v.r, sink, SIZE - 100), SIZE - 100);
  CHECK(shm_ring_reserve(&v.w, SIZE + 1, &err) == NULL);
  CHECK_INT_EQ(err, 0);
  uint8_t *room = shm_ring_reserve(&v.w, 1000, &err);
  CHECK(room == v.w.data + SIZE - 100);
  memcpy(room, in, 1000); /* 100 bytes before the wrap, 900 after */
  CHECK_INT_EQ(shm_ring_peek(&v.r, &p), 0); /* not published yet */
  shm_ring_commit(&v.w, 1000);
  CHECK_INT_EQ(shm_ring_peek(&v.r, &p), 1000);
  CHECK(p == v.r.data + SIZE - 100);
  CHECK(memcmp(p, in, 1000) == 0);
  CHECK(memcmp(v.r.data, in + 100, 900) == 0); /* the mirror is the same pages */
  /* a reader waiting for 2000 bytes sleeps; for 1000 it does not */
  CHECK(shm_ring_reader_wait(&v.r, 2000));
  CHECK(shm_ring_wake_reader(&v.w));
  CHECK(!shm_ring_reader_wait(&v.r, 1000));
  shm_ring_consume(&v.r, 1000);
  CHECK_INT_EQ(atomic_load(&v.r.h->tail), SIZE + 900);
  CHECK_INT_EQ(shm_ring_peek(&v.r, &p), 0);
  /* the room is what the reader left; a corrupt tail is an error */
  CHECK(shm_ring_reserve(&v.w, SIZE, &err) != NULL);
  atomic_store(&v.r.h->tail, v.w.pos + 1);
  CHECK(shm_ring_reserve(&v.w, 1, &err) == NULL);
  CHECK_INT_EQ(err, DRV_EPARSE);
  views_close(&v);
}

/* Not mirrored (plain memory): in-place spans stop at the wrap. */
TEST(shm_ring_flat_spans_stop_at_the_wrap) {
  static uint8_t mem[sizeof(shm_ring_hdr) + SIZE];
  shm_ring w, r;
  const uint8_t *p;
  int err;
  shm_ring_attach_flat(&w, mem, SIZE);
  shm_ring_attach_flat(&r, mem, SIZE);
  w.pos = r.pos = SIZE - 100;
  atomic_store(&w.h->head, w.pos);
  atomic_store(&w.h->tail, w.pos);
  CHECK(shm_ring_reserve(&w, 101, &err) == NULL);
  CHECK_INT_EQ(err, 0);
  CHECK(shm_ring_reserve(&w, 100, &err) == w.data + SIZE - 100);
  static const uint8_t some[300];
  CHECK_INT_EQ(shm_ring_write(&w, some, sizeof some), 300);
  CHECK_INT_EQ(shm_ring_peek(&r, &p), 100);
  CHECK(p == r.data + SIZE - 100);
}

/* The indices count bytes ever moved: their wrap past 2^64 is nothing
 * special (unsigned differences). */
TEST(shm_ring_indices_past_2_64) {
  two_views v;
  uint8_t in[3000], out[3000];
  uint64_t start = UINT64_MAX - 1000;
  views_open(&v);
  pattern(in, sizeof in, 2);
  v.w.pos = v.r.pos = start;
  atomic_store(&v.w.h->head, start);
  atomic_store(&v.w.h->tail, start);
  CHECK_INT_EQ(shm_ring_write(&v.w, in, sizeof in), sizeof in);
  CHECK(atomic_load(&v.w.h->head) < start); /* wrapped */
  CHECK_INT_EQ(shm_ring_readable(&v.r), sizeof in);
  CHECK_INT_EQ(shm_ring_read(&v.r, out, sizeof out), sizeof out);
  CHECK(memcmp(in, out, sizeof in) == 0);
  CHECK_INT_EQ(shm_ring_readable(&v.r), 0);
  views_close(&v);
}

/* ---- sleeping and waking --------------------------------------------------- */

TEST(shm_ring_sleep_and_wake_flags) {
  two_views v;
  static uint8_t buf[SIZE];
  views_open(&v);
  /* nobody sleeps: nobody to wake */
  CHECK(!shm_ring_wake_reader(&v.w));
  CHECK(!shm_ring_wake_writer(&v.r));
  /* an empty ring: the reader may sleep, and says so */
  CHECK(shm_ring_reader_sleep(&v.r));
  CHECK_INT_EQ(atomic_load(&v.r.h->reader_waiting), 1);
  CHECK_INT_EQ(shm_ring_write(&v.w, "abc", 3), 3);
  CHECK(shm_ring_wake_reader(&v.w)); /* once */
  CHECK_INT_EQ(atomic_load(&v.r.h->reader_waiting), 0);
  CHECK(!shm_ring_wake_reader(&v.w));
  /* bytes there: no sleeping, and the flag is left down */
  CHECK(!shm_ring_reader_sleep(&v.r));
  CHECK_INT_EQ(atomic_load(&v.r.h->reader_waiting), 0);
  /* the writer waits only for a full ring */
  CHECK(!shm_ring_writer_sleep(&v.w));
  CHECK_INT_EQ(atomic_load(&v.w.h->writer_waiting), 0);
  CHECK_INT_EQ(shm_ring_write(&v.w, buf, sizeof buf), SIZE - 3);
  CHECK(shm_ring_writer_sleep(&v.w));
  CHECK_INT_EQ(atomic_load(&v.w.h->writer_waiting), 1);
  CHECK_INT_EQ(shm_ring_read(&v.r, buf, 1), 1);
  CHECK(shm_ring_wake_writer(&v.r)); /* once */
  CHECK(!shm_ring_wake_writer(&v.r));
  views_close(&v);
}

/* ---- what a hostile peer can do to the shared indices ----------------------- */

TEST(shm_ring_impossible_indices_are_errors) {
  two_views v;
  uint8_t buf[256];
  views_open(&v);
  CHECK_INT_EQ(shm_ring_write(&v.w, "0123456789", 10), 10);
  CHECK_INT_EQ(shm_ring_read(&v.r, buf, 4), 4);
  /* the producer's index past a whole ring ahead of the consumer */
  atomic_store(&v.w.h->head, v.r.pos + SIZE + 1);
  CHECK_ERR(shm_ring_read(&v.r, buf, sizeof buf), DRV_EPARSE, "shared-memory ring corrupted");
  CHECK_ERR(shm_ring_readable(&v.r), DRV_EPARSE, "head 65541, tail 4");
  CHECK(!shm_ring_reader_sleep(&v.r)); /* the next read says why */
  /* or behind it */
  atomic_store(&v.w.h->head, v.r.pos - 1);
  CHECK_ERR(shm_ring_read(&v.r, buf, sizeof buf), DRV_EPARSE, "shared-memory ring corrupted");
  /* exactly a full ring is possible */
  atomic_store(&v.w.h->head, v.r.pos + SIZE);
  CHECK_INT_EQ(shm_ring_readable(&v.r), SIZE);
  /* the consumer's index ahead of what was written, or a ring behind */
  atomic_store(&v.w.h->tail, v.w.pos + 1);
  CHECK_ERR(shm_ring_write(&v.w, buf, 1), DRV_EPARSE, "shared-memory ring corrupted");
  CHECK(!shm_ring_writer_sleep(&v.w));
  atomic_store(&v.w.h->tail, v.w.pos - SIZE - 1);
  CHECK_ERR(shm_ring_write(&v.w, buf, 1), DRV_EPARSE, "shared-memory ring corrupted");
  views_close(&v);
}

/* Each side's own index is private: a peer that scribbles over it in
 * shared memory changes nothing on this side. */
TEST(shm_ring_own_index_is_never_read_back) {
  two_views v;
  uint8_t buf[64];
  views_open(&v);
  CHECK_INT_EQ(shm_ring_write(&v.w, "0123456789", 10), 10);
  atomic_store(&v.w.h->tail, 7); /* the reader's published index */
  CHECK_INT_EQ(shm_ring_read(&v.r, buf, sizeof buf), 10);
  CHECK(memcmp(buf, "0123456789", 10) == 0);
  CHECK_INT_EQ(atomic_load(&v.w.h->tail), 10); /* republished from its own */
  atomic_store(&v.w.h->head, 3); /* the writer's published index */
  CHECK_INT_EQ(shm_ring_write(&v.w, "abc", 3), 3);
  CHECK_INT_EQ(atomic_load(&v.w.h->head), 13);
  CHECK_INT_EQ(shm_ring_read(&v.r, buf, sizeof buf), 3);
  CHECK(memcmp(buf, "abc", 3) == 0);
  views_close(&v);
}
