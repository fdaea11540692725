/* events.c - TensorBoard event files (tfevents): CRC-32C, TFRecord framing,
 * the few protobuf fields of Event and Summary that scalars need, a
 * buffered writer, and a run's summaries (the coordinator's and the
 * chief's, with failures logged rather than stopping training).
 *
 * The protobuf is encoded by hand: a scalar event is a fixed shape
 * (wall_time, step, one tagged float), so a generic encoder would buy
 * nothing. Field numbers are those of tensorboard/compat/proto/event.proto
 * and summary.proto (the same as TensorFlow's); see events.h.
 */
#include "run/events.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/log.h"
#include "base/le.h"
#include "base/rundir.h"
#include "base/util.h"
#include "proto/wire_msgs.h"

#define FILE_VERSION "brain.Event:2"
#define MAX_TAG 256             /* bytes; TensorBoard's own tags are short */
#define FLUSH_EVERY 1.0         /* seconds between writes of the buffer */
#define FLUSH_BYTES (64 * 1024) /* ... unless this much is queued */
#define MAX_RECORD (MAX_TAG + 64)

struct events_writer {
  int fd;
  char path[1200];
  uint8_t *buf; /* queued records */
  size_t len, cap;
  double last_flush; /* monotonic seconds */
  int err;           /* sticky: 0 or the code of the failed write */
  char errmsg[1300];
};

/* ============================== CRC-32C ================================== */

/* Castagnoli polynomial, reflected; the table is built once, on first use. */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    crc_table[i] = c;
  }
}

uint32_t events_crc32c(const void *p, size_t n) {
  pthread_once(&crc_once, crc_init);
  const uint8_t *b = p;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) c = crc_table[(c ^ b[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

/* TFRecord masks its CRCs so that a CRC of data that itself embeds CRCs
 * is not degenerate. */
uint32_t events_masked_crc32c(const void *p, size_t n) {
  uint32_t c = events_crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ============================== encoding ================================= */

/* A protobuf fixed32/fixed64: its bytes, returning their count. */
static size_t put_fixed(uint8_t *o, uint64_t v, int bytes) {
  le_put(o, v, bytes);
  return (size_t)bytes;
}

static size_t put_varint(uint8_t *o, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    o[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  o[n++] = (uint8_t)v;
  return n;
}

/* Protobuf key: field number and wire type (0 varint, 1 fixed64,
 * 2 length-delimited, 5 fixed32). */
static size_t put_key(uint8_t *o, int field, int type) {
  return put_varint(o, (uint64_t)(field << 3 | type));
}

static size_t put_double(uint8_t *o, int field, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  size_t n = put_key(o, field, 1);
  return n + put_fixed(o + n, bits, 8);
}

static size_t put_bytes(uint8_t *o, int field, const void *p, size_t len) {
  size_t n = put_key(o, field, 2);
  n += put_varint(o + n, len);
  memcpy(o + n, p, len);
  return n + len;
}

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

/* Event{wall_time, step, summary{value{tag, simple_value}}} into o
 * (MAX_RECORD bytes is enough for a tag of MAX_TAG). */
static size_t encode_scalar(uint8_t *o, double wall_time, int64_t step, const char *tag,
                            size_t tag_len, float value) {
  size_t value_len = 1 + varint_len(tag_len) + tag_len + 1 + 4;
  size_t summary_len = 1 + varint_len(value_len) + value_len;
  size_t n = put_double(o, 1, wall_time);
  n += put_key(o + n, 2, 0);
  n += put_varint(o + n, (uint64_t)step); /* int64: negatives take 10 bytes */
  n += put_key(o + n, 5, 2);
  n += put_varint(o + n, summary_len);
  n += put_key(o + n, 1, 2); /* Summary.value */
  n += put_varint(o + n, value_len);
  n += put_bytes(o + n, 1, tag, tag_len); /* Value.tag */
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  n += put_key(o + n, 2, 5); /* Value.simple_value */
  return n + put_fixed(o + n, bits, 4);
}

/* ============================== the writer =============================== */

double events_wall_time(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Returns the sticky error again, with its message. */
static int failed(const events_writer *w) { return err_set(w->err, "%s", w->errmsg); }

/* Appends one framed record around `data`. */
static int append_record(events_writer *w, const uint8_t *data, size_t len) {
  size_t need = w->len + 8 + 4 + len + 4;
  if (util_grow(&w->buf, &w->cap, need, 1, 4096) < 0)
    return err_set(DRV_ENOMEM, "out of memory queueing a summary for '%s'", w->path);
  uint8_t *o = w->buf + w->len;
  le_put(o, len, 8);
  le_put(o + 8, events_masked_crc32c(o, 8), 4);
  memcpy(o + 12, data, len);
  le_put(o + 12 + len, events_masked_crc32c(data, len), 4);
  w->len = need;
  return 0;
}

int events_flush(events_writer *w) {
  if (w->err) return failed(w);
  size_t off = 0;
  while (off < w->len) {
    ssize_t k = write(w->fd, w->buf + off, w->len - off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      snprintf(w->errmsg, sizeof w->errmsg, "cannot write '%s': %s", w->path,
               k < 0 ? strerror(errno) : "nothing written");
      w->err = DRV_EIO;
      return failed(w);
    }
    off += (size_t)k;
  }
  w->len = 0;
  w->last_flush = mono_now();
  return 0;
}

static int writer_start(int fd, const char *path, events_writer **out) {
  events_writer *w = calloc(1, sizeof *w);
  if (!w) {
    close(fd);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  w->fd = fd;
  snprintf(w->path, sizeof w->path, "%s", path);
  uint8_t rec[64];
  double now = events_wall_time();
  size_t n = put_double(rec, 1, now);
  n += put_bytes(rec + n, 3, FILE_VERSION, strlen(FILE_VERSION));
  int rc = append_record(w, rec, n);
  if (rc == 0) rc = events_flush(w); /* a file TensorBoard accepts from the start */
  if (rc < 0) {
    char msg[1400];
    snprintf(msg, sizeof msg, "%s", err_msg());
    events_close(w);
    return err_set(rc, "%s", msg);
  }
  *out = w;
  return 0;
}

int events_open_file(const char *path, events_writer **out) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return err_set(DRV_EIO, "cannot create '%s': %s", path, strerror(errno));
  return writer_start(fd, path, out);
}

/* mkdir -p: creates dir and its missing parents. */
static int make_dirs(const char *dir) {
  char p[1024];
  size_t n = strlen(dir);
  if (n == 0 || n >= sizeof p) return err_set(DRV_EINVAL, "bad events directory '%s'", dir);
  memcpy(p, dir, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (p[i] != '/' && p[i] != '\0') continue;
    char c = p[i];
    p[i] = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
      return err_set(DRV_EIO, "cannot create '%s': %s", p, strerror(errno));
    p[i] = c;
  }
  return 0;
}

int events_open(const char *dir, const char *suffix, events_writer **out) {
  int rc = make_dirs(dir);
  if (rc < 0) return rc;
  char host[256] = "localhost";
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = '\0';
  char path[1200];
  long long t = (long long)time(NULL);
  /* Two writers in one second (a restarted chief) must not truncate each
   * other: O_EXCL, and a counter after the name when it is taken. */
  for (int k = 1; k < 1000; k++) {
    int len = k == 1 ? snprintf(path, sizeof path, "%s/events.out.tfevents.%010lld.%s%s", dir, t,
                                host, suffix ? suffix : "")
                     : snprintf(path, sizeof path, "%s/events.out.tfevents.%010lld.%s%s.%d", dir,
                                t, host, suffix ? suffix : "", k);
    if (len < 0 || (size_t)len >= sizeof path)
      return err_set(DRV_EINVAL, "events directory name too long: '%s'", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return writer_start(fd, path, out);
    if (errno != EEXIST) return err_set(DRV_EIO, "cannot create '%s': %s", path, strerror(errno));
  }
  return err_set(DRV_EIO, "cannot create an events file in '%s': every name is taken", dir);
}

int events_scalar(events_writer *w, const char *tag, int64_t step, double value,
                  double wall_time) {
  if (w->err) return failed(w);
  size_t tag_len = strlen(tag);
  if (tag_len == 0 || tag_len > MAX_TAG)
    return err_set(DRV_EINVAL, "summary tag of %zu bytes (1 to %d allowed)", tag_len, MAX_TAG);
  uint8_t rec[MAX_RECORD];
  size_t n = encode_scalar(rec, wall_time > 0 ? wall_time : events_wall_time(), step, tag,
                           tag_len, (float)value);
  int rc = append_record(w, rec, n);
  if (rc < 0) return rc;
  if (w->len >= FLUSH_BYTES || mono_now() - w->last_flush >= FLUSH_EVERY) return events_flush(w);
  return 0;
}

int events_tick(events_writer *w) {
  if (w->err) return failed(w);
  if (w->len == 0 || mono_now() - w->last_flush < FLUSH_EVERY) return 0;
  return events_flush(w);
}

int events_close(events_writer *w) {
  if (!w) return 0;
  int rc = events_flush(w);
  char msg[1400];
  if (rc < 0) snprintf(msg, sizeof msg, "%s", err_msg());
  if (close(w->fd) != 0 && rc == 0) {
    rc = DRV_EIO;
    snprintf(msg, sizeof msg, "cannot write '%s': %s", w->path, strerror(errno));
  }
  free(w->buf);
  free(w);
  return rc < 0 ? err_set(rc, "%s", msg) : 0;
}

const char *events_path(const events_writer *w) { return w->path; }

bool events_failed(const events_writer *w) { return w->err != 0; }

/* ============================== a run's summaries ======================== */

events_writer *events_run_open(const char *run_dir, const char *who) {
  if (!run_dir || !run_dir[0]) return NULL;
  char dir[1100], suffix[64];
  snprintf(dir, sizeof dir, "%s/" RUNDIR_TB "/%s", run_dir, who);
  snprintf(suffix, sizeof suffix, ".%s", who);
  events_writer *w;
  if (events_open(dir, suffix, &w) < 0) {
    log_warn("summaries: %s; the %s writes none", err_msg(), who);
    return NULL;
  }
  log_info("summaries: writing %s", events_path(w));
  return w;
}

/* The first failure goes to the log; summaries stop, training goes on. */
static void run_check(const events_writer *w, int rc) {
  if (rc >= 0) return;
  log_warn("summaries: %s; no more are written to %s", err_msg(), events_path(w));
  char why[1400];
  snprintf(why, sizeof why, "summaries: %s", err_msg());
  rundir_lost(NULL, why); /* the run's exit status says so */
}

void events_run_scalar(events_writer *w, const char *tag, int64_t step, double value) {
  if (w && !events_failed(w) && !isnan(value)) run_check(w, events_scalar(w, tag, step, value, 0));
}

void events_run_result(events_writer *w, const struct wire_wr *frame) {
  if (!w || frame->err || frame->len < WIRE_HEADER_SIZE) return;
  events_run_result_payload(w, frame->buf + WIRE_HEADER_SIZE, frame->len - WIRE_HEADER_SIZE);
}

void events_run_result_payload(events_writer *w, const uint8_t *payload, size_t len) {
  wire_msg_result m;
  /* a dropped gradient (sync) trained nothing: the coordinator does not count it either */
  if (!w || wire_get_result(payload, len, &m) < 0 || m.status != 0 || m.dropped) return;
  events_run_scalar(w, "train/loss", (int64_t)m.task, m.loss);
  if (m.correct >= 0 && m.examples > 0)
    events_run_scalar(w, "train/accuracy", (int64_t)m.task, (double)m.correct / (double)m.examples);
  events_run_scalar(w, "train/grad_norm", (int64_t)m.task, m.grad_norm); /* NaN: none */
}

void events_run_tick(events_writer *w) {
  if (w && !events_failed(w)) run_check(w, events_tick(w));
}

void events_run_flush(events_writer *w) {
  if (w && !events_failed(w)) run_check(w, events_flush(w));
}

void events_run_close(events_writer *w) {
  if (!w) return;
  bool was = events_failed(w);
  if (events_close(w) < 0 && !was) log_warn("summaries: %s", err_msg());
}
