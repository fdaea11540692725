/* test_closure.c - the closure codec: round trips between separate Lua
 * states, refusals from C, hand-made malformed inputs, and robustness of
 * the decoder against every truncation, single-byte corruptions and random
 * bytes (it must fail cleanly or succeed, never crash: run under ASan). */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>

#include "proto/closure.h"
#include "harness.h"

/* Closures used below: plain upvalues; nested functions, many constant
 * kinds and locals (so that corruptions reach every part of the bytecode);
 * a shared table and no upvalue but _ENV. */
static const char *const SOURCES[] = {
    "local n, t = 5, {a = 1, b = {2, 3}} "
    "return function(x, y) return n + x, t.b[2] * y, t end",

    "local name, scale, flags = 'mlp', 0.5, {true, false, [10] = 'ten', k = -1} "
    "return function(a, ...) "
    "  local function sq(v) return v * v end "
    "  local s = 0 "
    "  for i = 1, a do s = s + sq(i) * scale end "
    "  local f = function(z) return z .. name .. 1.25 .. 7 end "
    "  return s, f('x'), flags.k, select('#', ...), nil "
    "end",

    "return function(...) return select('#', ...), string.rep('ab', 3) end",
};
#define NSOURCES (int)(sizeof SOURCES / sizeof SOURCES[0])

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  CHECK(L != NULL);
  luaL_openlibs(L);
  return L;
}

/* Runs SOURCES[i] in L: its function ends up on top. */
static void push_source(lua_State *L, int i) {
  if (luaL_loadstring(L, SOURCES[i]) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
    harness_fail(__FILE__, __LINE__, "source %d: %s", i, lua_tostring(L, -1));
  CHECK(lua_isfunction(L, -1));
}

/* Encodes SOURCES[i] with arguments (7, 3, {1.5, "s"}); the caller frees. */
static wire_wr encode_source(int i) {
  lua_State *L = new_state();
  push_source(L, i);
  int fn = lua_gettop(L);
  lua_pushinteger(L, 7);
  lua_pushinteger(L, 3);
  lua_createtable(L, 2, 0);
  lua_pushnumber(L, 1.5);
  lua_rawseti(L, -2, 1);
  lua_pushstring(L, "s");
  lua_rawseti(L, -2, 2);
  wire_wr w;
  wire_wr_init(&w);
  CHECK_OK(closure_encode(L, fn, fn + 1, 3, &w));
  CHECK_INT_EQ(lua_gettop(L), fn + 3); /* the stack is left as it was */
  lua_close(L);
  return w;
}

#define PAYLOAD(w) ((w).buf + WIRE_HEADER_SIZE)
#define PAYLOAD_LEN(w) ((w).len - WIRE_HEADER_SIZE)

TEST(closure_roundtrip_between_states) {
  wire_wr w = encode_source(0);
  lua_State *R = new_state();
  lua_pushliteral(R, "below"); /* decode pushes on top of what is there */
  int n = closure_decode(R, PAYLOAD(w), PAYLOAD_LEN(w));
  CHECK_INT_EQ(n, 3);
  CHECK_INT_EQ(lua_gettop(R), 5);
  CHECK(lua_type(R, 2) == LUA_TFUNCTION);
  CHECK(lua_pcall(R, 3, 3, 0) == LUA_OK); /* f(7, 3, {1.5, "s"}) */
  CHECK(lua_isinteger(R, -3));
  CHECK_INT_EQ(lua_tointeger(R, -3), 12); /* n + x = 5 + 7 */
  CHECK_INT_EQ(lua_tointeger(R, -2), 9);  /* t.b[2] * y = 3 * 3 */
  CHECK(lua_getfield(R, -1, "a") == LUA_TNUMBER && lua_tointeger(R, -1) == 1);
  CHECK_STR_CONTAINS(lua_tostring(R, 1), "below");
  lua_close(R);
  wire_wr_free(&w);

  /* The richer closure: nested functions, constants, varargs. */
  w = encode_source(1);
  R = new_state();
  n = closure_decode(R, PAYLOAD(w), PAYLOAD_LEN(w));
  CHECK_INT_EQ(n, 3);
  CHECK(lua_pcall(R, 3, 5, 0) == LUA_OK);
  CHECK_NEAR(lua_tonumber(R, 1), 0.5 * (1 + 4 + 9 + 16 + 25 + 36 + 49), 1e-12);
  CHECK_STR_CONTAINS(lua_tostring(R, 2), "xmlp1.257");
  CHECK_INT_EQ(lua_tointeger(R, 3), -1);
  CHECK_INT_EQ(lua_tointeger(R, 4), 2);
  CHECK(lua_isnil(R, 5));
  lua_close(R);
  wire_wr_free(&w);
}

TEST(closure_env_is_the_receivers_globals) {
  lua_State *L = new_state();
  CHECK(luaL_dostring(L, "X = 'sender' return function() return X, _G == _ENV end") == LUA_OK);
  wire_wr w;
  wire_wr_init(&w);
  CHECK_OK(closure_encode(L, -1, 0, 0, &w));
  lua_close(L);
  lua_State *R = new_state();
  CHECK(luaL_dostring(R, "X = 'receiver'") == LUA_OK);
  CHECK_INT_EQ(closure_decode(R, PAYLOAD(w), PAYLOAD_LEN(w)), 0);
  CHECK(lua_pcall(R, 0, 2, 0) == LUA_OK);
  CHECK_STR_CONTAINS(lua_tostring(R, 1), "receiver");
  CHECK(lua_toboolean(R, 2));
  lua_close(R);
  wire_wr_free(&w);
}

TEST(closure_values_keep_types) {
  lua_State *L = new_state();
  CHECK(luaL_dostring(L, "return 1, 1.0, -0.0, 'a\\0b', true, nil, "
                         "{[1]=2, [2]=2.0, [3.5]='k', [false]=1, x={y={}}}") == LUA_OK);
  wire_wr w;
  wire_wr_init(&w);
  CHECK_OK(closure_encode_values(L, 1, 7, "value", &w));
  lua_State *R = new_state();
  CHECK_INT_EQ(closure_decode_values(R, PAYLOAD(w), PAYLOAD_LEN(w)), 7);
  CHECK(lua_isinteger(R, 1) && lua_tointeger(R, 1) == 1);
  CHECK(!lua_isinteger(R, 2) && lua_tonumber(R, 2) == 1.0);
  CHECK(signbit(lua_tonumber(R, 3)));
  size_t len;
  const char *s = lua_tolstring(R, 4, &len);
  CHECK(len == 3 && memcmp(s, "a\0b", 3) == 0);
  CHECK(lua_toboolean(R, 5) && lua_isnil(R, 6));
  CHECK(lua_geti(R, 7, 2) == LUA_TNUMBER && !lua_isinteger(R, -1));
  CHECK(lua_getfield(R, 7, "x") == LUA_TTABLE && lua_getfield(R, -1, "y") == LUA_TTABLE);
  lua_settop(R, 7);
  lua_pushnumber(R, 3.5);
  CHECK(lua_rawget(R, 7) == LUA_TSTRING);
  lua_pushboolean(R, 0);
  CHECK(lua_rawget(R, 7) == LUA_TNUMBER);
  lua_close(R);
  lua_close(L);
  wire_wr_free(&w);
}

TEST(closure_refusals_name_the_value_and_restore_w) {
  lua_State *L = new_state();
  CHECK(luaL_dostring(L, "return function(u) "
                         "  return function() return 1, u end "
                         "end") == LUA_OK);
  luaL_newmetatable(L, "test.Thing");
  lua_pop(L, 1);
  lua_newuserdatauv(L, 8, 0);
  luaL_setmetatable(L, "test.Thing");
  CHECK(lua_pcall(L, 1, 1, 0) == LUA_OK); /* function capturing u = the userdata */
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_u32(&w, 0xabcd); /* something already in the frame */
  size_t before = w.len;
  CHECK_ERR(closure_encode(L, -1, 0, 0, &w), DRV_EINVAL,
            "upvalue 'u' (#1) is a userdata test.Thing; only nil, booleans");
  CHECK_INT_EQ(w.len, before);

  CHECK(luaL_dostring(L, "return function() end, {opts = {cb = print}}") == LUA_OK);
  CHECK_ERR(closure_encode(L, -2, -1, 1, &w), DRV_EINVAL,
            "argument 1: field 'opts.cb' is a C function");
  CHECK(luaL_dostring(L, "local t = {} t[1] = {t} return t") == LUA_OK);
  CHECK_ERR(closure_encode(L, -3, -1, 1, &w), DRV_EINVAL,
            "argument 1 contains a cycle at field '[1][1]'");
  lua_pushcfunction(L, luaopen_base);
  CHECK_ERR(closure_encode(L, -1, 0, 0, &w), DRV_EINVAL, "cannot send a C function");
  CHECK_INT_EQ(w.len, before);
  lua_close(L);
  wire_wr_free(&w);
}

/* A values payload built by hand. */
typedef struct hand {
  uint8_t b[1024];
  size_t n;
} hand;

static void h_u8(hand *h, unsigned v) { h->b[h->n++] = (uint8_t)v; }
static void h_u32(hand *h, uint32_t v) {
  for (int i = 0; i < 4; i++) h_u8(h, (v >> (8 * i)) & 0xff);
}
static void h_f64(hand *h, double d) {
  uint64_t v;
  memcpy(&v, &d, 8);
  for (int i = 0; i < 8; i++) h_u8(h, (unsigned)(v >> (8 * i)) & 0xff);
}

static int decode_hand(lua_State *L, const hand *h) {
  int top = lua_gettop(L);
  int rc = closure_decode_values(L, h->b, h->n);
  if (rc < 0) CHECK_INT_EQ(lua_gettop(L), top); /* nothing left pushed */
  return rc;
}

TEST(closure_malformed_values_are_named) {
  lua_State *L = new_state();
  hand h = {.n = 0};
  h_u32(&h, 1);
  h_u8(&h, 0x09);
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "bad tag 0x09 at byte 4");

  h.n = 0;
  h_u32(&h, 1000);
  h_u8(&h, 0);
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "1000 values with 1 bytes left");

  h.n = 0;
  h_u32(&h, 1);
  h_u8(&h, 5); /* STR */
  h_u32(&h, 50);
  h_u8(&h, 'x');
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "string at byte 4 of 50 bytes with 1 left");

  h.n = 0;
  h_u32(&h, 1);
  h_u8(&h, 6); /* TABLE */
  h_u32(&h, 0);
  h_u32(&h, 100);
  h_u8(&h, 0);
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "claims 0+100 entries with 1 bytes left");

  h.n = 0;
  h_u32(&h, 1);
  h_u8(&h, 6);
  h_u32(&h, 0);
  h_u32(&h, 1);
  h_u8(&h, 0); /* key nil */
  h_u8(&h, 2);
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "nil key at byte 13");

  h.n = 0;
  h_u32(&h, 1);
  h_u8(&h, 6);
  h_u32(&h, 0);
  h_u32(&h, 1);
  h_u8(&h, 4); /* key NaN */
  h_f64(&h, NAN);
  h_u8(&h, 2);
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "NaN key");

  h.n = 0;
  h_u32(&h, 2);
  h_u8(&h, 6);
  h_u32(&h, 0);
  h_u32(&h, 0);
  h_u8(&h, 7); /* REF 1: only table 0 exists */
  h_u32(&h, 1);
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "reference to table 1 of 1");
  h.b[h.n - 4] = 0; /* REF 0 is fine, and is the same table */
  CHECK_INT_EQ(decode_hand(L, &h), 2);
  CHECK(lua_rawequal(L, -1, -2) && lua_istable(L, -1));
  lua_settop(L, 0);

  h.n = 0;
  h_u32(&h, 1);
  for (int i = 0; i < 70; i++) { /* {{{...}}} 70 deep */
    h_u8(&h, 6);
    h_u32(&h, 1);
    h_u32(&h, 0);
  }
  h_u8(&h, 0);
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "tables nested more than 64 deep");

  h.n = 0;
  h_u32(&h, 1);
  h_u8(&h, 2);
  h_u8(&h, 2);
  CHECK_ERR(decode_hand(L, &h), DRV_EPARSE, "1 bytes left over");
  lua_close(L);
}

TEST(closure_malformed_closures_are_named) {
  wire_wr w = encode_source(0);
  uint8_t *p = PAYLOAD(w);
  size_t n = PAYLOAD_LEN(w);
  lua_State *R = new_state();
  p[0] = 2;
  CHECK_ERR(closure_decode(R, p, n), DRV_EPARSE, "closure: unknown format 2");
  p[0] = 1;
  uint8_t saved = p[4];
  p[4] = 0x7f; /* code length ~2 GiB */
  CHECK_ERR(closure_decode(R, p, n), DRV_EPARSE, "bytecode of");
  p[4] = saved;
  /* The closure's upvalue count inside the bytecode header (after the
   * format byte, the u32 length and lua_dump's 31-byte header). */
  p[1 + 4 + 31] ^= 1;
  CHECK_ERR(closure_decode(R, p, n), DRV_EPARSE, "upvalue counts disagree");
  p[1 + 4 + 31] ^= 1;
  p[5] = 'X'; /* the signature */
  CHECK_ERR(closure_decode(R, p, n), DRV_EPARSE, "not Lua 5.4 bytecode");
  p[5] = 0x1b;
  CHECK_INT_EQ(closure_decode(R, p, n), 3);
  CHECK_ERR(closure_decode(R, p, n - 1), DRV_EPARSE, "with 0 left");
  lua_close(R);
  wire_wr_free(&w);
}

/* Decodes p[0..n) in L: must succeed with the stack grown by what it
 * returned (+1 for the function) or fail cleanly. Never calls what it got:
 * corrupted bytecode may do anything once run. Returns rc. */
static int decode_any(lua_State *L, const uint8_t *p, size_t n, bool closure) {
  int top = lua_gettop(L);
  int rc = closure ? closure_decode(L, p, n) : closure_decode_values(L, p, n);
  if (rc < 0) {
    CHECK_INT_EQ(rc, DRV_EPARSE);
    CHECK_INT_EQ(lua_gettop(L), top);
  } else {
    CHECK_INT_EQ(lua_gettop(L), top + rc + (closure ? 1 : 0));
    if (closure) CHECK(lua_type(L, top + 1) == LUA_TFUNCTION);
  }
  lua_settop(L, top);
  return rc;
}

TEST(closure_every_truncation_fails) {
  lua_State *R = new_state();
  for (int s = 0; s < NSOURCES; s++) {
    wire_wr w = encode_source(s);
    size_t n = PAYLOAD_LEN(w);
    /* A copy of exactly k bytes, so ASan sees any read past the end. */
    for (size_t k = 0; k < n; k++) {
      uint8_t *q = malloc(k ? k : 1);
      memcpy(q, PAYLOAD(w), k);
      CHECK_INT_EQ(decode_any(R, q, k, true), DRV_EPARSE);
      free(q);
    }
    CHECK_INT_EQ(decode_any(R, PAYLOAD(w), n, true), 3);
    wire_wr_free(&w);
  }
  lua_close(R);
}

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

TEST(closure_single_byte_corruptions_never_crash) {
  uint64_t seed = 0x5eed;
  long ok = 0, failed = 0;
  for (int s = 0; s < NSOURCES; s++) {
    wire_wr w = encode_source(s);
    size_t n = PAYLOAD_LEN(w);
    uint8_t *q = malloc(n);
    for (size_t i = 0; i < n; i++) {
      const uint8_t flips[] = {0x01, 0x80, 0xff, 0x7f, (uint8_t)(xorshift(&seed) | 1)};
      for (size_t f = 0; f < sizeof flips; f++) {
        /* A fresh state now and then, so corrupted functions do not pile up. */
        lua_State *R = new_state();
        memcpy(q, PAYLOAD(w), n);
        q[i] ^= flips[f];
        if (decode_any(R, q, n, true) >= 0)
          ok++;
        else
          failed++;
        lua_close(R);
      }
    }
    free(q);
    wire_wr_free(&w);
  }
  /* Most flips break something the checks see; some (a number, a line
   * number) decode fine. Both must have happened for the test to mean much. */
  CHECK(failed > 0 && ok > 0);
  printf("closure corruptions: %ld decoded, %ld refused\n", ok, failed);
}

TEST(closure_random_bytes_never_crash) {
  uint64_t seed = 12345;
  wire_wr valid = encode_source(1);
  lua_State *R = new_state();
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = xorshift(&seed) % 400;
    uint8_t *q = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) q[i] = (uint8_t)xorshift(&seed);
    int mode = iter % 3;
    if (mode == 1 && n > 0) { /* a real prefix, then noise: goes deeper */
      size_t k = xorshift(&seed) % n;
      if (k > PAYLOAD_LEN(valid)) k = PAYLOAD_LEN(valid);
      memcpy(q, PAYLOAD(valid), k);
    }
    if (mode == 2 && n >= 4) { /* a plausible value count */
      q[0] = (uint8_t)(xorshift(&seed) % 4);
      q[1] = q[2] = q[3] = 0;
    }
    decode_any(R, q, n, mode != 2);
    free(q);
    if (iter % 2000 == 1999) { /* bound what accumulates in one state */
      lua_close(R);
      R = new_state();
    }
  }
  lua_close(R);
  wire_wr_free(&valid);
}
