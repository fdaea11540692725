/* repl_complete.h - what the prompt's Tab offers: the globals, fields and
 * methods a word can continue with, found without running user code.
 * Used by repl.c's libedit completion; a lua_CFunction so that it runs
 * under lua_pcall (a memory error cannot escape to libedit). */
#ifndef DROVER_REPL_COMPLETE_H
#define DROVER_REPL_COMPLETE_H

#include <lua.h>

/* complete(word) -> { full candidates }: the word is what precedes the
 * cursor back to a break character ("pri", "drover.nn.Li", "m:for");
 * everything before its last '.' or ':' must be a chain of names that
 * resolves without calling code, else the table is empty. Unsorted. */
int repl_complete(lua_State *L);

#endif
