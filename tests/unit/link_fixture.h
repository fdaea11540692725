/* link_fixture.h - what the conn tests share (test_conn.c, test_conn_link.c,
 * test_conn_link_peer.c): a loop with a watchdog, a conn server and conn
 * clients that record what happened to them, and a hand-made same-host
 * peer (rawlink) that sets up a link with plain system calls and then
 * reads and writes its rings as it likes - run in a forked child, so that
 * it can die mid-frame, misbehave, or never read. Every helper fails the
 * case (CHECK) rather than return an error, in the child too (the parent
 * then sees its exit status).
 */
#ifndef DROVER_LINK_FIXTURE_H
#define DROVER_LINK_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "net/conn.h"
#include "net/shm_ring.h"
#include "proto/auth.h"
#include "proto/wire.h"

typedef struct lfx lfx;

/* What happened on one conn: a client's ud, and a server conn's once it
 * is ready (before, its ud is the fixture). */
typedef struct lrec {
  int kind;
  bool server;
  lfx *f;
  conn *c;
  int ready, closed, err, frames;
  char why[400];
  uint8_t last_type;
  uint32_t last_req;
  uint8_t *last; /* a copy of the last payload (owned) */
  size_t last_len;
  long n1, n2; /* per-case counters */
} lrec;

typedef void (*lfx_frame_fn)(lrec *r, const wire_header *h, const uint8_t *p);

#define LFX_MAX_CLOSES 48

struct lfx {
  int kind;
  uv_loop_t loop;
  uv_timer_t watchdog, tick;
  auth_secret secret;
  conn_opts so;
  conn_server *srv;
  int port;
  lrec srv_recs[16];
  int nsrv;
  /* Every server-side on_close but the TCP conns whose client moved to a
   * link, in order: refusals and ready conns alike. */
  struct {
    int err;
    char why[400];
  } closes[LFX_MAX_CLOSES];
  int ncloses;
  int moved; /* server TCP conns closed (err 0) because their client moved */
  lfx_frame_fn srv_frame, cli_frame; /* NULL: the server echoes, a client records */
  void (*cli_ready)(lrec *r);
  void (*srv_ready)(lrec *r);
  void (*cli_closed)(lrec *r); /* after a client's on_close is recorded */
  long counter;
  bool typed; /* set before lfx_listen: payloads validated (not opaque) */
};

/* A loop whose watchdog fails the case after `ms`, a fresh secret, and the
 * process's transport mode set to `mode` (it is per process: each case
 * says which it tests). */
void lfx_init(lfx *f, const char *name, uint64_t ms, conn_transport_mode mode);
/* Listens on 127.0.0.1 (opaque payloads unless f->typed: the cases carry
 * arbitrary bytes). */
void lfx_listen(lfx *f, uint32_t handshake_ms);
void lfx_connect(lfx *f, lrec *r);
void lfx_connect_with(lfx *f, lrec *r, const auth_secret *s);
/* lfx_connect with another secret, handshake timeout (0: the default) and
 * port (a listener of the case's own). */
void lfx_connect_full(lfx *f, lrec *r, const auth_secret *s, uint32_t handshake_ms, int port);
/* lfx_connect with a mode of the conn's own (conn_opts.own_transport). */
void lfx_connect_own(lfx *f, lrec *r, conn_transport_mode mode);
/* Closes what is still open, drains the loop, checks it closes. */
void lfx_finish(lfx *f, lrec *clients, int n);
/* Runs the loop until cond (the watchdog ends a wait that never does). */
#define LFX_RUN_UNTIL(f, cond) \
  while (!(cond)) uv_run(&(f)->loop, UV_RUN_ONCE)
/* Runs the loop for about `ms`. */
void lfx_run_for(lfx *f, uint64_t ms);
/* A 5 ms tick on or off: LFX_RUN_UNTIL then also sees conditions that
 * another thread or process changes. */
void lfx_ticking(lfx *f, bool on);

void lfx_record(lrec *r, const wire_header *h, const uint8_t *p);
void lfx_echo(lrec *r, const wire_header *h, const uint8_t *p);
void lfx_send_push(conn *c, const void *p, size_t n, uint32_t req);
/* Deterministic bytes from a seed. */
void lfx_fill(uint8_t *p, size_t n, uint64_t seed);
/* The last server-side close whose reason contains `needle`, or NULL. */
const char *lfx_close_with(const lfx *f, const char *needle, int *err);
/* Descriptors this process holds (a refused link must not leak any). */
int lfx_open_fds(void);

/* ---- a hand-made same-host peer ------------------------------------------ */

/* The server's HELLO as a raw TCP client reads it: its host id and link
 * token (the abstract socket's name). */
void lfx_offer(lfx *f, uint8_t host[WIRE_HOST_ID_SIZE], uint8_t token[WIRE_LINK_SIZE]);

/* Forks a child that runs fn(arg) and exits 0 (a failed CHECK exits 1);
 * the child closes every descriptor but 0-2 first, so that it holds none
 * of the parent's conns. */
pid_t lfx_spawn(void (*fn)(void *arg), void *arg);
/* Runs the loop until the child exits; its wait status. */
int lfx_reap(lfx *f, pid_t pid);

typedef struct rawlink {
  int sock;           /* the Unix socket (blocking, 5 s receive timeout) */
  int efd, peer_efd;  /* ours (the server writes it) and the server's */
  void *base;         /* the region, mapped */
  size_t len;
  shm_ring out, in;   /* ring 0 (we write), ring 1 (we read) */
} rawlink;

/* Connects to the socket a token names. */
int rawlink_dial(const uint8_t token[WIRE_LINK_SIZE]);
/* Sends a set-up message with these fields and descriptors (any). */
void rawlink_send_setup(int sock, const char magic[8], uint32_t mode, uint64_t ring,
                        const int *fds, int nfds);
/* A good shared-memory set-up with rings of `ring` bytes, as conn does it. */
void rawlink_open(rawlink *L, const uint8_t token[WIRE_LINK_SIZE], uint64_t ring);
/* All n bytes into ring 0, waking the server each time; bounded. */
void rawlink_write(rawlink *L, const void *p, size_t n);
/* Exactly n bytes from ring 1; bounded. */
void rawlink_read(rawlink *L, void *p, size_t n);
/* The client's side of the handshake over the rings (node ps:0). */
void rawlink_handshake(rawlink *L, const auth_secret *s);
/* Waits for the server to close the link: true on EOF, false after 5 s. */
bool rawlink_closed_by_server(int sock);

#endif
