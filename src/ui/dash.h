/* dash.h - the live dashboard: an ncurses view of a run (nodes, queues,
 * throughput, TensorBoard-style metrics, events), drawn on the event loop
 * from a runview snapshot (runview.h), with keys like top/htop.
 *
 * The dashboard knows its data only through a dash_source: in the
 * coordinator's process the source reads the coordinator (coord_dash.c);
 * in `drover attach` it is the attach client's copy of the model. Drawing
 * and input never touch sockets; model (runview.c), drawing
 * (dash_view.c, dash_panels.c, dash_draw.c, dash_chart.c), input
 * (dash_input.c) and themes (dash_theme.c) are separate modules.
 */
#ifndef DROVER_DASH_H
#define DROVER_DASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#include "proto/runview.h"

typedef struct dash_source {
  /* The model to draw now (borrowed until the next call). Called once per
   * frame, on the loop thread. */
  const runview *(*get)(void *ud);
  /* ':' - one line of Lua for the coordinator; the reply (a value, or an
   * error message) goes to out. NULL when the source does not allow it
   * (read-only attach): the dashboard then says so. */
  int (*command)(void *ud, const char *line, char *out, size_t n);
  /* 'k' - stop node `name` ("worker:1"), after the user confirmed. NULL
   * when not allowed. Returns 0 or a negative code (message in out). */
  int (*kill_node)(void *ud, const char *name, char *out, size_t n);
  /* '+' / '-' on a worker row - one worker more / fewer: text is
   * "worker=+1" or "worker=-1" (`drover scale`'s, relative to the workers
   * now); what happens, or why not, to out. NULL when not allowed. */
  int (*scale)(void *ud, const char *text, char *out, size_t n);
  /* 'k' - what stopping node `name` would do ("promote replica ps:2: no
   * update is lost"), shown before the user confirms. NULL: nothing said. */
  int (*stop_plan)(void *ud, const char *name, char *out, size_t n);
  /* The detail view - the newest lines of node `name`'s log (as many as
   * fit in out, up to DASH_LOG_LINES), or one line in parentheses saying
   * why there are none. The log belongs to the source: a local one reads
   * the file, the attach client asks the coordinator (the file may be on
   * another host). Returns 0 when out holds the answer, DASH_LOG_PENDING
   * when it is on its way (out holds what to show meanwhile; the view asks
   * again next frame, otherwise once a second). NULL: the view says the
   * source has no logs. */
  int (*log_tail)(void *ud, const char *name, char *out, size_t n);
  void *ud;
} dash_source;

#define DASH_LOG_LINES 40  /* lines of a node's log in the detail view */
#define DASH_LOG_PENDING 1 /* log_tail: the answer is on its way */

typedef struct dash_opts {
  double hz;              /* redraws per second (4; at most 60) */
  const char *theme;      /* theme name ("default"); NULL: $DROVER_THEME or default */
  FILE *in, *out;         /* the terminal (stdin, stdout) */
  /* Called once when the user leaves the dashboard (q), after the
   * terminal was restored; the dashboard is closed then. */
  void (*on_quit)(void *ud);
  void *ud;
} dash_opts;

void dash_opts_default(dash_opts *o);

typedef struct dash dash;

/* Takes over the terminal (ncurses newterm on o->in/o->out; honours
 * NO_COLOR and monochrome terminals) and redraws at o->hz from `src` on
 * `loop`, reading keys as they come. Returns 0 with *out, or a negative
 * code (not a terminal, terminfo missing) with the terminal untouched.
 * o NULL: the defaults. One dashboard per process at a time (ncurses has
 * one current screen). The first call sets LC_CTYPE from the environment
 * (so that UTF-8 terminals get Braille), and only LC_CTYPE: numbers and
 * string comparisons in Lua stay as they were. Keys are
 * read from a dup() of fileno(o->in), so a stopped uv_poll on the same
 * descriptor (the REPL's) does not get in the way; while the dashboard is
 * open nothing else may read that terminal or write to o->out. A hang-up
 * on the input (SSH gone) counts as q. */
int dash_open(uv_loop_t *loop, const dash_opts *o, dash_source src, dash **out);

/* Restores the terminal (if q did not already) and stops drawing; d is
 * the dashboard's from then on: its handles close on later loop turns,
 * which free it, so the loop must run again and d must not be used after
 * this call. NULL is fine; safe after q, and from inside on_quit. */
void dash_close(dash *d);

/* Whether the user has left (q, a hang-up): the terminal is restored and
 * the view is dead, waiting for dash_close. True for NULL. */
bool dash_closed(const dash *d);

#endif
