/* conn_shm.c - same-host links: a conn whose bytes go through two
 * shared-memory rings (shm_ring.h) or, as the fallback, a Unix socket,
 * instead of loopback TCP (conn.h says when and why).
 *
 * Setting up. A server listens on an abstract Unix socket whose name is
 * "drover-" and the hex of a random token; HELLO carries the token with
 * the server's host id (boot id and network namespace; an abstract socket
 * is only reachable from the same namespace anyway). A client that sees
 * its own host id there connects to that socket, sends one set-up message
 * ("DRVLINK1", the mode, the ring size) with, for shared memory, a sealed
 * memfd and two eventfds (SCM_RIGHTS), closes its TCP connection and waits
 * for a HELLO again, now over the link. Anything that fails on the way
 * leaves the client on TCP. The server checks what it received (sizes,
 * seals, that the eventfds are eventfds), maps the rings and sends HELLO:
 * the handshake, the accept tables and everything after are unchanged.
 *
 * Running. The dialler writes ring 0 and reads ring 1. Each side polls its
 * own eventfd, which the peer writes only when this side said it sleeps
 * (shm_ring.h), and the Unix socket, whose end (EOF, or any byte at all)
 * means the peer is gone: what is still in the ring is read first. Writes
 * are copied into the ring at once while there is room (a send_ref's
 * `done` then runs from the loop: before the link reads again, or through
 * the `kick` idle handle), a large one in steps that a reader on another
 * core can already copy out, and wait for the peer's wake-up when it is
 * full. A burst is read a bounded amount per callback so one busy link
 * cannot starve the loop.
 */
#include "net/conn.h"
#include "net/conn_int.h"
#include "net/shm_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sodium.h>

#include "base/err.h"
#include "base/le.h"
#include "base/log.h"

#define SETUP_MAGIC "DRVLINK1"
#define SETUP_SIZE 24 /* magic[8] mode u32 reserved u32 ring u64 */
#define MODE_SHM 1
#define MODE_UNIX 2
#define DEFAULT_RING (2u << 20)
#define ACCEPT_BURST 64
#define PUBLISH_CHUNK (256u << 10)

struct conn_link {
  int mode; /* MODE_SHM or MODE_UNIX */
  int sock, my_efd, peer_efd;
  void *base;
  size_t maplen;
  shm_ring in, out;
  uv_poll_t sock_poll, efd_poll;
  uv_idle_t kick;
  int sock_events; /* what sock_poll waits for */
  bool efd_open;   /* efd_poll initialised (a shared-memory link once set up) */
  bool up;         /* set-up done: bytes may flow */
  bool eof;        /* the peer's end is closed */
  size_t want;     /* bytes to wait for before reading: a frame to read in place, or 1 */
  size_t limit;    /* bytes the next read copies at most (0: no limit) */
  wreq *q, *q_tail;       /* writes not wholly out yet */
  wreq *done, *done_tail; /* written, `done` to run from the loop */
};

/* ---- the process's mode and host ----------------------------------------- */

static conn_transport_mode g_mode;
static bool g_mode_set;

int conn_transport_parse(const char *s, conn_transport_mode *m) {
  static const char *names[] = {"auto", "unix", "tcp"};
  for (int i = 0; i < 3; i++)
    if (s && strcmp(s, names[i]) == 0) {
      *m = (conn_transport_mode)i;
      return 0;
    }
  return err_set(DRV_EINVAL, "transport '%s': expected auto (shared memory between processes "
                 "on one host, else TCP), unix or tcp", s ? s : "(null)");
}

const char *conn_transport_mode_name(conn_transport_mode m) {
  return m == CONN_TRANSPORT_UNIX ? "unix" : m == CONN_TRANSPORT_TCP ? "tcp" : "auto";
}

void conn_set_transport(conn_transport_mode m) {
  g_mode = m;
  g_mode_set = true;
}

conn_transport_mode conn__mode(void) {
  if (!g_mode_set) {
    const char *e = getenv("DROVER_TRANSPORT");
    g_mode_set = true;
    if (e && *e && conn_transport_parse(e, &g_mode) < 0) {
      log_warn("DROVER_TRANSPORT: %s; using tcp", err_msg());
      g_mode = CONN_TRANSPORT_TCP;
    }
  }
  return g_mode;
}

conn_transport_mode conn_get_transport(void) { return conn__mode(); }

conn_transport_mode conn__opts_mode(const conn_opts *o) {
  if (o->own_transport && o->transport >= CONN_TRANSPORT_AUTO && o->transport <= CONN_TRANSPORT_TCP)
    return (conn_transport_mode)o->transport;
  return conn__mode();
}

void conn_server_set_offer(conn_server *s, bool offer) { s->offer = offer; }

const char *conn_transport(const conn *c) {
  return !c->link ? "tcp" : c->link->mode == MODE_SHM ? "shm" : "unix";
}

static socklen_t link_addr(const uint8_t token[WIRE_LINK_SIZE], struct sockaddr_un *a) {
  char hex[2 * WIRE_LINK_SIZE + 1];
  memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  sodium_bin2hex(hex, sizeof hex, token, WIRE_LINK_SIZE);
  /* Abstract: sun_path[0] is 0; the length bounds the name. */
  int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "drover-%s", hex);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static uint64_t ring_size(void) {
  const char *e = getenv("DROVER_SHM_RING");
  uint64_t v = e ? strtoull(e, NULL, 0) : DEFAULT_RING;
  return shm_ring_size_ok(v) ? v : DEFAULT_RING;
}

/* ---- running: waking, reading, writing ------------------------------------ */

static void wake_peer(conn_link *l) {
  uint64_t one = 1;
  if (write(l->peer_efd, &one, sizeof one) < 0 && errno != EAGAIN)
    log_debug("conn: waking a same-host peer: %s", strerror(errno));
}

static void on_kick(uv_idle_t *h);
static void on_sock(uv_poll_t *p, int status, int events);

static void kick(conn *c) {
  if (!c->closing) uv_idle_start(&c->link->kick, on_kick);
}

static void link_fail(conn *c, int err, const char *what) {
  conn__fail(c, err, "%s from %s: %s", what, c->peer, err_msg());
}

/* Some bytes from the link into the read buffer; 0 when none, 1 when
 * some, < 0 when the link is broken (already failed). */
static int read_some(conn *c, size_t *got) {
  conn_link *l = c->link;
  size_t room;
  uint8_t *p = conn__rbuf_room(c, &room);
  ssize_t n;
  *got = 0;
  if (!p || room == 0) {
    conn__fail(c, DRV_ENOMEM, "no memory to read from %s", c->peer);
    return -1;
  }
  if (l->mode == MODE_SHM) {
    n = shm_ring_read(&l->in, p, l->limit && l->limit < room ? l->limit : room);
    if (n < 0) {
      link_fail(c, DRV_EPARSE, "bad shared memory");
      return -1;
    }
    if (n > 0 && shm_ring_wake_writer(&l->in)) wake_peer(l);
  } else {
    n = read(l->sock, p, room);
    if (n == 0) l->eof = true;
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) n = 0;
    if (n < 0) {
      conn__fail(c, DRV_EIO, "read from %s failed: %s", c->peer, strerror(errno));
      return -1;
    }
  }
  *got = (size_t)n;
  return n > 0;
}

/* A whole frame read where it lies in the ring (conn_inplace.c): 1 when
 * one was (*got its bytes), 0 to read as usual, -1 to wait for the rest of
 * one (l->want says how much). */
static int take_in_place(conn *c, size_t *got) {
  conn_link *l = c->link;
  const uint8_t *p;
  size_t n;
  *got = 0;
  ssize_t avail = shm_ring_peek(&l->in, &p);
  if (avail <= 0) return 0; /* none, or corrupt: read_some says so */
  int r = conn__frame_in_place(c, p, (size_t)avail, (size_t)l->in.size, &n);
  if (r == IP_WAIT) l->want = n;
  if (r == IP_NO) l->limit = n;
  if (r != IP_TOOK) return r == IP_WAIT ? -1 : 0;
  if (!c->closing && n) {
    shm_ring_consume(&l->in, n);
    if (shm_ring_wake_writer(&l->in)) wake_peer(l);
  }
  *got = n;
  return 1;
}

/* The `done`s of writes already copied into the link. */
static void run_done(conn *c) {
  conn_link *l = c->link;
  while (l->done) {
    wreq *w = l->done;
    l->done = w->next;
    if (!l->done) l->done_tail = NULL;
    conn__finish_wreq(w);
  }
}

/* Reads and dispatches up to `budget` bytes (0: all there is). Returns
 * true when more may be waiting. Runs on after the peer's end too: what
 * it wrote before it went is read first. The `done`s of the replies sent
 * so far run before each read: a peer's next request, read in the same
 * turn, then finds their buffers released (a ps whose pull reply is still
 * referenced copies the shard before a push updates it). */
static bool pump_in(conn *c, size_t budget) {
  size_t total = 0, got;
  conn_link *l = c->link;
  while (!c->closing) {
    run_done(c);
    if (c->closing) break;
    l->want = 1;
    l->limit = 0;
    int r = l->mode == MODE_SHM ? take_in_place(c, &got) : 0;
    if (r < 0) return false; /* a frame to read in place, not whole yet */
    if (r == 0) {
      if ((r = read_some(c, &got)) <= 0) return false;
      conn__got_bytes(c, got);
    }
    total += got;
    if (budget && total >= budget) return true;
  }
  return false;
}

/* Some bytes of a write into the link: how many (0 when full), or < 0 when
 * the link failed (closed here). Shared memory takes at most PUBLISH_CHUNK
 * a call, so that a reader on another core sees a large frame's first part
 * while the rest is still being copied in. */
static ssize_t put_some(conn *c, const char *p, size_t n) {
  conn_link *l = c->link;
  ssize_t k;
  if (l->mode == MODE_SHM) {
    k = shm_ring_write(&l->out, p, n < PUBLISH_CHUNK ? n : PUBLISH_CHUNK);
    if (k < 0) link_fail(c, DRV_EPARSE, "bad shared memory");
    return k;
  }
  k = write(l->sock, p, n);
  if (k < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (k < 0) conn__fail(c, DRV_EIO, "write to %s failed: %s", c->peer, strerror(errno));
  return k;
}

/* Copies a write's buffers into the link while they fit; true when all of
 * it is out. A reader asleep is woken once a first chunk is in, not only
 * at the end (pump_out): on another core it copies out while the rest goes
 * in; on this one it runs once more, not once a chunk. */
static bool write_one(conn *c, wreq *w) {
  conn_link *l = c->link;
  size_t sent = 0;
  bool woke = false;
  while (w->bi < w->nbufs) {
    uv_buf_t *b = &w->bufs[w->bi];
    size_t left = b->len - w->boff;
    ssize_t n = left ? put_some(c, b->base + w->boff, left) : 0;
    if (n < 0) return false;
    w->boff += (size_t)n;
    sent += (size_t)n;
    if (!woke && sent >= PUBLISH_CHUNK && l->mode == MODE_SHM) {
      woke = true;
      if (shm_ring_wake_reader(&l->out)) wake_peer(l);
    }
    if (w->boff == b->len)
      w->bi++, w->boff = 0;
    else if (n == 0 || l->mode != MODE_SHM || (size_t)n < PUBLISH_CHUNK)
      return false; /* full */
  }
  return true;
}

static void set_sock_events(conn *c, int ev) {
  conn_link *l = c->link;
  if (l->sock_events == ev || c->closing) return;
  l->sock_events = ev;
  uv_poll_start(&l->sock_poll, ev, on_sock);
}

/* Writes what the queue holds while there is room; finishes a shutdown
 * once it is empty. */
static void pump_out(conn *c) {
  conn_link *l = c->link;
  bool wrote = false;
  while (l->q && !c->closing) {
    wreq *w = l->q;
    size_t before = w->boff + w->bi;
    bool whole = write_one(c, w);
    wrote = wrote || whole || w->boff + w->bi != before;
    if (!whole) break;
    l->q = w->next;
    if (!l->q) l->q_tail = NULL;
    c->pending -= w->bytes;
    w->next = NULL;
    if (w->done) { /* `done` runs from the loop, never inside conn_send */
      if (l->done_tail) l->done_tail->next = w; else l->done = w;
      l->done_tail = w;
      kick(c);
    } else {
      conn__finish_wreq(w);
    }
  }
  if (c->closing) return;
  if (l->mode == MODE_SHM) {
    if (wrote && shm_ring_wake_reader(&l->out)) wake_peer(l);
    if (l->q && !shm_ring_writer_sleep(&l->out)) kick(c); /* room came meanwhile */
  } else {
    set_sock_events(c, UV_READABLE | UV_DISCONNECT | (l->q ? UV_WRITABLE : 0));
  }
  if (!l->q && c->shutting) {
    char why[sizeof c->why];
    memcpy(why, c->why, sizeof why);
    conn__fail(c, 0, "%s", why);
  }
}

/* Reads what there is (a bounded amount), then sleeps when the ring is
 * empty or comes back next turn. */
static void service(conn *c) {
  conn_link *l = c->link;
  bool more = pump_in(c, 4 * (l->mode == MODE_SHM ? l->in.size : (64u << 10)));
  if (c->closing) return;
  if (l->eof) { /* the peer is gone: what it wrote before is read first */
    /* A ring holds at most its size from a peer that has gone; more means
     * another process writes on: no reason to read forever. */
    pump_in(c, l->mode == MODE_SHM ? l->in.size : 0);
    if (!c->closing) conn__got_eof(c);
    return;
  }
  pump_out(c);
  if (c->closing) return;
  if (more || (l->mode == MODE_SHM && !shm_ring_reader_wait(&l->in, l->want))) kick(c);
}

static void on_kick(uv_idle_t *h) {
  conn *c = h->data;
  uv_idle_stop(h);
  run_done(c);
  if (!c->closing && c->link->up) service(c);
}

static void on_efd(uv_poll_t *p, int status, int events) {
  conn *c = p->data;
  uint64_t v;
  (void)events;
  if (c->closing) return;
  if (status < 0) {
    conn__fail(c, DRV_EIO, "same-host link to %s: %s", c->peer, uv_strerror(status));
    return;
  }
  if (read(c->link->my_efd, &v, sizeof v) < 0 && errno != EAGAIN)
    log_debug("conn %s: eventfd: %s", c->peer, strerror(errno));
  service(c);
}

static void on_setup(conn *c);

/* The socket: the set-up message (server), the stream (unix mode), or,
 * for shared memory, only the peer's end. */
static void on_sock(uv_poll_t *p, int status, int events) {
  conn *c = p->data;
  conn_link *l = c->link;
  if (c->closing) return;
  if (status < 0) {
    conn__fail(c, DRV_EIO, "same-host link to %s: %s", c->peer, uv_strerror(status));
    return;
  }
  if (c->state == ST_LINK_SETUP) {
    on_setup(c);
    return;
  }
  if (l->mode == MODE_SHM) {
    char b[64];
    ssize_t n = recv(l->sock, b, sizeof b, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n > 0) { /* nothing travels there once set up */
      conn__fail(c, DRV_EPARSE, "unexpected bytes on the same-host link's socket from %s",
                 c->peer);
      return;
    }
    l->eof = true;
    service(c);
    return;
  }
  if (events & UV_WRITABLE) pump_out(c);
  if (!c->closing && (events & (UV_READABLE | UV_DISCONNECT))) service(c);
}

/* ---- the conn's side of it ------------------------------------------------ */

uint8_t *conn__link_reserve(conn *c, size_t n) {
  conn_link *l = c->link;
  int err;
  if (l->mode != MODE_SHM || !l->up || l->q) return NULL; /* the frames keep their order */
  uint8_t *p = shm_ring_reserve(&l->out, n, &err);
  if (err < 0) link_fail(c, DRV_EPARSE, "bad shared memory");
  return p;
}

void conn__link_commit(conn *c, size_t n) {
  conn_link *l = c->link;
  shm_ring_commit(&l->out, n);
  if (shm_ring_wake_reader(&l->out)) wake_peer(l);
}

void conn__link_write(conn *c, wreq *w) {
  conn_link *l = c->link;
  w->next = NULL;
  w->bi = 0, w->boff = 0;
  c->pending += w->bytes;
  if (l->q_tail) l->q_tail->next = w; else l->q = w;
  l->q_tail = w;
  if (l->up && l->q == w) pump_out(c);
}

bool conn__link_flushed(conn *c) { return c->link->q == NULL; }

static void drop_list(conn *c, wreq **list, bool queued) {
  while (*list) {
    wreq *w = *list;
    *list = w->next;
    if (queued) c->pending -= w->bytes;
    w->next = c->dropped;
    c->dropped = w;
  }
}

void conn__link_close(conn *c) {
  conn_link *l = c->link;
  if (!l) return;
  /* Writes not out, and `done`s not run: they finish in the close
   * callback, as TCP's cancelled writes do. */
  drop_list(c, &l->q, true);
  drop_list(c, &l->done, false);
  l->q_tail = l->done_tail = NULL;
  uv_close((uv_handle_t *)&l->sock_poll, conn__on_handle_closed);
  uv_close((uv_handle_t *)&l->kick, conn__on_handle_closed);
  if (l->efd_open) uv_close((uv_handle_t *)&l->efd_poll, conn__on_handle_closed);
}

void conn__link_free(conn *c) {
  conn_link *l = c->link;
  if (!l) return;
  if (l->base) munmap(l->base, l->maplen);
  if (l->sock >= 0) close(l->sock);
  if (l->my_efd >= 0) close(l->my_efd);
  if (l->peer_efd >= 0) close(l->peer_efd);
  free(l);
  c->link = NULL;
}

/* A link on `sock` with its socket and idle handles (counted in
 * open_handles); the caller closes sock when this fails. */
static conn_link *link_new(conn *c, int sock) {
  uv_loop_t *loop = c->timer.loop;
  conn_link *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  l->my_efd = l->peer_efd = -1;
  l->want = 1;
  if (uv_poll_init(loop, &l->sock_poll, sock) < 0) {
    free(l);
    return NULL;
  }
  l->sock = sock;
  uv_idle_init(loop, &l->kick);
  l->sock_poll.data = l->efd_poll.data = l->kick.data = c;
  c->link = l;
  c->open_handles += 2;
  return l;
}

/* Maps the rings and starts polling the eventfd: bytes may flow. `dialler`
 * writes ring 0. */
static int link_up(conn *c, int memfd, uint64_t size, bool dialler) {
  conn_link *l = c->link;
  int rc;
  if (l->mode == MODE_SHM) {
    if ((rc = shm_region_map(memfd, size, &l->base, &l->maplen)) < 0) return rc;
    shm_ring_attach(&l->out, l->base, size, dialler ? 0 : 1, true);
    shm_ring_attach(&l->in, l->base, size, dialler ? 1 : 0, false);
    if (uv_poll_init(c->timer.loop, &l->efd_poll, l->my_efd) < 0)
      return err_set(DRV_EIO, "cannot poll the link's eventfd");
    l->efd_open = true;
    c->open_handles++;
    uv_poll_start(&l->efd_poll, UV_READABLE, on_efd);
  }
  l->up = true;
  set_sock_events(c, UV_READABLE | UV_DISCONNECT);
  kick(c); /* a first look, which ends saying that this side sleeps */
  return 0;
}

/* ---- client: taking the offer ---------------------------------------------- */

static int send_setup(int sock, int mode, uint64_t size, const int *fds, int nfds) {
  uint8_t msg[SETUP_SIZE] = {0};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(3 * sizeof(int))];
  } ctl;
  struct iovec iov = {msg, sizeof msg};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  memcpy(msg, SETUP_MAGIC, 8);
  le_put(msg + 8, (uint64_t)mode, 4);
  le_put(msg + 16, size, 8);
  if (nfds) {
    memset(&ctl, 0, sizeof ctl);
    mh.msg_control = ctl.buf;
    mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
  }
  /* A fresh socket's buffer is empty: the message goes whole or not at all. */
  if (sendmsg(sock, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof msg)
    return err_set(DRV_EIO, "sending the link's set-up: %s", strerror(errno));
  return 0;
}

/* The region and eventfds of a shared-memory link: fds[0] the memfd,
 * fds[1] the dialler's eventfd, fds[2] the server's. */
static int make_shm(uint64_t size, int fds[3]) {
  int rc = shm_region_create(size, &fds[0]);
  if (rc < 0) return rc;
  fds[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  fds[2] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fds[1] >= 0 && fds[2] >= 0) return 0;
  rc = err_set(DRV_EIO, "eventfd: %s", strerror(errno));
  for (int i = 0; i < 3; i++)
    if (fds[i] >= 0) close(fds[i]);
  return rc;
}

/* Connects to the offered socket and sends the set-up: the socket, or -1
 * (said at debug level: the conn goes on over TCP). */
static int dial(conn *c, const uint8_t *token, int *mode, int fds[3], uint64_t size) {
  struct sockaddr_un a;
  socklen_t alen = link_addr(token, &a);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  fds[0] = fds[1] = fds[2] = -1;
  if (s < 0 || connect(s, (struct sockaddr *)&a, alen) < 0) {
    log_debug("conn %s: same-host link refused (%s): staying on TCP", c->peer, strerror(errno));
    if (s >= 0) close(s);
    return -1;
  }
  *mode = c->mode == CONN_TRANSPORT_UNIX ? MODE_UNIX : MODE_SHM;
  if (*mode == MODE_SHM && make_shm(size, fds) < 0) {
    log_info("conn %s: no shared memory (%s): a Unix socket instead", c->peer, err_msg());
    *mode = MODE_UNIX;
  }
  if (send_setup(s, *mode, size, fds, *mode == MODE_SHM ? 3 : 0) < 0) {
    log_debug("conn %s: %s: staying on TCP", c->peer, err_msg());
    for (int i = 0; i < 3; i++)
      if (fds[i] >= 0) close(fds[i]), fds[i] = -1;
    close(s);
    return -1;
  }
  return s;
}

bool conn__link_try(conn *c, const uint8_t *host, const uint8_t *token) {
  static const uint8_t zero[WIRE_HOST_ID_SIZE];
  uint8_t mine[WIRE_HOST_ID_SIZE];
  int fds[3], mode, s;
  uint64_t size = ring_size();
  conn__host_id(mine);
  if (c->mode == CONN_TRANSPORT_TCP || memcmp(host, zero, sizeof zero) == 0 ||
      memcmp(host, mine, sizeof mine) != 0)
    return false;
  if ((s = dial(c, token, &mode, fds, size)) < 0) return false;
  if (!link_new(c, s)) {
    close(s);
    for (int i = 0; i < 3; i++)
      if (fds[i] >= 0) close(fds[i]);
    return false;
  }
  c->link->mode = mode;
  if (mode == MODE_SHM) c->link->my_efd = fds[1], c->link->peer_efd = fds[2];
  int rc = link_up(c, fds[0], size, true);
  if (fds[0] >= 0) close(fds[0]); /* the mapping keeps the region */
  if (rc < 0) {
    conn__fail(c, DRV_EIO, "same-host link to %s: %s", c->peer, err_msg());
    return true; /* closing: nothing more to do with the HELLO */
  }
  /* The server's HELLO comes again over the link; TCP is done with. */
  conn_local_host(c, c->local_ip, sizeof c->local_ip);
  uv_read_stop((uv_stream_t *)&c->tcp);
  uv_close((uv_handle_t *)&c->tcp, conn__on_handle_closed);
  c->tcp_open = false;
  c->state = ST_WAIT_HELLO;
  uv_timer_start(&c->timer, conn__on_handshake_timeout, c->handshake_ms, 0);
  log_info("link to %s: %s (same host)", c->peer,
           c->link->mode == MODE_SHM ? "shared memory" : "Unix socket");
  return true;
}

/* ---- server: the Unix listener and the set-up ------------------------------ */

/* The eventfd check: a peer passing a pipe or a file instead would make
 * our polls spin or block. */
static bool is_eventfd(int fd) {
  char path[64], target[64];
  ssize_t n;
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  n = readlink(path, target, sizeof target - 1);
  if (n < 0) return false;
  target[n] = 0;
  return strcmp(target, "anon_inode:[eventfd]") == 0;
}

/* Reads and checks the set-up message: its mode, ring size and the fds
 * it carried (closed here on failure). */
static int read_setup(int sock, int *mode, uint64_t *size, int fds[3]) {
  uint8_t msg[SETUP_SIZE];
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(4 * sizeof(int))];
  } ctl;
  struct iovec iov = {msg, sizeof msg};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                      .msg_controllen = sizeof ctl.buf};
  int nfds = 0, rc = 0;
  ssize_t n = recvmsg(sock, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1; /* not yet */
  fds[0] = fds[1] = fds[2] = -1;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm; cm = CMSG_NXTHDR(&mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    int *got = (int *)CMSG_DATA(cm);
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      if (nfds < 3) fds[nfds] = got[i]; else close(got[i]);
      nfds++;
    }
  }
  *mode = n == SETUP_SIZE ? (int)le_get(msg + 8, 4) : 0;
  *size = n == SETUP_SIZE ? le_get(msg + 16, 8) : 0;
  if (n != SETUP_SIZE || memcmp(msg, SETUP_MAGIC, 8) != 0 || (mh.msg_flags & MSG_CTRUNC))
    rc = err_set(DRV_EPARSE, "a malformed link set-up (%zd bytes)", n);
  else if (*mode == MODE_UNIX ? nfds != 0 : *mode != MODE_SHM || nfds != 3)
    rc = err_set(DRV_EPARSE, "a link set-up of mode %d with %d descriptors", *mode, nfds);
  else if (*mode == MODE_SHM && (!is_eventfd(fds[1]) || !is_eventfd(fds[2])))
    rc = err_set(DRV_EPARSE, "a link set-up whose wake-ups are not eventfds");
  if (rc < 0)
    for (int i = 0; i < 3; i++)
      if (fds[i] >= 0) close(fds[i]), fds[i] = -1;
  return rc;
}

static void on_setup(conn *c) {
  conn_link *l = c->link;
  int mode, fds[3], rc;
  uint64_t size;
  rc = read_setup(l->sock, &mode, &size, fds);
  if (rc == 1) return;
  if (rc == 0) {
    l->mode = mode;
    if (mode == MODE_SHM) l->my_efd = fds[2], l->peer_efd = fds[1];
    rc = link_up(c, fds[0], size, false);
    if (fds[0] >= 0) close(fds[0]);
  }
  if (rc < 0) {
    conn__fail(c, DRV_EPARSE, "same-host link from %s: %s", c->peer, err_msg());
    return;
  }
  c->state = ST_WAIT_AUTH;
  if (conn__send_hello(c) < 0)
    conn__fail(c, DRV_EIO, "cannot send HELLO to %s: %s", c->peer, err_msg());
}

/* "local pid 1234": who dialled, as the kernel says. */
static void name_peer(conn *c, int sock) {
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0)
    snprintf(c->peer, sizeof c->peer, "local pid %d", (int)cr.pid);
  else
    snprintf(c->peer, sizeof c->peer, "local");
  snprintf(c->ip, sizeof c->ip, "local");
}

static void accept_link(conn_server *s, int fd) {
  conn *c = conn__new(s->link_poll.loop, &s->o);
  if (!c || !link_new(c, fd)) {
    log_error("conn: no memory for a same-host link on %s", s->addr);
    close(fd);
    if (c) conn__fail(c, DRV_ENOMEM, "out of memory");
    return;
  }
  name_peer(c, fd);
  conn__server_bound(s, c->ip);
  c->state = ST_LINK_SETUP;
  conn__server_adopt(s, c);
  uv_timer_start(&c->timer, conn__on_handshake_timeout, c->handshake_ms, 0);
  set_sock_events(c, UV_READABLE | UV_DISCONNECT);
  log_debug("conn %s: same-host link accepted on %s", c->peer, s->addr);
}

static void on_link_listen(uv_poll_t *p, int status, int events) {
  conn_server *s = p->data;
  (void)events;
  if (status < 0) return;
  for (int i = 0; i < ACCEPT_BURST; i++) {
    int fd = accept4(s->link_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
        log_warn("conn: accept of a same-host link on %s: %s", s->addr, strerror(errno));
      return;
    }
    accept_link(s, fd);
  }
}

int conn__link_listen(conn_server *s) {
  struct sockaddr_un a;
  socklen_t alen;
  int fd;
  if (conn__opts_mode(&s->o) == CONN_TRANSPORT_TCP) return 0;
  randombytes_buf(s->link_token, sizeof s->link_token);
  alen = link_addr(s->link_token, &a);
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) < 0 || listen(fd, 128) < 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return err_set(DRV_EIO, "a Unix socket for same-host links: %s", strerror(e));
  }
  if (uv_poll_init(s->tcp.loop, &s->link_poll, fd) < 0) {
    close(fd);
    return err_set(DRV_EIO, "cannot poll the same-host link socket");
  }
  s->link_fd = fd;
  s->link_poll.data = s;
  s->open++;
  s->offer = true;
  uv_poll_start(&s->link_poll, UV_READABLE, on_link_listen);
  return 0;
}

static void link_listener_closed(uv_handle_t *h) {
  conn_server *s = h->data;
  close(s->link_fd);
  s->link_fd = -1;
  if (--s->open == 0) free(s);
}

void conn__link_unlisten(conn_server *s) {
  if (s->link_fd < 0 || uv_is_closing((uv_handle_t *)&s->link_poll)) return;
  s->offer = false;
  uv_close((uv_handle_t *)&s->link_poll, link_listener_closed);
}
