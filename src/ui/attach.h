/* attach.h - `drover attach`: a client of a running coordinator. It
 * connects to the coordinator's address, proves the run's secret like a
 * node (conn.c), sends ATTACH, and keeps a runview up to date from the
 * SNAPSHOTs that come back (runsnap.h); with control it may send
 * COMMANDs. Detaching never affects the run.
 */
#ifndef DROVER_ATTACH_H
#define DROVER_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#include "proto/auth.h"
#include "proto/runview.h"

/* ---- the client ---------------------------------------------------------- */

typedef struct attach_client attach_client;

/* Starts connecting to host:port (numeric) on `loop`; nothing waits here.
 * hz: snapshots per second wanted (the coordinator sends at most 10).
 * The secret is copied. 0 with *out, or a negative code (bad address). */
int attach_client_open(uv_loop_t *loop, const char *host, int port, const auth_secret *secret,
                       bool control, double hz, attach_client **out);

/* Pumps the loop until the first SNAPSHOT arrived: 0; DRV_EIO when the
 * connection failed or closed (err_msg() says why: refused, wrong
 * secret, the coordinator's ERROR), DRV_ETIMEDOUT after `timeout` s.
 * Never call it from a callback of that loop (uv_run is not reentrant). */
int attach_client_wait(attach_client *a, double timeout);

/* The model as of the last SNAPSHOT (borrowed; changes as frames come). */
const runview *attach_client_model(const attach_client *a);
runview *attach_client_model_mut(attach_client *a);
/* The run directory the coordinator reported ("" before a snapshot). */
const char *attach_client_run_dir(const attach_client *a);
/* Whether the connection is gone; *why (may be NULL) gets the reason. */
bool attach_client_closed(const attach_client *a, const char **why);
/* Bytes and SNAPSHOT frames received so far. */
void attach_client_stats(const attach_client *a, size_t *bytes, size_t *frames);

/* Sends COMMAND {kind, text} (WIRE_COMMAND_*) without waiting: 0 or a
 * negative code. A later send forgets the reply to this one. */
int attach_client_send(attach_client *a, int kind, const char *text);
/* Whether the reply to the last send came: then *status (0 or a DRV_E*
 * code) and its text in out[n]. */
bool attach_client_reply(attach_client *a, int *status, char *out, size_t n);

/* The dashboard's dash_source.log_tail over the wire, without waiting:
 * the newest tail of node's log the coordinator sent into out[n], and a
 * COMMAND LOG_TAIL for a fresher one unless one is in flight. Returns 0
 * (out holds an answer, perhaps the previous one while the next is on its
 * way) or DASH_LOG_PENDING (none for this node yet: out says so). The
 * reply arrives as the client's loop runs; ':' commands do not disturb it. */
int attach_client_log_tail(attach_client *a, const char *node, char *out, size_t n);

/* Sends COMMAND {kind, text} (WIRE_COMMAND_*) and pumps the loop until its
 * reply or `timeout` s: the reply's status (0 or a DRV_E* code) with its
 * text in out[n]; DRV_ETIMEDOUT or DRV_EIO (message in out too). Not from
 * a callback of the client's loop. */
int attach_client_command(attach_client *a, int kind, const char *text, char *out, size_t n,
                          double timeout);

/* Closes the connection; the client is freed once its close callback ran
 * (run the loop a turn or two). NULL is fine. */
void attach_client_close(attach_client *a);

/* Prints a model as plain text: a header line, a table of the nodes, the
 * queue, each series' last value and the last `events` events. */
void attach_print(const runview *m, int events, FILE *out);

/* ---- the command --------------------------------------------------------- */

typedef struct attach_opts {
  const char *target;      /* RUN_DIR, a run's name (or name prefix) under
                              runs, or HOST:PORT with a key file */
  const char *target2;     /* a second run to compare (its records), or NULL */
  const char *runs;        /* where run names are looked up ("runs") */
  const char *secret_file; /* --key: NULL picks RUN_DIR's control.key or view.key */
  bool control;            /* may send commands */
  bool print;              /* print one snapshot and leave */
  const char *command;     /* send this Lua line, print the reply, leave */
  const char *stop;        /* stop this node ("worker:1"), print the reply, leave */
  const char *scale;       /* `drover scale`: "worker=N", print the reply, leave */
  double hz;               /* dashboard refresh (4) */
  double timeout;          /* seconds to wait for the first snapshot or a reply (10) */
  int stop_run;            /* `drover stop`: ATTACH_STOP_* (0: attach) */
  double wait;             /* `drover stop`: seconds to wait for the run's end (0: none) */
} attach_opts;

enum { ATTACH_STOP_CHECKPOINT = 1, ATTACH_STOP_NOW = 2 };

/* `drover attach`: returns the exit status (0; 1 when the run is not
 * running, cannot be reached or refuses; errors go to stderr naming the
 * run directory or address). A run whose coordinator is gone, and any
 * comparison of two runs, is shown from its records (attach_records).
 * With stop_run, `drover stop`: COMMAND STOP_RUN with the control key
 * (coord_runstop.c), then up to `wait` s until the coordinator closes the
 * connection; an in-process run (no coordinator, no keys) gets SIGINT from
 * here, as Ctrl-C. 0 once the run ended (or was told to, wait 0). */
int attach_main(const attach_opts *o);

/* ---- a run's records (attach_records.c) ---------------------------------- */

/* Whether run directory `dir` has a coordinator that lives (its file names
 * a process that exists). */
bool attach_coordinator_up(const char *dir);

/* `drover attach` on run directory dir that has ended (and dir2, NULL or
 * a second one, overlaid): the dashboard, read-only, on what the run
 * directories keep, with the banner "finished at ... (exit N)"; --print
 * prints it as text. Returns the exit status. */
int attach_records_main(const attach_opts *o, const char *dir, const char *dir2);

#endif
