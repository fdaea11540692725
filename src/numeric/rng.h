/* rng.h - a small seeded random number generator (xoshiro256**).
 *
 * Deterministic across runs and machines: the same seed gives the same
 * stream. Not thread-safe; give each thread or object its own rng_t.
 */
#ifndef DROVER_RNG_H
#define DROVER_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct rng {
  uint64_t s[4];
} rng_t;

/* Seeds `r` from a 64-bit seed (expanded with splitmix64). */
void rng_seed(rng_t *r, uint64_t seed);
uint64_t rng_u64(rng_t *r);
/* Uniform integer in [0, n), unbiased. n must be > 0. */
uint64_t rng_below(rng_t *r, uint64_t n);
/* Uniform float in [0, 1) with 24 random bits. */
float rng_uniform(rng_t *r);
/* Standard normal (Box-Muller; one value per call, no cached pair). */
float rng_normal(rng_t *r);
/* Fills idx with a uniformly random permutation of 0..n-1 (Fisher-Yates). */
void rng_permutation(rng_t *r, int64_t *idx, int64_t n);
/* Derives an independent seed from (seed, stream): for per-epoch shuffles,
 * per-layer init and so on, so that adding one consumer does not shift the
 * others' streams. */
uint64_t rng_derive(uint64_t seed, uint64_t stream);

#endif
