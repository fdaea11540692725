/* repl_complete.c - tab completion's candidates (repl_complete.h): Lua
 * keywords, globals, fields and methods, following __index tables (and
 * drover's __methods) but never calling a metamethod. */
#include "luabind/repl_complete.h"

#include <ctype.h>
#include <lauxlib.h>
#include <stdbool.h>
#include <string.h>

static const char *const keywords[] = {
    "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
    "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
    NULL};

#define INDEX_DEPTH 8 /* __index chains followed, against cycles */

static bool is_identifier(const char *s, size_t n) {
  if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (size_t i = 1; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return false;
  for (int i = 0; keywords[i]; i++)
    if (strlen(keywords[i]) == n && memcmp(keywords[i], s, n) == 0) return false;
  return true;
}

/* Replaces the value on top with the container where lookups continue:
 * its metatable's __index when that is a table; when __index is a
 * function, the metatable's __methods table, where drover's userdata
 * (l_tensor.c, l_nn.c, l_data.c) keep the methods that function serves.
 * Else nothing (returns false, value popped). Never calls a metamethod:
 * completing must not run user code. */
static bool next_index(lua_State *L) {
  if (!lua_getmetatable(L, -1)) {
    lua_pop(L, 1);
    return false;
  }
  lua_pushliteral(L, "__index");
  lua_rawget(L, -2);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_pushliteral(L, "__methods");
    lua_rawget(L, -2);
  }
  lua_remove(L, -2);
  lua_remove(L, -2);
  if (lua_istable(L, -1)) return true;
  lua_pop(L, 1);
  return false;
}

/* Replaces the value on top with value[key] (raw fields, then __index
 * tables), or nil. */
static void field(lua_State *L, const char *key, size_t n) {
  for (int depth = 0; depth < INDEX_DEPTH; depth++) {
    if (lua_istable(L, -1)) {
      lua_pushlstring(L, key, n);
      if (lua_rawget(L, -2) != LUA_TNIL) {
        lua_remove(L, -2);
        return;
      }
      lua_pop(L, 1);
    }
    if (!next_index(L)) {
      lua_pushnil(L);
      return;
    }
  }
  lua_pop(L, 1);
  lua_pushnil(L);
}

static bool callable(lua_State *L, int idx) {
  if (lua_isfunction(L, idx)) return true;
  if (luaL_getmetafield(L, idx, "__call") == LUA_TNIL) return false;
  lua_pop(L, 1);
  return true;
}

/* Adds to the table at `set` the identifier keys, starting with `prefix`,
 * of the value on top (popped) and of its __index tables. `methods` keeps
 * callables only (after ':'); "__" names only when the prefix starts so. */
static void collect(lua_State *L, int set, const char *prefix, size_t plen, bool methods) {
  bool dunder = plen >= 2 && prefix[0] == '_' && prefix[1] == '_';
  for (int depth = 0; depth < INDEX_DEPTH; depth++) {
    if (lua_istable(L, -1)) {
      lua_pushnil(L);
      while (lua_next(L, -2)) {
        size_t n;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &n) : NULL;
        if (k && n >= plen && memcmp(k, prefix, plen) == 0 && is_identifier(k, n) &&
            (dunder || strncmp(k, "__", 2) != 0) && (!methods || callable(L, -1))) {
          lua_pushvalue(L, -2);
          lua_pushboolean(L, 1);
          lua_rawset(L, set);
        }
        lua_pop(L, 1);
      }
    }
    if (!next_index(L)) return;
  }
  lua_pop(L, 1);
}

/* complete(word) -> { full candidates }, under lua_pcall. The word is what
 * precedes the cursor back to a break character: "pri", "drover.nn.Li",
 * "m:for". Everything before the last '.' or ':' must be a chain of names
 * that resolves without calling code; otherwise there is nothing to offer. */
int repl_complete(lua_State *L) {
  size_t wlen;
  const char *word = luaL_checklstring(L, 1, &wlen);
  lua_newtable(L);
  int set = lua_gettop(L);
  const char *sep = NULL;
  for (const char *p = word + wlen; p > word && !sep; p--)
    if (p[-1] == '.' || p[-1] == ':') sep = p - 1;
  const char *prefix = sep ? sep + 1 : word;
  size_t plen = (size_t)(word + wlen - prefix);

  lua_pushglobaltable(L);
  for (const char *p = word; sep && p <= sep; p++) {
    const char *q = p;
    while (q < sep && *q != '.') q++;
    if (!is_identifier(p, (size_t)(q - p))) return 1; /* empty set */
    field(L, p, (size_t)(q - p));
    if (lua_isnil(L, -1)) return 1;
    p = q;
  }
  collect(L, set, prefix, plen, sep && *sep == ':');
  for (int i = 0; !sep && keywords[i]; i++) {
    if (strncmp(keywords[i], prefix, plen) == 0) {
      lua_pushboolean(L, 1);
      lua_setfield(L, set, keywords[i]);
    }
  }

  lua_newtable(L);
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, set)) {
    lua_pop(L, 1);
    lua_pushlstring(L, word, (size_t)(prefix - word));
    lua_pushvalue(L, -2);
    lua_concat(L, 2);
    lua_rawseti(L, -3, ++n);
  }
  return 1;
}
