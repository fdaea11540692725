/* coord_feeders_int.h - the external feeders' state, shared by
 * coord_feed_ext.c (FEED_OPEN, credit, keys) and coord_feed_direct.c
 * (feeders that send their batches to the worker on their host). Private
 * to those two files.
 */
#ifndef DROVER_COORD_FEEDERS_INT_H
#define DROVER_COORD_FEEDERS_INT_H

#include "cluster/coord/coord_fit_int.h"

typedef struct coord_feeder {
  coord *c;
  conn *cn;
  char name[64];
  char key[128];        /* "" or the identity it feeds (FEED_OPEN.key) */
  char host[64];        /* FEED_OPEN.host: where it runs ("" unknown) */
  bool direct_ok;       /* FEED_OPEN.direct: it can feed a worker directly */
  int index;            /* its number in the feed's slots (feed_slot.feeder) */
  uint32_t window;      /* credits asked (0: ours) */
  uint32_t credits;     /* granted, not used */
  bool granted;         /* it got its window for this fit */
  uint64_t sent, trained;
  int64_t inflight;     /* accepted through the coordinator, not trained */
  bool ended;           /* FEED_END came, or it left */
  bool answered;        /* our FEED_END went out */
  /* direct (coord_feed_direct.c); a slot's, taken over with its key */
  int route;            /* the worker node it feeds directly; -1: the coordinator */
  int wait_node;        /* its first credit waits for this worker's FEED_LISTEN_OK
                           or FEED_DIRECT_END; -1: waits for nothing */
  uint64_t acked;       /* the last seq its worker acknowledged (in order) */
  uint64_t received;    /* the last seq its worker reported taking (FEED_DIRECT_END) */
  uint64_t last;        /* FEED_END.batches: its last seq (0 before FEED_END) */
  uint64_t direct_trained; /* batches trained through the direct path */
  bool reporting;       /* gone with batches maybe unacked: FEED_DIRECT_CLOSE sent,
                           its worker's FEED_DIRECT_END says what it took */
  struct coord_feeder *next;
} coord_feeder;

struct coord_feeders {
  coord_feeder *list;
  int count;      /* feeders ever opened (their indices) */
  int opened;     /* opened during (or before, still open at) this fit */
  int ended;      /* of those, ended */
  char failed[512]; /* a feeder gave up: the fit fails with this */
  int *port;      /* per node: a worker's direct feed port; 0 not asked,
                     -1 asked, -2 it could not listen (nnodes of them) */
};

/* coord_feed_ext.c */
bool coord__feeders_external(const coord_fit_state *f);
/* Its window once per fit (FEED_CREDIT), unless it ended or waits. */
void coord__feeder_grant(coord_fit_state *f, coord_feeder *d);
void coord__feeder_credit(coord_feeder *d, uint32_t credits, uint64_t acked);
void coord__feeder_send_end(coord_feeder *d, int32_t status, const char *msg);
/* Batches taken and not yet trained (through the coordinator or directly;
 * UINT64_MAX: not known yet, a direct feeder that has not ended). */
uint64_t coord__feeder_outstanding(const coord_feeder *d);
/* The window a feeder gets (its own when smaller, FEEDER_WINDOW_MAX at most). */
uint32_t coord__feeder_window(const coord_fit_state *f, const coord_feeder *d);

/* coord_feed_direct.c */
/* A feeder's credit is due (it opened, or a fit began): to the worker on
 * its host when it asked for that and there is one (FEED_ROUTE first,
 * maybe once that worker listens), else through the coordinator. */
void coord__feeder_route(coord_fit_state *f, coord_feeder *d);
/* d takes over o's slot (same key): a direct slot's worker is asked to
 * close o's connection and say what it took; d's credit waits for that. */
void coord__feeder_take_direct(coord_fit_state *f, coord_feeder *d, const coord_feeder *o);
/* Direct feeder d left (its slot stays, detached): its worker is asked
 * what it took, and the feed is not over until that is acknowledged. */
void coord__feeder_direct_gone(coord_fit_state *f, coord_feeder *d);

#endif
