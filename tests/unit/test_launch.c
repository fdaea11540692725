/* test_launch.c - the local launcher, driven with a fake node: a shell
 * script named by $DROVER_LAUNCH_EXE that writes its arguments, the
 * variables the launcher sets and its stdin to its log, then exits with a
 * chosen code or sleeps. Every process a case starts is ended by pid (the
 * sleeping fake also ends by itself after 10 s should a case fail). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "harness.h"
#include "launch/launch.h"
#include "proto/wire.h"

static const char fake_node[] =
    "#!/bin/sh\n"
    "for a in \"$@\"; do echo \"arg: $a\"; done\n"
    "echo \"secret: ${DROVER_SECRET_FILE-unset}\"\n"
    "echo \"secret vars: $(env | grep -c '^DROVER_SECRET_FILE=')\"\n"
    "echo \"blas: ${OPENBLAS_NUM_THREADS-unset}\"\n"
    "echo \"stdin: $(readlink /proc/$$/fd/0)\"\n"
    "echo \"to stderr\" >&2\n"
    "case \"$FAKE_MODE\" in\n"
    "  sleep) exec sleep 10 ;;\n"
    "  exit*) exit \"${FAKE_MODE#exit}\" ;;\n"
    "esac\n";

/* What on_exit reported for one task (its task_ud). */
typedef struct exit_rec {
  int calls;
  int64_t status;
  int sig;
} exit_rec;

typedef struct fixture {
  uv_loop_t loop;
  launcher *l;
  int exits;            /* on_exit calls, all tasks */
  int destroy_on_exit;  /* on_exit destroys the launcher */
  char run_dir[PATH_MAX + 16];
  char secret[PATH_MAX + 32];
  char exe[PATH_MAX + 16];
} fixture;

static void on_exit_cb(launcher *l, void *task_ud, int64_t status, int sig) {
  fixture *f = l->ud;
  exit_rec *r = task_ud;
  r->calls++;
  r->status = status;
  r->sig = sig;
  f->exits++;
  if (f->destroy_on_exit) {
    l->ops->destroy(l);
    f->l = NULL;
  }
}

static void setup(fixture *f) {
  memset(f, 0, sizeof *f);
  CHECK_INT_EQ(uv_loop_init(&f->loop), 0);
  char cwd[PATH_MAX];
  CHECK(realpath(".", cwd) != NULL);
  snprintf(f->run_dir, sizeof f->run_dir, "%s/run", cwd);
  snprintf(f->secret, sizeof f->secret, "%s/secret", f->run_dir);
  snprintf(f->exe, sizeof f->exe, "%s/fake-node", cwd);
  CHECK(mkdir("run", 0755) == 0 && mkdir("run/logs", 0755) == 0);
  harness_write_str("run/secret", "not-on-any-command-line");
  harness_write_str("fake-node", fake_node);
  CHECK(chmod("fake-node", 0755) == 0);
  setenv("DROVER_LAUNCH_EXE", f->exe, 1);
  unsetenv("DROVER_SECRET_FILE");
  unsetenv("OPENBLAS_NUM_THREADS");
  CHECK_OK(launch_local_new(&f->loop, NULL, on_exit_cb, f, &f->l));
  CHECK(f->l != NULL);
}

static launch_task make_task(const fixture *f, int role, int index, int cpus) {
  launch_task t = {.role = role, .index = index, .coord = "127.0.0.1:40001",
                   .run_dir = f->run_dir, .secret_file = f->secret,
                   .bind_host = "127.0.0.1", .cpus = cpus, .heartbeat_ms = 250,
                   .timeout_ms = 4000};
  return t;
}

static void on_timer(uv_timer_t *t) { *(int *)t->data = 1; }

/* Pumps the loop until f->exits reaches `target` or `ms` pass. */
static int run_until_exits(fixture *f, int target, int ms) {
  uv_timer_t timer;
  int timed_out = 0;
  CHECK_INT_EQ(uv_timer_init(&f->loop, &timer), 0);
  timer.data = &timed_out;
  CHECK_INT_EQ(uv_timer_start(&timer, on_timer, (uint64_t)ms, 0), 0);
  while (f->exits < target && !timed_out) uv_run(&f->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&timer, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT); /* runs the close callbacks */
  return f->exits >= target;
}

static void teardown(fixture *f) {
  if (f->l) f->l->ops->destroy(f->l);
  f->l = NULL;
  uv_run(&f->loop, UV_RUN_DEFAULT); /* every handle closes and is freed */
  CHECK_INT_EQ(uv_loop_close(&f->loop), 0);
}

static char *slurp(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) harness_fail(__FILE__, __LINE__, "cannot open %s", path);
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, fp);
  buf[n] = '\0';
  fclose(fp);
  return buf;
}

/* The log the fake writes for this task, line by line. */
static void expect_log(char *out, size_t n, const fixture *f, const char *role, int index,
                       int cpus, const char *blas) {
  size_t k = strlen(out);
  k += (size_t)snprintf(out + k, n - k,
                        "arg: node\narg: --coord\narg: 127.0.0.1:40001\narg: --role\narg: %s\n"
                        "arg: --index\narg: %d\narg: --run-dir\narg: %s\narg: --bind\n"
                        "arg: 127.0.0.1\n", role, index, f->run_dir);
  if (cpus > 0) k += (size_t)snprintf(out + k, n - k, "arg: --cpus\narg: %d\n", cpus);
  snprintf(out + k, n - k,
           "arg: --heartbeat-ms\narg: 250\narg: --timeout-ms\narg: 4000\n"
           "secret: %s\nsecret vars: 1\nblas: %s\nstdin: /dev/null\nto stderr\n",
           f->secret, blas);
}

/* Whether this process holds an open descriptor on `path`. */
static int holds_fd_on(const char *path) {
  DIR *d = opendir("/proc/self/fd");
  CHECK(d != NULL);
  struct dirent *e;
  int found = 0;
  while ((e = readdir(d))) {
    char link[300], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(link, target, sizeof target - 1);
    if (k <= 0) continue;
    target[k] = '\0';
    if (strcmp(target, path) == 0) found = 1;
  }
  closedir(d);
  return found;
}

/* Waits (bounded) until pid no longer exists, not even as a zombie. */
static int gone(pid_t pid) {
  for (int i = 0; i < 300; i++) {
    if (kill(pid, 0) < 0 && errno == ESRCH) return 1;
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return 0;
}

TEST(launch_local_args_env_log) {
  fixture f;
  setup(&f);
  /* Inherited values the launcher must replace, not duplicate. */
  setenv("DROVER_SECRET_FILE", "/wrong/secret", 1);
  setenv("OPENBLAS_NUM_THREADS", "7", 1);
  setenv("FAKE_MODE", "exit0", 1);

  launch_task t = make_task(&f, ROLE_WORKER, 3, 2);
  exit_rec r1 = {0};
  pid_t pid = 0;
  CHECK_OK(f.l->ops->start(f.l, &t, &r1, &pid));
  CHECK(pid > 0);
  CHECK_INT_EQ(f.l->ops->running(f.l), 1);
  char log[PATH_MAX + 64];
  snprintf(log, sizeof log, "%s/logs/worker-3.log", f.run_dir);
  CHECK(!holds_fd_on(log)); /* the parent closed its copy */
  CHECK(run_until_exits(&f, 1, 10000));
  CHECK_INT_EQ(r1.calls, 1);
  CHECK_INT_EQ(r1.status, 0);
  CHECK_INT_EQ(r1.sig, 0);
  CHECK_INT_EQ(f.l->ops->running(f.l), 0);

  /* Restarted with cpus = 0: appended to the same log, thread count left
   * as inherited, exit code reported. */
  setenv("FAKE_MODE", "exit5", 1);
  t.cpus = 0;
  exit_rec r2 = {0};
  CHECK_OK(f.l->ops->start(f.l, &t, &r2, &pid));
  CHECK(run_until_exits(&f, 2, 10000));
  CHECK_INT_EQ(r2.calls, 1);
  CHECK_INT_EQ(r2.status, 5);
  CHECK_INT_EQ(r1.calls, 1);

  static char want[8192];
  want[0] = '\0';
  expect_log(want, sizeof want, &f, "worker", 3, 2, "2");
  expect_log(want, sizeof want, &f, "worker", 3, 0, "7");
  const char *got = slurp(log);
  if (strcmp(got, want) != 0)
    harness_fail(__FILE__, __LINE__, "log:\n%s\nexpected:\n%s", got, want);
  teardown(&f);
}

TEST(launch_local_exit_status) {
  fixture f;
  setup(&f);
  exit_rec ps = {0}, chief = {0};
  launch_task tp = make_task(&f, ROLE_PS, 0, 0), tc = make_task(&f, ROLE_CHIEF, 0, 0);
  setenv("FAKE_MODE", "exit42", 1);
  CHECK_OK(f.l->ops->start(f.l, &tp, &ps, NULL));
  setenv("FAKE_MODE", "exit0", 1);
  CHECK_OK(f.l->ops->start(f.l, &tc, &chief, NULL));
  CHECK_INT_EQ(f.l->ops->running(f.l), 2);
  CHECK(run_until_exits(&f, 2, 10000));
  CHECK_INT_EQ(ps.calls, 1);
  CHECK_INT_EQ(ps.status, 42);
  CHECK_INT_EQ(chief.calls, 1);
  CHECK_INT_EQ(chief.status, 0);
  CHECK_INT_EQ(f.l->ops->running(f.l), 0);
  CHECK_STR_CONTAINS(slurp("run/logs/ps-0.log"), "arg: ps\n");
  CHECK_STR_CONTAINS(slurp("run/logs/chief-0.log"), "arg: chief\n");
  teardown(&f);
}

TEST(launch_local_signal) {
  fixture f;
  setup(&f);
  setenv("FAKE_MODE", "sleep", 1);
  launch_task t = make_task(&f, ROLE_EVALUATOR, 0, 0);
  exit_rec r = {0}, other = {0};
  pid_t pid = 0;
  CHECK_OK(f.l->ops->start(f.l, &t, &r, &pid));
  /* Its own session and process group, away from the terminal's signals. */
  CHECK_INT_EQ(getpgid(pid), pid);
  CHECK_INT_EQ(getsid(pid), pid);
  CHECK(getpgid(pid) != getpgid(0));

  CHECK(!run_until_exits(&f, 1, 200)); /* it sleeps */
  CHECK_INT_EQ(f.l->ops->running(f.l), 1);
  CHECK_OK(f.l->ops->signal(f.l, &other, SIGTERM)); /* unknown task: no-op */
  CHECK_OK(f.l->ops->signal(f.l, &r, SIGTERM));
  CHECK(run_until_exits(&f, 1, 10000));
  CHECK_INT_EQ(r.calls, 1);
  CHECK_INT_EQ(r.sig, SIGTERM);
  CHECK_INT_EQ(f.l->ops->running(f.l), 0);
  CHECK(gone(pid));
  CHECK_OK(f.l->ops->signal(f.l, &r, SIGTERM)); /* ended: no-op */
  teardown(&f);
}

TEST(launch_local_destroy_kills) {
  fixture f;
  setup(&f);
  setenv("FAKE_MODE", "sleep", 1);
  exit_rec a = {0}, b = {0};
  launch_task ta = make_task(&f, ROLE_PS, 0, 0), tb = make_task(&f, ROLE_WORKER, 1, 0);
  pid_t pa = 0, pb = 0;
  CHECK_OK(f.l->ops->start(f.l, &ta, &a, &pa));
  CHECK_OK(f.l->ops->start(f.l, &tb, &b, &pb));
  CHECK_INT_EQ(f.l->ops->running(f.l), 2);
  f.l->ops->destroy(f.l);
  f.l = NULL;
  /* Killed and reaped: no zombie left behind either. */
  CHECK(gone(pa));
  CHECK(gone(pb));
  teardown(&f);
  CHECK_INT_EQ(a.calls + b.calls, 0); /* no exit callbacks after destroy */
}

/* on_exit may destroy the launcher: the other task is killed, and nothing
 * touches the freed launcher afterwards. */
TEST(launch_local_destroy_from_exit_cb) {
  fixture f;
  setup(&f);
  f.destroy_on_exit = 1;
  exit_rec quick = {0}, slow = {0};
  launch_task tq = make_task(&f, ROLE_CHIEF, 0, 0), ts = make_task(&f, ROLE_WORKER, 1, 0);
  pid_t ps = 0;
  setenv("FAKE_MODE", "sleep", 1);
  CHECK_OK(f.l->ops->start(f.l, &ts, &slow, &ps));
  setenv("FAKE_MODE", "exit0", 1);
  CHECK_OK(f.l->ops->start(f.l, &tq, &quick, NULL));
  CHECK(run_until_exits(&f, 1, 10000));
  CHECK(f.l == NULL);
  CHECK_INT_EQ(quick.calls, 1);
  CHECK(gone(ps));
  teardown(&f);
  CHECK_INT_EQ(slow.calls, 0);
}

TEST(launch_local_start_errors) {
  fixture f;
  setup(&f);
  launch_task t = make_task(&f, ROLE_PS, 0, 0);
  exit_rec r = {0};
  pid_t pid = 123;

  setenv("DROVER_LAUNCH_EXE", "/nonexistent/drover", 1);
  CHECK_ERR(f.l->ops->start(f.l, &t, &r, &pid), DRV_EIO,
            "launch ps-0: cannot start '/nonexistent/drover'");
  CHECK_INT_EQ(pid, 0);
  CHECK_INT_EQ(f.l->ops->running(f.l), 0);
  setenv("DROVER_LAUNCH_EXE", f.exe, 1);

  char nologs[PATH_MAX + 32];
  snprintf(nologs, sizeof nologs, "%s/elsewhere", f.run_dir);
  t.run_dir = nologs;
  CHECK_ERR(f.l->ops->start(f.l, &t, &r, &pid), DRV_EIO, "/run/elsewhere/logs/ps-0.log");
  t.run_dir = f.run_dir;

  t.role = 9;
  CHECK_ERR(f.l->ops->start(f.l, &t, &r, &pid), DRV_EINVAL, "unknown role 9");
  t.role = ROLE_WORKER;
  t.secret_file = NULL;
  CHECK_ERR(f.l->ops->start(f.l, &t, &r, &pid), DRV_EINVAL, "launch worker-0");
  CHECK_INT_EQ(f.l->ops->running(f.l), 0);
  teardown(&f);
  CHECK_INT_EQ(r.calls, 0);
}

TEST(launch_self_exe) {
  unsetenv("DROVER_LAUNCH_EXE");
  char self[PATH_MAX];
  ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
  CHECK(k > 0);
  self[k] = '\0';
  CHECK(strcmp(launch_self_exe(), self) == 0);
  CHECK(launch_self_exe()[0] == '/');
  setenv("DROVER_LAUNCH_EXE", "/opt/wrapper", 1);
  CHECK(strcmp(launch_self_exe(), "/opt/wrapper") == 0);
}
