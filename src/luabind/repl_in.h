/* repl_in.h - lines of a REPL whose input is not a terminal (a pipe, a
 * FIFO, a file), read while the libuv loop keeps turning.
 *
 * Between two lines the coordinator of a cluster the REPL hosts must go on
 * beating, serving attach clients and noticing `drover stop`: a blocking
 * getline would freeze it for as long as the writer is quiet. So while no
 * whole line is buffered, replin_next() waits on a uv_poll of the input's
 * fd, turning the loop, and calls `between` after every turn (outside any
 * libuv callback, so it may run Lua that pumps the loop itself).
 *
 * The lines come through the FILE itself (stdin), never around it: what a
 * chunk reads with io.read() is the input's next line, as with getline. A
 * regular file (which libuv cannot poll, and which never blocks anyway) is
 * read plainly.
 */
#ifndef DROVER_REPL_IN_H
#define DROVER_REPL_IN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <uv.h>

typedef struct replin {
  FILE *f;
  uv_loop_t *loop;
  uv_poll_t poll;   /* f's fd, started only around a turn of the loop */
  bool polling;     /* the poll exists: f is a pipe, FIFO or socket */
  bool readable;    /* the poll fired during the last turn */
  bool closing;     /* the poll's close callback has not run yet */
  int flags;        /* the fd's status flags on entry (blocking) */
  void (*between)(void *ud);
  void *ud;
  char *line;       /* the line being read (owned) */
  size_t len, cap;
} replin;

/* Sets `in` up to read lines from f (stdin) on `loop`; `between(ud)` (may
 * be NULL) runs after each turn of the loop while a line is awaited. The
 * caller owns `in` (it must stay put until replin_close), f and loop.
 * Never fails: input that cannot be polled is read with blocking reads. */
void replin_open(replin *in, FILE *f, uv_loop_t *loop, void (*between)(void *ud), void *ud);

/* The next line, without its '\n', in *line (owned by `in`, valid until
 * the next call; NUL-terminated, *len bytes) and 1; or 0 at the end of
 * the input (or on a read error). A last line without '\n' is a line.
 * The fd is in blocking mode whenever this is not running. */
int replin_next(replin *in, const char **line, size_t *len);

/* Closes the poll (running the loop until its close callback ran) and
 * frees the line buffer. */
void replin_close(replin *in);

#endif
