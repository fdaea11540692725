/* node_fake.h - a fake coordinator for the node tests: a conn_listen
 * server on the test's own loop that takes the nodes' connections, queues
 * every frame they send, and speaks the coordinator's side of the protocol
 * (REGISTERED, SPEC, VAR_INIT, PULL, PUSH ...). Nodes run node_main in
 * forked children; every wait is bounded.
 *
 * Fork the children before the fake accepts any connection, so that no
 * child holds a copy of a socket the test later closes.
 */
#ifndef DROVER_NODE_FAKE_H
#define DROVER_NODE_FAKE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "proto/auth.h"
#include "net/conn.h"
#include "numeric/optim.h"
#include "numeric/tensor.h"
#include "proto/wire.h"

/* A child that leaks exits with LEAKED, a status no node uses, so that the
 * exit-status checks also catch leaks under AddressSanitizer. */
#define LEAKED 99
#define WAIT_MS 10000 /* the longest any single expected event may take */

typedef struct fk_frame {
  wire_header h;
  uint8_t *p; /* owned copy of the payload */
  struct fk_frame *next;
} fk_frame;

typedef struct peer {
  conn *c;      /* NULL once closed */
  auth_secret key; /* what a peer the fake dialled proves */
  bool closed;
  int err;
  char why[256];
  fk_frame *head, *tail;
} peer;

typedef struct fake {
  uv_loop_t loop;
  uv_timer_t timer;
  bool timed_out;
  auth_secret secret;
  conn_server *srv;
  int port;
  conn_opts sopts;
  peer *accepted[8];
  int naccepted;
} fake;

/* The ps index under which the fake itself plays a ps (a reg with `fake`
 * set): every node's key file holds its key for it, derived from the
 * fake's secret, which the fake's listener checks. */
#define NF_FAKE_PS 4096u

typedef struct reg {
  int role, index, port;
  bool fake; /* a ps the fake plays itself, on its own port (SPEC proc NF_FAKE_PS) */
  uint32_t pid, cpus, affinity; /* cpus: BLAS threads */
  uint64_t memory;
  char hostname[64];
  char host[64];
  peer *ctl;
} reg;

/* Starts the fake: a secret file (0600) named by DROVER_SECRET_FILE for
 * the children, and a listener on 127.0.0.1:0. */
void nf_fake_start(fake *f);
/* Closes everything the fake holds (and the peers it dialled) and frees it. */
void nf_fake_stop(fake *f, peer **dialed, int ndialed);
/* Runs the fake's loop until cond(arg) holds or `ms` pass; returns cond. */
bool nf_pump(fake *f, bool (*cond)(void *), void *arg, int ms);
void nf_pump_for(fake *f, int ms);
bool nf_peer_closed(void *arg);
/* Waits for `n` node connections in total. */
void nf_accept_n(fake *f, int n);
/* Dials a ps data port like a worker does; returns the authenticated peer
 * (freed by nf_fake_stop when passed in `dialed`). */
peer *nf_dial(fake *f, uint32_t ps, int port);
/* The same as node (role, index) (AUTH_ROLE_COORD 0: the coordinator),
 * proving that identity's key at ps `ps` (its index: its root checks it). */
peer *nf_dial_as(fake *f, uint32_t ps, int port, int role, uint32_t index);
/* The next frame from pe that is not a HEARTBEAT or LINKS (unless one is
 * asked for), or a failure naming what was expected. Free with nf_frame_free. */
fk_frame *nf_expect(fake *f, peer *pe, uint8_t type, const char *file, int line);
#define NF_EXPECT(f, pe, type) nf_expect((f), (pe), (type), __FILE__, __LINE__)
void nf_frame_free(fk_frame *fr);
void nf_send_wr(peer *pe, wire_wr *w, uint8_t type, uint32_t req);

/* node_main in a forked child (cpus 1, bind 127.0.0.1). */
pid_t nf_spawn_node(fake *f, int role, int index, uint32_t hb_ms, uint32_t timeout_ms);
double nf_now_ms(void);
/* The child's exit status (128 + signal when killed), pumping the fake's
 * loop meanwhile; after `ms` it is killed and -1 returned. */
int nf_reap(fake *f, pid_t pid, int ms);

void nf_read_register(fake *f, peer *pe, reg *r);
/* Accepts n nodes, reads their REGISTERs, answers REGISTERED ok, and
 * sends every one the SPEC of all of them. regs[] in arrival order. */
void nf_register_all(fake *f, reg *regs, int n);
/* The cluster transport (WIRE_TRANSPORT_*) the next nf_register_all's
 * REGISTERED says; after it, auto again. */
void nf_registered_transport(uint8_t transport);
reg *nf_find_reg(reg *regs, int n, int role, int index);
void nf_send_shutdown(peer *ctl);
/* Sends ctl the SPEC of regs[0..n). */
void nf_send_spec(peer *ctl, reg *regs, int n);
/* VAR_INIT and its VAR_INIT_OK (req echoed, empty). */
void nf_var_init(fake *f, peer *pe, uint32_t var, uint64_t row0, const optim_cfg *cfg,
                 const tensor *value, uint32_t req);
void nf_send_pull(peer *pe, const uint32_t *vars, uint32_t n, uint32_t req);
void nf_send_push1(peer *pe, uint32_t var, const tensor *grad, uint32_t req);
/* Sync training: VAR_INIT with mode/replicas/target (nf_var_init sends
 * async), PULL with a min_version, PUSH naming its version, and the
 * version / applied flag of the replies. */
void nf_var_init_mode(fake *f, peer *pe, uint32_t var, uint64_t row0, bool sync,
                      uint32_t replicas, uint64_t target, const optim_cfg *cfg,
                      const tensor *value, uint32_t req);
void nf_send_pull_v(peer *pe, uint64_t min_version, const uint32_t *vars, uint32_t n,
                    uint32_t req);
void nf_send_push1_v(peer *pe, uint64_t version, uint32_t var, const tensor *grad,
                     uint32_t req);
uint64_t nf_read_pull_reply_v(fk_frame *fr, const uint32_t *vars, uint32_t n, tensor **out);
uint64_t nf_read_push_ok_v(fake *f, peer *pe, uint32_t req, bool *applied);
/* Reads a PULL_REPLY's tensors into out[] (new tensors), checking the ids. */
void nf_read_pull_reply(fk_frame *fr, const uint32_t *vars, uint32_t n, tensor **out);
tensor *nf_pull1(fake *f, peer *pe, uint32_t var, uint32_t req);
uint64_t nf_read_push_ok(fake *f, peer *pe, uint32_t req);
/* An ERROR frame followed by the close of that connection; returns the
 * message (static storage). */
const char *nf_expect_error_and_close(fake *f, peer *pe);

/* ============================== a fake cluster ============================ */

#define NF_MAX_NODES 8
#define NF_MAX_DIALED 16

/* One node of a fake cluster. */
typedef struct nf_node {
  int role, index;
} nf_node;

/* The fake coordinator with node_main children registered to it: the
 * set-up and tear-down the multi-process node tests share. Keep it where
 * it was made (the fake's loop and g_fake point into it). */
typedef struct nf_cluster {
  fake f;                       /* the coordinator: pass &c->f to the nf_ helpers */
  int n;
  nf_node nodes[NF_MAX_NODES];  /* as asked */
  pid_t pids[NF_MAX_NODES];     /* nodes[i]'s child; 0 once reaped */
  reg regs[NF_MAX_NODES];       /* their REGISTERs, in arrival order */
  peer *dialed[NF_MAX_DIALED];  /* nf_cluster_dial's, freed by nf_cluster_down */
  int ndialed;
} nf_cluster;

/* Starts the fake, forks a node_main child for each of the n nodes (all
 * with heartbeat hb_ms and timeout timeout_ms), and registers them all
 * (nf_register_all: REGISTERED and the SPEC of all of them). */
void nf_cluster_up(nf_cluster *c, const nf_node *nodes, int n, uint32_t hb_ms,
                   uint32_t timeout_ms);
/* The REGISTER of (role, index); fails the case when it did not register. */
reg *nf_cluster_reg(nf_cluster *c, int role, int index);
/* Dials the data port of (role, index) like a worker does; the peer is
 * closed and freed by nf_cluster_down. */
peer *nf_cluster_dial(nf_cluster *c, int role, int index);
/* The same as node (as_role, as_index) (nf_dial_as). */
peer *nf_cluster_dial_as(nf_cluster *c, int role, int index, int as_role, uint32_t as_index);
/* nf_reap of (role, index)'s child, which nf_cluster_down then leaves alone. */
int nf_cluster_reap(nf_cluster *c, int role, int index, int ms);
/* Sends SHUTDOWN to every child not reaped yet, fails the case unless each
 * exits 0 within WAIT_MS, then stops the fake (nf_fake_stop, with the
 * dialed peers). */
void nf_cluster_down(nf_cluster *c);

bool nf_same_bits(const tensor *a, const tensor *b);
/* A new tensor with d[i] = base + step * i. */
tensor *nf_filled(int ndim, const int64_t *shape, float base, float step);

#endif
