/* blockcache.c - see blockcache.h. */
#include "base/blockcache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 6
#define MAX_BYTES ((size_t)32 << 20)
#define MAX_BLOCK ((size_t)16 << 20)

static struct {
  pthread_mutex_t mu;
  void *p[SLOTS];
  size_t bytes[SLOTS];
  size_t total;
  int next; /* the slot filled next: the oldest */
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

void *blockcache_take(size_t bytes) {
  void *p = NULL;
  if (bytes < BLOCKCACHE_MIN || bytes > MAX_BLOCK) return NULL;
  pthread_mutex_lock(&cache.mu);
  for (int i = 0; i < SLOTS && !p; i++)
    if (cache.p[i] && cache.bytes[i] == bytes) {
      p = cache.p[i];
      cache.p[i] = NULL;
      cache.total -= bytes;
    }
  pthread_mutex_unlock(&cache.mu);
  return p;
}

/* Keeps the newest blocks: when the cache is full, older ones go (a
 * block of a size nobody asks for again must not hold a slot forever). */
void blockcache_give(void *p, size_t bytes) {
  void *out[SLOTS] = {0};
  int nout = 0;
  if (p && bytes >= BLOCKCACHE_MIN && bytes <= MAX_BLOCK) {
    pthread_mutex_lock(&cache.mu);
    for (int k = 0; k < SLOTS && (cache.total + bytes > MAX_BYTES || cache.p[cache.next]); k++) {
      int i = cache.next; /* the oldest slot */
      if (cache.p[i]) {
        out[nout++] = cache.p[i];
        cache.total -= cache.bytes[i];
        cache.p[i] = NULL;
      }
      if (cache.total + bytes > MAX_BYTES) cache.next = (cache.next + 1) % SLOTS;
    }
    cache.p[cache.next] = p;
    cache.bytes[cache.next] = bytes;
    cache.total += bytes;
    cache.next = (cache.next + 1) % SLOTS;
    p = NULL;
    pthread_mutex_unlock(&cache.mu);
  }
  for (int i = 0; i < nout; i++) free(out[i]);
  free(p);
}

void *blockcache_alloc(size_t bytes, size_t *got) {
  if (bytes > SIZE_MAX - BLOCKCACHE_MIN) return NULL;
  bytes = (bytes + BLOCKCACHE_MIN - 1) & ~(BLOCKCACHE_MIN - 1);
  void *p = blockcache_take(bytes);
  if (!p && posix_memalign(&p, BLOCKCACHE_MIN, bytes) != 0) return NULL;
  *got = bytes;
  return p;
}
