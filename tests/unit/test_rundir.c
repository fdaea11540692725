/* test_rundir.c - run directories: layout and stamp, name checks, suffixes
 * on collision, stamped events, atomic writes with exact modes, log tails
 * and the messages for paths that cannot be created. */
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <string.h>

#include "base/afile.h"
#include "harness.h"
#include "base/rundir.h"

/* Whole file into a malloc'd string (caller frees). */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) harness_fail(__FILE__, __LINE__, "cannot open %s", path);
  char *buf = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&buf, &len);
  char chunk[4096];
  size_t k;
  while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, k, mem);
  fclose(f);
  fclose(mem);
  return buf;
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(rundir_layout) {
  time_t before = time(NULL);
  rundir rd;
  CHECK_OK(rundir_create("runs/deep/er", "mnist", &rd));
  time_t after = time(NULL);

  char cwd[PATH_MAX], want[PATH_MAX + 64];
  CHECK(realpath(".", cwd) != NULL);
  snprintf(want, sizeof want, "%s/runs/deep/er/mnist-", cwd);
  CHECK(strncmp(rd.path, want, strlen(want)) == 0);

  /* The stamp is local time, yyyymmdd-hhmmss, taken during the call. */
  const char *stamp = rd.path + strlen(want);
  CHECK_INT_EQ(strlen(stamp), 15);
  struct tm tm = {0};
  const char *end = strptime(stamp, "%Y%m%d-%H%M%S", &tm);
  CHECK(end && *end == '\0');
  tm.tm_isdst = -1;
  time_t t = mktime(&tm);
  CHECK(t >= before && t <= after);

  char p[2048];
  CHECK(strcmp(rundir_file(&rd, "logs", p, sizeof p), strcat(strcpy(want, rd.path), "/logs")) == 0);
  CHECK(is_dir(p));
  struct stat st;
  CHECK(stat(rundir_file(&rd, "events.log", p, sizeof p), &st) == 0 && S_ISREG(st.st_mode));
  CHECK(rd.events != NULL);
  rundir_close(&rd);
  CHECK(rd.events == NULL);
  rundir_close(&rd); /* twice is harmless */
}

TEST(rundir_name_validation) {
  rundir rd;
  CHECK_ERR(rundir_create("runs", "a/b", &rd), DRV_EINVAL, "run name 'a/b' contains '/'");
  CHECK_ERR(rundir_create("runs", ".hidden", &rd), DRV_EINVAL, "starts with '.'");
  CHECK_ERR(rundir_create("runs", "..", &rd), DRV_EINVAL, "starts with '.'");
  CHECK_ERR(rundir_create("runs", "", &rd), DRV_EINVAL, "empty");
  CHECK_ERR(rundir_create("runs", NULL, &rd), DRV_EINVAL, "empty");
  CHECK(!is_dir("runs")); /* refused before anything was created */
}

/* Same name in the same second: -2, then -3. The stamp may tick between
 * calls, so retry until three creations share one stamp. */
TEST(rundir_collision_suffix) {
  for (int attempt = 0; attempt < 5; attempt++) {
    rundir a, b, c;
    CHECK_OK(rundir_create("runs", "exp", &a));
    CHECK_OK(rundir_create("runs", "exp", &b));
    CHECK_OK(rundir_create("runs", "exp", &c));
    char want_b[1100], want_c[1100];
    snprintf(want_b, sizeof want_b, "%s-2", a.path);
    snprintf(want_c, sizeof want_c, "%s-3", a.path);
    int same_second = strcmp(b.path, want_b) == 0 && strcmp(c.path, want_c) == 0;
    CHECK(strcmp(a.path, b.path) != 0 && strcmp(b.path, c.path) != 0);
    CHECK(is_dir(a.path) && is_dir(b.path) && is_dir(c.path));
    rundir_close(&a);
    rundir_close(&b);
    rundir_close(&c);
    if (same_second) return;
  }
  harness_fail(__FILE__, __LINE__, "never saw the -2/-3 suffixes");
}

TEST(rundir_events) {
  rundir rd;
  CHECK_OK(rundir_create("runs", "ev", &rd));
  struct timespec t0, t1;
  clock_gettime(CLOCK_REALTIME, &t0);
  rundir_event(&rd, "node %s:%d up", "ps", 0);
  rundir_event(&rd, "error: %s", "two\nlines");
  clock_gettime(CLOCK_REALTIME, &t1);

  char p[2048];
  char *text = slurp(rundir_file(&rd, "events.log", p, sizeof p)); /* flushed already */
  const char *want_text[] = {"node ps:0 up", "error: two lines"};
  char *save = NULL, *line = strtok_r(text, "\n", &save);
  for (int i = 0; i < 2; i++) {
    CHECK(line != NULL);
    /* "2026-11-21T10:53:06.123Z text", in UTC */
    struct tm tm = {0};
    const char *rest = strptime(line, "%Y-%m-%dT%H:%M:%S", &tm);
    CHECK(rest != NULL);
    CHECK(rest[0] == '.' && rest[4] == 'Z' && rest[5] == ' ');
    int ms = atoi(rest + 1);
    CHECK(ms >= 0 && ms < 1000);
    long long t = (long long)timegm(&tm) * 1000 + ms;
    CHECK(t >= (long long)t0.tv_sec * 1000 + t0.tv_nsec / 1000000);
    CHECK(t <= (long long)t1.tv_sec * 1000 + t1.tv_nsec / 1000000);
    CHECK(strcmp(rest + 6, want_text[i]) == 0);
    line = strtok_r(NULL, "\n", &save);
  }
  CHECK(line == NULL);
  free(text);
  rundir_close(&rd);
  rundir_event(&rd, "after close is ignored");
}

TEST(rundir_write_modes) {
  rundir rd;
  CHECK_OK(rundir_create("runs", "w", &rd));
  char p[2048];
  struct stat st;

  umask(022);
  CHECK_OK(rundir_write(&rd, "secret", "s3cr3t", 0600));
  CHECK(stat(rundir_file(&rd, "secret", p, sizeof p), &st) == 0);
  CHECK_INT_EQ(st.st_mode & 07777, 0600);
  char *got = slurp(p);
  CHECK(strcmp(got, "s3cr3t") == 0);
  free(got);

  /* The mode is applied exactly: a restrictive umask does not narrow it. */
  umask(077);
  CHECK_OK(rundir_write(&rd, "coordinator", "127.0.0.1:4000 42\n", 0644));
  CHECK(stat(rundir_file(&rd, "coordinator", p, sizeof p), &st) == 0);
  CHECK_INT_EQ(st.st_mode & 07777, 0644);
  umask(022);

  /* Replacing goes through rename: a reader that opened the old file keeps
   * reading the old content whole, never a truncated or mixed one. */
  FILE *old = fopen(p, "r");
  CHECK(old != NULL);
  CHECK_OK(rundir_write(&rd, "coordinator", "127.0.0.1:5000 43\n", 0644));
  char line[64] = "";
  CHECK(fgets(line, sizeof line, old) != NULL);
  CHECK(strcmp(line, "127.0.0.1:4000 42\n") == 0);
  fclose(old);
  got = slurp(p);
  CHECK(strcmp(got, "127.0.0.1:5000 43\n") == 0);
  free(got);

  /* No temporaries left behind. */
  DIR *d = opendir(rd.path);
  CHECK(d != NULL);
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp")) harness_fail(__FILE__, __LINE__, "left %s", e->d_name);
  closedir(d);

  CHECK_ERR(rundir_write(&rd, "../escape", "x", 0644), DRV_EINVAL, "leaves the run directory");
  CHECK_ERR(rundir_write(&rd, "logs/../../x", "x", 0644), DRV_EINVAL, "leaves");
  CHECK_ERR(rundir_write(&rd, "/tmp/x", "x", 0644), DRV_EINVAL, "absolute");
  CHECK_ERR(rundir_write(&rd, "nodir/x", "x", 0644), DRV_EIO, "/nodir/x");
  CHECK_OK(rundir_write(&rd, "logs/coordinator.log", "", 0644));
  rundir_close(&rd);
}

TEST(rundir_tail) {
  char buf[4096];
  /* Fewer lines than asked: all of them. */
  const char *p = harness_write_str("short.log", "one\ntwo\n");
  CHECK(strcmp(rundir_tail(p, 5, buf, sizeof buf), "one\ntwo\n") == 0);
  CHECK(strcmp(rundir_tail(p, 1, buf, sizeof buf), "two\n") == 0);
  CHECK(strcmp(rundir_tail(p, 0, buf, sizeof buf), "") == 0);

  /* No final newline: the partial line is the last line. */
  p = harness_write_str("partial.log", "a\nb\nc");
  CHECK(strcmp(rundir_tail(p, 2, buf, sizeof buf), "b\nc") == 0);

  /* Many lines, far more than one read chunk. */
  FILE *f = fopen("long.log", "w");
  CHECK(f != NULL);
  for (int i = 0; i < 20000; i++) fprintf(f, "line %d\n", i);
  fclose(f);
  CHECK(strcmp(rundir_tail("long.log", 3, buf, sizeof buf),
               "line 19997\nline 19998\nline 19999\n") == 0);

  /* Lines longer than a chunk, with the newlines on chunk edges. */
  f = fopen("wide.log", "w");
  CHECK(f != NULL);
  for (int i = 0; i < 4; i++) {
    for (int j = 0; j < 4095; j++) fputc('a' + i, f);
    fputc('\n', f);
  }
  fclose(f);
  char *big = malloc(20000);
  CHECK(big != NULL);
  rundir_tail("wide.log", 2, big, 20000);
  CHECK_INT_EQ(strlen(big), 2 * 4096);
  CHECK(big[0] == 'c' && big[4095] == '\n' && big[4096] == 'd' && big[8191] == '\n');
  free(big);

  /* Too small a buffer keeps the newest end. */
  char small[8];
  CHECK(strcmp(rundir_tail("long.log", 3, small, sizeof small), " 19999\n") == 0);

  CHECK(strcmp(rundir_tail("missing.log", 3, buf, sizeof buf), "") == 0);
  CHECK(strcmp(rundir_tail(".", 3, buf, sizeof buf), "") == 0);
  p = harness_write_str("empty.log", "");
  CHECK(strcmp(rundir_tail(p, 3, buf, sizeof buf), "") == 0);
}

TEST(rundir_base_not_creatable) {
  harness_write_str("plain", "a regular file\n");
  rundir rd;
  CHECK_ERR(rundir_create("plain/runs", "exp", &rd), DRV_EIO,
            "cannot create 'plain/runs': 'plain' exists and is not a directory");
  CHECK_ERR(rundir_create("plain", "exp", &rd), DRV_EIO,
            "cannot create 'plain': exists and is not a directory");
  CHECK(rd.events == NULL);
  /* A relative base with redundant slashes still works. */
  CHECK_OK(rundir_create("ok//runs/", "exp", &rd));
  CHECK(strstr(rd.path, "/ok/runs/exp-") != NULL);
  rundir_close(&rd);
}

/* afile: a failed write leaves the old file and no temporary; an abort
 * leaves the old file; a commit replaces it with the exact mode. Writing
 * to a full device is what the tmpfs tests (test_safetensors.sh,
 * test_checkpoint.sh) cover; here a write to a closed descriptor fails. */
TEST(afile_whole_or_nothing) {
  CHECK(system("mkdir -p af && printf old > af/x") == 0);
  afile f;
  CHECK_OK(afile_open(&f, "af/x"));
  CHECK_OK(afile_write(&f, "new", 3));
  afile_abort(&f);
  char *s = slurp("af/x");
  CHECK(strcmp(s, "old") == 0);
  free(s);

  CHECK_OK(afile_open(&f, "af/x"));
  close(f.fd); /* the next write fails with EBADF */
  CHECK(afile_write(&f, "new", 3) < 0);
  f.fd = open("/dev/null", O_WRONLY); /* commit closes something */
  CHECK_ERR(afile_commit(&f, 0644), DRV_EIO, "cannot write 'af/x': write failed");
  s = slurp("af/x");
  CHECK(strcmp(s, "old") == 0);
  free(s);

  CHECK_OK(afile_open(&f, "af/x"));
  CHECK_OK(afile_write(&f, "new", 3));
  CHECK_OK(afile_commit(&f, 0640));
  s = slurp("af/x");
  CHECK(strcmp(s, "new") == 0);
  free(s);
  struct stat st;
  CHECK(stat("af/x", &st) == 0 && (st.st_mode & 07777) == 0640);
  DIR *d = opendir("af");
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  CHECK_INT_EQ(n, 1); /* no temporary left behind */
}

/* afile: a big file goes out in pieces that end at multiples of
 * AFILE_PIECE (the kernel never sees a larger write) with its writeback
 * started every AFILE_WRITEBACK bytes; the bytes are the ones given, in
 * order, whatever the sizes of the calls. */
TEST(afile_big_file_in_pieces) {
  CHECK(mkdir("afbig", 0755) == 0);
  size_t n = 2 * AFILE_WRITEBACK + AFILE_PIECE / 2 + 7;
  unsigned char *buf = malloc(n), *back = malloc(n + 1);
  CHECK(buf && back);
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)((i * 2654435761u) >> 13);
  afile f;
  CHECK_OK(afile_open(&f, "afbig/x"));
  const size_t cuts[] = {3, AFILE_PIECE - 1, 5 * AFILE_PIECE + 11, AFILE_WRITEBACK + 1, n};
  size_t at = 0;
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    CHECK_OK(afile_write(&f, buf + at, cuts[i] - at));
    at = cuts[i];
    CHECK(f.pos == at);
    CHECK(f.started == at / AFILE_WRITEBACK * AFILE_WRITEBACK); /* started at each 8 MiB */
  }
  CHECK_OK(afile_commit(&f, 0644));
  FILE *in = fopen("afbig/x", "rb");
  CHECK(in != NULL);
  CHECK(fread(back, 1, n + 1, in) == n);
  fclose(in);
  CHECK(memcmp(back, buf, n) == 0);
  free(back);
  free(buf);
}

TEST(rundir_numbered_names) {
  char b[64];
  CHECK_INT_EQ(rundir_node_log(b, sizeof b, NULL, "worker", 3), strlen("logs/worker-3.log"));
  CHECK(strcmp(b, "logs/worker-3.log") == 0);
  CHECK(rundir_node_log(b, sizeof b, "/r", "ps", 0) > 0 && strcmp(b, "/r/logs/ps-0.log") == 0);
  CHECK(rundir_node_key(b, sizeof b, "/r", "chief", 0) > 0);
  CHECK(strcmp(b, "/r/keys/chief-0.key") == 0);
  CHECK(rundir_host_log(b, sizeof b, "/r", "h1") > 0 && strcmp(b, "/r/logs/ssh-h1.log") == 0);
  CHECK(rundir_ps_shards(b, sizeof b, NULL, 2) > 0 && strcmp(b, "ps-2.safetensors") == 0);
  CHECK(rundir_step(b, sizeof b, "/r/" RUNDIR_CHECKPOINTS, 1200) > 0);
  CHECK(strcmp(b, "/r/checkpoints/step-1200") == 0);
  /* As snprintf: what it needs back, and a cut name in a short buffer. */
  char s[8];
  CHECK_INT_EQ(rundir_node_log(s, sizeof s, "/run", "worker", 1), strlen("/run/logs/worker-1.log"));
  CHECK(strcmp(s, "/run/lo") == 0);
  CHECK_INT_EQ(rundir_step(s, 3, "/run", 5), strlen("/run/step-5"));
  CHECK(strcmp(s, "/r") == 0);
  CHECK_INT_EQ(rundir_step(NULL, 0, NULL, 42), strlen("step-42"));
  /* A step directory's name read back; anything else is none. */
  CHECK_INT_EQ(rundir_step_of("step-0"), 0);
  CHECK_INT_EQ(rundir_step_of("step-1200"), 1200);
  const char *not[] = {"step-", "step-x", "step-12a", "step--1", "step-+1", "Step-1", "step-1.tmp",
                       "step-99999999999999999999", "ps-1", ""};
  for (size_t i = 0; i < sizeof not / sizeof *not; i++) CHECK_INT_EQ(rundir_step_of(not[i]), -1);
}
