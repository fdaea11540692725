/* closure_bc.c - a structure check of Lua 5.4 bytecode, run before
 * lua_load sees bytes from another process (closure.h, SECURITY).
 *
 * lua_load trusts the counts in a binary chunk: a corrupted one asks for
 * gigabytes (ASan aborts on the request; a real process may just die),
 * overruns the upvalue table (5.4.4 reads as many upvalue names as the
 * chunk says), or nests functions until the C stack ends. This walk
 * mirrors lundump.c's reads (the layout ldump.c writes) and checks each
 * count against the bytes left, the upvalue counts against each other,
 * and the nesting depth. It does not judge the instructions.
 */
#include <lua.h>
#include <stdbool.h>
#include <string.h>

#include "proto/closure.h"
#include "base/err.h"

#if LUA_VERSION_NUM != 504
#error "closure_bc.c checks Lua 5.4 bytecode; port it to this Lua version"
#endif

#define BC_MAX_DEPTH 200 /* the parser's own limit (LUAI_MAXCCALLS) */
#define BC_HEADER_SIZE 31 /* signature 4, version, format, data 6, 3 sizes, int 8, num 8 */

/* Constant tags (lobject.h: makevariant(type, variant)). */
enum { K_NIL = 0x00, K_FALSE = 0x01, K_TRUE = 0x11, K_INT = 0x03, K_FLT = 0x13,
       K_SHRSTR = 0x04, K_LNGSTR = 0x14 };

typedef struct bc {
  const uint8_t *p;
  size_t n, off;
  const char *why;
} bc;

static int bc_fail(bc *b, const char *why) {
  if (!b->why) b->why = why;
  return -1;
}

static int bc_skip(bc *b, size_t k) {
  if (k > b->n - b->off) return bc_fail(b, "truncated");
  b->off += k;
  return 0;
}

static int bc_byte(bc *b, unsigned *v) {
  if (b->off >= b->n) return bc_fail(b, "truncated");
  *v = b->p[b->off++];
  return 0;
}

/* lundump's loadUnsigned: 7-bit groups, most significant first, the last
 * one flagged with 0x80; at most `limit`. */
static int bc_varint(bc *b, size_t limit, size_t *v) {
  size_t x = 0;
  unsigned c;
  limit >>= 7;
  do {
    if (bc_byte(b, &c)) return -1;
    if (x >= limit) return bc_fail(b, "integer overflow");
    x = (x << 7) | (c & 0x7f);
  } while (!(c & 0x80));
  *v = x;
  return 0;
}

/* A vector count (loadInt) whose elements take at least `unit` bytes. */
static int bc_count(bc *b, size_t unit, size_t *n) {
  if (bc_varint(b, 0x7fffffff, n)) return -1;
  if (*n > (b->n - b->off) / unit) return bc_fail(b, "count beyond the chunk");
  return 0;
}

/* A string (loadStringN): size+1, or 0 for none. */
static int bc_string(bc *b, bool required) {
  size_t size;
  if (bc_varint(b, ~(size_t)0, &size)) return -1;
  if (size == 0) return required ? bc_fail(b, "missing string") : 0;
  return bc_skip(b, size - 1);
}

static int bc_constants(bc *b) {
  size_t n;
  if (bc_count(b, 1, &n)) return -1;
  for (size_t i = 0; i < n; i++) {
    unsigned t;
    if (bc_byte(b, &t)) return -1;
    switch (t) {
    case K_NIL: case K_FALSE: case K_TRUE: break;
    case K_INT: case K_FLT:
      if (bc_skip(b, 8)) return -1;
      break;
    case K_SHRSTR: case K_LNGSTR:
      if (bc_string(b, true)) return -1;
      break;
    default:
      return bc_fail(b, "bad constant tag");
    }
  }
  return 0;
}

static int bc_debug(bc *b, size_t ncode, size_t nup) {
  size_t n, v;
  if (bc_count(b, 1, &n)) return -1; /* lineinfo: one byte per instruction */
  if (n != 0 && n != ncode) return bc_fail(b, "line info does not match the code");
  if (bc_skip(b, n) || bc_count(b, 2, &n)) return -1; /* abslineinfo */
  for (size_t i = 0; i < 2 * n; i++)
    if (bc_varint(b, 0x7fffffff, &v)) return -1;
  if (bc_count(b, 3, &n)) return -1; /* locvars: name, startpc, endpc */
  for (size_t i = 0; i < n; i++)
    if (bc_string(b, false) || bc_varint(b, 0x7fffffff, &v) || bc_varint(b, 0x7fffffff, &v))
      return -1;
  if (bc_count(b, 1, &n)) return -1; /* upvalue names */
  if (n != 0 && n != nup) return bc_fail(b, "upvalue names do not match the upvalues");
  for (size_t i = 0; i < n; i++)
    if (bc_string(b, false)) return -1;
  return 0;
}

static int bc_function(bc *b, int depth, size_t *nup) {
  size_t v, ncode, nprotos;
  if (depth > BC_MAX_DEPTH) return bc_fail(b, "functions nested too deep");
  if (bc_string(b, false) || bc_varint(b, 0x7fffffff, &v) || bc_varint(b, 0x7fffffff, &v) ||
      bc_skip(b, 3)) /* source, linedefined, lastlinedefined, params, vararg, stack */
    return -1;
  if (bc_count(b, 4, &ncode) || bc_skip(b, 4 * ncode) || bc_constants(b)) return -1;
  if (bc_count(b, 3, nup) || bc_skip(b, 3 * *nup)) return -1;
  if (*nup > 255) return bc_fail(b, "too many upvalues");
  if (bc_count(b, 1, &nprotos)) return -1;
  for (size_t i = 0; i < nprotos; i++) {
    size_t inner;
    if (bc_function(b, depth + 1, &inner)) return -1;
  }
  return bc_debug(b, ncode, *nup);
}

/* The whole chunk: header, the main closure's upvalue count, its function. */
static int bc_chunk(bc *b, size_t *nup) {
  static const uint8_t head[] = {0x1b, 'L', 'u', 'a', 0x54, 0, 0x19, 0x93, '\r', '\n', 0x1a,
                                 '\n', 4, sizeof(lua_Integer), sizeof(lua_Number)};
  if (b->n < BC_HEADER_SIZE + 1) return bc_fail(b, "truncated");
  if (memcmp(b->p, head, sizeof head) != 0) return bc_fail(b, "not Lua 5.4 bytecode of this build");
  b->off = BC_HEADER_SIZE; /* lua_load checks the integer and float samples */
  unsigned closure_nup;
  if (bc_byte(b, &closure_nup) || bc_function(b, 0, nup)) return -1;
  if (*nup != closure_nup) return bc_fail(b, "upvalue counts disagree");
  if (b->off != b->n) return bc_fail(b, "trailing bytes");
  return 0;
}

int closure_bc_check(const uint8_t *p, size_t n, size_t *nup) {
  bc b = {p, n, 0, NULL};
  if (bc_chunk(&b, nup) < 0)
    return err_set(DRV_EPARSE, "bad bytecode: %s at byte %zu of it", b.why, b.off);
  return 0;
}
