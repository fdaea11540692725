/* closure.c - the closure codec: a Lua function, its upvalues and its
 * arguments to bytes and back (closure.h has the contract and the security
 * note).
 *
 * Format. Integers are little-endian, unaligned, without padding.
 *
 *   closure := u8 format (CLOSURE_FORMAT = 1)
 *              u32 code_len, code_len bytes: lua_dump output, debug info kept
 *              u8 nup: the function's upvalue count (== the bytecode's)
 *              nup x value: upvalue 1..nup in order
 *              values: the arguments
 *   values  := u32 count (<= CLOSURE_MAX_VALUES), count x value
 *   value   := u8 tag, then by tag:
 *     0 NIL, 1 FALSE, 2 TRUE    nothing more
 *     3 INT                     i64
 *     4 FLOAT                   f64 (IEEE-754 bits)
 *     5 STR                     u32 len, len bytes (any bytes)
 *     6 TABLE                   u32 narr, u32 nhash, then narr values
 *                               (t[1]..t[narr]; a NIL leaves a hole), then
 *                               nhash pairs key value (a key is never NIL
 *                               nor a NaN)
 *     7 REF                     u32 id: the table that started id-th
 *                               (from 0) in this message: a shared table
 *     8 GLOBALS                 the receiver's globals table (the _ENV
 *                               upvalue, or _G wherever it appears)
 *
 * closure_encode_values writes a `values` alone. Tables nest at most
 * CLOSURE_MAX_DEPTH deep; a message is at most CLOSURE_MAX_BYTES. The
 * decoder checks every tag, count and length against the bytes that
 * remain before using it, checks the bytecode's structure
 * (closure_bc_check, closure_bc.c) before lua_load sees it, and runs
 * inside lua_pcall so that a memory error cannot escape.
 */
#include "proto/closure.h"

#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/le.h"

#define CLOSURE_FORMAT 1

enum { T_NIL, T_FALSE, T_TRUE, T_INT, T_FLOAT, T_STR, T_TABLE, T_REF, T_GLOBALS };

#define SENDABLE "only nil, booleans, numbers, strings and tables of them can be sent"

/* ======================================================================
 * Encoder
 * ==================================================================== */

/* Tables met so far, by address: their id (for REF) and whether they are
 * being encoded right now (met again then: a cycle). Open addressing; the
 * inline slots spare small closures a malloc. */
typedef struct seen_slot {
  const void *p;
  uint32_t id;
  bool busy;
} seen_slot;

typedef enum { F_VALUE, F_CYCLE, F_DEPTH, F_SIZE, F_NOMEM, F_WIRE } fail_kind;

typedef struct enc {
  lua_State *L;
  wire_wr *w;
  size_t start;          /* w->len when the call began */
  const void *globals;   /* L's globals table, sent as T_GLOBALS */
  seen_slot *slots;
  size_t cap, used;
  uint32_t ntables;
  /* The failure, filled while the recursion unwinds: the offending value's
   * description and its path, built right to left in path[pos..]. */
  fail_kind kind;
  bool in_key;           /* the offender is a key, not a value */
  bool is_lua_fn;
  bool cut;              /* the path was too long: its outer part is "..." */
  size_t pos;
  char what[96];
  seen_slot inline_slots[16];
  char path[256];        /* last: enc_init leaves it uninitialised */
} enc;

static void enc_init(enc *e, lua_State *L, wire_wr *w) {
  memset(e, 0, offsetof(enc, path));
  e->L = L;
  e->w = w;
  e->start = w->len;
  e->slots = e->inline_slots;
  e->cap = sizeof e->inline_slots / sizeof e->inline_slots[0];
  lua_pushglobaltable(L);
  e->globals = lua_topointer(L, -1);
  lua_pop(L, 1);
  e->pos = sizeof e->path - 1;
  e->path[e->pos] = '\0';
}

static void enc_free(enc *e) {
  if (e->slots != e->inline_slots) free(e->slots);
}

static size_t seen_hash(const void *p, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 32) & (cap - 1);
}

static seen_slot *seen_find(enc *e, const void *p) {
  for (size_t i = seen_hash(p, e->cap);; i = (i + 1) & (e->cap - 1)) {
    if (e->slots[i].p == p) return &e->slots[i];
    if (!e->slots[i].p) return NULL;
  }
}

/* Adds p (not present); NULL when out of memory. Keeps the load <= 1/2. */
static seen_slot *seen_add(enc *e, const void *p, uint32_t id) {
  if (2 * (e->used + 1) > e->cap) {
    size_t ncap = e->cap * 2;
    seen_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns) return NULL;
    for (size_t i = 0; i < e->cap; i++) {
      if (!e->slots[i].p) continue;
      size_t j = seen_hash(e->slots[i].p, ncap);
      while (ns[j].p) j = (j + 1) & (ncap - 1);
      ns[j] = e->slots[i];
    }
    if (e->slots != e->inline_slots) free(e->slots);
    e->slots = ns;
    e->cap = ncap;
  }
  size_t i = seen_hash(p, e->cap);
  while (e->slots[i].p) i = (i + 1) & (e->cap - 1);
  e->slots[i] = (seen_slot){p, id, true};
  e->used++;
  return &e->slots[i];
}

/* ---- failure reports ---- */

static int enc_fail(enc *e, fail_kind kind) {
  e->kind = kind;
  return -1;
}

static void path_prepend(enc *e, const char *s) {
  size_t n = strlen(s);
  if (e->cut) return;
  if (e->pos < n + 3) { /* keep the innermost part; mark the cut */
    e->pos -= 3;
    memcpy(e->path + e->pos, "...", 3);
    e->cut = true;
    return;
  }
  e->pos -= n;
  memcpy(e->path + e->pos, s, n);
}

static bool is_identifier(const char *s, size_t n) {
  if (n == 0 || n > 40 || !(s[0] == '_' || ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z')))
    return false;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!(c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z')))
      return false;
  }
  return true;
}

/* Prepends the key at idx as a path step: ".name", "[3]", "[\"a b\"]". */
static void path_key(enc *e, int idx) {
  lua_State *L = e->L;
  char buf[64];
  size_t n;
  const char *s;
  switch (lua_type(L, idx)) {
  case LUA_TSTRING:
    s = lua_tolstring(L, idx, &n);
    if (is_identifier(s, n))
      snprintf(buf, sizeof buf, ".%s", s);
    else
      snprintf(buf, sizeof buf, "[\"%.*s%s\"]", (int)(n > 24 ? 24 : n), s, n > 24 ? "..." : "");
    break;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx))
      snprintf(buf, sizeof buf, "[%lld]", (long long)lua_tointeger(L, idx));
    else
      snprintf(buf, sizeof buf, "[%.14g]", (double)lua_tonumber(L, idx));
    break;
  case LUA_TBOOLEAN:
    snprintf(buf, sizeof buf, "[%s]", lua_toboolean(L, idx) ? "true" : "false");
    break;
  default:
    snprintf(buf, sizeof buf, "[%s]", luaL_typename(L, idx));
  }
  path_prepend(e, buf);
}

static void path_index(enc *e, lua_Integer i) {
  char buf[32];
  snprintf(buf, sizeof buf, "[%lld]", (long long)i);
  path_prepend(e, buf);
}

/* Describes the value at idx that cannot be sent. */
static int enc_bad(enc *e, int idx) {
  lua_State *L = e->L;
  const char *tn = luaL_typename(L, idx);
  if (lua_iscfunction(L, idx)) {
    snprintf(e->what, sizeof e->what, "a C function");
  } else if (lua_isfunction(L, idx)) {
    snprintf(e->what, sizeof e->what, "a Lua function");
    e->is_lua_fn = true;
  } else if (lua_type(L, idx) == LUA_TUSERDATA || lua_type(L, idx) == LUA_TTABLE) {
    const char *name = NULL;
    if (luaL_getmetafield(L, idx, "__name") != LUA_TNIL) {
      name = lua_tostring(L, -1);
      lua_pop(L, 1);
    }
    if (lua_type(L, idx) == LUA_TTABLE)
      snprintf(e->what, sizeof e->what, "a table with a metatable%s%s", name ? " " : "",
               name ? name : "");
    else
      snprintf(e->what, sizeof e->what, "a userdata%s%s", name ? " " : "", name ? name : "");
  } else if (lua_type(L, idx) == LUA_TLIGHTUSERDATA) {
    snprintf(e->what, sizeof e->what, "a light userdata");
  } else if (lua_type(L, idx) == LUA_TTHREAD) {
    snprintf(e->what, sizeof e->what, "a coroutine");
  } else {
    snprintf(e->what, sizeof e->what, "a %s", tn);
  }
  return enc_fail(e, F_VALUE);
}

/* ---- values ---- */

static int enc_value(enc *e, int idx, int depth);

/* 0 while the message is within CLOSURE_MAX_BYTES and w is healthy. */
static int enc_check(enc *e) {
  if (e->w->err) return enc_fail(e, F_WIRE);
  if (e->w->len - e->start > CLOSURE_MAX_BYTES) return enc_fail(e, F_SIZE);
  return 0;
}

static int enc_table_body(enc *e, int idx, int depth) {
  lua_State *L = e->L;
  wire_wr *w = e->w;
  lua_Unsigned narr = lua_rawlen(L, idx);
  if (narr > CLOSURE_MAX_BYTES) return enc_fail(e, F_SIZE);
  wire_wr_u8(w, T_TABLE);
  wire_wr_u32(w, (uint32_t)narr);
  size_t at = w->len;
  wire_wr_u32(w, 0); /* nhash, patched below */
  for (lua_Unsigned i = 1; i <= narr; i++) {
    lua_rawgeti(L, idx, (lua_Integer)i);
    int rc = enc_value(e, -1, depth + 1);
    lua_pop(L, 1);
    if (rc) {
      path_index(e, (lua_Integer)i);
      return -1;
    }
  }
  uint32_t nhash = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_isinteger(L, -2)) {
      lua_Integer k = lua_tointeger(L, -2);
      if (k >= 1 && (lua_Unsigned)k <= narr) { /* sent in the array part */
        lua_pop(L, 1);
        continue;
      }
    }
    if (enc_value(e, -2, depth + 1)) {
      lua_pop(L, 2);
      if (e->kind == F_VALUE) { /* "a key of field 'x' is ..." */
        e->in_key = true;
        e->pos = sizeof e->path - 1;
        e->path[e->pos] = '\0';
        e->cut = false;
      }
      return -1;
    }
    if (enc_value(e, -1, depth + 1)) {
      path_key(e, -2);
      lua_pop(L, 2);
      return -1;
    }
    lua_pop(L, 1);
    nhash++;
  }
  if (w->err) return enc_fail(e, F_WIRE);
  le_put(w->buf + at, nhash, 4);
  return 0;
}

static int enc_table(enc *e, int idx, int depth) {
  lua_State *L = e->L;
  const void *p = lua_topointer(L, idx);
  if (p == e->globals) {
    wire_wr_u8(e->w, T_GLOBALS);
    return enc_check(e);
  }
  if (lua_getmetatable(L, idx)) {
    lua_pop(L, 1);
    return enc_bad(e, idx);
  }
  seen_slot *s = seen_find(e, p);
  if (s) {
    if (s->busy) return enc_fail(e, F_CYCLE);
    wire_wr_u8(e->w, T_REF);
    wire_wr_u32(e->w, s->id);
    return enc_check(e);
  }
  if (depth >= CLOSURE_MAX_DEPTH) return enc_fail(e, F_DEPTH);
  if (!lua_checkstack(L, 4) || !seen_add(e, p, e->ntables)) return enc_fail(e, F_NOMEM);
  e->ntables++;
  if (enc_table_body(e, lua_absindex(L, idx), depth)) return -1;
  seen_find(e, p)->busy = false; /* slots may have moved: look it up again */
  return enc_check(e);
}

/* Appends the value at idx. 0, or -1 with the failure recorded in e. */
static int enc_value(enc *e, int idx, int depth) {
  lua_State *L = e->L;
  wire_wr *w = e->w;
  switch (lua_type(L, idx)) {
  case LUA_TNIL:
    wire_wr_u8(w, T_NIL);
    break;
  case LUA_TBOOLEAN:
    wire_wr_u8(w, lua_toboolean(L, idx) ? T_TRUE : T_FALSE);
    break;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      wire_wr_u8(w, T_INT);
      wire_wr_i64(w, (int64_t)lua_tointeger(L, idx));
    } else {
      wire_wr_u8(w, T_FLOAT);
      wire_wr_f64(w, (double)lua_tonumber(L, idx));
    }
    break;
  case LUA_TSTRING: {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    if (n > CLOSURE_MAX_BYTES) return enc_fail(e, F_SIZE);
    wire_wr_u8(w, T_STR);
    wire_wr_u32(w, (uint32_t)n);
    wire_wr_raw(w, s, n);
    break;
  }
  case LUA_TTABLE:
    return enc_table(e, idx, depth);
  default:
    return enc_bad(e, idx);
  }
  return enc_check(e);
}

/* Turns the failure in e into err_set's message about `who` ("upvalue
 * 'model' (#2)", "argument 3"); root names the value in a cycle's path
 * (the upvalue's name), NULL to say "field '...'" instead. */
static int enc_report(enc *e, const char *who, const char *root) {
  const char *path = e->path + e->pos;
  const char *field = path[0] == '.' ? path + 1 : path;
  char where[300] = "";
  if (*field) snprintf(where, sizeof where, ": field '%s'", field);
  switch (e->kind) {
  case F_VALUE:
    if (e->in_key)
      return err_set(DRV_EINVAL, "%s%s has a key that is %s; " SENDABLE, who, where, e->what);
    return err_set(DRV_EINVAL, "%s%s is %s; " SENDABLE "%s", who, where, e->what,
                   e->is_lua_fn ? " (functions cannot be sent yet: create it inside the "
                                    "function that is sent)"
                                  : "");
  case F_CYCLE:
    if (root) return err_set(DRV_EINVAL, "%s contains a cycle at %s%s", who, root, path);
    return err_set(DRV_EINVAL, "%s contains a cycle at field '%s'", who, field);
  case F_DEPTH:
    return err_set(DRV_EINVAL, "%s%s nests tables more than %d deep", who, where,
                   CLOSURE_MAX_DEPTH);
  case F_SIZE:
    return err_set(DRV_EINVAL, "%s%s makes the message larger than %u MiB", who, where,
                   CLOSURE_MAX_BYTES >> 20);
  case F_NOMEM:
    return err_set(DRV_ENOMEM, "out of memory encoding %s", who);
  case F_WIRE:
    break;
  }
  return err_set(e->w->err ? e->w->err : DRV_ENOMEM, "encoding %s: the buffer failed (%s)",
                 who, err_str(e->w->err));
}

/* Writes `values` (count, then each value); who_fmt names value i. */
static int enc_values(enc *e, int first, int n, const char *what) {
  if (n < 0 || n > CLOSURE_MAX_VALUES)
    return err_set(DRV_EINVAL, "%d %ss: at most %d can be sent", n, what, CLOSURE_MAX_VALUES);
  wire_wr_u32(e->w, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    if (enc_value(e, first + i, 0)) {
      char who[64];
      snprintf(who, sizeof who, "%s %d", what, i + 1);
      return enc_report(e, who, NULL);
    }
  }
  return 0;
}

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
  (void)L;
  wire_wr *w = ud;
  wire_wr_raw(w, p, sz);
  return w->err != 0;
}

static int enc_function(enc *e, int fn) {
  lua_State *L = e->L;
  wire_wr *w = e->w;
  wire_wr_u8(w, CLOSURE_FORMAT);
  size_t at = w->len;
  wire_wr_u32(w, 0);
  lua_pushvalue(L, fn);
  lua_dump(L, dump_writer, w, 0); /* keep debug info: remote tracebacks */
  lua_pop(L, 1);
  if (enc_check(e)) return enc_report(e, "the function", NULL);
  le_put(w->buf + at, w->len - at - 4, 4);

  int nup = 0;
  while (lua_getupvalue(L, fn, nup + 1)) {
    lua_pop(L, 1);
    nup++;
  }
  wire_wr_u8(w, (uint8_t)nup); /* Lua allows at most 255 */
  for (int i = 1; i <= nup; i++) {
    const char *name = lua_getupvalue(L, fn, i);
    int rc = enc_value(e, -1, 0);
    if (rc) {
      char who[96];
      snprintf(who, sizeof who, "upvalue '%.60s' (#%d)", name, i);
      char root[64];
      snprintf(root, sizeof root, "%.60s", name);
      lua_pop(L, 1);
      return enc_report(e, who, root);
    }
    lua_pop(L, 1);
  }
  return 0;
}

int closure_encode(lua_State *L, int fn, int first_arg, int nargs, wire_wr *w) {
  if (w->err) return err_set(w->err, "closure: the buffer has already failed");
  if (!lua_checkstack(L, 8)) return err_set(DRV_ENOMEM, "closure: Lua stack overflow");
  fn = lua_absindex(L, fn);
  if (nargs > 0) first_arg = lua_absindex(L, first_arg);
  if (lua_type(L, fn) != LUA_TFUNCTION)
    return err_set(DRV_EINVAL, "expected a Lua function, got a %s", luaL_typename(L, fn));
  if (lua_iscfunction(L, fn))
    return err_set(DRV_EINVAL, "cannot send a C function (only a Lua function can be "
                                 "sent: wrap the call in one)");
  enc e;
  enc_init(&e, L, w);
  int rc = enc_function(&e, fn);
  if (rc == 0) rc = enc_values(&e, first_arg, nargs, "argument");
  enc_free(&e);
  if (rc < 0) w->len = e.start;
  return rc;
}

int closure_encode_values(lua_State *L, int first, int n, const char *what, wire_wr *w) {
  if (w->err) return err_set(w->err, "closure: the buffer has already failed");
  if (!lua_checkstack(L, 8)) return err_set(DRV_ENOMEM, "closure: Lua stack overflow");
  if (n > 0) first = lua_absindex(L, first);
  enc e;
  enc_init(&e, L, w);
  int rc = enc_values(&e, first, n, what);
  enc_free(&e);
  if (rc < 0) w->len = e.start;
  return rc;
}

/* ======================================================================
 * Decoder
 * ==================================================================== */

typedef struct dec {
  wire_rd r;        /* the bytes, through wire's bounds-checked reader */
  bool closure;     /* a whole closure, or values alone */
  int refs;         /* stack slot of the id -> table map (nil until a table) */
  uint32_t ntables;
  bool failed;
  char why[200];
} dec;

__attribute__((format(printf, 2, 3))) static int dec_fail(dec *d, const char *fmt, ...) {
  if (!d->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof d->why, fmt, ap);
    va_end(ap);
    d->failed = true;
  }
  return -1;
}

static size_t dec_left(const dec *d) { return wire_rd_left(&d->r); }

/* The next k bytes (borrowed) through wire's reader, or NULL (failed). */
static const uint8_t *dec_take(dec *d, size_t k) {
  size_t at = d->r.off;
  const uint8_t *q = wire_rd_raw(&d->r, k);
  if (!q) dec_fail(d, "truncated at byte %zu (%zu more needed)", at, k);
  return q;
}

static int dec_uint(dec *d, int nbytes, uint64_t *v) {
  const uint8_t *q = dec_take(d, (size_t)nbytes);
  if (!q) return -1;
  *v = le_get(q, nbytes);
  return 0;
}

static int dec_value(dec *d, lua_State *L, int depth, bool is_key);

static int dec_table(dec *d, lua_State *L, int depth) {
  uint64_t narr, nhash;
  size_t at = d->r.off - 1;
  if (depth >= CLOSURE_MAX_DEPTH)
    return dec_fail(d, "tables nested more than %d deep at byte %zu", CLOSURE_MAX_DEPTH, at);
  if (dec_uint(d, 4, &narr) || dec_uint(d, 4, &nhash)) return -1;
  /* Each entry takes at least one byte (a pair two): no promise beyond the input. */
  if (narr > dec_left(d) || nhash > dec_left(d) / 2 || narr + 2 * nhash > dec_left(d))
    return dec_fail(d, "table at byte %zu claims %llu+%llu entries with %zu bytes left", at,
                    (unsigned long long)narr, (unsigned long long)nhash, dec_left(d));
  if (!lua_checkstack(L, 6)) return dec_fail(d, "Lua stack overflow");
  lua_createtable(L, (int)narr, (int)nhash);
  int t = lua_gettop(L);
  if (lua_isnil(L, d->refs)) {
    lua_newtable(L);
    lua_replace(L, d->refs);
  }
  lua_pushvalue(L, t);
  lua_rawseti(L, d->refs, (lua_Integer)++d->ntables);
  for (uint64_t i = 1; i <= narr; i++) {
    if (dec_value(d, L, depth + 1, false)) return -1;
    lua_rawseti(L, t, (lua_Integer)i); /* a nil leaves the hole it was */
  }
  for (uint64_t i = 0; i < nhash; i++) {
    if (dec_value(d, L, depth + 1, true) || dec_value(d, L, depth + 1, false)) return -1;
    lua_rawset(L, t);
  }
  return 0;
}

/* Pushes one value; -1 (nothing pushed... or partial: the caller's stack
 * is discarded on failure) with the reason in d. */
static int dec_value(dec *d, lua_State *L, int depth, bool is_key) {
  uint64_t tag, v;
  size_t at = d->r.off;
  if (dec_uint(d, 1, &tag)) return -1;
  switch (tag) {
  case T_NIL:
    if (is_key) return dec_fail(d, "nil key at byte %zu", at);
    lua_pushnil(L);
    return 0;
  case T_FALSE: case T_TRUE:
    lua_pushboolean(L, tag == T_TRUE);
    return 0;
  case T_INT:
    if (dec_uint(d, 8, &v)) return -1;
    lua_pushinteger(L, (lua_Integer)(int64_t)v);
    return 0;
  case T_FLOAT: {
    if (dec_uint(d, 8, &v)) return -1;
    double x;
    memcpy(&x, &v, 8);
    if (is_key && isnan(x)) return dec_fail(d, "NaN key at byte %zu", at);
    lua_pushnumber(L, (lua_Number)x);
    return 0;
  }
  case T_STR: {
    const uint8_t *s;
    if (dec_uint(d, 4, &v)) return -1;
    if (v > dec_left(d))
      return dec_fail(d, "string at byte %zu of %llu bytes with %zu left", at,
                      (unsigned long long)v, dec_left(d));
    s = dec_take(d, (size_t)v);
    lua_pushlstring(L, (const char *)s, (size_t)v);
    return 0;
  }
  case T_TABLE:
    return dec_table(d, L, depth);
  case T_REF:
    if (dec_uint(d, 4, &v)) return -1;
    if (v >= d->ntables)
      return dec_fail(d, "reference to table %llu of %u at byte %zu", (unsigned long long)v,
                      d->ntables, at);
    lua_rawgeti(L, d->refs, (lua_Integer)v + 1);
    return 0;
  case T_GLOBALS:
    lua_pushglobaltable(L);
    return 0;
  default:
    return dec_fail(d, "bad tag 0x%02x at byte %zu", (unsigned)tag, at);
  }
}

static int dec_values(dec *d, lua_State *L) {
  uint64_t count;
  if (dec_uint(d, 4, &count)) return -1;
  if (count > CLOSURE_MAX_VALUES || count > dec_left(d))
    return dec_fail(d, "%llu values with %zu bytes left (at most %d)",
                    (unsigned long long)count, dec_left(d), CLOSURE_MAX_VALUES);
  if (!lua_checkstack(L, (int)count + 8)) return dec_fail(d, "Lua stack overflow");
  for (uint64_t i = 0; i < count; i++)
    if (dec_value(d, L, 0, false)) return -1;
  return 0;
}

/* Loads the function and sets its upvalues: leaves the function pushed. */
static int dec_function(dec *d, lua_State *L) {
  uint64_t format, len, nup;
  if (dec_uint(d, 1, &format)) return -1;
  if (format != CLOSURE_FORMAT) return dec_fail(d, "unknown format %u", (unsigned)format);
  if (dec_uint(d, 4, &len)) return -1;
  if (len > dec_left(d))
    return dec_fail(d, "bytecode of %llu bytes with %zu left", (unsigned long long)len,
                    dec_left(d));
  size_t bc_nup;
  size_t at = d->r.off;
  const uint8_t *bc = dec_take(d, (size_t)len);
  if (closure_bc_check(bc, (size_t)len, &bc_nup) < 0)
    return dec_fail(d, "%s (it starts at byte %zu)", err_msg(), at);
  if (luaL_loadbufferx(L, (const char *)bc, (size_t)len, "=closure", "b") != LUA_OK)
    return dec_fail(d, "bad bytecode: %s", lua_tostring(L, -1));
  int fn = lua_gettop(L);
  if (dec_uint(d, 1, &nup)) return -1;
  if (nup != bc_nup)
    return dec_fail(d, "%u upvalues sent for a function with %zu", (unsigned)nup, bc_nup);
  for (int i = 1; i <= (int)nup; i++) {
    if (dec_value(d, L, 0, false)) return -1;
    lua_setupvalue(L, fn, i); /* exists: i <= the bytecode's count */
  }
  return 0;
}

/* lua_pcall'ed: [1] = dec*. Pushes the results; returns their count, or
 * 0 on failure (d->failed). */
static int dec_protected(lua_State *L) {
  dec *d = lua_touserdata(L, 1);
  lua_settop(L, 1);
  lua_pushnil(L); /* slot 2: d->refs */
  d->refs = 2;
  if ((d->closure && dec_function(d, L)) || dec_values(d, L)) return 0;
  if (dec_left(d)) return dec_fail(d, "%zu bytes left over", dec_left(d)), 0;
  return lua_gettop(L) - 2;
}

static int decode(lua_State *L, const uint8_t *p, size_t n, bool closure) {
  const char *what = closure ? "closure" : "closure values";
  if (n > CLOSURE_MAX_BYTES + (size_t)1024)
    return err_set(DRV_EPARSE, "%s: %zu bytes, over the %u MiB limit", what, n,
                   CLOSURE_MAX_BYTES >> 20);
  if (!lua_checkstack(L, 4)) return err_set(DRV_EPARSE, "%s: Lua stack overflow", what);
  dec d = {.closure = closure};
  wire_rd_init(&d.r, p, n);
  int base = lua_gettop(L);
  lua_pushcfunction(L, dec_protected);
  lua_pushlightuserdata(L, &d);
  if (lua_pcall(L, 1, LUA_MULTRET, 0) != LUA_OK) {
    int rc = err_set(DRV_EPARSE, "%s: %s", what, lua_tostring(L, -1));
    lua_settop(L, base);
    return rc;
  }
  if (d.failed) {
    lua_settop(L, base);
    return err_set(DRV_EPARSE, "%s: %s", what, d.why);
  }
  return lua_gettop(L) - base - (closure ? 1 : 0);
}

int closure_decode(lua_State *L, const uint8_t *p, size_t n) { return decode(L, p, n, true); }

int closure_decode_values(lua_State *L, const uint8_t *p, size_t n) {
  return decode(L, p, n, false);
}
