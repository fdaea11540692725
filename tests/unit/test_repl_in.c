/* test_repl_in.c - a REPL's lines from a pipe while the loop turns, and
 * from a regular file. */
#include <fcntl.h>
#include <unistd.h>
#include <uv.h>

#include "harness.h"
#include "luabind/repl_in.h"

typedef struct writer {
  int fd;
  int turns; /* `between` calls */
  bool wrote;
} writer;

static void count_turn(void *ud) { ((writer *)ud)->turns++; }

/* The rest of a line, more lines and the end, from a timer: only a loop
 * that turns while the reader waits gets them written. */
static void on_write(uv_timer_t *t) {
  writer *w = t->data;
  static const char rest[] = "nt(1)\nsecond\n\nlast";
  CHECK(write(w->fd, rest, sizeof rest - 1) == (ssize_t)(sizeof rest - 1));
  close(w->fd);
  w->wrote = true;
}

static void next_is(replin *in, const char *want) {
  const char *line;
  size_t len;
  CHECK_INT_EQ(replin_next(in, &line, &len), 1);
  CHECK(strcmp(line, want) == 0);
  CHECK_INT_EQ(len, strlen(want));
}

TEST(replin_waits_for_a_line_while_the_loop_turns) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  int p[2];
  CHECK(pipe(p) == 0);
  CHECK(write(p[1], "pri", 3) == 3);
  writer w = {p[1], 0, false};
  uv_timer_t t;
  uv_timer_init(&loop, &t);
  t.data = &w;
  uv_timer_start(&t, on_write, 30, 0);
  FILE *f = fdopen(p[0], "r");
  replin in;
  replin_open(&in, f, &loop, count_turn, &w);
  CHECK(in.polling);
  next_is(&in, "print(1)");
  CHECK(w.wrote);
  CHECK(w.turns >= 1);
  CHECK(!(fcntl(p[0], F_GETFL) & O_NONBLOCK)); /* blocking again for the chunk */
  int turns = w.turns;
  next_is(&in, "second"); /* already buffered: no wait */
  next_is(&in, "");
  next_is(&in, "last");   /* no newline before the end */
  CHECK_INT_EQ(w.turns, turns);
  const char *line;
  size_t len;
  CHECK_INT_EQ(replin_next(&in, &line, &len), 0);
  replin_close(&in);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT_EQ(uv_loop_close(&loop), 0);
  fclose(f);
}

TEST(replin_reads_a_regular_file_plainly) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  FILE *f = fopen(harness_write_str("in.lua", "a = 1\n\nprint(a)"), "r");
  CHECK(f != NULL);
  writer w = {-1, 0, false};
  replin in;
  replin_open(&in, f, &loop, count_turn, &w);
  CHECK(!in.polling);
  next_is(&in, "a = 1");
  next_is(&in, "");
  next_is(&in, "print(a)");
  const char *line;
  size_t len;
  CHECK_INT_EQ(replin_next(&in, &line, &len), 0);
  CHECK_INT_EQ(w.turns, 0);
  replin_close(&in);
  CHECK_INT_EQ(uv_loop_close(&loop), 0);
  fclose(f);
}
