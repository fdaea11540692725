/* detach.c - `drover run --detach` (see detach.h): the parent that forks a
 * session of its own and waits for the run directory, and the child's end
 * of the pipe that the coordinator writes it to.
 */
#include "launch/detach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch/launch.h"
#include "train/progress.h"
#include "base/rundir.h"

#define DETACH_WAIT 120.0 /* seconds for the cluster to start ($DROVER_DETACH_TIMEOUT) */

/* ============================== the child ================================ */

static int notify_fd = -1;
static char detach_log[PATH_MAX];

void detach_child_init(void) {
  const char *fd = getenv("DROVER_DETACH_FD"), *log = getenv("DROVER_DETACH_LOG");
  if (fd) {
    char *end;
    long v = strtol(fd, &end, 10);
    /* Nodes are spawned (exec) by this process: they must not hold the
     * pipe, or the parent would wait for them too. */
    if (!*end && v > 2 && fcntl((int)v, F_SETFD, FD_CLOEXEC) == 0) notify_fd = (int)v;
  }
  if (log) snprintf(detach_log, sizeof detach_log, "%s", log);
  unsetenv("DROVER_DETACH_FD");
  unsetenv("DROVER_DETACH_LOG");
}

void detach_notify(const char *run_dir) {
  if (notify_fd < 0) return;
  if (detach_log[0]) {
    char dest[PATH_MAX + 32];
    snprintf(dest, sizeof dest, "%s/" RUNDIR_SCRIPT_LOG, run_dir);
    if (rename(detach_log, dest) != 0 && symlink(detach_log, dest) != 0)
      fprintf(stderr, "drover: cannot move %s to %s: %s\n", detach_log, dest, strerror(errno));
  }
  char line[PATH_MAX + 2];
  int k = snprintf(line, sizeof line, "%s\n", run_dir);
  if (k > 0 && write(notify_fd, line, (size_t)k) != k)
    fprintf(stderr, "drover: cannot tell the detaching parent: %s\n", strerror(errno));
  close(notify_fd);
  notify_fd = -1;
}

/* ============================== the parent =============================== */

/* runs/detached-<stamp>-<pid>.log (absolute) into path; 0 or -1. */
static int make_log(char *path, size_t n) {
  if (mkdir(RUNDIR_BASE, 0755) != 0 && errno != EEXIST) return -1;
  char dir[PATH_MAX], stamp[32];
  if (!realpath(RUNDIR_BASE, dir)) return -1;
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  int k = snprintf(path, n, "%s/detached-%s-%d.log", dir, stamp, (int)getpid());
  return k > 0 && (size_t)k < n ? 0 : -1;
}

/* The child: a session of its own, then `drover run ARGS` again. */
static void become_detached(int n, char **args, int wfd, int logfd, const char *log) {
  setsid();
  int nul = open("/dev/null", O_RDONLY);
  if (nul < 0 || dup2(nul, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0) _exit(127);
  fcntl(wfd, F_SETFD, 0); /* survives the exec */
  char fd[16];
  snprintf(fd, sizeof fd, "%d", wfd);
  setenv("DROVER_DETACH_FD", fd, 1);
  setenv("DROVER_DETACH_LOG", log, 1);
  char **argv = calloc((size_t)n + 3, sizeof *argv);
  if (!argv) _exit(127);
  const char *self = launch_self_exe();
  argv[0] = (char *)"drover";
  argv[1] = (char *)"run";
  for (int i = 0; i < n; i++) argv[2 + i] = args[i];
  execv(self, argv);
  fprintf(stderr, "drover: cannot run '%s': %s\n", self, strerror(errno));
  _exit(127);
}

/* Reads the run directory line; 1 got it, 0 EOF (the child is gone), -1
 * timed out. */
static int wait_line(int fd, char *line, size_t n, double timeout) {
  size_t len = 0;
  double deadline = progress_now() + timeout;
  while (len + 1 < n) {
    int left = (int)((deadline - progress_now()) * 1000);
    if (left <= 0) return -1;
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    ssize_t k = read(fd, line + len, n - 1 - len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return 0;
    len += (size_t)k;
    line[len] = '\0';
    char *nl = strchr(line, '\n');
    if (nl) {
      *nl = '\0';
      return 1;
    }
  }
  return -1;
}

static void report_exit(pid_t pid, const char *log) {
  int st = 0;
  double deadline = progress_now() + 5;
  pid_t r;
  while ((r = waitpid(pid, &st, WNOHANG)) == 0 && progress_now() < deadline) usleep(20000);
  char how[64] = "it is still running";
  if (r == pid && WIFEXITED(st)) snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(st));
  else if (r == pid && WIFSIGNALED(st))
    snprintf(how, sizeof how, "killed by signal %d", WTERMSIG(st));
  char tail[4096];
  rundir_tail(log, 15, tail, sizeof tail);
  fprintf(stderr, "drover: the detached run ended before its cluster started (%s); the end of "
                  "%s:\n%s", how, log, tail[0] ? tail : "(empty)\n");
}

/* "tensorboard:   URL" when the run serves one (tensorboard = true: its
 * file is written before the cluster's nodes start). */
static void print_tensorboard(const char *dir) {
  char path[PATH_MAX + 32], url[256];
  snprintf(path, sizeof path, "%s/" RUNDIR_TENSORBOARD, dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (fscanf(f, "%255s", url) == 1) printf("tensorboard:   %s\n", url);
  fclose(f);
}

int detach_run(int n, char **args) {
  char log[PATH_MAX];
  if (make_log(log, sizeof log) < 0) {
    fprintf(stderr, "drover: cannot create a log file in ./runs: %s\n", strerror(errno));
    return 1;
  }
  int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644), p[2];
  if (logfd < 0 || pipe2(p, O_CLOEXEC) != 0) {
    fprintf(stderr, "drover: cannot start a detached run (%s): %s\n", log, strerror(errno));
    return 1;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "drover: cannot fork: %s\n", strerror(errno));
    return 1;
  }
  if (pid == 0) become_detached(n, args, p[1], logfd, log);
  close(p[1]);
  close(logfd);
  const char *env = getenv("DROVER_DETACH_TIMEOUT");
  double timeout = env && atof(env) > 0 ? atof(env) : DETACH_WAIT;
  char dir[PATH_MAX + 2];
  int got = wait_line(p[0], dir, sizeof dir, timeout);
  close(p[0]);
  if (got == 0) {
    report_exit(pid, log);
    return 1;
  }
  if (got < 0) {
    fprintf(stderr, "drover: no cluster started within %g s; the run goes on in the background "
                    "(pid %d), its output in %s\n", timeout, (int)pid, log);
    return 1;
  }
  printf("run directory: %s\n"
         "output:        %s/" RUNDIR_SCRIPT_LOG "\n"
         "pid:           %d\n"
         "attach with:   drover attach %s\n",
         dir, dir, (int)pid, dir);
  print_tensorboard(dir);
  return 0;
}
