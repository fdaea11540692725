/* rng.c - xoshiro256** seeded by splitmix64. */
#include "numeric/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(rng_t *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t rng_u64(rng_t *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t rng_below(rng_t *r, uint64_t n) {
  /* Rejection sampling on the top of the range keeps it unbiased. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t v;
  do v = rng_u64(r);
  while (v >= limit);
  return v % n;
}

float rng_uniform(rng_t *r) { return (float)(rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

float rng_normal(rng_t *r) {
  double u1 = ((double)(rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
  double u2 = (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
  return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

void rng_permutation(rng_t *r, int64_t *idx, int64_t n) {
  for (int64_t i = 0; i < n; i++) idx[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)rng_below(r, (uint64_t)i + 1);
    int64_t t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
  }
}

uint64_t rng_derive(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);
  splitmix64(&x);
  return splitmix64(&x);
}
