/* link_fixture.c - the same-host link tests' fixture and hand-made peer
 * (see link_fixture.h). */
#include "link_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "base/log.h"
#include "harness.h"

/* HELLO: nonce, server kind, host id, link token. */
#define HELLO_LEN (WIRE_NONCE_SIZE + 1 + WIRE_HOST_ID_SIZE + WIRE_LINK_SIZE)
#define AUTH_LEN 70 /* nonce, mac, who, role, index */
#define RAW_WAIT_MS 5000

enum { KIND_FX = 0x4658, KIND_REC = 0x5245 };

/* ---- the fixture --------------------------------------------------------- */

static void watchdog_fired(uv_timer_t *t) {
  harness_fail(__FILE__, __LINE__, "watchdog: %s did not finish in time", (char *)t->data);
}

static void on_ready_cb(conn *c);
static void on_frame_cb(conn *c, const wire_header *h, const uint8_t *p);
static void on_close_cb(conn *c, int err, const char *why);
static const conn_cbs cbs = {on_ready_cb, on_frame_cb, on_close_cb};

void lfx_init(lfx *f, const char *name, uint64_t ms, conn_transport_mode mode) {
  memset(f, 0, sizeof *f);
  f->kind = KIND_FX;
  CHECK_INT_EQ(uv_loop_init(&f->loop), 0);
  uv_timer_init(&f->loop, &f->watchdog);
  uv_timer_init(&f->loop, &f->tick);
  f->watchdog.data = (void *)name;
  uv_timer_start(&f->watchdog, watchdog_fired, ms, 0);
  CHECK_OK(auth_secret_generate(&f->secret));
  f->so.secret = &f->secret;
  f->so.cbs = &cbs;
  f->so.ud = f;
  log_setup(NULL, "test", LOG_ERROR);
  conn_set_transport(mode);
}

void lfx_listen(lfx *f, uint32_t handshake_ms) {
  f->so.handshake_ms = handshake_ms;
  f->so.opaque = !f->typed;
  CHECK_OK(conn_listen(&f->loop, "127.0.0.1", 0, &f->so, &f->srv, &f->port));
  CHECK(f->port > 0);
}

static void rec_init(lfx *f, lrec *r) {
  memset(r, 0, sizeof *r);
  r->kind = KIND_REC;
  r->f = f;
}

void lfx_connect_full(lfx *f, lrec *r, const auth_secret *s, uint32_t handshake_ms, int port) {
  conn_opts o = {.secret = s, .cbs = &cbs, .ud = r, .opaque = !f->typed,
                 .handshake_ms = handshake_ms};
  rec_init(f, r);
  CHECK_OK(conn_connect(&f->loop, "127.0.0.1", port, &o, &r->c));
}

void lfx_connect_with(lfx *f, lrec *r, const auth_secret *s) {
  lfx_connect_full(f, r, s, 0, f->port);
}

void lfx_connect(lfx *f, lrec *r) { lfx_connect_with(f, r, &f->secret); }

void lfx_connect_own(lfx *f, lrec *r, conn_transport_mode mode) {
  conn_opts o = {.secret = &f->secret, .cbs = &cbs, .ud = r, .opaque = !f->typed,
                 .own_transport = true, .transport = (int)mode};
  rec_init(f, r);
  CHECK_OK(conn_connect(&f->loop, "127.0.0.1", f->port, &o, &r->c));
}

void lfx_finish(lfx *f, lrec *clients, int n) {
  for (int i = 0; i < n; i++)
    if (!clients[i].closed) conn_close(clients[i].c, "test over");
  for (int i = 0; i < f->nsrv; i++)
    if (!f->srv_recs[i].closed) conn_close(f->srv_recs[i].c, "test over");
  if (f->srv) conn_server_close(f->srv);
  uv_close((uv_handle_t *)&f->watchdog, NULL);
  uv_close((uv_handle_t *)&f->tick, NULL);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  CHECK_INT_EQ(uv_loop_close(&f->loop), 0);
  for (int i = 0; i < n; i++) free(clients[i].last);
  for (int i = 0; i < f->nsrv; i++) free(f->srv_recs[i].last);
}

static void tick_cb(uv_timer_t *t) { (void)t; }

void lfx_ticking(lfx *f, bool on) {
  if (on)
    uv_timer_start(&f->tick, tick_cb, 5, 5);
  else
    uv_timer_stop(&f->tick);
}

void lfx_run_for(lfx *f, uint64_t ms) {
  uv_update_time(&f->loop);
  uint64_t end = uv_now(&f->loop) + ms;
  lfx_ticking(f, true);
  while (uv_now(&f->loop) < end) uv_run(&f->loop, UV_RUN_ONCE);
  lfx_ticking(f, false);
}

/* ---- callbacks ----------------------------------------------------------- */

static lfx *pending_fx(conn *c) {
  int *kind = conn_ud(c);
  CHECK(*kind == KIND_FX || *kind == KIND_REC);
  return *kind == KIND_FX ? (lfx *)kind : NULL;
}

static void on_ready_cb(conn *c) {
  lfx *f = pending_fx(c);
  lrec *r;
  if (f) {
    CHECK(f->nsrv < 16);
    r = &f->srv_recs[f->nsrv++];
    rec_init(f, r);
    r->server = true;
    r->c = c;
    conn_set_ud(c, r);
    r->ready++;
    if (f->srv_ready) f->srv_ready(r);
    return;
  }
  r = conn_ud(c);
  r->ready++;
  CHECK(conn_is_ready(c));
  if (r->f->cli_ready) r->f->cli_ready(r);
}

void lfx_record(lrec *r, const wire_header *h, const uint8_t *p) {
  free(r->last);
  r->last = malloc(h->len ? h->len : 1);
  CHECK(r->last);
  memcpy(r->last, p, h->len);
  r->last_len = h->len;
  r->last_type = h->type;
  r->last_req = h->req;
}

void lfx_echo(lrec *r, const wire_header *h, const uint8_t *p) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_raw(&w, p, h->len);
  CHECK_OK(conn_send_wr(r->c, &w, h->type, h->req));
}

static void on_frame_cb(conn *c, const wire_header *h, const uint8_t *p) {
  lrec *r = conn_ud(c);
  CHECK(r->kind == KIND_REC);
  r->frames++;
  if (r->server)
    (r->f->srv_frame ? r->f->srv_frame : lfx_echo)(r, h, p);
  else
    (r->f->cli_frame ? r->f->cli_frame : lfx_record)(r, h, p);
}

static void log_close(lfx *f, int err, const char *why) {
  if (err == 0 && strstr(why, "moved to a same-host link")) {
    f->moved++;
    return;
  }
  CHECK(f->ncloses < LFX_MAX_CLOSES);
  f->closes[f->ncloses].err = err;
  snprintf(f->closes[f->ncloses++].why, sizeof f->closes[0].why, "%s", why);
}

static void on_close_cb(conn *c, int err, const char *why) {
  lfx *f = pending_fx(c);
  lrec *r = conn_ud(c);
  CHECK(why != NULL);
  if (f) { /* a server conn that never became ready */
    log_close(f, err, why);
    return;
  }
  if (r->closed) harness_fail(__FILE__, __LINE__, "on_close called twice (%s)", why);
  r->closed++;
  r->err = err;
  snprintf(r->why, sizeof r->why, "%s", why);
  if (r->server) log_close(r->f, err, why);
  else if (r->f->cli_closed) r->f->cli_closed(r);
}

/* ---- helpers ------------------------------------------------------------- */

void lfx_send_push(conn *c, const void *p, size_t n, uint32_t req) {
  wire_wr w;
  wire_wr_init(&w);
  wire_wr_raw(&w, p, n);
  CHECK_OK(conn_send_wr(c, &w, WIRE_PUSH, req));
}

void lfx_fill(uint8_t *p, size_t n, uint64_t seed) {
  uint64_t s = seed * 2654435761u + 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    memcpy(p + i, &s, 8);
  }
  for (; i < n; i++) s ^= s << 13, s ^= s >> 7, s ^= s << 17, p[i] = (uint8_t)s;
}

const char *lfx_close_with(const lfx *f, const char *needle, int *err) {
  for (int i = f->ncloses - 1; i >= 0; i--)
    if (strstr(f->closes[i].why, needle)) {
      if (err) *err = f->closes[i].err;
      return f->closes[i].why;
    }
  return NULL;
}

int lfx_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  CHECK(d);
  while (readdir(d)) n++;
  closedir(d);
  return n - 3; /* ".", ".." and the directory's own */
}

/* ---- the offer, seen raw ------------------------------------------------- */

static int tcp_connect(int port) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  CHECK_INT_EQ(uv_ip4_addr("127.0.0.1", port, &a), 0);
  CHECK_INT_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  return fd;
}

void lfx_offer(lfx *f, uint8_t host[WIRE_HOST_ID_SIZE], uint8_t token[WIRE_LINK_SIZE]) {
  uint8_t hello[WIRE_HEADER_SIZE + HELLO_LEN];
  size_t got = 0;
  wire_header h;
  int fd = tcp_connect(f->port), before = f->moved;
  /* The server accepts on this loop: turn it while reading. */
  while (got < sizeof hello) {
    ssize_t k = recv(fd, hello + got, sizeof hello - got, MSG_DONTWAIT);
    if (k == 0) harness_fail(__FILE__, __LINE__, "the server closed before its HELLO");
    if (k > 0) got += (size_t)k;
    if (got < sizeof hello) uv_run(&f->loop, UV_RUN_NOWAIT), usleep(1000);
  }
  CHECK_OK(wire_header_decode(hello, WIRE_DEFAULT_MAX_FRAME, false, &h));
  CHECK_INT_EQ(h.type, WIRE_HELLO);
  CHECK_INT_EQ(h.len, HELLO_LEN);
  memcpy(host, hello + WIRE_HEADER_SIZE + WIRE_NONCE_SIZE + 1, WIRE_HOST_ID_SIZE);
  memcpy(token, hello + WIRE_HEADER_SIZE + WIRE_NONCE_SIZE + 1 + WIRE_HOST_ID_SIZE,
         WIRE_LINK_SIZE);
  close(fd);
  /* That conn's close is this helper's, not the case's (the server takes
   * an EOF after its offer for a client that moved). */
  LFX_RUN_UNTIL(f, f->moved == before + 1);
  f->moved--;
}

/* ---- children ------------------------------------------------------------ */

pid_t lfx_spawn(void (*fn)(void *arg), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close_range(3, ~0u, 0);
    alarm(30);
    fn(arg);
    _exit(0);
  }
  return pid;
}

int lfx_reap(lfx *f, pid_t pid) {
  int status = 0;
  lfx_ticking(f, true);
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    CHECK(r >= 0);
    if (r == pid) break;
    uv_run(&f->loop, UV_RUN_ONCE);
  }
  lfx_ticking(f, false);
  return status;
}

/* ---- the hand-made peer --------------------------------------------------- */

int rawlink_dial(const uint8_t token[WIRE_LINK_SIZE]) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  struct timeval tv = {RAW_WAIT_MS / 1000, 0};
  char hex[2 * WIRE_LINK_SIZE + 1];
  sodium_bin2hex(hex, sizeof hex, token, WIRE_LINK_SIZE);
  int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "drover-%s", hex);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CHECK(fd >= 0);
  CHECK_INT_EQ(connect(fd, (struct sockaddr *)&a,
                       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)),
               0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void rawlink_send_setup(int sock, const char magic[8], uint32_t mode, uint64_t ring,
                        const int *fds, int nfds) {
  uint8_t msg[24] = {0};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(8 * sizeof(int))];
  } ctl;
  struct iovec iov = {msg, sizeof msg};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
  memcpy(msg, magic, 8);
  for (int i = 0; i < 4; i++) msg[8 + i] = (uint8_t)(mode >> (8 * i));
  for (int i = 0; i < 8; i++) msg[16 + i] = (uint8_t)(ring >> (8 * i));
  CHECK(nfds >= 0 && nfds <= 8);
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
  CHECK_INT_EQ(sendmsg(sock, &mh, MSG_NOSIGNAL), sizeof msg);
}

void rawlink_open(rawlink *L, const uint8_t token[WIRE_LINK_SIZE], uint64_t ring) {
  int memfd, fds[3];
  memset(L, 0, sizeof *L);
  L->sock = rawlink_dial(token);
  CHECK_OK(shm_region_create(ring, &memfd));
  L->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  L->peer_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  CHECK(L->efd >= 0 && L->peer_efd >= 0);
  CHECK_OK(shm_region_map(memfd, ring, &L->base, &L->len));
  shm_ring_attach(&L->out, L->base, ring, 0, true);
  shm_ring_attach(&L->in, L->base, ring, 1, false);
  fds[0] = memfd, fds[1] = L->efd, fds[2] = L->peer_efd;
  rawlink_send_setup(L->sock, "DRVLINK1", 1, ring, fds, 3);
  close(memfd); /* the mapping keeps the region */
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void wake(int efd) {
  uint64_t one = 1;
  CHECK(write(efd, &one, sizeof one) == sizeof one || errno == EAGAIN);
}

/* Sleeps until the server wakes us (or 20 ms: a missed wake-up only slows
 * the peer down); fails the case after RAW_WAIT_MS in all. */
static void wait_wake(int efd, uint64_t t0, const char *what) {
  struct pollfd p = {.fd = efd, .events = POLLIN};
  uint64_t v;
  if (now_ms() - t0 > RAW_WAIT_MS) harness_fail(__FILE__, __LINE__, "raw peer: %s stuck", what);
  if (poll(&p, 1, 20) > 0 && read(efd, &v, sizeof v) < 0) CHECK(errno == EAGAIN);
}

void rawlink_write(rawlink *L, const void *p, size_t n) {
  uint64_t t0 = now_ms();
  while (n) {
    ssize_t k = shm_ring_write(&L->out, p, n);
    CHECK_OK(k);
    p = (const uint8_t *)p + k;
    n -= (size_t)k;
    if (k) wake(L->peer_efd);
    if (n && !k && shm_ring_writer_sleep(&L->out)) wait_wake(L->efd, t0, "writing");
  }
}

void rawlink_read(rawlink *L, void *p, size_t n) {
  uint64_t t0 = now_ms();
  while (n) {
    ssize_t k = shm_ring_read(&L->in, p, n);
    CHECK_OK(k);
    p = (uint8_t *)p + k;
    n -= (size_t)k;
    if (k && shm_ring_wake_writer(&L->in)) wake(L->peer_efd);
    if (n && !k && shm_ring_reader_sleep(&L->in)) wait_wake(L->efd, t0, "reading");
  }
}

void rawlink_handshake(rawlink *L, const auth_secret *s) {
  static const uint8_t zero[WIRE_HOST_ID_SIZE + WIRE_LINK_SIZE];
  uint8_t in[WIRE_HEADER_SIZE + HELLO_LEN], out[WIRE_HEADER_SIZE + AUTH_LEN] = {0};
  uint8_t nc[AUTH_NONCE_SIZE], mac[AUTH_MAC_SIZE];
  wire_header h = {.type = WIRE_AUTH, .len = AUTH_LEN};
  rawlink_read(L, in, sizeof in);
  CHECK_OK(wire_header_decode(in, WIRE_DEFAULT_MAX_FRAME, false, &h));
  CHECK_INT_EQ(h.type, WIRE_HELLO);
  /* Over the link, nothing more is offered. */
  CHECK(memcmp(in + WIRE_HEADER_SIZE + WIRE_NONCE_SIZE + 1, zero, sizeof zero) == 0);
  auth_nonce(nc);
  auth_client_mac(s, in + WIRE_HEADER_SIZE, nc, mac);
  h = (wire_header){.type = WIRE_AUTH, .len = AUTH_LEN};
  wire_header_encode(&h, out);
  memcpy(out + WIRE_HEADER_SIZE, nc, sizeof nc);
  memcpy(out + WIRE_HEADER_SIZE + sizeof nc, mac, sizeof mac);
  rawlink_write(L, out, sizeof out);
  rawlink_read(L, out, WIRE_HEADER_SIZE + AUTH_MAC_SIZE);
  CHECK_OK(wire_header_decode(out, WIRE_DEFAULT_MAX_FRAME, false, &h));
  CHECK_INT_EQ(h.type, WIRE_AUTH_OK);
  auth_server_mac(s, nc, in + WIRE_HEADER_SIZE, mac);
  CHECK(auth_mac_equal(out + WIRE_HEADER_SIZE, mac));
}

bool rawlink_closed_by_server(int sock) {
  char b[64];
  uint64_t t0 = now_ms();
  while (now_ms() - t0 < RAW_WAIT_MS) {
    ssize_t k = recv(sock, b, sizeof b, 0);
    if (k == 0 || (k < 0 && errno == ECONNRESET)) return true;
    if (k < 0 && errno != EINTR && errno != EAGAIN) return false;
  }
  return false;
}
