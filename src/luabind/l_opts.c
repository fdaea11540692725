/* l_opts.c - the fields of option tables and the one rule for their
 * numbers (l_opts.h). */
#include "luabind/l_opts.h"

#include <lauxlib.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *const int_kind[] = {"an integer", "a non-negative integer",
                                       "a positive integer"};
static const char *const real_kind[] = {"a number", "a non-negative number", "a positive number"};

/* "what: key", or "ROOT: PATH.key" when what is "ROOT: PATH". */
static const char *field_name(char *buf, size_t n, const char *what, const char *key) {
  snprintf(buf, n, "%s%s%s", what, strstr(what, ": ") ? "." : ": ", key);
  return buf;
}

const char *lopts_show(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  switch (lua_type(L, idx)) {
  case LUA_TNONE:
  case LUA_TNIL:
    lua_pushliteral(L, "nothing");
    break;
  case LUA_TSTRING:
    lua_pushfstring(L, "\"%s\"", lua_tostring(L, idx));
    break;
  case LUA_TNUMBER:
  case LUA_TBOOLEAN:
    luaL_tolstring(L, idx, NULL);
    break;
  default: {
    int t = luaL_getmetafield(L, idx, "__name"); /* pushed unless nil */
    if (t == LUA_TSTRING) break;                 /* "drover.Dataset" */
    if (t != LUA_TNIL) lua_pop(L, 1);
    lua_pushstring(L, luaL_typename(L, idx));
  }
  }
  return lua_tostring(L, -1);
}

/* An integral float beyond max (or beyond the integers): too large, not
 * "not an integer". */
static bool integral_above(lua_State *L, int idx, lua_Integer max) {
  if (lua_type(L, idx) != LUA_TNUMBER) return false;
  lua_Number x = lua_tonumber(L, idx);
  return isfinite(x) && x == floor(x) && x > (lua_Number)max;
}

lua_Integer lopts_to_int(lua_State *L, int idx, lopts_low low, lua_Integer max, const char *what,
                         const char *key) {
  int isint = 0;
  lua_Integer v = lua_type(L, idx) == LUA_TNUMBER ? lua_tointegerx(L, idx, &isint) : 0;
  lua_Integer min = low == LOPTS_POS ? 1 : low == LOPTS_NONNEG ? 0 : LUA_MININTEGER;
  if (isint && v >= min && v <= max) return v;
  char name[160];
  field_name(name, sizeof name, what, key);
  if ((isint && v > max) || (!isint && integral_above(L, idx, max)))
    luaL_error(L, "%s = %s is too large (at most %I)", name, lopts_show(L, idx), max);
  luaL_error(L, "%s must be %s (got %s)", name, int_kind[low], lopts_show(L, idx));
  return 0;
}

lua_Number lopts_to_real(lua_State *L, int idx, lopts_low low, lua_Number max, const char *what,
                         const char *key) {
  char name[160];
  field_name(name, sizeof name, what, key);
  if (lua_type(L, idx) == LUA_TNUMBER) {
    lua_Number x = lua_tonumber(L, idx);
    if (!isfinite(x))
      luaL_error(L, "%s must be a finite number (got %s)", name, lopts_show(L, idx));
    bool above_low = low == LOPTS_ANY || (low == LOPTS_NONNEG ? x >= 0 : x > 0);
    if (above_low && x <= max) return x;
    if (above_low && max == floor(max) && max < 0x1p53) /* "at most 86400", not 86400.0 */
      luaL_error(L, "%s = %s is too large (at most %I)", name, lopts_show(L, idx),
                 (lua_Integer)max);
    if (above_low)
      luaL_error(L, "%s = %s is too large (at most %f)", name, lopts_show(L, idx), max);
  }
  luaL_error(L, "%s must be %s (got %s)", name, real_kind[low], lopts_show(L, idx));
  return 0;
}

/* Pushes field `key` of the table at idx and returns 1, or returns 0 (with
 * nothing pushed) when idx is nil/none or the field is nil. */
static int get_field(lua_State *L, int idx, const char *key) {
  if (lua_isnoneornil(L, idx)) return 0;
  if (lua_getfield(L, idx, key) == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  return 1;
}

lua_Integer lopts_int(lua_State *L, int idx, const char *key, lua_Integer def, lopts_low low,
                      lua_Integer max, const char *what) {
  if (!get_field(L, idx, key)) return def;
  lua_Integer v = lopts_to_int(L, -1, low, max, what, key);
  lua_pop(L, 1);
  return v;
}

lua_Number lopts_real(lua_State *L, int idx, const char *key, lua_Number def, lopts_low low,
                      lua_Number max, const char *what) {
  if (!get_field(L, idx, key)) return def;
  lua_Number v = lopts_to_real(L, -1, low, max, what, key);
  lua_pop(L, 1);
  return v;
}

int lopts_bool(lua_State *L, int idx, const char *key, int def, const char *what) {
  if (!get_field(L, idx, key)) return def;
  char name[160];
  if (!lua_isboolean(L, -1))
    luaL_error(L, "%s must be true or false (got %s)", field_name(name, sizeof name, what, key),
               lopts_show(L, -1));
  int v = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Pushes "a, b, c": the valid keys. */
static const char *push_valid(lua_State *L, const char *const *keys) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 0; keys[i]; i++) {
    if (i) luaL_addstring(&b, ", ");
    luaL_addstring(&b, keys[i]);
  }
  luaL_pushresult(&b);
  return lua_tostring(L, -1);
}

static bool known(const char *const *keys, const char *k) {
  for (int i = 0; keys[i]; i++)
    if (strcmp(keys[i], k) == 0) return true;
  return false;
}

/* The unknown key (on top of the stack) as a description's field. */
static void unknown_field(lua_State *L, const char *what, const char *const *keys) {
  const char *sep = strstr(what, ": ");
  const char *k = luaL_tolstring(L, -1, NULL);
  const char *root = sep ? lua_pushlstring(L, what, (size_t)(sep - what)) : what;
  const char *valid = push_valid(L, keys);
  if (sep) luaL_error(L, "%s: unknown field '%s.%s' (valid: %s)", root, sep + 2, k, valid);
  luaL_error(L, "%s: unknown field '%s' (valid: %s)", root, k, valid);
}

static void check_keys(lua_State *L, int idx, const char *what, const char *const *keys,
                       bool fields) {
  if (lua_isnoneornil(L, idx)) return;
  idx = lua_absindex(L, idx);
  luaL_checktype(L, idx, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    bool named = lua_type(L, -1) == LUA_TSTRING;
    if (named && known(keys, lua_tostring(L, -1))) continue;
    if (fields) unknown_field(L, what, keys);
    if (!named)
      luaL_error(L, "%s: options must be named (got a %s key)", what, luaL_typename(L, -1));
    const char *k = lua_tostring(L, -1);
    luaL_error(L, "%s: unknown option '%s' (valid: %s)", what, k, push_valid(L, keys));
  }
}

void lopts_check_keys(lua_State *L, int idx, const char *what, const char *const *keys) {
  check_keys(L, idx, what, keys, false);
}

void lopts_check_fields(lua_State *L, int idx, const char *what, const char *const *keys) {
  check_keys(L, idx, what, keys, true);
}
