/* test_blockcache.c - freed large blocks come back for the same size;
 * the cache stays bounded and keeps the newest. Each case runs in its own
 * process, so the cache starts empty. */
#include <stdint.h>
#include <stdlib.h>

#include "base/blockcache.h"
#include "harness.h"

TEST(blockcache_gives_back_a_block_of_the_same_size) {
  size_t got = 0;
  void *a = blockcache_alloc(3u << 20, &got);
  CHECK(a != NULL);
  CHECK(got == (4u << 20));
  CHECK(((uintptr_t)a & (BLOCKCACHE_MIN - 1)) == 0);
  blockcache_give(a, got);
  CHECK(blockcache_take(2u << 20) == NULL); /* another size */
  CHECK(blockcache_take(got) == a);
  CHECK(blockcache_take(got) == NULL); /* taken once */
  free(a);
}

TEST(blockcache_small_blocks_are_not_kept) {
  void *p = malloc(4096);
  blockcache_give(p, 4096); /* freed */
  CHECK(blockcache_take(4096) == NULL);
}

TEST(blockcache_is_bounded_and_keeps_the_newest) {
  void *b[10];
  size_t got;
  for (int i = 0; i < 10; i++) CHECK((b[i] = blockcache_alloc(8u << 20, &got)) != NULL);
  for (int i = 0; i < 10; i++) blockcache_give(b[i], 8u << 20); /* 32 MiB: four stay */
  int back = 0;
  void *t;
  while ((t = blockcache_take(8u << 20))) {
    back++;
    CHECK(t == b[6] || t == b[7] || t == b[8] || t == b[9]);
    free(t);
  }
  CHECK(back == 4);
}
