/* coord_int.h - the coordinator's internals, shared by coord.c (cluster
 * lifecycle) and coord_fit.c (training); not a public API. */
#ifndef DROVER_COORD_INT_H
#define DROVER_COORD_INT_H

#include <stdio.h>

#include "auth.h"
#include "conn.h"
#include "coord.h"
#include "launch.h"
#include "rundir.h"

#define TICK_MS 100 /* heartbeat/silence timer period */

typedef struct coord_fit_state coord_fit_state; /* coord_fit.c */

struct coord {
  uv_loop_t *loop;
  coord_opts opts;
  rundir rd;
  FILE *log;
  auth_secret secret;
  conn_server *server;
  int port;
  char addr[80];
  launcher *launch;
  coord_node *nodes; /* nnodes entries, ps first (role order) */
  conn **ctl;        /* control connection per node, NULL until registered */
  int nnodes, registered;
  uv_timer_t *tick;
  double last_tick, last_heartbeat;
  uint64_t hb_seq;
  bool shutting_down, shut_down;
  bool spec_sent; /* the reservation is over; SPEC went to everyone */
  int failures;
  char failure[4096];
  coord_fit_state *fit; /* placement and ps connections, kept across fits */
};

const char *coord_node_name(const coord_node *n, char *buf, size_t len);
int coord_find_node(const coord *c, int role, int index);
void coord_fail(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends on node i's control connection (dropped when it has none). */
void coord_send(coord *c, int node, wire_wr *w, uint8_t type, uint32_t req);
/* Pumps the loop until done(c, arg): 0; DRV_ETIMEDOUT after `timeout`
 * seconds (0: none); DRV_EINTERRUPTED on Ctrl-C; DRV_ENODE when a node
 * fails and fail_on_loss. */
int coord_pump(coord *c, bool (*done)(coord *c, void *arg), void *arg, double timeout,
               bool fail_on_loss);

/* coord_fit.c: frames from workers and the evaluator on their control
 * connections (RESULT, EVAL_RESULT, SETUP_OK); negative for a frame that
 * has no business there. */
int coord_fit_frame(coord *c, int node, const wire_header *h, const uint8_t *payload);
/* Node `node` (a worker or chief) was lost and will be restarted: its
 * in-flight train steps go back to the front of the queue. */
void coord_fit_node_lost(coord *c, int node);
/* Node `node` registered again after a restart: a fit in progress (or
 * setting up) sends it SETUP again before any work. */
void coord_fit_node_back(coord *c, int node);
/* Closes the coordinator's connections to the ps nodes. */
void coord_fit_close(coord *c);
void coord_fit_free(coord *c);

#endif
