/* l_closure.c - drover._closure_roundtrip, the test hook of the closure
 * codec (closure.c): a function and its arguments through closure_encode,
 * run in a fresh Lua state, and the results back through
 * closure_encode_values. Lua layer: it needs drover_lua_init for the fresh
 * state, which the codec (protocol layer) must not know about.
 */
#include <lauxlib.h>
#include <stdio.h>

#include "proto/closure.h"
#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_util.h"
#include "proto/wire.h"

/* Raises msg in L after freeing what the round trip holds. */
static int rt_raise(lua_State *L, lua_State *R, wire_wr *w, const char *msg) {
  lua_pushstring(L, msg); /* copied before R goes: msg may live in R */
  if (R) lua_close(R);
  if (w) wire_wr_free(w);
  return lua_error(L);
}

/* Runs fn(...) in R; leaves its results from R's index `base`. */
static int rt_call(lua_State *L, lua_State *R, int *base) {
  wire_wr w;
  wire_wr_init(&w);
  char msg[1100];
  if (closure_encode(L, 1, 2, lua_gettop(L) - 1, &w) < 0) {
    snprintf(msg, sizeof msg, "_closure_roundtrip: %s", err_msg());
    return rt_raise(L, R, &w, msg);
  }
  int n = closure_decode(R, w.buf + WIRE_HEADER_SIZE, w.len - WIRE_HEADER_SIZE);
  if (n < 0) {
    snprintf(msg, sizeof msg, "_closure_roundtrip: %s", err_msg());
    return rt_raise(L, R, &w, msg);
  }
  wire_wr_free(&w);
  *base = lua_gettop(R) - n; /* the function */
  lua_pushcfunction(R, drover_lua_traceback);
  lua_insert(R, *base);
  if (lua_pcall(R, n, LUA_MULTRET, *base) != LUA_OK) {
    const char *err = lua_tostring(R, -1);
    return rt_raise(L, R, NULL, err ? err : "(error object is not a string)");
  }
  return 0;
}

static int l_roundtrip(lua_State *L) {
  luaL_checkany(L, 1);
  lua_State *R = luaL_newstate();
  if (!R) return luaL_error(L, "_closure_roundtrip: out of memory");
  if (drover_lua_init(R) < 0) {
    char msg[1100];
    snprintf(msg, sizeof msg, "_closure_roundtrip: %s", err_msg());
    return rt_raise(L, R, NULL, msg);
  }
  int base = 0;
  rt_call(L, R, &base); /* raises on failure */
  int nres = lua_gettop(R) - base;
  wire_wr w;
  wire_wr_init(&w);
  char msg[1100];
  if (closure_encode_values(R, base + 1, nres, "result", &w) < 0) {
    snprintf(msg, sizeof msg, "_closure_roundtrip: %s", err_msg());
    return rt_raise(L, R, &w, msg);
  }
  lua_close(R);
  lua_settop(L, 0);
  int n = closure_decode_values(L, w.buf + WIRE_HEADER_SIZE, w.len - WIRE_HEADER_SIZE);
  if (n < 0) {
    snprintf(msg, sizeof msg, "_closure_roundtrip: %s", err_msg());
    return rt_raise(L, NULL, &w, msg);
  }
  wire_wr_free(&w);
  return n;
}

void lclosure_open(lua_State *L) {
  lua_pushcfunction(L, l_roundtrip);
  lua_setfield(L, -2, "_closure_roundtrip");
}
