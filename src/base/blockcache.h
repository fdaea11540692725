/* blockcache.h - a small process-wide cache of large freed blocks.
 *
 * A fresh mapping of a few MiB costs the kernel a clear of every page; a
 * fed worker decodes a batch of the same size again and again, and the
 * coordinator encodes one, so freed blocks of a size are kept for the
 * next block of that size. Bounded (a few blocks, 32 MiB); thread-safe.
 */
#ifndef DROVER_BLOCKCACHE_H
#define DROVER_BLOCKCACHE_H

#include <stddef.h>

/* Blocks this large or larger are worth caching (and are 2 MiB aligned
 * by their makers: the cache hands a block to any maker of that size). */
#define BLOCKCACHE_MIN ((size_t)2 << 20)

/* A cached block of exactly `bytes` (the caller's from now on, to free()
 * or give back), or NULL. Its contents are undefined. */
void *blockcache_take(size_t bytes);
/* Takes p (a block of `bytes`, 2 MiB aligned when bytes >= BLOCKCACHE_MIN,
 * from malloc or posix_memalign) and keeps it for reuse, or frees it. */
void blockcache_give(void *p, size_t bytes);
/* A block of `bytes` rounded up to 2 MiB, 2 MiB aligned: from the cache,
 * else new. *got: its size. NULL when out of memory. */
void *blockcache_alloc(size_t bytes, size_t *got);

#endif
