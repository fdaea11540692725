/* util.h - the base layer's small helpers: growing an array, and the
 * close callback that frees a malloc'ed libuv handle.
 *
 * Base layer: includes nothing of drover's but err.h.
 */
#ifndef DROVER_UTIL_H
#define DROVER_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <uv.h>

/* Makes room in the array *pp (of *cap elements of `size` bytes) for at
 * least `need` elements: the capacity doubles from at least `min_cap`, so n
 * appends cost O(n). `pp` is the address of the array pointer (any element
 * type: `util_grow(&s->items, &s->cap, s->n + 1, sizeof *s->items, 16)`).
 * Elements past the old capacity are zeroed when `zero` is set (use
 * util_grow_zeroed). Returns 0, or DRV_ENOMEM / DRV_ERANGE with a message
 * when the size overflows or memory runs out; *pp and *cap are then
 * unchanged. The caller keeps owning the array. */
int util_grow_(void *pp, size_t *cap, size_t need, size_t size, size_t min_cap, int zero);
static inline int util_grow(void *pp, size_t *cap, size_t need, size_t size, size_t min_cap) {
  return need <= *cap ? 0 : util_grow_(pp, cap, need, size, min_cap, 0);
}
static inline int util_grow_zeroed(void *pp, size_t *cap, size_t need, size_t size,
                                   size_t min_cap) {
  return need <= *cap ? 0 : util_grow_(pp, cap, need, size, min_cap, 1);
}

/* a * b into *out; false (and *out untouched) when it overflows size_t. */
/* MurmurHash3's 64-bit finalizer: every input bit spread over the result,
 * so `mod n` of it is uniform for any n (hashed ids, a row's ps). */
static inline uint64_t util_fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

static inline int util_mul_ok(size_t a, size_t b, size_t *out) {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r)) return 0;
  *out = r;
  return 1;
}

/* uv_close callback for a handle that was malloc'ed on its own. */
void util_free_handle(uv_handle_t *h);

/* write(2) until all of buf is written, through EINTR and short writes.
 * 0, or -1 with errno set. */
int util_write_all(int fd, const void *buf, size_t len);

/* fsync of directory `dir`, so that a rename or create in it is on disk.
 * A file system that cannot sync directories (EINVAL) is let be. 0, or -1
 * with errno set. */
int util_sync_dir(const char *dir);

/* fopen(path, "a") with O_CLOEXEC and an explicit creation mode: a plain
 * fopen creates 0666 less the umask, world-writable under umask 000; run
 * records and logs are made `mode` (less the umask) instead. NULL with
 * errno set. */
FILE *util_fopen_append(const char *path, mode_t mode);

/* util_sync_dir of the directory holding `path` ("." for a bare name). */
int util_sync_parent(const char *path);

/* Descriptors held in reserve (UTIL_FD_RESERVE of them, on /dev/null,
 * close-on-exec), so that a process whose table a flood of connections
 * filled can still open what recovery needs: a relaunched node's log, the
 * pipes of its spawn, a run record. The process keeps them from
 * util_fd_reserve() on; a recovery step calls util_fd_release() just
 * before it opens, and util_fd_reserve() right after to take them back
 * (when it cannot, the next call tries again). Loop thread only: the
 * state is process-wide. util_open() does this around one open(2) that
 * failed with EMFILE/ENFILE. util_fd_reserve returns how many are held. */
#define UTIL_FD_RESERVE 4
int util_fd_reserve(void);
void util_fd_release(void);
/* open(2) (O_CLOEXEC added) that, on EMFILE or ENFILE, releases the
 * reserve, tries again and re-takes it. -1 with errno set. */
int util_open(const char *path, int flags, mode_t mode);

/* Fault injection for tests (DROVER_FAULT): with DROVER_FAULT_ONCE=PATH
 * true only in the one process that creates PATH (a restarted node does
 * not fail again); without it, always true. */
bool util_fault_first(void);

#endif
