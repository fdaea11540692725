/* closure.h - ships a Lua function to another Lua state: its bytecode, its
 * upvalues and its arguments, as bytes (for c:schedule and its results).
 *
 * What can be sent ("plain data"): nil, booleans, numbers (integers and
 * floats stay distinct), strings, and tables of these, nested, with keys of
 * the same kinds. A table reachable twice arrives as one table reachable
 * twice; a cycle is refused. Tables with a metatable, userdata, threads and
 * functions (C functions, and Lua functions as upvalues or inside tables)
 * are refused with a message naming the upvalue or argument and the path
 * inside it. The function's `_ENV` upvalue is not sent: the receiver binds
 * it to its own globals (any reference to the sender's globals table is
 * rebound that way). Limits: CLOSURE_MAX_DEPTH nested tables,
 * CLOSURE_MAX_VALUES arguments or results, CLOSURE_MAX_BYTES in all.
 *
 * The function keeps its debug information, so an error raised on the
 * receiver carries a traceback naming the sender's file and lines.
 *
 * SECURITY. Decoding loads Lua bytecode, and running bytecode runs code;
 * malformed bytecode can crash the Lua VM (Lua 5.4 does not verify it).
 * Decode only bytes that came from an authenticated peer: every drover
 * connection proves it holds the run's secret before any frame is handled
 * (auth.h). The decoder validates everything around the bytecode (tags,
 * counts, lengths, depth, all against the bytes that remain), checks the
 * structure of the bytecode itself (every count it holds against the
 * bytes left, so no huge allocation, no overrun of the upvalue table,
 * bounded nesting), and lua_load checks the header; what the instructions
 * then do is trusted.
 *
 * The format is described at the top of closure.c.
 */
#ifndef DROVER_CLOSURE_H
#define DROVER_CLOSURE_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"

#define CLOSURE_MAX_DEPTH 64            /* tables inside tables */
#define CLOSURE_MAX_VALUES 4096         /* arguments, or results */
#define CLOSURE_MAX_BYTES (16u << 20)   /* one encoded closure or value list */

/* Appends to w an encoding of the Lua function at stack index fn, its
 * upvalues and the nargs values starting at stack index first_arg (nargs
 * may be 0; first_arg is then ignored). The stack is left as it was.
 * Arguments are numbered from 1 in messages ("argument 1" is the value at
 * first_arg). Returns 0; or DRV_EINVAL when something cannot be sent, with
 * err_msg() naming it without a prefix (the caller adds its own, e.g.
 * "schedule: "):
 *   "upvalue 'model' (#2) is a userdata drover.Module; only nil, booleans,
 *    numbers, strings and tables of them can be sent"
 *   "argument 3: field 'opts.cb' is a Lua function; ..."
 *   "upvalue 't' (#1) contains a cycle at t.self"
 * or DRV_ENOMEM / DRV_ERANGE when w fails. On failure w is restored to its
 * length before the call (w->err stays set if w itself failed). Never
 * raises a Lua error. */
int closure_encode(lua_State *L, int fn, int first_arg, int nargs, wire_wr *w);

/* Validates and rebuilds what closure_encode wrote, from the n bytes at p
 * (borrowed): pushes the function (loaded with lua_load in mode "b"; its
 * chunk name is the one in the bytecode), with its upvalues set and its
 * _ENV bound to L's globals, then pushes the arguments. Returns the number
 * of arguments (>= 0), or DRV_EPARSE with the reason in err_msg()
 * ("closure: truncated at byte 17", "closure: bad tag 0x09 at byte 40",
 * ...) and nothing pushed. Every length and count is checked against the
 * bytes that remain before it is used. Runs in a protected call: never
 * raises (a memory error becomes DRV_EPARSE too). See SECURITY above: p
 * must come from an authenticated peer. */
int closure_decode(lua_State *L, const uint8_t *p, size_t n);

/* The same codec for a list of values alone (a closure's results): n
 * values from stack index first. `what` names one in messages ("result"
 * gives "result 2: field 'x' is a userdata drover.Tensor; ..."). Returns 0
 * or DRV_EINVAL / DRV_ENOMEM / DRV_ERANGE as closure_encode. */
int closure_encode_values(lua_State *L, int first, int n, const char *what, wire_wr *w);

/* Decodes what closure_encode_values wrote: pushes the values and returns
 * how many, or DRV_EPARSE as closure_decode (nothing pushed). */
int closure_decode_values(lua_State *L, const uint8_t *p, size_t n);

/* Checks the structure of the n bytes of Lua 5.4 bytecode at p (a
 * lua_dump output) without loading it: header, every count and length
 * against the bytes that remain, upvalue counts consistent, functions
 * nested at most 200 deep, nothing left over. *nup gets the main
 * function's upvalue count. 0, or DRV_EPARSE ("bad bytecode: count
 * beyond the chunk at byte 40 of it"). closure_decode runs it. */
int closure_bc_check(const uint8_t *p, size_t n, size_t *nup);

#endif
