/* nodeout.c - the node's stdout and stderr captured for --log-forward
 * (see nodeout.h). The reader thread owns the pipes' read ends and the
 * line buffers; the queue of records is shared with the loop under a
 * mutex. Writers never wait for the coordinator: a full queue drops.
 */
#include "net/nodeout.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"

/* How much finish reads from the pipes once they are no longer ours: a
 * child still writing to an inherited copy must not keep the node alive. */
#define FINISH_MAX (4 * NODEOUT_QUEUE)

struct nodeout {
  uv_loop_t *loop;
  uv_async_t async;
  uv_thread_t thread;
  uv_mutex_t mu;
  nodeout_fn fn;
  void *ud;
  char who[64];
  int rd[2];   /* the pipes' read ends, for descriptors 1 and 2 */
  int orig[2]; /* the original descriptors 1 and 2, kept */
  int wake[2]; /* finish wakes the thread through it */
  FILE *log_out;
  char line[2][NODEOUT_LINE]; /* thread only */
  size_t line_len[2];
  char *q; /* records for the loop (under mu) */
  size_t q_len, q_cap;
  uint64_t dropped; /* bytes dropped (under mu) */
  bool finished;
};

static const char *const stream_name[2] = {"stdout", "stderr"};

static void write_all_fd(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return; /* the original is gone: the copy is best effort */
    p += k;
    n -= (size_t)k;
  }
}

/* ============================== reader thread =========================== */

/* Queues one record for the loop; drops it when the queue is full. */
static void queue_record(nodeout *o, const char *rec, size_t len) {
  uv_mutex_lock(&o->mu);
  if (len > NODEOUT_QUEUE - o->q_len) {
    o->dropped += len;
  } else {
    if (o->q_len + len > o->q_cap) {
      size_t cap = o->q_cap ? o->q_cap : 4096;
      while (cap < o->q_len + len) cap *= 2;
      char *b = realloc(o->q, cap);
      if (b) {
        o->q = b;
        o->q_cap = cap;
      }
    }
    if (o->q_len + len <= o->q_cap) {
      memcpy(o->q + o->q_len, rec, len);
      o->q_len += len;
    } else {
      o->dropped += len;
    }
  }
  uv_mutex_unlock(&o->mu);
  uv_async_send(&o->async);
}

/* The line of stream s so far as a record; the buffer starts again. */
static void emit_line(nodeout *o, int s) {
  size_t n = o->line_len[s];
  o->line_len[s] = 0;
  while (n && o->line[s][n - 1] == '\r') n--;
  char ts[40];
  log_timestamp(ts, sizeof ts);
  char rec[NODEOUT_LINE + 160];
  int k = snprintf(rec, sizeof rec, "%s %s %s %.*s\n", ts, o->who, stream_name[s], (int)n,
                   o->line[s]);
  if (k > 0) queue_record(o, rec, (size_t)k < sizeof rec ? (size_t)k : sizeof rec - 1);
}

/* One read of stream s: copied to the original, cut into lines. Returns
 * the bytes read, 0 at end of file, -1 on an error (EAGAIN included). */
static ssize_t read_once(nodeout *o, int s) {
  char buf[4096];
  ssize_t n;
  do n = read(o->rd[s], buf, sizeof buf);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return n;
  write_all_fd(o->orig[s], buf, (size_t)n);
  for (ssize_t i = 0; i < n; i++) {
    if (buf[i] == '\n') {
      emit_line(o, s);
      continue;
    }
    o->line[s][o->line_len[s]++] = buf[i];
    if (o->line_len[s] == NODEOUT_LINE) emit_line(o, s); /* a long line goes in pieces */
  }
  return n;
}

/* After finish: what is left in the pipes, without waiting, bounded. */
static void read_rest(nodeout *o, const bool open[2]) {
  for (int s = 0; s < 2; s++) {
    if (!open[s]) continue;
    int fl = fcntl(o->rd[s], F_GETFL);
    if (fl >= 0) fcntl(o->rd[s], F_SETFL, fl | O_NONBLOCK);
    size_t got = 0;
    ssize_t n;
    while (got < FINISH_MAX && (n = read_once(o, s)) > 0) got += (size_t)n;
  }
  for (int s = 0; s < 2; s++)
    if (o->line_len[s]) emit_line(o, s); /* a last line without its newline */
}

static void reader(void *arg) {
  nodeout *o = arg;
  bool open[2] = {true, true};
  for (;;) {
    struct pollfd p[3] = {{open[0] ? o->rd[0] : -1, POLLIN, 0},
                          {open[1] ? o->rd[1] : -1, POLLIN, 0},
                          {o->wake[0], POLLIN, 0}};
    int r = poll(p, 3, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    for (int s = 0; s < 2; s++)
      if (p[s].revents && read_once(o, s) <= 0) open[s] = false;
    if (p[2].revents || (!open[0] && !open[1])) break;
  }
  read_rest(o, open);
}

/* ============================== loop side =============================== */

/* Hands what the thread queued to fn, with a record of any drop first. */
static void deliver(nodeout *o) {
  uv_mutex_lock(&o->mu);
  char *q = o->q;
  size_t len = o->q_len;
  uint64_t dropped = o->dropped;
  o->q = NULL;
  o->q_len = o->q_cap = 0;
  o->dropped = 0;
  uv_mutex_unlock(&o->mu);
  if (dropped) {
    char ts[40], rec[256];
    log_timestamp(ts, sizeof ts);
    int k = snprintf(rec, sizeof rec, "%s %s W %llu bytes of this node's stdout and stderr were "
                     "not forwarded (written faster than forwarded)\n", ts, o->who,
                     (unsigned long long)dropped);
    if (k > 0 && (size_t)k < sizeof rec) o->fn(o->ud, rec, (size_t)k);
  }
  if (len) o->fn(o->ud, q, len);
  free(q);
}

static void on_async(uv_async_t *a) { deliver(a->data); }

static nodeout *crash_o; /* for the fatal-signal handler: one node per process */

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void free_fds(nodeout *o) {
  for (int s = 0; s < 2; s++) {
    close_fd(&o->rd[s]);
    close_fd(&o->orig[s]);
    close_fd(&o->wake[s]);
  }
}

static void on_closed(uv_handle_t *h) {
  nodeout *o = h->data;
  uv_mutex_destroy(&o->mu);
  free(o->q);
  if (o->log_out) fclose(o->log_out);
  free_fds(o);
  free(o);
}

int nodeout_start(uv_loop_t *loop, const char *who, nodeout_fn fn, void *ud, nodeout **out,
                  FILE **log_out) {
  nodeout *o = calloc(1, sizeof *o);
  if (!o) return err_set(DRV_ENOMEM, "out of memory");
  o->loop = loop;
  o->fn = fn;
  o->ud = ud;
  snprintf(o->who, sizeof o->who, "%s", who);
  int wr[2] = {-1, -1};
  for (int s = 0; s < 2; s++) o->rd[s] = o->orig[s] = o->wake[s] = -1;
  int rc = 0;
  fflush(stdout);
  fflush(stderr);
  for (int s = 0; s < 2 && rc == 0; s++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0 || (o->orig[s] = fcntl(s + 1, F_DUPFD_CLOEXEC, 3)) < 0) {
      rc = err_set(DRV_EIO, "cannot capture the node's output: %s", strerror(errno));
      break;
    }
    o->rd[s] = p[0];
    wr[s] = p[1];
  }
  if (rc == 0 && pipe2(o->wake, O_CLOEXEC) < 0)
    rc = err_set(DRV_EIO, "cannot capture the node's output: %s", strerror(errno));
  int lfd = rc == 0 ? fcntl(o->orig[1], F_DUPFD_CLOEXEC, 3) : -1;
  if (rc == 0 && (lfd < 0 || !(o->log_out = fdopen(lfd, "w")))) {
    if (lfd >= 0) close(lfd);
    rc = err_set(DRV_EIO, "cannot capture the node's output: %s", strerror(errno));
  }
  if (rc == 0) {
    uv_mutex_init(&o->mu);
    uv_async_init(loop, &o->async, on_async);
    o->async.data = o;
    /* From here on the process writes into the pipes (children too). */
    dup2(wr[0], 1);
    dup2(wr[1], 2);
    setvbuf(stdout, NULL, _IOLBF, 0); /* a print leaves when its line is done */
    if (uv_thread_create(&o->thread, reader, o) != 0) {
      dup2(o->orig[0], 1);
      dup2(o->orig[1], 2);
      for (int s = 0; s < 2; s++) close(wr[s]);
      o->finished = true; /* no thread to join */
      uv_close((uv_handle_t *)&o->async, on_closed); /* frees o; the caller runs the loop */
      return err_set(DRV_EIO, "cannot start the output reader thread");
    }
  }
  for (int s = 0; s < 2; s++)
    if (wr[s] >= 0) close(wr[s]);
  if (rc < 0) {
    if (o->log_out) fclose(o->log_out);
    free_fds(o);
    free(o);
    return rc;
  }
  crash_o = o;
  *out = o;
  *log_out = o->log_out;
  return 0;
}

void nodeout_finish(nodeout *o) {
  if (!o || o->finished) return;
  o->finished = true;
  fflush(stdout);
  fflush(stderr);
  dup2(o->orig[0], 1); /* the process's own write ends of the pipes go */
  dup2(o->orig[1], 2);
  write_all_fd(o->wake[1], "x", 1);
  uv_thread_join(&o->thread);
  crash_o = NULL;
  deliver(o);
}

void nodeout_close(nodeout *o) {
  if (!o) return;
  nodeout_finish(o);
  uv_close((uv_handle_t *)&o->async, on_closed);
}

/* ============================== crashes ================================= */

/* Async-signal-safe: descriptors back, the pipes' content to the
 * originals (not forwarded: the loop is not to be trusted now), then the
 * signal again with its default action. */
static void on_crash(int sig) {
  nodeout *o = crash_o;
  if (o) {
    dup2(o->orig[0], 1);
    dup2(o->orig[1], 2);
    for (int s = 0; s < 2; s++) {
      int fl = fcntl(o->rd[s], F_GETFL);
      if (fl >= 0) fcntl(o->rd[s], F_SETFL, fl | O_NONBLOCK);
      char buf[4096];
      ssize_t n;
      size_t got = 0;
      while (got < FINISH_MAX && (n = read(o->rd[s], buf, sizeof buf)) > 0) {
        write_all_fd(o->orig[s], buf, (size_t)n);
        got += (size_t)n;
      }
    }
  }
  raise(sig); /* SA_RESETHAND: the default action now */
}

void nodeout_crash_guard(nodeout *o) {
  (void)o; /* crash_o already names it */
#ifdef __SANITIZE_ADDRESS__
  return; /* the sanitizer's own handlers report crashes (to the original fd 2 by then) */
#endif
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(sigs[i], &sa, NULL);
  }
}
