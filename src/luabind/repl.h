/* repl.h - the interactive Lua prompt (libedit on the libuv loop) and the
 * interruptible call both the prompt and `drover run` use.
 *
 * The prompt reads keys from a uv_poll on stdin through libedit's callback
 * interface, so everything else on the loop (later: the cluster, the network,
 * the dashboard) keeps moving while the user types. A finished chunk runs
 * outside any libuv callback, so Lua code may itself pump the loop with
 * uv_run(loop, UV_RUN_ONCE) while it waits.
 */
#ifndef DROVER_REPL_H
#define DROVER_REPL_H

#include <lua.h>
#include <stdbool.h>
#include <stdio.h>
#include <uv.h>

/* Runs the prompt on `loop` with the state L (made by drover_lua_init; the
 * caller keeps owning both) until Ctrl-D on an empty line or end of input.
 * With a terminal on stdin: banner, prompt "> " (">> " while a chunk is
 * incomplete), history in $DROVER_HISTORY or ~/.drover_history (an empty
 * DROVER_HISTORY turns it off), tab completion, results pretty-printed,
 * Ctrl-C stopping the running chunk or abandoning the line being typed.
 * Without a terminal it evaluates stdin line by line the same way, with no
 * prompt and no editing. Either way the loop turns while a line is awaited
 * (a cluster the REPL hosts goes on beating; attach clients' ':' lines and
 * a `drover stop` are served). The REPL's handles are closed before it returns;
 * SIGINT gets back the disposition it had on entry.
 * Returns the exit status: 0, or 1 when input was not a terminal and some
 * chunk failed (so `drover < file` reports errors), or 1 when the terminal
 * could not be set up. */
int repl_run(lua_State *L, uv_loop_t *loop);

/* Whether repl_run is running on L: a run the REPL hosts is not a
 * script's (its exit status is not the run's; ui/runs.h RUNS_REPL_EVENT). */
bool repl_hosts(lua_State *L);

/* Interrupts the line the REPL (or `drover run`'s script) is running, as
 * Ctrl-C does; nothing at the prompt. Safe from a libuv callback. */
void repl_interrupt_line(void);

/* Like lua_pcall(L, nargs, nresults, drover_lua_traceback) on the function
 * below the nargs arguments, but interruptible: a SIGINT during the call
 * calls err_interrupt_request() (so C loops such as training stop) and sets
 * a hook that raises "interrupted" at the next Lua instruction. When
 * `second_kills` is true a second SIGINT during the same call kills the
 * process (as lua.c does, for scripts stuck in C code); otherwise it only
 * repeats the request. On return the hook is gone, the interrupt flag is
 * cleared and SIGINT's previous disposition is back. *interrupted (may be
 * NULL) tells whether a SIGINT arrived during the call; the status and the
 * stack are as lua_pcall leaves them (message with traceback on error). */
int repl_pcall(lua_State *L, int nargs, int nresults, bool second_kills, bool *interrupted);

/* For C code that answers Ctrl-C itself, saying where it stopped (a fit):
 * raises "interrupted at step N" (with luaL_error: it does not return).
 * The hook the signal handler set would raise a bare "interrupted" in its
 * place at the next Lua call on the way up: it is taken off first (the
 * polling hook stays, so a script that catches the error still stops). */
int repl_raise_interrupted(lua_State *L, long long step);

/* Prints to f what an interrupted call's error `msg` says: prefix, then
 * "interrupted at step N" when a fit said where it stopped, else
 * "interrupted"; with `frames`, the traceback's frames in the script's
 * own files after it. Nothing that names drover's own Lua or C (their
 * frames, a position they gave the message). */
void repl_report_interrupted(FILE *f, const char *prefix, const char *msg, bool frames);

#endif
