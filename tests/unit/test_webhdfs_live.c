/* test_webhdfs_live.c - the WebHDFS client's C API against a real HDFS:
 * create from a buffer and from a reader (its short count and its error
 * passed back), read_all and its bound, open's offset, length and a
 * writer's error, list of a directory and of a file, mkdirs' permission,
 * delete's answer, rename into a directory and to a plain path, and calls
 * from several threads at once.
 *
 * These need $DROVER_WEBHDFS (tests/hdfs/start.sh's env):
 * tests/cli/test_hdfs.sh runs them (`unit_tests webhdfs_live`) with the
 * test HDFS up. Without it each case checks only that the variable is
 * unset and passes: the unit suite alone has no HDFS. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/webhdfs.h"
#include "harness.h"

/* DIR/NAME on the test HDFS under a directory of this process, or NULL
 * when there is none. */
static const char *url(const char *name) {
  static char u[WEBHDFS_URL_MAX];
  const char *w = getenv("DROVER_WEBHDFS");
  if (!w || !*w) return NULL;
  snprintf(u, sizeof u, "%s/tmp/unit-%ld/%s", w, (long)getppid(), name);
  return u;
}

#define LIVE_OR_RETURN(name, var)                  \
  char var[WEBHDFS_URL_MAX];                       \
  do {                                             \
    const char *u_ = url(name);                    \
    if (!u_) return;                               \
    snprintf(var, sizeof var, "%s", u_);           \
  } while (0)

TEST(webhdfs_live_create_buffer_read_all) {
  LIVE_OR_RETURN("buf/a.bin", a);
  char data[3000];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (char)(i * 7);
  CHECK_OK(webhdfs_create(a, data, sizeof data, 0, 0));
  char *got;
  size_t n;
  CHECK_OK(webhdfs_read_all(a, &got, &n, 1 << 20));
  CHECK_INT_EQ(n, sizeof data);
  CHECK(memcmp(got, data, n) == 0 && got[n] == '\0');
  free(got);
  CHECK_ERR(webhdfs_read_all(a, &got, &n, 100), DRV_ERANGE, "over 100 bytes");
  CHECK(got == NULL);
  CHECK_ERR(webhdfs_create(a, "x", 1, 0, 0), DRV_EIO, "FileAlreadyExistsException");
  CHECK_OK(webhdfs_create(a, "", 0, 1, 0600));
  webhdfs_info st;
  CHECK_OK(webhdfs_stat(a, &st));
  CHECK_INT_EQ(st.size, 0);
  CHECK_INT_EQ(st.perm, 0600);
  CHECK(!st.is_dir && st.mtime_ms > 0);
}

typedef struct feeder {
  size_t left;
  int fail;
} feeder;

static long long feed(void *ud, char *buf, size_t cap) {
  feeder *f = ud;
  if (f->fail && f->left < 100000) return err_set(DRV_EINTERRUPTED, "the feeder stopped");
  size_t k = f->left < cap ? f->left : cap;
  memset(buf, 'z', k);
  f->left -= k;
  return (long long)k;
}

TEST(webhdfs_live_create_stream_short_and_failing_readers) {
  LIVE_OR_RETURN("stream/s.bin", s);
  feeder f = {.left = 300000};
  CHECK_OK(webhdfs_create_stream(s, 300000, feed, &f, 0, 0));
  webhdfs_info st;
  CHECK_OK(webhdfs_stat(s, &st));
  CHECK_INT_EQ(st.size, 300000);
  f = (feeder){.left = 1000};
  CHECK_ERR(webhdfs_create_stream(s, 5000, feed, &f, 1, 0), DRV_EIO, "the reader gave fewer");
  f = (feeder){.left = 300000, .fail = 1};
  CHECK_ERR(webhdfs_create_stream(s, -1, feed, &f, 1, 0), DRV_EINTERRUPTED, "the feeder stopped");
}

typedef struct collect {
  char buf[64];
  size_t n;
  int stop_after;
} collect;

static int take(void *ud, const char *b, size_t n) {
  collect *c = ud;
  if (c->stop_after && c->n >= (size_t)c->stop_after) return err_set(DRV_ECANCELLED, "enough");
  size_t k = n < sizeof c->buf - c->n ? n : sizeof c->buf - c->n;
  memcpy(c->buf + c->n, b, k);
  c->n += k;
  return 0;
}

TEST(webhdfs_live_open_offset_length_and_writer_error) {
  LIVE_OR_RETURN("open/o.txt", o);
  CHECK_OK(webhdfs_create(o, "0123456789", 10, 1, 0));
  collect c = {0};
  CHECK_OK(webhdfs_open(o, 3, 4, take, &c));
  CHECK_INT_EQ(c.n, 4);
  CHECK(memcmp(c.buf, "3456", 4) == 0);
  c = (collect){0};
  CHECK_OK(webhdfs_open(o, 8, WEBHDFS_TO_END, take, &c));
  CHECK_INT_EQ(c.n, 2);
  c = (collect){0};
  CHECK_OK(webhdfs_open(o, 8, 100, take, &c));
  CHECK_INT_EQ(c.n, 2);
  c = (collect){0};
  CHECK_ERR(webhdfs_open(o, 11, 1, take, &c), DRV_EIO, "HTTP");
  /* A big file, a writer that stops: its code comes back. */
  LIVE_OR_RETURN("open/big.bin", big);
  feeder f = {.left = 2 << 20};
  CHECK_OK(webhdfs_create_stream(big, 2 << 20, feed, &f, 1, 0));
  c = (collect){.stop_after = 1};
  CHECK_ERR(webhdfs_open(big, 0, WEBHDFS_TO_END, take, &c), DRV_ECANCELLED, "enough");
}

TEST(webhdfs_live_list_mkdirs_delete_rename) {
  LIVE_OR_RETURN("tree", t);
  char p[WEBHDFS_URL_MAX + 16], q[WEBHDFS_URL_MAX + 16];
  snprintf(p, sizeof p, "%s/d/sub", t);
  CHECK_OK(webhdfs_mkdirs(p, 0700));
  webhdfs_info st;
  CHECK_OK(webhdfs_stat(p, &st));
  CHECK(st.is_dir && st.perm == 0700);
  const char *names[] = {"c", "a", "b"};
  for (int i = 0; i < 3; i++) {
    snprintf(q, sizeof q, "%s/d/%s", t, names[i]);
    CHECK_OK(webhdfs_create(q, "xy", (size_t)i, 0, 0));
  }
  webhdfs_entry *e;
  size_t n;
  snprintf(p, sizeof p, "%s/d", t);
  CHECK_OK(webhdfs_list(p, &e, &n));
  CHECK_INT_EQ(n, 4);
  CHECK(!strcmp(e[0].name, "a") && !strcmp(e[1].name, "b") && !strcmp(e[2].name, "c") &&
        !strcmp(e[3].name, "sub") && e[3].is_dir && e[1].size == 2 && e[0].size == 1);
  webhdfs_list_free(e, n);
  snprintf(q, sizeof q, "%s/d/b", t);
  CHECK_OK(webhdfs_list(q, &e, &n));
  CHECK(n == 1 && !strcmp(e[0].name, "b") && e[0].size == 2);
  webhdfs_list_free(e, n);
  snprintf(q, sizeof q, "%s/nope", t);
  CHECK_ERR(webhdfs_list(q, &e, &n), DRV_ENOENT, "FileNotFoundException");
  /* rename into an existing directory moves inside it; to a plain path */
  snprintf(p, sizeof p, "%s/d/a", t);
  snprintf(q, sizeof q, "%s/d/sub", t);
  CHECK_OK(webhdfs_rename(p, q));
  snprintf(q, sizeof q, "%s/d/sub/a", t);
  CHECK_OK(webhdfs_stat(q, &st));
  const char *path = strstr(strstr(t, "://") + 3, "/");
  snprintf(p, sizeof p, "%s/d/c-renamed", path);
  snprintf(q, sizeof q, "%s/d/c", t);
  CHECK_OK(webhdfs_rename(q, p));
  CHECK_ERR(webhdfs_rename(q, p), DRV_ENOENT, "the source does not exist");
  CHECK_ERR(webhdfs_rename(q, "relative"), DRV_EINVAL, "not absolute");
  CHECK_INT_EQ(webhdfs_delete(t, 1), 1);
  CHECK_INT_EQ(webhdfs_delete(t, 1), 0);
}

static void *writer(void *arg) {
  long i = (long)arg;
  char name[32], data[4096];
  snprintf(name, sizeof name, "threads/f%ld", i);
  const char *u = url(name);
  char mine[WEBHDFS_URL_MAX];
  snprintf(mine, sizeof mine, "%s", u);
  memset(data, 'a' + (int)i, sizeof data);
  for (int k = 0; k < 5; k++) {
    char *got = NULL;
    size_t n = 0;
    if (webhdfs_create(mine, data, sizeof data, 1, 0) < 0 ||
        webhdfs_read_all(mine, &got, &n, 1 << 20) < 0 || n != sizeof data ||
        memcmp(got, data, n) != 0) {
      free(got);
      return (void *)1;
    }
    free(got);
  }
  return NULL;
}

TEST(webhdfs_live_calls_from_threads) {
  LIVE_OR_RETURN("threads", t);
  pthread_t th[4];
  for (long i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, writer, (void *)i) == 0);
  int bad = 0;
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(th[i], &r);
    bad += r != NULL;
  }
  CHECK_INT_EQ(bad, 0);
  CHECK_INT_EQ(webhdfs_delete(t, 1), 1);
}
