/* conn_int.h - what conn.c and conn_server.c share: the conn and server
 * structs and the internal functions of conn.c the listener uses. Not for
 * other modules: conn.h is the interface. */
#ifndef DROVER_CONN_INT_H
#define DROVER_CONN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "net/conn.h"

enum conn_state {
  ST_CONNECTING, /* client: TCP connect in progress */
  ST_WAIT_HELLO, /* client: connected, waiting for HELLO */
  ST_WAIT_AUTH,  /* server: HELLO sent, waiting for AUTH */
  ST_WAIT_OK,    /* client: AUTH sent, waiting for AUTH_OK */
  ST_READY,      /* authenticated both ways */
  ST_LINK_SETUP, /* server: a same-host link accepted, its set-up not read yet */
};

typedef struct conn_link conn_link; /* conn_shm.c: a same-host link */

/* One queued write. `frame` is owned (conn_send) or NULL (conn_send_ref,
 * whose payload is borrowed until `done`). */
typedef struct wreq {
  uv_write_t req;
  conn *c;
  uint8_t *frame;
  size_t bytes; /* counted in conn_pending */
  void (*done)(void *arg);
  void *arg;
  struct wreq *next; /* in conn.dropped, or a same-host link's queues */
  uint8_t hdr[WIRE_HEADER_SIZE];
  /* A same-host link copies the buffers itself: what is left of them. */
  uv_buf_t bufs[1 + CONN_MAX_PIECES];
  unsigned nbufs, bi;
  size_t boff;
} wreq;

struct conn {
  uv_tcp_t tcp; /* tcp.data == timer.data == this conn */
  uv_timer_t timer;
  uv_connect_t connect_req;
  uv_shutdown_t shutdown_req;
  const auth_secret *secret;
  const auth_secret *control, *view;
  const conn_accept *accept;
  const conn_cbs *cbs;
  void *ud;
  bool derive;          /* server: node keys derived from secret */
  uint8_t who, role;    /* the identity claimed (client) or proved (server) */
  uint32_t index;
  auth_cap cap;         /* server: set once the AUTH checked; client: its own */
  uint32_t max_frame, handshake_ms, shutdown_ms;
  bool opaque; /* payloads are not checked against their layouts */
  uint8_t server_kind;
  uint8_t mode; /* conn_transport_mode: conn_opts' own, else the process's at creation */
  enum conn_state state;
  bool closing;
  bool shutting; /* conn_shutdown: closes once the writes are out */
  int open_handles; /* freed when it drops to 0 */
  uint8_t ns[AUTH_NONCE_SIZE], nc[AUTH_NONCE_SIZE];
  /* read buffer */
  uint8_t *rbuf;
  size_t rcap, rstart, rend;
  bool have_hdr; /* `cur` holds the validated header at rstart */
  wire_header cur;
  size_t pending;
  wreq *dropped; /* send_ref writes never queued: done runs at close */
  /* Frames the owner sent before the handshake ended, in order: written
   * once it has (a peer drops any frame before authentication). */
  wreq *held, **held_tail;
  bool hs_send; /* the handshake's own frame is being queued */
  int close_err;
  /* While handshaking on a server: its list of such conns, so that
   * conn_server_close can drop them (the owner cannot: it has not seen
   * them yet). */
  conn_server *srv;
  conn *prev, *next;
  /* conn_send_reserve's room (header first), and whether it lies in the
   * link's ring; its payload's bytes. */
  uint8_t *resv;
  bool resv_ring;
  size_t resv_len;
  /* Reading in place (conn_set_in_place): the frame being dispatched, its
   * payload in the ring (ip_src) and its private copy (rbuf). */
  bool in_place;
  const uint8_t *ip_src;
  size_t ip_len;
  uint8_t ip_type;
  conn_link *link; /* a same-host link (its handles counted in open_handles), or NULL */
  bool tcp_open;    /* the TCP handle is not closed yet (a client that moved closes it) */
  bool offered;     /* server: its HELLO offered a same-host link */
  char local_ip[48]; /* client on a link: the TCP connection's local address */
  char peer[64];
  char ip[48]; /* the peer's address without the port: the per-address bound */
  char why[320];
};

struct conn_server {
  uv_tcp_t tcp;
  conn_opts o;
  conn *handshaking; /* accepted conns not yet ready, newest first */
  int nhandshaking;
  uint64_t dropped, dropped_said; /* handshakes dropped for newer ones; logged */
  double said_at;                 /* when the last such line was logged (ms) */
  uint64_t failed, failed_said;   /* accepts that failed (EMFILE...); logged the same way */
  double failed_at;
  uint32_t max_per_addr;          /* waiting handshakes from one address */
  char addr[64];
  /* Same-host links (conn_shm.c): the Unix listener, watched by link_poll
   * (link_fd -1: none), and the token naming it in HELLO. */
  int link_fd;
  uv_poll_t link_poll;
  int open; /* handles not closed yet: freed at 0 */
  bool offer;
  uint8_t link_token[WIRE_LINK_SIZE];
};

/* The transport mode `o` asks for (its own, else the process's). */
conn_transport_mode conn__opts_mode(const conn_opts *o);

/* conn.c's internals (see there). */
void conn__fail(conn *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
conn *conn__new(uv_loop_t *loop, const conn_opts *o);
int conn__prepare(const conn_opts *o);
int conn__parse_addr(const char *host, int port, struct sockaddr_storage *ss);
void conn__format_addr(const struct sockaddr *sa, char *out, size_t n);
uint32_t conn__max_frame(const conn_opts *o);
int conn__start(conn *c);
int conn__send_hello(conn *c);
void conn__on_handshake_timeout(uv_timer_t *t);
void conn__finish_wreq(wreq *w);
void conn__on_handle_closed(uv_handle_t *h);
/* One whole frame, header validated: to the handshake or on_frame. */
void conn__dispatch(conn *c, const wire_header *h, const uint8_t *payload);
/* The conn's accept table allows this header (else it is closed). */
bool conn__accepted(conn *c, const wire_header *h);
/* The read buffer's free room for the next bytes (NULL when out of memory). */
uint8_t *conn__rbuf_room(conn *c, size_t *room);
/* n bytes were put at the room's start: frames are dispatched. */
void conn__got_bytes(conn *c, size_t n);
/* The peer's end is closed (EOF). */
void conn__got_eof(conn *c);
/* A shared-memory link's readable bytes, `avail` at `frame`, of which at
 * most `whole` can ever be there at once (the ring's size): IP_TOOK when a
 * whole frame was read in place and dispatched (*took its bytes, to be
 * consumed), IP_WAIT when one will be once the rest arrives (read nothing
 * meanwhile: *took is the bytes to wait for), IP_NO to read them as usual
 * (*took, when not 0, the size of the frame at the head: to copy no more
 * than it, so that a large frame right behind can still be read in place). */
enum { IP_NO, IP_TOOK, IP_WAIT };
int conn__frame_in_place(conn *c, const uint8_t *frame, size_t avail, size_t whole,
                         size_t *took);
/* conn_server.c: an accepted conn joins the waiting handshakes. */
void conn__server_adopt(conn_server *s, conn *c);
/* Drops waiting handshakes over the bounds for one more from `ip`. */
void conn__server_bound(conn_server *s, const char *ip);

/* conn_shm.c: same-host links. */
conn_transport_mode conn__mode(void);
/* conn_host.c: this host's id (boot id and network namespace: HELLO's
 * offer); whether sa (AF_INET or AF_INET6) is an address of this host
 * (loopback, or an interface's; true when the interfaces cannot be read). */
void conn__host_id(uint8_t out[WIRE_HOST_ID_SIZE]);
struct sockaddr;
bool conn__addr_is_local(const struct sockaddr *sa);
/* Client, on a HELLO that offers a link: true when the conn moved to it
 * (the TCP handle is closing and the handshake starts again there). */
bool conn__link_try(conn *c, const uint8_t *host, const uint8_t *token);
/* Room for n bytes (a frame) in the link's ring, or NULL (not shared
 * memory, earlier writes queued, no room); conn__link_commit publishes
 * them. */
uint8_t *conn__link_reserve(conn *c, size_t n);
void conn__link_commit(conn *c, size_t n);
/* Queues a write on the link (w->bufs set); pending counted. */
void conn__link_write(conn *c, wreq *w);
/* conn_shutdown on a link: true when nothing is left to write. */
bool conn__link_flushed(conn *c);
/* conn__fail: closes the link's handles (counted in open_handles) and moves
 * its queued writes to c->dropped. */
void conn__link_close(conn *c);
/* The last handle closed: unmaps and closes descriptors. */
void conn__link_free(conn *c);
int conn__link_listen(conn_server *s);
void conn__link_unlisten(conn_server *s);

#endif
