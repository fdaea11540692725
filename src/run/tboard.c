/* tboard.c - TensorBoard as drover's child process (see tboard.h): the
 * program's lookup, the port and address check, the fork and exec, and
 * its end.
 */
#include "run/tboard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"

struct tboard {
  pid_t pid;      /* its session's and process group's id too */
  char url[320];
  char log[1200]; /* "" when it writes to our own output */
  bool exited;    /* reaped */
  int status;     /* waitpid's, once exited */
};

/* ============================== the program ============================== */

static bool executable(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* The venv `make tensorboard` makes, beside this binary: ./drover in a
 * source tree has it in build/, build/drover next to it. */
static bool beside_binary(char *path, size_t n) {
  static const char *const rel[] = {"build/tensorboard/bin/tensorboard",
                                    "tensorboard/bin/tensorboard"};
  char exe[PATH_MAX];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (k <= 0) return false;
  exe[k] = '\0';
  char *slash = strrchr(exe, '/');
  if (!slash) return false;
  *slash = '\0';
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++)
    if (snprintf(path, n, "%s/%s", exe, rel[i]) < (int)n && executable(path)) return true;
  return false;
}

static bool on_path(char *path, size_t n) {
  const char *p = getenv("PATH");
  while (p && *p) {
    const char *end = strchr(p, ':');
    int len = end ? (int)(end - p) : (int)strlen(p);
    /* An empty entry is the working directory, as execvp has it. */
    if (snprintf(path, n, "%.*s%stensorboard", len, len ? p : ".", "/") < (int)n &&
        executable(path))
      return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

int tboard_program(char *path, size_t n) {
  const char *env = getenv("DROVER_TENSORBOARD");
  if (env && *env) {
    if (executable(env) && snprintf(path, n, "%s", env) < (int)n) return 0;
    return err_set(DRV_EUNSUPPORTED, "tensorboard: DROVER_TENSORBOARD='%s' is not an executable "
                   "file (it names the tensorboard program to run)", env);
  }
  if (beside_binary(path, n) || on_path(path, n)) return 0;
  return err_set(DRV_EUNSUPPORTED,
                 "tensorboard: TensorBoard is not installed: no `tensorboard` on PATH, no "
                 "build/tensorboard beside this drover, DROVER_TENSORBOARD not set. Install "
                 "it with `make tensorboard` in drover's source tree (TensorBoard from PyPI "
                 "into build/tensorboard), or `pip install tensorboard`, or set "
                 "DROVER_TENSORBOARD to a tensorboard program");
}

/* ============================== address and port ========================= */

static const char *bind_of(const tboard_opts *o) { return o->bind[0] ? o->bind : "127.0.0.1"; }

/* Listens for a moment on host:port (port 0: one the kernel picks, put in
 * *got): what TensorBoard will do. 0, or an errno (EAI_* as negative
 * numbers, gai_strerror's) with why[n] said. */
static int try_listen(const char *host, int port, int *got, char *why, size_t n) {
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  int rc = getaddrinfo(host, ps, &hints, &ai);
  if (rc != 0) {
    snprintf(why, n, "%s", gai_strerror(rc));
    return rc < 0 ? rc : -rc;
  }
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol), one = 1;
  rc = fd < 0 ? errno : 0;
  if (!rc) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (!rc && bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) rc = errno;
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (!rc && getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
    *got = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
  if (fd >= 0) close(fd);
  freeaddrinfo(ai);
  if (rc) snprintf(why, n, "%s", strerror(rc));
  return rc;
}

/* The port TensorBoard gets (o->port, or TensorBoard's way of choosing
 * one) into *port. */
static int pick_port(const tboard_opts *o, int *port) {
  char why[256];
  const char *host = bind_of(o);
  if (o->port < 0 || o->port > 65535)
    return err_set(DRV_EINVAL, "tensorboard: port must be 1..65535 (got %d)", o->port);
  if (o->port > 0) {
    if (try_listen(host, o->port, port, why, sizeof why) != 0)
      return err_set(DRV_EINVAL, "tensorboard: cannot listen on %s port %d: %s", host, o->port,
                     why);
    return 0;
  }
  int rc = EADDRINUSE;
  /* Another error than a taken port is the address's: no port will do. */
  for (int p = TBOARD_PORT; p < TBOARD_PORT + TBOARD_PORT_TRIES && rc == EADDRINUSE; p++)
    if ((rc = try_listen(host, p, port, why, sizeof why)) == 0) return 0;
  if (rc == EADDRINUSE && try_listen(host, 0, port, why, sizeof why) == 0) return 0;
  return err_set(DRV_EINVAL, "tensorboard: cannot listen on %s: %s", host, why);
}

int tboard_check(const tboard_opts *o) {
  char prog[PATH_MAX];
  int port, rc = tboard_program(prog, sizeof prog);
  return rc < 0 ? rc : pick_port(o, &port);
}

bool tboard_spec_ok(const char *name, const char *dir) {
  return dir[0] == '/' && !strchr(dir, ',') && !strchr(name, ',') && !strchr(name, ':') && *name;
}

/* "http://HOST:PORT/": every interface is reached by this host's name. */
static void make_url(tboard *t, const tboard_opts *o, int port) {
  const char *host = bind_of(o);
  char name[256];
  if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::")) {
    if (gethostname(name, sizeof name) != 0) snprintf(name, sizeof name, "localhost");
    name[sizeof name - 1] = '\0';
    host = name;
  }
  bool v6 = strchr(host, ':') != NULL;
  snprintf(t->url, sizeof t->url, "http://%s%s%s:%d/", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* ============================== start ==================================== */

/* fd, moved above the standard three so dup2 onto them never meets itself
 * (which would keep its close-on-exec). */
static int high_fd(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int h = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  close(fd);
  return h;
}

/* In the child, between fork and exec: async-signal-safe calls only. */
static void child(pid_t parent, int in, int out, char *const argv[], const char *fail) {
  setsid(); /* a session and process group of its own, no terminal */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127); /* drover died before the line above */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  static const int sigs[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
  dup2(in, 0);
  if (out >= 0) dup2(out, 1), dup2(out, 2);
  if (close_range(3, ~0U, 0) != 0)
    for (int fd = 3; fd < 65536; fd++) close(fd);
  execv(argv[0], argv);
  if (write(2, fail, strlen(fail)) < 0) _exit(127);
  _exit(127);
}

static int open_fds(const char *log, int *in, int *out) {
  *in = high_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  *out = log ? high_fd(open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) : -1;
  if (*in >= 0 && (!log || *out >= 0)) return 0;
  int rc = err_set(DRV_EIO, "tensorboard: cannot open '%s': %s", *in < 0 ? "/dev/null" : log,
                   strerror(errno));
  if (*in >= 0) close(*in);
  return rc;
}

int tboard_start(const tboard_opts *o, const char *logdir, bool spec, const char *title,
                 const char *log, tboard **out) {
  *out = NULL;
  char prog[PATH_MAX], ps[16], fail[PATH_MAX + 64];
  int port, in, fd, rc;
  if ((rc = tboard_program(prog, sizeof prog)) < 0 || (rc = pick_port(o, &port)) < 0) return rc;
  tboard *t = calloc(1, sizeof *t);
  if (!t) return err_set(DRV_ENOMEM, "out of memory");
  snprintf(ps, sizeof ps, "%d", port);
  snprintf(fail, sizeof fail, "drover: cannot execute %s\n", prog);
  char *argv[] = {prog, spec ? "--logdir_spec" : "--logdir", (char *)logdir, "--host",
                  (char *)bind_of(o), "--port", ps, "--window_title", (char *)title, NULL};
  if ((rc = open_fds(log, &in, &fd)) < 0) return free(t), rc;
  pid_t parent = getpid();
  t->pid = fork();
  if (t->pid == 0) child(parent, in, fd, argv, fail);
  int e = errno;
  close(in);
  if (fd >= 0) close(fd);
  if (t->pid < 0) {
    free(t);
    return err_set(DRV_EIO, "tensorboard: cannot start %s: %s", prog, strerror(e));
  }
  make_url(t, o, port);
  snprintf(t->log, sizeof t->log, "%s", log ? log : "");
  *out = t;
  return 0;
}

const char *tboard_url(const tboard *t) { return t->url; }
pid_t tboard_pid(const tboard *t) { return t->pid; }
const char *tboard_log(const tboard *t) { return t->log; }

/* ============================== the end ================================== */

/* Whether it has exited, without reaping it: a zombie keeps its pid, so
 * its group's id cannot go to another process before the group is
 * signalled. `wait` blocks. */
static bool ended(tboard *t, bool wait) {
  siginfo_t si;
  for (;;) {
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)t->pid, &si, WEXITED | WNOWAIT | (wait ? 0 : WNOHANG)) == 0)
      return si.si_pid == t->pid;
    if (errno != EINTR) return true; /* not our child any more: nothing to wait for */
  }
}

/* The rest of its group (the data server) killed, then the reaping. */
static void reap(tboard *t) {
  kill(-t->pid, SIGKILL);
  while (waitpid(t->pid, &t->status, 0) < 0 && errno == EINTR) {
  }
  t->exited = true;
}

bool tboard_exited(tboard *t, char *why, size_t n) {
  if (!t->exited && ended(t, false)) reap(t);
  if (t->exited && n) {
    if (WIFSIGNALED(t->status)) snprintf(why, n, "killed by signal %d", WTERMSIG(t->status));
    else snprintf(why, n, "exited with status %d", WEXITSTATUS(t->status));
  }
  return t->exited;
}

bool tboard_stop(tboard *t) {
  if (!t) return true;
  bool was_running = !tboard_exited(t, NULL, 0);
  if (was_running) {
    kill(t->pid, SIGTERM); /* TensorBoard's handler removes its info file and exits */
    struct timespec nap = {0, 20 * 1000 * 1000};
    for (int i = 0; i < (int)(TBOARD_STOP_SECONDS * 50) && !ended(t, false); i++)
      nanosleep(&nap, NULL);
    if (!ended(t, false)) {
      kill(-t->pid, SIGKILL);
      ended(t, true);
    }
    reap(t);
  }
  free(t);
  return was_running;
}

/* ============================== a run's ================================== */

int tboard_run_start(rundir *rd, const tboard_opts *o, tboard **t) {
  char logdir[1200], log[1200], line[400];
  const char *base = strrchr(rd->path, '/');
  rundir_file(rd, RUNDIR_TB, logdir, sizeof logdir);
  rundir_file(rd, RUNDIR_TB_LOG, log, sizeof log);
  /* TensorBoard waits for a logdir that is not there yet, but says so
   * on every reload: the writers make theirs later. */
  int rc = rundir_mkdirs(logdir);
  if (rc == 0) rc = tboard_start(o, logdir, false, base ? base + 1 : rd->path, log, t);
  if (rc < 0) return rc;
  snprintf(line, sizeof line, "%s %ld\n", tboard_url(*t), (long)tboard_pid(*t));
  rundir_write(rd, RUNDIR_TENSORBOARD, line, 0644);
  rundir_event(rd, "tensorboard: %s (pid %ld)", tboard_url(*t), (long)tboard_pid(*t));
  fprintf(stderr, "drover: TensorBoard at %s (its log: %s)\n", tboard_url(*t), log);
  return 0;
}

static void forget(rundir *rd, tboard **t) {
  char path[1200];
  unlink(rundir_file(rd, RUNDIR_TENSORBOARD, path, sizeof path));
  *t = NULL;
}

void tboard_run_poll(rundir *rd, tboard **t) {
  char why[64], tail[1000];
  if (!*t || !tboard_exited(*t, why, sizeof why)) return;
  rundir_tail(tboard_log(*t), 5, tail, sizeof tail);
  rundir_event(rd, "tensorboard %s (pid %ld); the run goes on without it", why,
               (long)tboard_pid(*t));
  fprintf(stderr, "drover: TensorBoard %s; the run goes on without it. The end of %s:\n%s\n", why,
          tboard_log(*t), tail);
  tboard_stop(*t);
  forget(rd, t);
}

void tboard_run_stop(rundir *rd, tboard **t) {
  if (!*t) return;
  tboard_run_poll(rd, t);
  if (!*t) return;
  long pid = (long)tboard_pid(*t);
  tboard_stop(*t);
  rundir_event(rd, "tensorboard stopped (pid %ld)", pid);
  forget(rd, t);
}
