/* shm_ring.c - the shared-memory byte ring of a same-host link (see
 * shm_ring.h for the layout, the trust rules and the wake-up protocol). */
#include "net/shm_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* A ring's header takes a page, so that its data starts on a page and can
 * be mapped a second time right after itself. One host, one page size:
 * both sides compute the same layout. */
static size_t hdr_bytes(void) {
  long pg = sysconf(_SC_PAGESIZE);
  return pg > (long)sizeof(shm_ring_hdr) ? (size_t)pg : sizeof(shm_ring_hdr);
}

size_t shm_region_bytes(uint64_t size) { return 2 * (hdr_bytes() + (size_t)size); }
size_t shm_region_map_bytes(uint64_t size) { return 2 * (hdr_bytes() + 2 * (size_t)size); }

bool shm_ring_size_ok(uint64_t size) {
  return size >= SHM_RING_MIN && size <= SHM_RING_MAX && (size & (size - 1)) == 0;
}

int shm_region_create(uint64_t size, int *fd) {
  if (!shm_ring_size_ok(size))
    return err_set(DRV_EINVAL, "shared-memory ring of %llu bytes: a power of two from %u to %u",
                   (unsigned long long)size, SHM_RING_MIN, SHM_RING_MAX);
  int f = memfd_create("drover-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (f < 0) return err_set(DRV_EIO, "memfd_create: %s", strerror(errno));
  /* Fresh pages are zero: both rings start empty with nobody waiting. */
  if (ftruncate(f, (off_t)shm_region_bytes(size)) < 0 || fcntl(f, F_ADD_SEALS, SEALS) < 0) {
    int e = errno;
    close(f);
    return err_set(DRV_EIO, "shared-memory region of %zu bytes: %s", shm_region_bytes(size),
                   strerror(e));
  }
  *fd = f;
  return 0;
}

/* Into the reserved range at p: per ring its header and data from the
 * file, then the data again (MAP_FIXED replaces the reservation). */
static int map_mirrored(int fd, uint8_t *p, uint64_t size) {
  size_t hb = hdr_bytes(), ring = hb + (size_t)size;
  for (int i = 0; i < 2; i++) {
    uint8_t *at = p + (size_t)i * (hb + 2 * (size_t)size);
    off_t off = (off_t)((size_t)i * ring);
    if (mmap(at, ring, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, off) == MAP_FAILED ||
        mmap(at + ring, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             off + (off_t)hb) == MAP_FAILED)
      return -1;
  }
  return 0;
}

int shm_region_map(int fd, uint64_t size, void **base, size_t *len_out) {
  struct stat st;
  int seals;
  if (!shm_ring_size_ok(size)) return err_set(DRV_EPARSE, "ring size %llu refused",
                                              (unsigned long long)size);
  size_t want = shm_region_bytes(size);
  seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return err_set(DRV_EPARSE, "the shared-memory region is not a memfd sealed against "
                   "resizing");
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != want)
    return err_set(DRV_EPARSE, "the shared-memory region is not of %zu bytes", want);
  size_t len = shm_region_map_bytes(size);
  uint8_t *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return err_set(DRV_EIO, "mmap of %zu bytes: %s", len, strerror(errno));
  if (map_mirrored(fd, p, size) < 0) {
    int e = errno;
    munmap(p, len);
    return err_set(DRV_EIO, "mmap of a %llu-byte ring: %s", (unsigned long long)size,
                   strerror(e));
  }
  *base = p;
  *len_out = len;
  return 0;
}

void shm_ring_attach(shm_ring *r, void *base, uint64_t size, int which, bool writer) {
  size_t hb = hdr_bytes();
  uint8_t *p = (uint8_t *)base + (size_t)which * (hb + 2 * (size_t)size);
  (void)writer; /* both start at 0; the flag documents the call site */
  r->h = (shm_ring_hdr *)p;
  r->data = p + hb;
  r->size = size;
  r->pos = 0;
  r->mirrored = true;
}

void shm_ring_attach_flat(shm_ring *r, void *mem, uint64_t size) {
  r->h = mem;
  r->data = (uint8_t *)mem + sizeof(shm_ring_hdr);
  r->size = size;
  r->pos = 0;
  r->mirrored = false;
}

/* Bytes in the ring, from our index and the peer's (read once, checked). */
static ssize_t used_by(uint64_t head, uint64_t tail, uint64_t size) {
  uint64_t used = head - tail;
  if (used > size) return err_set(DRV_EPARSE, "shared-memory ring corrupted (head %llu, tail "
                                  "%llu)", (unsigned long long)head, (unsigned long long)tail);
  return (ssize_t)used;
}

ssize_t shm_ring_write(shm_ring *r, const void *p, size_t n) {
  uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
  ssize_t used = used_by(r->pos, tail, r->size);
  if (used < 0) return used;
  size_t room = (size_t)(r->size - (uint64_t)used), k = n < room ? n : room;
  if (k == 0) return 0;
  size_t at = (size_t)(r->pos & (r->size - 1)), first = r->size - at;
  if (first > k) first = k;
  memcpy(r->data + at, p, first);
  memcpy(r->data, (const uint8_t *)p + first, k - first);
  r->pos += k;
  atomic_store_explicit(&r->h->head, r->pos, memory_order_release);
  return (ssize_t)k;
}

ssize_t shm_ring_readable(const shm_ring *r) {
  uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
  return used_by(head, r->pos, r->size);
}

ssize_t shm_ring_read(shm_ring *r, void *p, size_t n) {
  ssize_t used = shm_ring_readable(r);
  if (used <= 0) return used;
  size_t k = n < (size_t)used ? n : (size_t)used;
  size_t at = (size_t)(r->pos & (r->size - 1)), first = r->size - at;
  if (first > k) first = k;
  memcpy(p, r->data + at, first);
  memcpy((uint8_t *)p + first, r->data, k - first);
  r->pos += k;
  atomic_store_explicit(&r->h->tail, r->pos, memory_order_release);
  return (ssize_t)k;
}

uint8_t *shm_ring_reserve(shm_ring *r, size_t n, int *err) {
  uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
  ssize_t used = used_by(r->pos, tail, r->size);
  *err = used < 0 ? (int)used : 0;
  if (used < 0) return NULL;
  size_t at = (size_t)(r->pos & (r->size - 1));
  size_t room = (size_t)(r->size - (uint64_t)used);
  if (!r->mirrored && room > r->size - at) room = r->size - at;
  return n <= room ? r->data + at : NULL;
}

void shm_ring_commit(shm_ring *r, size_t n) {
  r->pos += n;
  atomic_store_explicit(&r->h->head, r->pos, memory_order_release);
}

ssize_t shm_ring_peek(const shm_ring *r, const uint8_t **p) {
  ssize_t used = shm_ring_readable(r);
  size_t at = (size_t)(r->pos & (r->size - 1));
  if (used > 0 && !r->mirrored && (size_t)used > r->size - at) used = (ssize_t)(r->size - at);
  *p = r->data + at;
  return used;
}

void shm_ring_consume(shm_ring *r, size_t n) {
  r->pos += n;
  atomic_store_explicit(&r->h->tail, r->pos, memory_order_release);
}

/* A side going to sleep: flag, full fence, then look again (the peer
 * publishes its index, fences, then reads the flag: one of the two sees
 * the other). */
bool shm_ring_reader_sleep(shm_ring *r) { return shm_ring_reader_wait(r, 1); }

bool shm_ring_reader_wait(shm_ring *r, size_t want) {
  atomic_store_explicit(&r->h->reader_waiting, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  ssize_t n = shm_ring_readable(r);
  if (n >= 0 && (size_t)n < want) return true;
  atomic_store_explicit(&r->h->reader_waiting, 0, memory_order_relaxed);
  return false; /* bytes (or a corrupt index, which the next read reports) */
}

bool shm_ring_writer_sleep(shm_ring *r) {
  atomic_store_explicit(&r->h->writer_waiting, 1, memory_order_relaxed);
  atomic_thread_fence(memory_order_seq_cst);
  uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
  if (r->pos - tail == r->size) return true;
  atomic_store_explicit(&r->h->writer_waiting, 0, memory_order_relaxed);
  return false; /* room (or a corrupt index, which the next write reports) */
}

bool shm_ring_wake_reader(shm_ring *r) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&r->h->reader_waiting, memory_order_relaxed) == 0) return false;
  return atomic_exchange_explicit(&r->h->reader_waiting, 0, memory_order_relaxed) != 0;
}

bool shm_ring_wake_writer(shm_ring *r) {
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&r->h->writer_waiting, memory_order_relaxed) == 0) return false;
  return atomic_exchange_explicit(&r->h->writer_waiting, 0, memory_order_relaxed) != 0;
}
