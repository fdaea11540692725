/* bench_msgrate.c - the reference for schedule.lua's closures/s: how many
 * small request/reply exchanges per second loopback TCP carries between
 * one coordinator process and 2 forked worker processes, with plain
 * poll()ed blocking sockets and no drover code.
 *
 * The traffic is shaped like drover's no-op closures: a request is a
 * 16-byte header and a CALL's 98-byte payload (task id u64, then the
 * closure as bytes: u32 length + the 86 bytes closure_encode writes for
 * `local function noop() end`), a reply a header and a CALL_RESULT's 20
 * bytes (task id, status i32, an empty value list as bytes). Each worker
 * has WINDOW requests in flight, like CALL_INFLIGHT_PER_WORKER in
 * src/cluster/coord/coord_sched.c; every reply is answered by a new request. Both sides
 * batch the way a straightforward implementation does: read what is
 * available, then one write() carrying the answers to everything read.
 *
 * Prints the best of 3 intervals (schedule.lua also keeps its best of 3):
 *   loopback_msgs_per_sec_2workers N
 * Usage: bench_msgrate [seconds] (default 4). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NWORKERS 2
#define WINDOW 16       /* requests in flight per worker */
#define HDR 16
#define REQ_PAYLOAD 98  /* u64 task + u32 len + 86 closure bytes */
#define REP_PAYLOAD 20  /* u64 task + i32 status + u32 len + 4 value bytes */
#define MAGIC 0x31565244u
#define IDLE_MS 10000   /* any wait longer than this is a failure */
#define BUFSZ (64 << 10)

static pid_t workers[NWORKERS];

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Ends the run: the workers by pid, then this process. err is an errno
 * value or 0. */
static void die(const char *what, int err) {
  fprintf(stderr, "bench_msgrate: %s%s%s\n", what, err ? ": " : "", err ? strerror(err) : "");
  for (int i = 0; i < NWORKERS; i++)
    if (workers[i] > 0) {
      kill(workers[i], SIGKILL);
      waitpid(workers[i], NULL, 0);
    }
  exit(1);
}

static void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put64(uint8_t *p, uint64_t v) {
  put32(p, (uint32_t)v);
  put32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

/* Writes a frame's header and task id at out; the rest is zeroed. */
static void put_head(uint8_t *out, uint8_t type, uint64_t task, uint32_t len) {
  memset(out, 0, HDR + len);
  put32(out, MAGIC);
  out[4] = 1;
  out[5] = type;
  put32(out + 12, len);
  put64(out + HDR, task);
}

/* A request at out: task, then the closure as bytes. Returns its size. */
static size_t put_request(uint8_t *out, uint64_t task) {
  put_head(out, 1, task, REQ_PAYLOAD);
  put32(out + HDR + 8, REQ_PAYLOAD - 12);
  return HDR + REQ_PAYLOAD;
}

/* A reply at out: task, status 0, the (empty) results as bytes. */
static size_t put_reply(uint8_t *out, uint64_t task) {
  put_head(out, 2, task, REP_PAYLOAD);
  put32(out + HDR + 12, REP_PAYLOAD - 16);
  return HDR + REP_PAYLOAD;
}

static void write_all(int s, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(s, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die("write", w < 0 ? errno : 0);
    p += w;
    n -= (size_t)w;
  }
}

/* A connection's input: [0, have) of buf are bytes not yet framed. */
typedef struct inbuf {
  uint8_t buf[BUFSZ];
  size_t have;
} inbuf;

/* Reads what is available (at least one byte: s is readable). Returns 0
 * on EOF. */
static int fill(int s, inbuf *in) {
  ssize_t r = read(s, in->buf + in->have, sizeof in->buf - in->have);
  if (r < 0) die("read", errno);
  in->have += (size_t)r;
  return r > 0;
}

/* The complete frame at *off, if any: its task id, and *off past it. */
static int next_frame(inbuf *in, size_t *off, uint32_t want_len, uint64_t *task) {
  if (in->have - *off < HDR) return 0;
  const uint8_t *h = in->buf + *off;
  uint32_t len = get32(h + 12);
  if (get32(h) != MAGIC || len != want_len) die("a malformed frame", 0);
  if (in->have - *off < HDR + len) return 0;
  *task = get64(h + HDR);
  *off += HDR + len;
  return 1;
}

static void consumed(inbuf *in, size_t off) {
  memmove(in->buf, in->buf + off, in->have - off);
  in->have -= off;
}

/* ================================ worker ================================= */

/* Answers every request until the coordinator closes the connection. */
static void worker(int s) {
  static inbuf in;
  static uint8_t out[BUFSZ / HDR * (HDR + REP_PAYLOAD)];
  struct pollfd p = {.fd = s, .events = POLLIN};
  for (;;) {
    int r = poll(&p, 1, IDLE_MS);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) _exit(2);
    if (!fill(s, &in)) _exit(0);
    size_t off = 0, n = 0;
    uint64_t task;
    while (next_frame(&in, &off, REQ_PAYLOAD, &task)) n += put_reply(out + n, task);
    consumed(&in, off);
    if (n) write_all(s, out, n);
  }
}

/* ============================== coordinator ============================== */

typedef struct peer {
  int s;
  inbuf in;
  uint64_t sent, answered; /* task ids are per peer, 0.. in order */
} peer;

/* Reads pe's replies; answers each with a new request (one write)
 * while `more`. Returns the replies read. */
static long serve(peer *pe, int more) {
  static uint8_t out[BUFSZ / HDR * (HDR + REQ_PAYLOAD)];
  if (!fill(pe->s, &pe->in)) die("a worker closed its connection", 0);
  size_t off = 0, n = 0;
  long got = 0;
  uint64_t task;
  while (next_frame(&pe->in, &off, REP_PAYLOAD, &task)) {
    if (task != pe->answered++) die("a reply out of order", 0);
    got++;
    if (more) n += put_request(out + n, pe->sent++);
  }
  consumed(&pe->in, off);
  if (n) write_all(pe->s, out, n);
  return got;
}

/* No Nagle delay (drover sets TCP_NODELAY too); timeouts bound the
 * blocking reads and writes. */
static void tune(int s) {
  int one = 1;
  struct timeval tv = {IDLE_MS / 1000, 0};
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Forks the workers and connects them to a listener on 127.0.0.1. */
static void start(peer *peers) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, NWORKERS) < 0 ||
      getsockname(ls, (struct sockaddr *)&a, &al) < 0)
    die("listen on 127.0.0.1", errno);
  for (int i = 0; i < NWORKERS; i++) {
    pid_t pid = fork();
    if (pid < 0) die("fork", errno);
    if (pid == 0) {
      close(ls);
      for (int k = 0; k < i; k++) {
        close(peers[k].s);
        workers[k] = 0; /* a failing worker ends itself, not its siblings */
      }
      int s = socket(AF_INET, SOCK_STREAM, 0);
      if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) _exit(3);
      tune(s);
      worker(s);
    }
    workers[i] = pid;
    struct pollfd p = {.fd = ls, .events = POLLIN};
    if (poll(&p, 1, IDLE_MS) != 1 || (peers[i].s = accept(ls, NULL, NULL)) < 0)
      die("accept a worker", errno);
    tune(peers[i].s);
  }
  close(ls);
}

/* Closes the connections (the workers' EOF) and reaps the workers, waiting at
 * most IDLE_MS for each before killing it. */
static void stop(peer *peers) {
  for (int i = 0; i < NWORKERS; i++) close(peers[i].s);
  for (int i = 0; i < NWORKERS; i++) {
    int st = 0;
    double t0 = now();
    pid_t r;
    while ((r = waitpid(workers[i], &st, WNOHANG)) == 0 && now() - t0 < IDLE_MS / 1000.0)
      usleep(1000);
    if (r == 0) {
      kill(workers[i], SIGKILL);
      waitpid(workers[i], &st, 0);
      st = 1;
    }
    workers[i] = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) die("a worker failed", 0);
  }
}

/* Runs the exchange for warm-up + 3 intervals of seconds/3; returns the
 * best interval's replies per second. */
static double measure(peer *peers, double seconds) {
  static uint8_t out[WINDOW * (HDR + REQ_PAYLOAD)];
  for (int i = 0; i < NWORKERS; i++) {
    size_t n = 0;
    while (peers[i].sent < WINDOW) n += put_request(out + n, peers[i].sent++);
    write_all(peers[i].s, out, n);
  }
  struct pollfd p[NWORKERS];
  for (int i = 0; i < NWORKERS; i++) p[i] = (struct pollfd){.fd = peers[i].s, .events = POLLIN};
  double warm = 0.3, mark = now() + warm, best = 0, t_mark = 0;
  long done = 0, at_mark = 0;
  int interval = -1; /* -1: warming up */
  while (interval < 3) {
    int r = poll(p, NWORKERS, IDLE_MS);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) die("waiting for replies", r < 0 ? errno : ETIMEDOUT);
    for (int i = 0; i < NWORKERS; i++)
      if (p[i].revents) done += serve(&peers[i], 1);
    double t = now();
    if (t < mark) continue;
    if (interval >= 0 && (double)(done - at_mark) / (t - t_mark) > best)
      best = (double)(done - at_mark) / (t - t_mark);
    interval++;
    at_mark = done;
    t_mark = t;
    mark = t + seconds / 3;
  }
  /* Drain: every request sent gets its reply. */
  for (int i = 0; i < NWORKERS; i++)
    while (peers[i].answered < peers[i].sent) {
      struct pollfd q = {.fd = peers[i].s, .events = POLLIN};
      if (poll(&q, 1, IDLE_MS) != 1) die("draining replies", ETIMEDOUT);
      serve(&peers[i], 0);
    }
  return best;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 4;
  if (!(seconds > 0)) seconds = 4;
  signal(SIGPIPE, SIG_IGN);
  static peer peers[NWORKERS];
  start(peers);
  double rate = measure(peers, seconds);
  stop(peers);
  printf("loopback_msgs_per_sec_2workers %.0f\n", rate);
  return 0;
}
