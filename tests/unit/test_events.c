/* test_events.c - TensorBoard event files, read back by a decoder written
 * here from the format's description (its own bitwise CRC-32C, TFRecord
 * framing, protobuf wire format): framing and both masked CRCs of every
 * record, the Event and Summary fields, the file name, buffering, the
 * chief's summaries of RESULT frames, and the messages for a missing
 * directory, a full disk and a file-size limit. */
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run/events.h"
#include "harness.h"
#include "base/log.h"
#include "proto/wire.h"

/* ============================== the decoder ============================== */

/* CRC-32C bit by bit, from the polynomial: shares nothing with events.c. */
static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

static uint32_t masked(const uint8_t *p, size_t n) {
  uint32_t c = crc_bitwise(p, n);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t le(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

typedef struct ev {
  double wall_time;
  int64_t step;
  char version[64];
  char tag[300];
  float value;
  int has_value, nvalues;
} ev;

typedef struct pb {
  const uint8_t *p, *end;
} pb;

static uint64_t pb_varint(pb *b) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    CHECK(b->p < b->end);
    uint8_t c = *b->p++;
    v |= (uint64_t)(c & 0x7F) << shift;
    if (!(c & 0x80)) return v;
  }
  harness_fail(__FILE__, __LINE__, "varint longer than 10 bytes");
}

/* A length-delimited field's contents as a sub-reader. */
static pb pb_sub(pb *b) {
  uint64_t n = pb_varint(b);
  CHECK(n <= (uint64_t)(b->end - b->p));
  pb s = {b->p, b->p + n};
  b->p += n;
  return s;
}

/* Summary.Value: tag = 1 (string), simple_value = 2 (float). */
static void decode_value(pb v, ev *e) {
  while (v.p < v.end) {
    uint64_t key = pb_varint(&v);
    if (key == (1 << 3 | 2)) {
      pb s = pb_sub(&v);
      size_t n = (size_t)(s.end - s.p);
      CHECK(n < sizeof e->tag);
      memcpy(e->tag, s.p, n);
      e->tag[n] = '\0';
    } else if (key == (2 << 3 | 5)) {
      CHECK(v.end - v.p >= 4);
      uint32_t bits = (uint32_t)le(v.p, 4);
      memcpy(&e->value, &bits, 4);
      e->has_value = 1;
      v.p += 4;
    } else {
      harness_fail(__FILE__, __LINE__, "unexpected Value key %llu", (unsigned long long)key);
    }
  }
}

/* Event: wall_time = 1 (double), step = 2 (int64), file_version = 3
 * (string), summary = 5 (Summary { repeated Value value = 1 }). */
static void decode_event(const uint8_t *p, size_t n, ev *e) {
  memset(e, 0, sizeof *e);
  pb b = {p, p + n};
  while (b.p < b.end) {
    uint64_t key = pb_varint(&b);
    if (key == (1 << 3 | 1)) {
      CHECK(b.end - b.p >= 8);
      uint64_t bits = le(b.p, 8);
      memcpy(&e->wall_time, &bits, 8);
      b.p += 8;
    } else if (key == (2 << 3 | 0)) {
      e->step = (int64_t)pb_varint(&b);
    } else if (key == (3 << 3 | 2)) {
      pb s = pb_sub(&b);
      size_t len = (size_t)(s.end - s.p);
      CHECK(len < sizeof e->version);
      memcpy(e->version, s.p, len);
      e->version[len] = '\0';
    } else if (key == (5 << 3 | 2)) {
      pb sum = pb_sub(&b);
      while (sum.p < sum.end) {
        CHECK_INT_EQ(pb_varint(&sum), 1 << 3 | 2);
        decode_value(pb_sub(&sum), e);
        e->nvalues++;
      }
    } else {
      harness_fail(__FILE__, __LINE__, "unexpected Event key %llu", (unsigned long long)key);
    }
  }
}

/* Reads every record of a file, checking the framing and both CRCs;
 * returns the number of events decoded into out[max]. */
static int read_events(const char *path, ev *out, int max) {
  FILE *f = fopen(path, "rb");
  if (!f) harness_fail(__FILE__, __LINE__, "cannot open %s", path);
  int n = 0;
  uint8_t head[12];
  size_t got;
  while ((got = fread(head, 1, sizeof head, f)) > 0) {
    CHECK_INT_EQ(got, 12);
    uint64_t len = le(head, 8);
    CHECK_INT_EQ(le(head + 8, 4), masked(head, 8));
    CHECK(len > 0 && len < 4096);
    uint8_t data[4096], crc[4];
    CHECK_INT_EQ(fread(data, 1, len, f), len);
    CHECK_INT_EQ(fread(crc, 1, 4, f), 4);
    CHECK_INT_EQ(le(crc, 4), masked(data, len));
    CHECK(n < max);
    decode_event(data, len, &out[n++]);
  }
  fclose(f);
  return n;
}

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* ============================== CRC ====================================== */

TEST(events_crc32c_vector) {
  CHECK_INT_EQ(events_crc32c("123456789", 9), 0xE3069283u);
  CHECK_INT_EQ(events_crc32c("", 0), 0);
  uint8_t buf[1000];
  uint32_t x = 12345;
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
  for (size_t n = 0; n <= sizeof buf; n += 37) {
    CHECK_INT_EQ(events_crc32c(buf, n), crc_bitwise(buf, n));
    CHECK_INT_EQ(events_masked_crc32c(buf, n), masked(buf, n));
  }
}

/* ============================== the writer =============================== */

TEST(events_roundtrip) {
  double before = events_wall_time();
  events_writer *w;
  CHECK_OK(events_open("logs/ev", ".test", &w));
  const char *path = events_path(w);
  char host[256];
  CHECK(gethostname(host, sizeof host) == 0);
  /* events.out.tfevents.<10 digits>.<host>.test, in the directory made. */
  CHECK(starts_with(path, "logs/ev/events.out.tfevents."));
  long long t = 0;
  int used = 0;
  CHECK(sscanf(path + 28, "%10lld.%n", &t, &used) == 1 && used == 11);
  CHECK(t >= (long long)before - 1 && t <= (long long)events_wall_time() + 1);
  CHECK(strncmp(path + 39, host, strlen(host)) == 0);
  CHECK(strcmp(path + 39 + strlen(host), ".test") == 0);

  static const struct {
    const char *tag;
    int64_t step;
    double value, wall;
  } in[] = {
      {"train/loss", 1, 2.302585, 1700000000.25},
      {"train/accuracy", 1, 0.125, 1700000000.5},
      {"eval/loss", 300, -1.5e-7, 1700000001.0},
      {"a/very/long/tag/with/many/parts/to/need/a/two/byte/length/when/it/is/over/127/bytes/"
       "long/which/this/one/is/after/these/words/padding/padding/padding",
       (int64_t)1 << 40, 1e30, 1700000002.0},
      {"negative/step", -3, 42.0, 1700000003.0},
  };
  int nin = (int)(sizeof in / sizeof in[0]);
  CHECK(strlen(in[3].tag) > 127);
  for (int i = 0; i < nin; i++)
    CHECK_OK(events_scalar(w, in[i].tag, in[i].step, in[i].value, in[i].wall));
  CHECK_OK(events_scalar(w, "now", 9, 1.0, 0)); /* wall_time 0: the current time */
  char keep[1300];
  snprintf(keep, sizeof keep, "%s", path);
  CHECK_OK(events_close(w));

  ev e[16];
  int n = read_events(keep, e, 16);
  CHECK_INT_EQ(n, nin + 2);
  CHECK(strcmp(e[0].version, "brain.Event:2") == 0);
  CHECK_INT_EQ(e[0].nvalues, 0);
  CHECK(e[0].wall_time >= before - 0.01 && e[0].wall_time <= events_wall_time() + 0.01);
  for (int i = 0; i < nin; i++) {
    const ev *x = &e[i + 1];
    CHECK(strcmp(x->tag, in[i].tag) == 0);
    CHECK_INT_EQ(x->step, in[i].step);
    CHECK(x->value == (float)in[i].value);
    CHECK(x->wall_time == in[i].wall);
    CHECK_INT_EQ(x->nvalues, 1);
    CHECK(x->has_value && x->version[0] == '\0');
  }
  CHECK(strcmp(e[nin + 1].tag, "now") == 0);
  CHECK(e[nin + 1].wall_time >= before && e[nin + 1].wall_time <= events_wall_time());
}

TEST(events_name_taken) {
  /* Two writers of one suffix in one second get two files. */
  events_writer *a, *b;
  CHECK_OK(events_open("ev", ".x", &a));
  CHECK_OK(events_open("ev", ".x", &b));
  CHECK(strcmp(events_path(a), events_path(b)) != 0);
  CHECK_OK(events_scalar(a, "t", 1, 1.0, 0));
  CHECK_OK(events_scalar(b, "t", 1, 2.0, 0));
  char pa[1300], pb_[1300];
  snprintf(pa, sizeof pa, "%s", events_path(a));
  snprintf(pb_, sizeof pb_, "%s", events_path(b));
  CHECK_OK(events_close(a));
  CHECK_OK(events_close(b));
  ev e[4];
  CHECK_INT_EQ(read_events(pa, e, 4), 2);
  CHECK(e[1].value == 1.0f);
  CHECK_INT_EQ(read_events(pb_, e, 4), 2);
  CHECK(e[1].value == 2.0f);
}

TEST(events_buffered_then_flushed) {
  events_writer *w;
  double t0 = events_wall_time();
  CHECK_OK(events_open_file("buffered.tfevents", &w));
  long first = file_size("buffered.tfevents");
  CHECK(first > 12 + 4); /* the version record is on disk at once */
  CHECK_OK(events_scalar(w, "a", 1, 1.0, 0));
  /* Within the second after the last write, a scalar stays in memory. */
  if (events_wall_time() - t0 < 0.8) CHECK_INT_EQ(file_size("buffered.tfevents"), first);
  CHECK_OK(events_flush(w));
  long second = file_size("buffered.tfevents");
  CHECK(second > first);
  double t1 = events_wall_time();
  CHECK_OK(events_scalar(w, "b", 2, 2.0, 0));
  CHECK_OK(events_tick(w)); /* too soon: stays queued */
  if (events_wall_time() - t1 < 0.8) CHECK_INT_EQ(file_size("buffered.tfevents"), second);
  struct timespec ts = {1, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  CHECK_OK(events_tick(w)); /* a second later, with no new scalar: out */
  ev e[8];
  CHECK_INT_EQ(read_events("buffered.tfevents", e, 8), 3);
  CHECK(strcmp(e[2].tag, "b") == 0 && e[2].step == 2);
  CHECK_OK(events_scalar(w, "c", 3, 3.0, 0)); /* queued until close */
  CHECK_OK(events_close(w));
  CHECK_INT_EQ(read_events("buffered.tfevents", e, 8), 4);
  CHECK(strcmp(e[3].tag, "c") == 0 && e[3].step == 3);
}

TEST(events_errors_name_the_path) {
  events_writer *w = NULL;
  CHECK_ERR(events_open_file("missing/x.tfevents", &w), DRV_EIO,
            "cannot create 'missing/x.tfevents': No such file or directory");
  CHECK(w == NULL);
  harness_write_str("afile", "not a directory");
  CHECK_ERR(events_open("afile/events", NULL, &w), DRV_EIO,
            "cannot create 'afile/events': Not a directory");
  /* A full disk: /dev/full takes the open but refuses every write. */
  CHECK_ERR(events_open_file("/dev/full", &w), DRV_EIO,
            "cannot write '/dev/full': No space left on device");
  CHECK(w == NULL);
  CHECK_OK(events_open("ok", NULL, &w));
  char tag[300];
  memset(tag, 'x', sizeof tag - 1);
  tag[sizeof tag - 1] = '\0';
  CHECK_ERR(events_scalar(w, tag, 1, 1.0, 0), DRV_EINVAL, "summary tag of 299 bytes");
  CHECK_ERR(events_scalar(w, "", 1, 1.0, 0), DRV_EINVAL, "summary tag of 0 bytes");
  CHECK(!events_failed(w));
  CHECK_OK(events_close(w));
}

TEST(events_write_failure_is_sticky) {
  /* A file-size limit makes a later write fail, as a disk filling up
   * during training would (this case runs in its own process). */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {200, 200};
  CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
  events_writer *w;
  CHECK_OK(events_open_file("limited.tfevents", &w));
  int rc = 0, i;
  for (i = 0; i < 50 && rc == 0; i++) {
    rc = events_scalar(w, "train/loss", i, 1.0, 0);
    if (rc == 0) rc = events_flush(w);
  }
  CHECK_INT_EQ(rc, DRV_EIO);
  CHECK_STR_CONTAINS(err_msg(), "cannot write 'limited.tfevents': File too large");
  CHECK(i > 1 && events_failed(w));
  CHECK_ERR(events_scalar(w, "train/loss", 99, 1.0, 0), DRV_EIO, "File too large");
  CHECK_ERR(events_close(w), DRV_EIO, "cannot write 'limited.tfevents'");
  /* What reached the file is whole records up to the limit at most. */
  CHECK(file_size("limited.tfevents") <= 200);
}

/* ============================== a run's summaries ======================== */

static void result_frame(wire_wr *m, uint64_t task, int32_t status, double loss, int64_t correct,
                         uint64_t examples, double grad_norm) {
  wire_wr_init(m);
  wire_wr_u64(m, task);
  wire_wr_i32(m, status);
  wire_wr_f64(m, loss);
  wire_wr_i64(m, correct);
  wire_wr_u64(m, examples);
  wire_wr_str(m, status ? "it broke" : "");
  wire_wr_u8(m, 0); /* dropped: no, the gradient was applied */
  wire_wr_f64(m, grad_norm); /* NaN: the fit does not clip */
}

TEST(events_run_chief_results) {
  CHECK(events_run_open(NULL, "chief") == NULL);
  double before = events_wall_time();
  events_writer *w = events_run_open("run", "chief");
  CHECK(w != NULL);
  char path[1300];
  snprintf(path, sizeof path, "%s", events_path(w));
  CHECK(starts_with(path, "run/events/chief/events.out.tfevents."));
  CHECK(strcmp(path + strlen(path) - 6, ".chief") == 0);
  wire_wr m;
  result_frame(&m, 7, 0, 0.5, 3, 4, NAN);
  events_run_result(w, &m);
  wire_wr_free(&m);
  result_frame(&m, 8, DRV_EIO, NAN, -1, 0, NAN); /* a failed step: no summary */
  events_run_result(w, &m);
  wire_wr_free(&m);
  result_frame(&m, 9, 0, 1.25, -1, 4, 2.5); /* a loss without accuracy, a clipped step */
  events_run_result(w, &m);
  events_run_result(NULL, &m); /* no writer: nothing, no crash */
  wire_wr_free(&m);
  events_run_scalar(w, "eval/accuracy", 10, NAN); /* skipped */
  events_run_scalar(w, "eval/loss", 10, 0.25);
  events_run_close(w);

  ev e[8];
  CHECK_INT_EQ(read_events(path, e, 8), 6);
  CHECK(strcmp(e[0].version, "brain.Event:2") == 0);
  CHECK(strcmp(e[1].tag, "train/loss") == 0 && e[1].step == 7 && e[1].value == 0.5f);
  CHECK(strcmp(e[2].tag, "train/accuracy") == 0 && e[2].step == 7 && e[2].value == 0.75f);
  CHECK(strcmp(e[3].tag, "train/loss") == 0 && e[3].step == 9 && e[3].value == 1.25f);
  CHECK(strcmp(e[4].tag, "train/grad_norm") == 0 && e[4].step == 9 && e[4].value == 2.5f);
  CHECK(strcmp(e[5].tag, "eval/loss") == 0 && e[5].step == 10 && e[5].value == 0.25f);
  CHECK(e[1].wall_time >= before && e[5].wall_time <= events_wall_time());
}

TEST(events_run_failures_do_not_stop_training) {
  harness_write_str("run", "a file where the run directory should be");
  CHECK(events_run_open("run", "coordinator") == NULL);
  /* A writer whose disk fills: the wrappers log, then write nothing more. */
  signal(SIGXFSZ, SIG_IGN);
  events_writer *w = events_run_open("ok", "coordinator");
  CHECK(w != NULL);
  char path[1300];
  snprintf(path, sizeof path, "%s", events_path(w));
  long size = file_size(path);
  struct rlimit rl = {(rlim_t)size + 60, (rlim_t)size + 60};
  CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
  char *logbuf = NULL;
  size_t loglen = 0;
  FILE *log = open_memstream(&logbuf, &loglen); /* memory: not under the limit */
  CHECK(log != NULL);
  log_setup(log, "coordinator", LOG_INFO);
  for (int i = 0; i < 10; i++) {
    events_run_scalar(w, "train/loss", i, 1.0);
    events_run_flush(w);
  }
  CHECK(events_failed(w));
  events_run_tick(w);
  events_run_close(w);
  fclose(log);
  CHECK(file_size(path) <= size + 60);
  CHECK_STR_CONTAINS(logbuf, "summaries: cannot write 'ok/events/coordinator/events.out.tfevents.");
  CHECK_STR_CONTAINS(logbuf, "File too large; no more are written");
  const char *first = strstr(logbuf, "summaries:");
  CHECK(first && !strstr(first + 1, "summaries:")); /* said once */
  free(logbuf);
}
