/* test_conn_link_peer.c - a conn server's same-host links against peers
 * made by hand in forked children (link_fixture.h's rawlink): a peer that
 * dies mid-frame or right after a whole one, one that never reads while
 * the server shuts down, hostile peers that write garbage or impossible
 * indices into their rings, and set-up messages the server must refuse.
 * Each misbehaving peer loses its own link with a reason naming it ("local
 * pid N"), no descriptor it passed is left open, and the server goes on
 * serving a good client over shared memory.
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "link_fixture.h"

#define RING (256u << 10)

/* What a child needs: the offered socket, the secret, which case. */
typedef struct peer_arg {
  uint8_t token[WIRE_LINK_SIZE];
  const auth_secret *secret;
  int which;
} peer_arg;

static void fx_start(lfx *f, peer_arg *a, const char *name, uint32_t handshake_ms,
                     uint32_t shutdown_ms) {
  uint8_t host[WIRE_HOST_ID_SIZE];
  lfx_init(f, name, 30000, CONN_TRANSPORT_AUTO);
  f->so.shutdown_ms = shutdown_ms;
  lfx_listen(f, handshake_ms);
  lfx_offer(f, host, a->token);
  a->secret = &f->secret;
}

/* Runs a child to its end; it must exit 0 (its own checks passed). */
static pid_t run_child(lfx *f, void (*fn)(void *), peer_arg *a) {
  pid_t pid = lfx_spawn(fn, a);
  int status = lfx_reap(f, pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    harness_fail(__FILE__, __LINE__, "peer %d (case %d) ended with status 0x%x", (int)pid,
                 a->which, status);
  return pid;
}

/* The server's last close came from this child's link, with `reason`. */
static void check_closed(lfx *f, int before, pid_t pid, const char *reason, bool error) {
  char who[64];
  snprintf(who, sizeof who, "local pid %d", (int)pid);
  LFX_RUN_UNTIL(f, f->ncloses == before + 1);
  if (!strstr(f->closes[before].why, reason) || !strstr(f->closes[before].why, who) ||
      (error ? f->closes[before].err >= 0 : f->closes[before].err != 0))
    harness_fail(__FILE__, __LINE__, "\"%s\" (err %d), wanted \"%s\" from %s", 
                 f->closes[before].why, f->closes[before].err, reason, who);
}

static void push_on_ready(lrec *r) { lfx_send_push(r->c, "still here, ps", 14, 77); }

/* A good client after all that: served, over shared memory. */
static void check_still_serving(lfx *f, lrec *good) {
  f->cli_ready = push_on_ready;
  lfx_connect(f, good);
  LFX_RUN_UNTIL(f, good->last_len > 0);
  CHECK_INT_EQ(good->last_req, 77);
  CHECK(memcmp(good->last, "still here, ps", 14) == 0);
  CHECK_STR_CONTAINS(conn_transport(good->c), "shm");
}

static void put_header(uint8_t *out, uint8_t type, uint32_t len) {
  wire_header h = {.type = type, .len = len};
  wire_header_encode(&h, out);
}

/* ---- peers that go away -------------------------------------------------- */

/* Half of a 1 MiB PUSH, then gone without a word. */
static void dies_mid_frame(void *arg) {
  peer_arg *a = arg;
  rawlink L;
  static uint8_t half[WIRE_HEADER_SIZE + 100000];
  rawlink_open(&L, a->token, RING);
  rawlink_handshake(&L, a->secret);
  lfx_fill(half, sizeof half, 5);
  put_header(half, WIRE_PUSH, 1u << 20);
  rawlink_write(&L, half, sizeof half);
  _exit(0);
}

TEST(link_peer_dies_mid_frame) {
  lfx f;
  lrec good;
  peer_arg a = {0};
  fx_start(&f, &a, "dies mid-frame", 0, 0);
  pid_t pid = run_child(&f, dies_mid_frame, &a);
  check_closed(&f, 0, pid, "closed by", false);
  CHECK_INT_EQ(f.nsrv, 1);
  CHECK_INT_EQ(f.srv_recs[0].frames, 0); /* half a frame is no frame */
  check_still_serving(&f, &good);
  lfx_finish(&f, &good, 1);
}

/* A whole frame into the ring, no wake-up, and gone: the socket's end is
 * all the server hears, and the frame must still arrive (on TCP, bytes
 * sent before the FIN do). */
#define LAST_WORDS 5000
static void frame_then_exit(void *arg) {
  peer_arg *a = arg;
  rawlink L;
  static uint8_t frame[WIRE_HEADER_SIZE + LAST_WORDS];
  rawlink_open(&L, a->token, RING);
  rawlink_handshake(&L, a->secret);
  lfx_fill(frame + WIRE_HEADER_SIZE, LAST_WORDS, 6);
  put_header(frame, WIRE_PUSH, LAST_WORDS);
  CHECK_INT_EQ(shm_ring_write(&L.out, frame, sizeof frame), sizeof frame);
  _exit(0);
}

TEST(link_frame_written_before_the_peer_exits_arrives) {
  lfx f;
  lrec good;
  peer_arg a = {0};
  uint8_t want[LAST_WORDS];
  fx_start(&f, &a, "frame then exit", 0, 0);
  f.srv_frame = lfx_record;
  pid_t pid = run_child(&f, frame_then_exit, &a);
  check_closed(&f, 0, pid, "closed by", false);
  CHECK_INT_EQ(f.srv_recs[0].frames, 1);
  CHECK_INT_EQ(f.srv_recs[0].last_len, LAST_WORDS);
  lfx_fill(want, LAST_WORDS, 6);
  CHECK(memcmp(f.srv_recs[0].last, want, LAST_WORDS) == 0);
  f.srv_frame = NULL;
  check_still_serving(&f, &good);
  lfx_finish(&f, &good, 1);
}

/* Authenticates, then never reads: the server's shutdown cannot flush. */
static void never_reads(void *arg) {
  peer_arg *a = arg;
  rawlink L;
  rawlink_open(&L, a->token, 64u << 10);
  rawlink_handshake(&L, a->secret);
  CHECK(rawlink_closed_by_server(L.sock));
}

static uint8_t one_mib[1u << 20];
static uint64_t shut_t0;

static void ref_done(void *arg) { ((lrec *)arg)->n1++; }

static void flood_then_shut(lrec *r) {
  for (int i = 0; i < 32; i++)
    CHECK_OK(conn_send_ref(r->c, WIRE_PUSH, (uint32_t)i, one_mib, sizeof one_mib, ref_done, r));
  shut_t0 = uv_now(&r->f->loop);
  conn_shutdown(r->c, "flooded");
  CHECK_ERR(conn_send_ref(r->c, WIRE_PUSH, 99, one_mib, 16, ref_done, r), DRV_EIO, "closing");
}

TEST(link_shutdown_times_out_on_a_peer_that_does_not_read) {
  lfx f;
  lrec good;
  peer_arg a = {0};
  fx_start(&f, &a, "shutdown timeout", 0, 300);
  f.srv_ready = flood_then_shut;
  pid_t pid = run_child(&f, never_reads, &a);
  check_closed(&f, 0, pid, "bytes unsent after 300 ms (the peer does not read)", true);
  CHECK(uv_now(&f.loop) - shut_t0 >= 290);
  /* 32 queued and one refused: each `done` ran once, all before on_close */
  CHECK_INT_EQ(f.srv_recs[0].n1, 33);
  f.srv_ready = NULL;
  check_still_serving(&f, &good);
  lfx_finish(&f, &good, 1);
}

/* ---- hostile ring writers -------------------------------------------------- */

enum { R_GARBAGE, R_HEADER, R_HEAD_PAST, R_HEAD_BACK, R_TAIL_PAST, R_SOCKET_BYTE };
static const struct ring_case {
  bool handshake;
  int what;
  uint8_t type;
  uint32_t len;
  const char *reason;
} ring_cases[] = {
    {false, R_GARBAGE, 0, 0, "bad magic"},
    {true, R_GARBAGE, 0, 0, "bad magic"},
    {false, R_HEADER, WIRE_PUSH, 12, "frame type PUSH before authentication"},
    {true, R_HEADER, WIRE_PUSH, 1u << 30, "frame of 1073741824 bytes exceeds"},
    {true, R_HEADER, WIRE_AUTH, 70, "unexpected AUTH frame from local pid"},
    {true, R_HEADER, 0x7f, 4, "unknown frame type 0x7f"},
    {false, R_HEAD_PAST, 0, 0, "shared-memory ring corrupted"},
    {true, R_HEAD_BACK, 0, 0, "shared-memory ring corrupted"},
    {true, R_TAIL_PAST, 0, 0, "shared-memory ring corrupted"},
    {true, R_SOCKET_BYTE, 0, 0, "unexpected bytes on the same-host link's socket"},
};
#define NRING (int)(sizeof ring_cases / sizeof ring_cases[0])

/* The consumer's index the server publishes in ring 1 is its own: moved
 * past its head, the server's next write finds the ring impossible. */
static void corrupt_and_push(rawlink *L, const struct ring_case *k) {
  uint8_t buf[256];
  if (k->what == R_HEAD_PAST)
    atomic_store(&L->out.h->head, L->out.pos + RING + 1);
  else if (k->what == R_HEAD_BACK)
    atomic_store(&L->out.h->head, 0); /* behind what the server has read */
  if (k->what != R_TAIL_PAST) {
    uint64_t one = 1;
    CHECK(write(L->peer_efd, &one, sizeof one) == sizeof one);
    return;
  }
  atomic_store(&L->in.h->tail, atomic_load(&L->in.h->head) + 1);
  lfx_fill(buf, 64, 3);
  put_header(buf, WIRE_PUSH, 48); /* echoed: the server writes */
  rawlink_write(L, buf, 64);
}

static void hostile_ring(void *arg) {
  peer_arg *a = arg;
  const struct ring_case *k = &ring_cases[a->which];
  rawlink L;
  uint8_t buf[256];
  rawlink_open(&L, a->token, RING);
  if (k->handshake) rawlink_handshake(&L, a->secret);
  lfx_fill(buf, sizeof buf, (uint64_t)a->which);
  if (k->what == R_GARBAGE) {
    buf[0] = 'X'; /* never the magic */
    rawlink_write(&L, buf, sizeof buf);
  } else if (k->what == R_HEADER) {
    put_header(buf, k->type, k->len);
    rawlink_write(&L, buf, WIRE_HEADER_SIZE + (k->len < 128 ? k->len : 128));
  } else if (k->what == R_SOCKET_BYTE) {
    CHECK_INT_EQ(send(L.sock, "x", 1, MSG_NOSIGNAL), 1);
  } else {
    corrupt_and_push(&L, k);
  }
  CHECK(rawlink_closed_by_server(L.sock));
}

TEST(link_hostile_ring_writers_close_only_themselves) {
  lfx f;
  lrec good;
  peer_arg a = {0};
  int ready = 0;
  fx_start(&f, &a, "hostile rings", 0, 0);
  int fds = lfx_open_fds();
  for (int i = 0; i < NRING; i++) {
    a.which = i;
    pid_t pid = run_child(&f, hostile_ring, &a);
    check_closed(&f, i, pid, ring_cases[i].reason, true);
    ready += ring_cases[i].handshake;
  }
  CHECK_INT_EQ(f.nsrv, ready); /* those that authenticated were ready before */
  CHECK_INT_EQ(lfx_open_fds(), fds);
  check_still_serving(&f, &good);
  lfx_finish(&f, &good, 1);
}

/* ---- set-up messages the server refuses ------------------------------------ */

enum {
  S_MAGIC, S_UNSEALED, S_WRONG_SIZE, S_ODD_RING, S_WRITE_SEALED, S_PIPE, S_UNIX_WITH_FDS,
  S_SHM_NO_FDS, S_SHM_FOUR_FDS, S_MODE_7, S_NOTHING, S_SILENT
};
static const struct setup_case {
  int what;
  const char *reason;
} setup_cases[] = {
    {S_MAGIC, "a malformed link set-up (24 bytes)"},
    {S_UNSEALED, "not a memfd sealed against resizing"},
    {S_WRONG_SIZE, "the shared-memory region is not of"},
    {S_ODD_RING, "ring size 100000 refused"},
    {S_WRITE_SEALED, "mmap of"},
    {S_PIPE, "wake-ups are not eventfds"},
    {S_UNIX_WITH_FDS, "a link set-up of mode 2 with 3 descriptors"},
    {S_SHM_NO_FDS, "a link set-up of mode 1 with 0 descriptors"},
    {S_SHM_FOUR_FDS, "a link set-up of mode 1 with 4 descriptors"},
    {S_MODE_7, "a link set-up of mode 7 with 3 descriptors"},
    {S_NOTHING, "a malformed link set-up (0 bytes)"},
    {S_SILENT, "timed out after 1000 ms"},
};
#define NSETUP (int)(sizeof setup_cases / sizeof setup_cases[0])

/* A memfd of two rings of `ring` bytes with the given seals (by hand:
 * shm_region_create seals it right). */
static int memfd_sealed(uint64_t ring, int seals) {
  int fd = memfd_create("test-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  CHECK(fd >= 0);
  CHECK_INT_EQ(ftruncate(fd, (off_t)shm_region_bytes(ring)), 0);
  if (seals) CHECK_INT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
  return fd;
}

static void bad_setup(void *arg) {
  peer_arg *a = arg;
  int what = setup_cases[a->which].what, sock = rawlink_dial(a->token), p[2];
  int fds[4] = {-1, eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC), eventfd(0, EFD_CLOEXEC)};
  uint64_t ring = what == S_ODD_RING ? 100000 : RING;
  uint32_t mode = what == S_UNIX_WITH_FDS ? 2 : what == S_MODE_7 ? 7 : 1;
  int nfds = what == S_SHM_NO_FDS ? 0 : what == S_SHM_FOUR_FDS ? 4 : 3;
  CHECK(fds[1] >= 0 && fds[2] >= 0 && fds[3] >= 0);
  if (what == S_UNSEALED)
    fds[0] = memfd_sealed(RING, 0);
  else if (what == S_WRITE_SEALED)
    fds[0] = memfd_sealed(RING, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
  else
    CHECK_OK(shm_region_create(what == S_WRONG_SIZE ? 2 * RING : RING, &fds[0]));
  if (what == S_PIPE) {
    CHECK_INT_EQ(pipe(p), 0);
    fds[2] = p[0];
  }
  if (what == S_NOTHING)
    shutdown(sock, SHUT_WR);
  else if (what != S_SILENT)
    rawlink_send_setup(sock, what == S_MAGIC ? "DRVLINK9" : "DRVLINK1", mode, ring, fds, nfds);
  CHECK(rawlink_closed_by_server(sock));
}

TEST(link_bad_setups_refused_one_by_one) {
  lfx f;
  lrec good;
  peer_arg a = {0};
  fx_start(&f, &a, "bad set-ups", 1000, 0);
  int fds = lfx_open_fds();
  for (int i = 0; i < NSETUP; i++) {
    a.which = i;
    pid_t pid = run_child(&f, bad_setup, &a);
    check_closed(&f, i, pid, setup_cases[i].reason, true);
    if (setup_cases[i].what != S_SILENT)
      CHECK_STR_CONTAINS(f.closes[i].why, "same-host link from local pid");
  }
  CHECK_INT_EQ(f.nsrv, 0);
  /* every descriptor the refused set-ups passed was closed */
  CHECK_INT_EQ(lfx_open_fds(), fds);
  check_still_serving(&f, &good);
  lfx_finish(&f, &good, 1);
}
