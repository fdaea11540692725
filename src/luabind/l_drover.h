/* l_drover.h - the `drover` Lua library: one entry point for every Lua
 * state drover makes (scripts, the REPL, later nodes).
 *
 * Modules: drover.tensor (l_tensor.c), drover.nn (l_nn.c), drover.optim
 * (l_optim.c), drover.data (l_data.c), training (l_train.c); the Lua side
 * lives in lua/ and is embedded at build time: `require "drover.X"` finds
 * lua/X.lua (after the user's own package.path, so users may override).
 */
#ifndef DROVER_L_DROVER_H
#define DROVER_L_DROVER_H

#include <lua.h>
#include <stdbool.h>
#include <uv.h>

/* Opens the standard libraries and drover into L: the global `drover`
 * (also `require "drover"`), then runs lua/init.lua (help(), experiment,
 * pretty printing). Returns 0, or a negative code with err_msg() set. */
int drover_lua_init(lua_State *L);

/* The event loop that Lua code pumps while it waits (c:fit, c:shutdown):
 * set by whoever made the state, before running any Lua; borrowed, and it
 * must outlive lua_close(L) (cluster finalizers pump it). */
void drover_lua_set_loop(lua_State *L, uv_loop_t *loop);
/* The loop, or a Lua error when the state has none. */
uv_loop_t *drover_lua_loop(lua_State *L);

/* `drover run --dash`: the script's first cluster opens the dashboard. */
void drover_lua_set_dash(lua_State *L);
/* `drover run --dash`, after the script returned (status: its exit status
 * so far): a dashboard still up keeps its last frame with "run finished -
 * q to leave" until q (not when interrupted), then closes, printing the
 * output it held back; a script that never showed one gets a notice on
 * stderr. Before the error report and lua_close. (l_dash.c) */
void ldash_script_end(lua_State *L, int status, bool interrupted);

/* lua_pcall message handler: appends a traceback to the error. */
int drover_lua_traceback(lua_State *L);

/* Runs the chunk on top of the stack with nargs arguments under
 * drover_lua_traceback; on error prints "drover: MSG" to stderr and
 * returns -1 (the message is popped). */
int drover_lua_pcall(lua_State *L, int nargs, int nresults);

/* Each returns the module table (luaL_Reg style). */
int luaopen_drover_tensor(lua_State *L);
int luaopen_drover_nn(lua_State *L);
int luaopen_drover_optim(lua_State *L);
int luaopen_drover_data(lua_State *L);
int luaopen_drover_train(lua_State *L); /* C primitives behind experiment:fit */
int luaopen_drover_cluster(lua_State *L); /* returns the drover.cluster function */

/* Node failures of clusters that were shut down by their finalizer (a
 * script that never called c:shutdown): main turns them into a non-zero
 * exit status. */
int drover_cluster_failures(void);

#endif
