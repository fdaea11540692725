/* le.h - little-endian integers at unaligned addresses: the one set of
 * byte-order helpers the protocol layer (wire, closure, events, ps) uses.
 *
 * Integers are assembled byte by byte, so nothing depends on the host's
 * byte order or on pointer alignment; compilers turn these loops into a
 * single load or store.
 */
#ifndef DROVER_LE_H
#define DROVER_LE_H

#include <stdint.h>

/* Writes the low n bytes (1..8) of v at p, least significant first. */
static inline void le_put(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Reads n bytes (1..8) at p as a little-endian unsigned integer. */
static inline uint64_t le_get(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* 1 when the host stores integers and floats little-endian, as the wire
 * does: float arrays then cross in one memcpy. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define LE_HOST 1
#else
#define LE_HOST 0
#endif

#endif
