/* test_tboard.c - TensorBoard's child process (run/tboard.h) with a stand-in
 * program (a shell script named by DROVER_TENSORBOARD that records its
 * arguments, and, like TensorBoard's data server, leaves a child of its
 * own in its process group): the arguments and URL, the refusals (no
 * program, a taken port, an address not of this machine, a port out of
 * range), its own session, the end of its whole group on stop, an exit
 * noticed, and its death with a SIGKILLed parent. The real TensorBoard is
 * driven by tests/cli/test_tensorboard.sh. */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "run/tboard.h"

/* A stand-in that writes its arguments to args, its pid and its child's
 * to pids, then waits (or exits with `status` when >= 0). */
static void stand_in(int status) {
  char text[512];
  snprintf(text, sizeof text,
           "#!/bin/sh\n"
           "printf '%%s\\n' \"$@\" > args.tmp && mv args.tmp args\n"
           "sleep 300 & echo \"$$ $!\" > pids.tmp && mv pids.tmp pids\n"
           "%s\n",
           status >= 0 ? "exit $EXIT" : "wait");
  const char *p = harness_write_str("tb", text);
  CHECK(chmod(p, 0755) == 0);
  CHECK(setenv("DROVER_TENSORBOARD", p, 1) == 0);
  snprintf(text, sizeof text, "%d", status);
  CHECK(setenv("EXIT", text, 1) == 0);
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

static bool wait_file(const char *p, double secs) {
  struct timespec nap = {0, 10 * 1000 * 1000};
  for (int i = 0; i < (int)(secs * 100) && !exists(p); i++) nanosleep(&nap, NULL);
  return exists(p);
}

/* Gone, or a zombie nobody reaps yet (its parent died). */
static bool gone(pid_t pid) {
  char path[64], line[256] = "";
  snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return true;
  bool got = fgets(line, sizeof line, f) != NULL;
  fclose(f);
  const char *st = got ? strrchr(line, ')') : NULL;
  return st && st[1] == ' ' && st[2] == 'Z';
}

static bool wait_gone(pid_t pid, double secs) {
  struct timespec nap = {0, 10 * 1000 * 1000};
  for (int i = 0; i < (int)(secs * 100) && !gone(pid); i++) nanosleep(&nap, NULL);
  return gone(pid);
}

static void read_pids(long *a, long *b) {
  FILE *f = fopen("pids", "r");
  CHECK(f && fscanf(f, "%ld %ld", a, b) == 2);
  fclose(f);
}

/* A port on 127.0.0.1 someone listens on (fd returned). */
static int taken_port(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0);
  CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

TEST(tboard_program_from_env) {
  char path[4096];
  CHECK(setenv("DROVER_TENSORBOARD", "/nonexistent/tensorboard", 1) == 0);
  CHECK_ERR(tboard_program(path, sizeof path), DRV_EUNSUPPORTED,
            "DROVER_TENSORBOARD='/nonexistent/tensorboard' is not an executable file");
  stand_in(-1);
  CHECK_OK(tboard_program(path, sizeof path));
  CHECK_STR_CONTAINS(path, "/tb");
}

TEST(tboard_refuses_what_it_cannot_honour) {
  stand_in(-1);
  int port, fd = taken_port(&port);
  char want[96];
  snprintf(want, sizeof want, "cannot listen on 127.0.0.1 port %d: Address already in use", port);
  CHECK_ERR(tboard_check(&(tboard_opts){.port = port}), DRV_EINVAL, want);
  close(fd);
  CHECK_ERR(tboard_check(&(tboard_opts){.port = 70000}), DRV_EINVAL, "port must be 1..65535");
  /* TEST-NET-1 (RFC 5737): an address of no machine here */
  CHECK_ERR(tboard_check(&(tboard_opts){.bind = "192.0.2.1"}), DRV_EINVAL,
            "cannot listen on 192.0.2.1: Cannot assign requested address");
  CHECK_ERR(tboard_check(&(tboard_opts){.bind = "no-such-host.invalid"}), DRV_EINVAL,
            "cannot listen on no-such-host.invalid");
  CHECK(!exists("args")); /* nothing was started */
}

TEST(tboard_start_args_url_and_stop_ends_its_group) {
  stand_in(-1);
  int port, fd = taken_port(&port);
  close(fd); /* a port free now */
  tboard *t;
  CHECK_OK(tboard_start(&(tboard_opts){.port = port}, "/x/events", false, "run-1", "tb.log", &t));
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
  CHECK(strcmp(tboard_url(t), url) == 0);
  CHECK(wait_file("pids", 10) && wait_file("args", 10));
  char args[512] = "", want[256];
  FILE *f = fopen("args", "r");
  CHECK(f && fread(args, 1, sizeof args - 1, f) > 0);
  fclose(f);
  snprintf(want, sizeof want,
           "--logdir\n/x/events\n--host\n127.0.0.1\n--port\n%d\n--window_title\nrun-1\n", port);
  CHECK(strcmp(args, want) == 0);
  long pid, child;
  read_pids(&pid, &child);
  CHECK_INT_EQ(pid, tboard_pid(t));
  CHECK_INT_EQ(getsid((pid_t)pid), pid); /* a session of its own: no terminal's signals */
  CHECK_INT_EQ(getpgid((pid_t)child), pid);
  CHECK(!tboard_exited(t, NULL, 0));
  CHECK(tboard_stop(t));
  CHECK(gone((pid_t)pid));
  CHECK(wait_gone((pid_t)child, 5)); /* its group went with it */
}

TEST(tboard_exit_noticed) {
  stand_in(3);
  tboard *t;
  CHECK_OK(tboard_start(&(tboard_opts){.bind = "::1"}, "a:/x,b:/y", true, "t", NULL, &t));
  CHECK_STR_CONTAINS(tboard_url(t), "http://[::1]:");
  char why[64] = "";
  for (int i = 0; i < 500 && !tboard_exited(t, why, sizeof why); i++) usleep(10000);
  CHECK(strcmp(why, "exited with status 3") == 0);
  CHECK(!tboard_stop(t)); /* it had ended by itself */
}

/* Its parent SIGKILLed: the kernel ends it (PR_SET_PDEATHSIG). */
TEST(tboard_dies_with_its_parent) {
  stand_in(-1);
  pid_t mid = fork();
  CHECK(mid >= 0);
  if (mid == 0) {
    tboard *t;
    if (tboard_start(&(tboard_opts){0}, "/x", false, "t", "tb.log", &t) < 0) _exit(1);
    pause();
    _exit(0);
  }
  CHECK(wait_file("pids", 10));
  long pid, child;
  read_pids(&pid, &child);
  CHECK(!gone((pid_t)pid));
  kill(mid, SIGKILL);
  waitpid(mid, NULL, 0);
  CHECK(wait_gone((pid_t)pid, 5));
  kill((pid_t)child, SIGKILL); /* the stand-in's own child has no such tie */
}

TEST(tboard_spec_names) {
  CHECK(tboard_spec_ok("run-1", "/runs/run-1/events"));
  CHECK(!tboard_spec_ok("a:b", "/x"));
  CHECK(!tboard_spec_ok("a", "/x,y"));
  CHECK(!tboard_spec_ok("a", "relative"));
  CHECK(!tboard_spec_ok("", "/x"));
}
