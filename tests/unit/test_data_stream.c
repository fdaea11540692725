/* test_data_stream.c - rows of CSV and libsvm lines as they arrive
 * (data_stream.c): a pipe written in pieces, partial lines, headers, the
 * end of the stream, malformed lines, a file that grows. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data_stream.h"
#include "base/err.h"
#include "harness.h"

/* A stream over the read end of a new pipe (opened through /proc/self/fd,
 * as data.stream opens a path); *wfd is the write end. */
static data_stream *pipe_stream(const data_stream_opts *o, int *wfd) {
  int p[2];
  CHECK(pipe(p) == 0);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
  data_stream *s = NULL;
  CHECK_OK(data_stream_open(path, o, &s));
  close(p[0]); /* the stream opened its own descriptor */
  *wfd = p[1];
  return s;
}

static void put(int fd, const char *text) { CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text)); }

TEST(data_stream_csv_rows_as_they_arrive) {
  data_stream_opts o = {.format = DATA_STREAM_CSV, .label = -1};
  int w;
  data_stream *s = pipe_stream(&o, &w);
  tensor *x, *y;
  CHECK_INT_EQ(data_stream_read(s, 2, 2, &x, &y), DRV_EAGAIN); /* nothing yet */
  put(w, "a,b,label\n1,2,0\n3,");                               /* a header, a row, half a row */
  CHECK_INT_EQ(data_stream_read(s, 2, 2, &x, &y), DRV_EAGAIN); /* one whole row: fewer than 2 */
  put(w, "4,1\n5,6,2\n");
  CHECK_INT_EQ(data_stream_read(s, 2, 2, &x, &y), 1);
  CHECK_INT_EQ(x->shape[0], 2);
  CHECK_INT_EQ(x->shape[1], 2);
  CHECK(tensor_data(x)[0] == 1 && tensor_data(x)[2] == 3 && tensor_data(x)[3] == 4);
  CHECK(tensor_data(y)[0] == 0 && tensor_data(y)[1] == 1);
  tensor_free(x), tensor_free(y);
  put(w, "7,8,3"); /* no newline: a row once the stream ends */
  close(w);
  CHECK_INT_EQ(data_stream_read(s, 5, 5, &x, &y), 1); /* the end: fewer than min */
  CHECK_INT_EQ(x->shape[0], 2);
  CHECK(tensor_data(x)[2] == 7 && tensor_data(y)[1] == 3);
  tensor_free(x), tensor_free(y);
  CHECK_INT_EQ(data_stream_read(s, 1, 1, &x, &y), 0);
  CHECK(data_stream_ended(s));
  CHECK_INT_EQ(data_stream_rows(s), 4);
  data_stream_close(s);
}

TEST(data_stream_libsvm_and_errors) {
  data_stream_opts o = {.format = DATA_STREAM_LIBSVM, .features = 3};
  int w;
  data_stream *s = pipe_stream(&o, &w);
  tensor *x, *y;
  put(w, "1 1:0.5 3:2\n0 2:1\n");
  CHECK_INT_EQ(data_stream_read(s, 2, 8, &x, &y), 1);
  CHECK_INT_EQ(x->shape[0], 2);
  CHECK(tensor_data(x)[0] == 0.5f && tensor_data(x)[1] == 0 && tensor_data(x)[2] == 2);
  CHECK(tensor_data(x)[4] == 1 && tensor_data(y)[0] == 1 && tensor_data(y)[1] == 0);
  tensor_free(x), tensor_free(y);
  put(w, "1 4:1\n");
  CHECK_ERR(data_stream_read(s, 1, 1, &x, &y), DRV_EPARSE, ":3: bad index:value pair (indices are 1..3)");
  close(w);
  data_stream_close(s);
  data_stream_opts bad = {.format = DATA_STREAM_LIBSVM};
  CHECK_ERR(data_stream_open("-", &bad, &s), DRV_EINVAL, "needs features");
  o = (data_stream_opts){.format = DATA_STREAM_CSV, .label = 6};
  s = pipe_stream(&o, &w);
  put(w, "1,2,3\n");
  CHECK_ERR(data_stream_read(s, 1, 1, &x, &y), DRV_EINVAL, "label column 7 is out of range");
  close(w);
  data_stream_close(s);
  o = (data_stream_opts){.format = DATA_STREAM_CSV, .label = -1};
  s = pipe_stream(&o, &w);
  put(w, "1,2,3\n4,5\n");
  CHECK_ERR(data_stream_read(s, 2, 2, &x, &y), DRV_EPARSE, ":2: 2 fields where the first row had 3");
  close(w);
  data_stream_close(s);
}

TEST(data_stream_follows_a_growing_file) {
  char path[] = "/tmp/drover-stream-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  put(fd, "1,0\n");
  data_stream_opts o = {.format = DATA_STREAM_CSV, .label = -1, .follow = true};
  data_stream *s = NULL;
  CHECK_OK(data_stream_open(path, &o, &s));
  CHECK_INT_EQ(data_stream_fd(s), -1); /* a regular file is polled at the tick */
  tensor *x, *y;
  CHECK_INT_EQ(data_stream_read(s, 2, 2, &x, &y), DRV_EAGAIN); /* its end is not the stream's */
  put(fd, "2,1\n");
  CHECK_INT_EQ(data_stream_read(s, 2, 2, &x, &y), 1);
  CHECK(tensor_data(x)[1] == 2 && tensor_data(y)[1] == 1);
  tensor_free(x), tensor_free(y);
  data_stream_close(s);
  o.follow = false; /* without follow: read to the end, then over */
  CHECK_OK(data_stream_open(path, &o, &s));
  CHECK_INT_EQ(data_stream_read(s, 5, 5, &x, &y), 1);
  CHECK_INT_EQ(x->shape[0], 2);
  tensor_free(x), tensor_free(y);
  CHECK_INT_EQ(data_stream_read(s, 1, 1, &x, &y), 0);
  data_stream_close(s);
  close(fd);
  unlink(path);
}
