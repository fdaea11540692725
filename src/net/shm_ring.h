/* shm_ring.h - a single-producer, single-consumer byte ring in memory shared
 * by two processes: one per direction of a same-host link (conn_shm.c).
 *
 * The region is a memfd made by the dialling side and sealed against
 * shrinking and growing before the peer maps it, so no peer can turn a
 * mapping into SIGBUS. It holds two rings, [header][data][header][data],
 * each header a page; the dialler writes ring 0 and reads ring 1. The bytes
 * are a stream, as a TCP connection's are: the conn's frame parser runs on
 * what is read.
 *
 * Mirrored: shm_region_map maps each ring's data twice, back to back, so
 * that any span of up to the ring's size starting anywhere in it is
 * contiguous in memory. A frame is then written in place (reserve, encode,
 * commit) and read in place (peek, use, consume) even where it wraps.
 *
 * Trust: the peer may write anything into the shared pages at any moment.
 * Each side keeps its own index (head for the producer, tail for the
 * consumer) privately and publishes it; the peer's index is read once per
 * call and checked (0 <= head - tail <= size), and a violation is an error
 * that closes the link. Whoever reads bytes in place (shm_ring_peek) must
 * copy out every field it checks before checking it: the peer may rewrite
 * them at any moment.
 *
 * Wake-ups: a side about to sleep sets its waiting flag, fences and looks
 * again (shm_ring_reader_sleep / _writer_sleep); the other side, after
 * moving its index, fences and clears the flag with an exchange, and only
 * then wakes the sleeper (shm_ring_wake_*: the caller writes the peer's
 * eventfd). Busy peers make no system call, and nobody ever spins.
 */
#ifndef DROVER_SHM_RING_H
#define DROVER_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The shared header: each index on its own cache line. */
typedef struct shm_ring_hdr {
  _Atomic uint64_t head; /* bytes ever written (the producer's) */
  uint8_t pad0[56];
  _Atomic uint64_t tail; /* bytes ever read (the consumer's) */
  uint8_t pad1[56];
  _Atomic uint32_t reader_waiting;
  uint8_t pad2[60];
  _Atomic uint32_t writer_waiting;
  uint8_t pad3[60];
} shm_ring_hdr;

#define SHM_RING_MIN (64u << 10)
#define SHM_RING_MAX (64u << 20)

/* One side's view of one ring. `pos` is this side's own index, never read
 * back from shared memory. */
typedef struct shm_ring {
  shm_ring_hdr *h;
  uint8_t *data;
  uint64_t size; /* a power of two */
  uint64_t pos;
  bool mirrored; /* data[size..2 size) maps data[0..size) again */
} shm_ring;

/* Bytes of a region (the memfd) of two rings of `size` bytes each. */
size_t shm_region_bytes(uint64_t size);
/* Bytes of its mapping (shm_region_map's *len): the data mapped twice. */
size_t shm_region_map_bytes(uint64_t size);
/* A ring size is a power of two within [SHM_RING_MIN, SHM_RING_MAX]. */
bool shm_ring_size_ok(uint64_t size);
/* A new sealed memfd holding two empty rings of `size` bytes (close-on-exec).
 * The descriptor into *fd, or a negative code with the reason. */
int shm_region_create(uint64_t size, int *fd);
/* Maps a region received from a peer after checking what it is: a memfd
 * sealed against shrinking and growing, of exactly the size two rings of
 * `size` need; each ring's data twice (mirrored). *base and *len for
 * munmap. */
int shm_region_map(int fd, uint64_t size, void **base, size_t *len);
/* Ring `which` (0 or 1) of a mapped region, seen by its producer (`writer`)
 * or its consumer. Starts at index 0: both rings are fresh. */
void shm_ring_attach(shm_ring *r, void *base, uint64_t size, int which, bool writer);
/* One ring in plain memory of sizeof(shm_ring_hdr) + size bytes, not
 * mirrored (the fuzzer's): in-place spans stop at the wrap. */
void shm_ring_attach_flat(shm_ring *r, void *mem, uint64_t size);

/* Producer: copies up to n bytes in and publishes them; returns how many (0
 * when full), or DRV_EPARSE when the consumer's index is impossible. */
ssize_t shm_ring_write(shm_ring *r, const void *p, size_t n);
/* Consumer: copies up to n bytes out and frees their room; returns how many
 * (0 when empty), or DRV_EPARSE when the producer's index is impossible. */
ssize_t shm_ring_read(shm_ring *r, void *p, size_t n);
/* Consumer: bytes waiting (DRV_EPARSE as above). */
ssize_t shm_ring_readable(const shm_ring *r);

/* Producer, in place: room for n contiguous bytes at the head, to be
 * written there and published with shm_ring_commit; NULL when the room is
 * smaller (or, not mirrored, not contiguous), with *err 0, or DRV_EPARSE
 * when the consumer's index is impossible. Nothing is visible to the
 * consumer before the commit. */
uint8_t *shm_ring_reserve(shm_ring *r, size_t n, int *err);
/* Publishes the n bytes (n <= what was reserved) written at the head. */
void shm_ring_commit(shm_ring *r, size_t n);
/* Consumer, in place: the bytes waiting as one span (mirrored: all of
 * them; else up to the wrap) into *p; returns its length (0: none) or
 * DRV_EPARSE. The peer may rewrite them at any moment: see the header. */
ssize_t shm_ring_peek(const shm_ring *r, const uint8_t **p);
/* Frees the first n bytes of what peek showed (n <= its length). */
void shm_ring_consume(shm_ring *r, size_t n);

/* Consumer about to sleep: true when it may (nothing to read, and the
 * producer will wake it); false when bytes arrived meanwhile. */
bool shm_ring_reader_sleep(shm_ring *r);
/* The same for a consumer that needs `want` bytes (a whole frame to read
 * in place): true when fewer are there, and the producer will wake it at
 * its next publication. */
bool shm_ring_reader_wait(shm_ring *r, size_t want);
/* Producer about to wait for room: true when it may. */
bool shm_ring_writer_sleep(shm_ring *r);
/* Producer after a write: true when the consumer sleeps and must be woken. */
bool shm_ring_wake_reader(shm_ring *r);
/* Consumer after a read: true when the producer waits for room. */
bool shm_ring_wake_writer(shm_ring *r);

#endif
