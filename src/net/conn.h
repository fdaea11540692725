/* conn.h - framed, authenticated TCP connections on a libuv loop.
 *
 * A conn reads frames (wire.h), validates each header before buffering its
 * payload, runs the auth.h handshake before anything else, and hands whole
 * authenticated frames to its owner's on_frame callback. Writes are queued;
 * a frame's buffer belongs to the conn from conn_send() on.
 *
 * Lifetimes follow libuv: the conn module owns the conn and its handle,
 * frees them only in the close callback, and calls on_close exactly once
 * (also for a conn that never authenticated, and for one closed by the
 * owner). After on_close returns the conn pointer is invalid. A protocol
 * error (bad frame, failed handshake, a peer that times out during the
 * handshake) closes that connection only, with the reason logged and passed
 * to on_close; the process goes on.
 *
 * Servers: conn_listen() accepts connections, each a conn with the
 * server's callbacks, calling on_ready once authenticated. Clients:
 * conn_connect() resolves nothing (numeric addresses only), connects,
 * authenticates and calls on_ready, or on_close on failure.
 */
#ifndef DROVER_CONN_H
#define DROVER_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proto/auth.h"
#include "proto/wire.h"

typedef struct conn conn;
typedef struct conn_server conn_server;

typedef struct conn_cbs {
  /* The handshake finished; frames may flow. May be NULL. */
  void (*on_ready)(conn *c);
  /* One authenticated frame. `payload` (h->len bytes) is valid only during
   * the call. The callback may call conn_close(c) or conn_send(c). */
  void (*on_frame)(conn *c, const wire_header *h, const uint8_t *payload);
  /* The connection is gone: `err` 0 for a clean close by either side (EOF
   * or conn_close), else a negative code with `why` naming the reason
   * ("bad magic 0x41414141 from 127.0.0.1:40312"). */
  void (*on_close)(conn *c, int err, const char *why);
} conn_cbs;

/* The frames a conn accepts once authenticated, checked at the header,
 * before any byte of the payload is buffered: a type with allow[type], of
 * max_len[type] bytes at most. `what` names the peer in the refusal ("refused
 * VAR_INIT from 127.0.0.1:4100 (a worker): not accepted"). Tables are
 * static const in their owners, borrowed for the conn's life. */
typedef struct conn_accept {
  const char *what;
  bool allow[256];
  uint32_t max_len[256];
} conn_accept;

typedef struct conn_opts {
  /* Required; borrowed for the conn's life. A client proves it as the key
   * of the identity it claims (who/role/index below). A server checks a
   * node identity against it, or with derive_node_keys against that
   * identity's own key derived from it (auth_node_key). */
  const auth_secret *secret;
  uint8_t who, role;         /* client: AUTH_WHO_NODE/CLIENT, the role (AUTH_ROLE_COORD...) */
  uint32_t index;            /* client: the node's index */
  bool derive_node_keys;     /* server: see secret */
  const auth_secret *control, *view; /* server: attach clients' keys; NULL: refused */
  const conn_accept *accept; /* server: frames accepted once authenticated (conn_set_accept
                                changes it per conn); NULL: every type up to max_frame */
  const conn_cbs *cbs;       /* required; borrowed */
  void *ud;                  /* the owner's pointer, read with conn_ud() */
  uint32_t max_frame;        /* 0: WIRE_DEFAULT_MAX_FRAME */
  uint8_t server_kind;       /* sent in HELLO (0 coordinator, 1 ps) */
  uint32_t handshake_ms;     /* 0: 5000; a peer silent that long is dropped */
  uint32_t shutdown_ms;      /* 0: 5000; conn_shutdown waits that long for the writes */
  uint32_t max_handshaking;  /* a server's connections not yet authenticated at once;
                                0: a quarter of RLIMIT_NOFILE, 64..1024. A new one over
                                the bound drops the oldest (see conn_listen) */
  uint32_t max_per_addr;     /* of those, from one address (IP) at once; 0: a quarter
                                of max_handshaking, at least 16 */
  bool own_transport;        /* use `transport` below, not the process's mode (a process
                                running clusters of different transports: a REPL) */
  int transport;             /* a conn_transport_mode, read when own_transport */
  bool opaque;               /* skip the payload layout check (wire_validate_payload)
                                that every authenticated frame gets: only for tests of
                                the transport itself, which carry arbitrary bytes */
} conn_opts;

/* Listens on host:port (numeric IPv4/IPv6; port 0 picks a free one, whose
 * number goes to *bound_port). Every accepted conn gets `o`'s callbacks and
 * ud (conn_set_ud can change it per conn).
 *
 * Connections that never authenticate would otherwise hold a descriptor
 * each until their handshake timeout, and a flood of them leaves the
 * process none to open what recovery needs (a restarted node's log). So at
 * most max_handshaking wait at once, and max_per_addr from one address: a
 * new one over a bound drops the oldest of its address, or of all (closed
 * with err 0, so the owner logs nothing; a peer that authenticates does so
 * within milliseconds and is never the oldest), and the drops are logged
 * at most once a second, counted; so are accepts that fail (EMFILE). */
int conn_listen(uv_loop_t *loop, const char *host, int port, const conn_opts *o,
                conn_server **out, int *bound_port);
/* Stops accepting and closes the listener (not the accepted conns). The
 * server is freed once its handle closes. */
void conn_server_close(conn_server *s);
/* Its connections not yet authenticated (tests). */
int conn_server_handshaking(const conn_server *s);

/* Starts connecting to host:port; *out is valid at once (for conn_close).
 * Returns a negative code only for immediate failures, after which no
 * callback is called. */
int conn_connect(uv_loop_t *loop, const char *host, int port, const conn_opts *o,
                 conn **out);

/* Queues a whole frame (header included, as from wire_wr_finish). Takes
 * ownership of `frame` (malloc'd) in every case. Returns DRV_EIO once the
 * conn is closing. Every send may come before the handshake has ended (a
 * conn just dialled, or dialled again): the frames are held and written in
 * their order once it has, or finished unsent (done run) when it fails. */
int conn_send(conn *c, uint8_t *frame, size_t len);
/* wire_wr_finish(w, type, req) and conn_send; w is consumed. */
int conn_send_wr(conn *c, wire_wr *w, uint8_t type, uint32_t req);
/* A frame that sends a payload the caller keeps alive until `done` runs
 * (called once, from the loop, when the write completed or failed; may be
 * NULL when the payload outlives the conn anyway): for large tensors
 * without a copy. The header is built here. */
int conn_send_ref(conn *c, uint8_t type, uint32_t req, const void *payload, size_t len,
                  void (*done)(void *arg), void *arg);
/* The same with the payload in up to CONN_MAX_PIECES pieces sent one
 * after the other (one writev): a frame whose fields are encoded here and
 * whose tensor bytes stay where they are (a fed batch's rows). */
#define CONN_MAX_PIECES 4
typedef struct conn_piece {
  const void *p;
  size_t len;
} conn_piece;
int conn_send_refv(conn *c, uint8_t type, uint32_t req, const conn_piece *pieces, int n,
                   void (*done)(void *arg), void *arg);

/* Writing a frame in place, its payload encoded once where it goes (a
 * gradient of many MB): conn_send_reserve returns room for exactly `len`
 * payload bytes, in a shared-memory link's ring when the ring has that
 * room and no earlier write is still queued, else in a buffer of the
 * conn's; conn_send_commit sends what was written there as one frame
 * (type, req), conn_send_cancel gives the room back unsent. Between the two
 * no other send on this conn and no return to the loop; one reservation at
 * a time. The room may be memory the peer shares: write it, never read it
 * back (wire_wr_init_fixed). NULL, with err_msg, when the conn is closing
 * (DRV_EIO), a reservation is open (DRV_EINVAL), len does not fit a frame
 * (DRV_ERANGE) or memory is short. */
uint8_t *conn_send_reserve(conn *c, size_t len);
/* Returns DRV_EIO when the conn closed meanwhile (the frame is dropped). */
int conn_send_commit(conn *c, uint8_t type, uint32_t req);
void conn_send_cancel(conn *c);

/* Reading in place. An owner that opts in gets large PUSH and PULL_REPLY
 * frames arriving whole in a shared-memory ring without their floats being
 * copied: on_frame's payload is then a private copy of everything but the
 * tensors' float bytes (every count, shape and length checked there, so no
 * peer can change what was validated), and the floats stay in the ring
 * until on_frame returns. Such an owner reads a tensor's floats only
 * through conn_in_place (the payload's own float bytes are stale), copies a
 * payload it keeps with conn_payload_copy, and never keeps a pointer past
 * on_frame. Float values read there may change under the reader (the peer
 * can rewrite them): that is a value the peer could have sent. Off by
 * default; other frames and other transports are unchanged. */
void conn_set_in_place(conn *c, bool on);
/* p, a pointer into the payload on_frame got, as the bytes really lie:
 * in the ring for a frame read in place, else p itself. */
const void *conn_in_place(const conn *c, const void *p);
/* The payload on_frame got (pl, len bytes), floats included, into dst. */
void conn_payload_copy(const conn *c, const uint8_t *pl, size_t len, uint8_t *dst);

/* Closes the conn (idempotent); on_close follows from the loop with err 0
 * and `why`. Queued writes are dropped (conn_shutdown keeps them). */
void conn_close(conn *c, const char *why);
/* Send, then close (libuv's uv_shutdown): the writes already queued go out,
 * then the conn closes and on_close follows with err 0 and `why`. A peer
 * that has not read them within opts.shutdown_ms gets closed anyway
 * (on_close with DRV_EIO). From the call on, sends fail (DRV_EIO, a
 * send_ref's `done` still runs once), no frame reaches on_frame, and
 * conn_is_ready is false. Idempotent; does nothing on a closing conn, and
 * conn_close still closes at once. Typical use: an ERROR that tells the
 * peer why, then conn_shutdown. */
void conn_shutdown(conn *c, const char *why);

/* Changes what the conn accepts from its next frame header on (a peer
 * that registered may send more). `a` is borrowed; NULL accepts all. */
void conn_set_accept(conn *c, const conn_accept *a);
/* Who the peer authenticated as (server side; a client's own claim on the
 * client side): its capability, and for a node its role and index. */
auth_cap conn_cap(const conn *c);
int conn_role(const conn *c);
uint32_t conn_index(const conn *c);

void *conn_ud(const conn *c);
void conn_set_ud(conn *c, void *ud);
bool conn_is_ready(const conn *c); /* authenticated, not closing nor shutting down */
/* The handshake completed at some point: still true while closing and
 * inside on_close, where the owner learns which kind of conn is going. */
bool conn_was_ready(const conn *c);
/* "127.0.0.1:40312" (the peer as accepted or dialled). */
const char *conn_peer(const conn *c);
/* Bytes queued for writing and not yet written. */
size_t conn_pending(const conn *c);
/* This end's IP address as the peer sees it routed (getsockname: the
 * interface the connection left by), without port or brackets, into out.
 * 0, or DRV_EIO when the socket is not connected. */
int conn_local_host(const conn *c, char *out, size_t n);

/* ---- same-host links (conn_shm.c) ----------------------------------------
 * Two processes on one host (the same boot id and network namespace, which
 * the server states in its HELLO and the client compares with its own) talk
 * through a shared-memory ring per direction instead of loopback TCP: the
 * client dials TCP as always, and on such a HELLO moves to the server's
 * Unix socket, passes it a sealed memfd holding both rings and two
 * eventfds, and the handshake starts again over the rings. Frames,
 * authentication and accept tables are the same; only the bytes' path
 * differs. A Unix socket carrying the stream is the fallback (no memfd).
 *
 * The mode is the process's: DROVER_TRANSPORT (auto, unix, tcp) read on the
 * first conn, or conn_set_transport(); a conn or server whose conn_opts set
 * own_transport has its own. A server offers a same-host link only when its
 * mode is not tcp and conn_server_set_offer() did not turn it off; a client
 * takes an offer only when its own mode is not tcp. */
typedef enum conn_transport_mode {
  CONN_TRANSPORT_AUTO = 0, /* shared memory with a co-located peer, else TCP */
  CONN_TRANSPORT_UNIX,     /* a Unix socket with a co-located peer (the fallback) */
  CONN_TRANSPORT_TCP,      /* TCP always */
} conn_transport_mode;

/* "auto", "unix" or "tcp" into *m; DRV_EINVAL naming the choices. */
int conn_transport_parse(const char *s, conn_transport_mode *m);
const char *conn_transport_mode_name(conn_transport_mode m);
void conn_set_transport(conn_transport_mode m);
conn_transport_mode conn_get_transport(void);
/* Whether the server offers same-host links from its next HELLO on (default:
 * yes when the process's mode allows). */
void conn_server_set_offer(conn_server *s, bool offer);
/* The link's path: "shm", "unix" or "tcp" ("tcp" until a client moved). */
const char *conn_transport(const conn *c);

#endif
