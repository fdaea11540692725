/* l_util.h - helpers shared by the Lua bindings (l_*.c); not for use
 * outside them. Every function raises a Lua error (never returns) on bad
 * input, naming `what` and the offending key or argument.
 */
#ifndef DROVER_L_UTIL_H
#define DROVER_L_UTIL_H

#include <lauxlib.h>
#include <lua.h>

#include "data/data.h"
#include "numeric/nn.h"
#include "numeric/optim.h"
#include "numeric/rng.h"
#include "numeric/tensor.h"
#include "train/train.h"
#include "luabind/l_opts.h" /* option tables: every binding reads them */

/* ---- l_drover.c ---- */
/* Makes the metatable `name` of a userdata type (Lua's liolib createmeta):
 * the metamethods `meta` and the methods `methods` (either may be NULL).
 * When meta has no __index, the methods table is __index; else it is
 * __methods, where that __index function looks methods up (and the REPL
 * completes from). Leaves the stack as it was. */
void ldrv_createmeta(lua_State *L, const char *name, const luaL_Reg *meta,
                     const luaL_Reg *methods);

/* ---- l_tensor.c ---- */
/* The Tensor userdata at idx (borrowed from it). */
tensor *ltensor_check(lua_State *L, int idx);
/* A Tensor, or a (nested) table of numbers converted to a new tensor that
 * lives on the Lua stack; borrowed either way. */
tensor *ltensor_arg(lua_State *L, int idx);
/* Pushes a Tensor userdata taking ownership of t; returns t. */
tensor *ltensor_push(lua_State *L, tensor *t);
/* ---- l_optim_sched.c ---- */
/* Pushes the drover.optim.schedule table (and registers drover.Schedule). */
void loptim_sched_open(lua_State *L);
/* ---- l_tensor_ops.c ---- */
/* Adds the tensor math to the Tensor metatable and the library at lib. */
void ltensor_ops_open(lua_State *L, int lib);
/* The state's RNG for initialisation (registry; drover.seed resets it). */
rng_t *ldrv_rng(lua_State *L);

/* ---- l_nn.c ---- */
nn_module *lnn_check_module(lua_State *L, int idx);
nn_loss *lnn_check_loss(lua_State *L, int idx);
/* Pushes a Module userdata holding a new reference to m. */
void lnn_push_module(lua_State *L, nn_module *m);

/* ---- l_optim.c ---- */
const optim_cfg *loptim_check(lua_State *L, int idx);

/* ---- l_train.c ---- */
/* t[k] = v on the table on top; NaN ("does not apply") leaves k nil. */
void ldrv_set_num(lua_State *L, const char *k, double v);
void ldrv_set_int(lua_State *L, const char *k, int64_t v);
/* Pushes the table a progress callback receives / exp:fit() returns. */
void ltrain_push_progress(lua_State *L, const train_progress *p);
void ltrain_push_result(lua_State *L, const train_result *r);
/* Gives the table on top of the stack the metatable of results
 * (drover.pretty's result_mt: print() shows its fields, as the REPL
 * does); nothing when the pretty printer is not loaded. */
void ltrain_mark_result(lua_State *L);

/* Raises "bad argument #idx ... (expected an experiment ...)" unless the
 * value at idx is a drover.experiment { ... }. */
void ltrain_check_experiment(lua_State *L, int idx);

/* Writes run.lua (the script arg[0] names, as it is now) and run.json
 * (its absolute path, the arguments in `arg`, the working directory) into
 * the run directory `dir`: what `drover run --resume` runs again. Nothing
 * when arg[0] is not a readable file (stdin, the REPL). 0 or negative. */
int ltrain_save_script(lua_State *L, const char *dir);
/* The run directory `drover run --resume` gave (copied into buf), or NULL;
 * the first caller takes it: later ones (another cluster, an in-process
 * fit) get NULL and make their own. */
const char *ltrain_take_resume(lua_State *L, char *buf, size_t n);
/* The inputs of a predict at idx: a dataset's x or a tensor (raises
 * otherwise); borrowed from the value at idx. */
const tensor *ltrain_inputs(lua_State *L, int idx);

/* ---- l_cluster.c ---- */
struct coord;
/* The coordinator of the Cluster userdata at idx; raises when it was shut
 * down. Borrowed. */
struct coord *lcluster_live(lua_State *L, int idx);
/* The same without raising: NULL when shut down or not a Cluster. */
struct coord *lcluster_get(lua_State *L, int idx);
/* Clusters the REPL hosts that `drover stop` stopped: whether any waits to
 * be shut down, and shutting them down (saying so on stderr), from outside
 * the loop's callbacks. Returns how many. */
bool lcluster_stop_pending(void);
int lcluster_end_stopped(void);

/* ---- l_schedule.c ---- */
/* Adds schedule, join and done to the Cluster methods table on top of the
 * stack, and makes the RemoteValue metatable. */
void lschedule_open(lua_State *L);

/* ---- l_closure.c ---- */
/* Sets drover._closure_roundtrip on the table on top of L's stack: a test
 * hook (l_closure.c). drover._closure_roundtrip(fn, ...) encodes fn and
 * its arguments, decodes them in a fresh Lua state (drover_lua_init:
 * nothing shared), calls the function there under a traceback handler and
 * returns its results brought back through closure_encode_values; a remote
 * error is raised here with its remote traceback. */
void lclosure_open(lua_State *L);

/* ---- l_dash.c ---- */
/* A cluster (the userdata at idx, coordinator c) is up: its ':' command
 * thread, the newest cluster for drover.dash(), and with `drover run
 * --dash` the dashboard. A command (':' or an attach client's line) runs
 * at most `limit` seconds of Lua (command_limit), and Ctrl-C stops it. */
void ldash_cluster_up(lua_State *L, int idx, struct coord *c, double limit);
/* c is being shut down: a dashboard showing it closes first. */
void ldash_cluster_down(struct coord *c);
/* An in-process fit (exp:fit) begins, in run directory rd (NULL: none),
 * `tensorboard` the URL of the TensorBoard serving it ("": none): with
 * `drover run --dash` and no dashboard yet, the dashboard opens over a
 * model of this process's fit (one "local" node, its metrics). */
struct rundir;
void ldash_fit_begin(lua_State *L, struct rundir *rd, const char *tensorboard);
/* Each step's and eval's progress of that fit: the model, and now and then
 * a turn of the loop so that the dashboard draws and reads its keys. */
void ldash_fit_progress(lua_State *L, const train_progress *p);
/* The fit ended (its node idle again). */
void ldash_fit_end(lua_State *L);
/* Runs the attach clients' Lua lines waiting at the newest live cluster
 * (coord_run_commands): for a wait that turns the loop itself
 * (drover.sleep) rather than through coord__pump. */
void ldash_run_commands(lua_State *L);
/* Adds c:dash to the Cluster methods table on top of the stack. */
void ldash_open(lua_State *L);
/* Sets drover.dash on the table on top of the stack. */
void ldash_open_global(lua_State *L);

/* ---- l_data.c ---- */
dataset *ldata_check(lua_State *L, int idx);
/* The same with its rows in memory: a lazy dataset (read from a file,
 * data.h) is loaded in place; raises with the reader's message. */
dataset *ldata_values(lua_State *L, int idx);
/* Pushes d as a drover.Dataset, which then owns it (freed with it). */
void ldata_push(lua_State *L, dataset *d);
/* The list of 1-based column numbers on top of the stack (`categorical`)
 * as 0-based ints in a userdata pushed above it (it lives as long as that
 * stays on the stack); *count of them. Raises naming `who`. */
int *ldata_columns(lua_State *L, const char *who, int *count);
/* Raises "WHAT: sparse tables on a cluster are not supported yet: ..."
 * when d (may be NULL) has a sparse part (issue 26's cluster half). */
void ldata_refuse_sparse(lua_State *L, const dataset *d, const char *what);

#endif
