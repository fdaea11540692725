/* wire_int.h - the payload reader's internals, shared by wire.c (the reader)
 * and wire_msgs.c (the generated codecs); not a public API. */
#ifndef DROVER_WIRE_INT_H
#define DROVER_WIRE_INT_H

#include "proto/wire.h"

#define TENSOR_MIN (1 + 8) /* a 1-D tensor of zero elements */

/* Records the first failure of r (later ones are its consequences). */
void wire__rd_fail(wire_rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The next n bytes, or NULL (and a failure naming `what`) when fewer remain. */
const uint8_t *wire__rd_take(wire_rd *r, size_t n, const char *what);
/* Reads and checks nd dims (each and their product below 2^40) starting at
 * offset `at`; the element count, or -1 after a failure. */
int64_t wire__rd_shape(wire_rd *r, const char *what, size_t at, unsigned nd, int64_t *dims);

/* n little-endian float32s at src (unaligned) into dst. */
void wire__f32_from_wire(float *dst, const uint8_t *src, size_t n);

#endif
