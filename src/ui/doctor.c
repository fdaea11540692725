/* doctor.c - `drover doctor`: what a run needs on this machine, checked
 * and said in plain words (see doctor.h).
 *
 * Each check prints one line and returns its verdict. Outside commands
 * (ssh, sinfo) run through popen with their stderr, so that what they
 * said is what the line reports.
 */
#include "ui/doctor.h"

/* Before term.h, whose `lines` macro would rename its parameters. */
#include "base/rundir.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <limits.h>
#include <locale.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <curses.h>
#include <term.h>
#include <unistd.h>

#include "numeric/tensor.h"

typedef enum { V_OK, V_WARN, V_FAIL, V_NA } verdict;

__attribute__((format(printf, 3, 4)))
static verdict say(FILE *out, verdict v, const char *fmt, ...) {
  static const char *const tag[] = {"ok   ", "warn ", "FAIL ", "--   "};
  fprintf(out, "%s ", tag[v]);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
  fputc('\n', out);
  return v;
}

/* Runs cmd (stderr with stdout); the last non-empty line it printed into
 * last. Returns its exit status, or -1 when it could not run. */
static int run_cmd(const char *cmd, char *last, size_t n, char *all, size_t alln) {
  if (last && n) last[0] = '\0';
  if (all && alln) all[0] = '\0';
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char line[512];
  size_t len = 0;
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (all && len + 1 < alln) len += (size_t)snprintf(all + len, alln - len, "%s%s", len ? " " : "", line);
    if (last && line[0]) snprintf(last, n, "%.*s", (int)(n - 1), line);
  }
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool in_path(const char *prog) {
  const char *path = getenv("PATH");
  char buf[PATH_MAX];
  for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
    size_t k = strcspn(p, ":");
    if (snprintf(buf, sizeof buf, "%.*s/%s", (int)k, p, prog) < (int)sizeof buf &&
        access(buf, X_OK) == 0)
      return true;
    p += k + (p[k] == ':');
  }
  return false;
}

/* ============================== the machine ============================== */

static verdict check_blas(FILE *out) {
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                          : (int)sysconf(_SC_NPROCESSORS_ONLN);
  int threads = tensor_threads();
  const char *env = getenv("OPENBLAS_NUM_THREADS");
  if (threads > cpus)
    return say(out, V_WARN, "BLAS: %d threads on the %d CPU%s this process may use (taskset, "
               "cgroups): they would take turns; set OPENBLAS_NUM_THREADS=%d (or cpus = N per "
               "node in drover.cluster)", threads, cpus, cpus == 1 ? "" : "s", cpus);
  if (env && atoi(env) > threads)
    return say(out, V_WARN, "BLAS: OPENBLAS_NUM_THREADS=%s asks for more threads than there are "
               "CPUs: OpenBLAS runs %d on %d CPU%s", env, threads, cpus, cpus == 1 ? "" : "s");
  return say(out, V_OK, "BLAS: %d thread%s on %d CPU%s per process (a local cluster's nodes "
             "share them: cpus = N per node divides them)", threads, threads == 1 ? "" : "s",
             cpus, cpus == 1 ? "" : "s");
}

/* A terminal, its type and colours: what the dashboard needs. */
static verdict check_terminal(FILE *out) {
  int fd = isatty(STDOUT_FILENO) ? STDOUT_FILENO : open("/dev/tty", O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return say(out, V_WARN, "terminal: none (no /dev/tty): the dashboard cannot be shown here; "
               "`drover attach RUN --print` and `drover logs` still work");
  const char *term = getenv("TERM");
  int err = 0, colors = -1;
  bool known = term && *term && strcmp(term, "dumb") != 0 && setupterm(NULL, fd, &err) == OK;
  if (known) colors = tigetnum("colors");
  if (fd != STDOUT_FILENO) close(fd);
  if (!term || !*term || strcmp(term, "dumb") == 0)
    return say(out, V_WARN, "terminal: TERM is %s: the dashboard needs a terminal type "
               "(export TERM=xterm-256color)", term && *term ? "\"dumb\"" : "unset");
  if (!known)
    return say(out, V_WARN, "terminal: TERM=%s is unknown to this machine's terminfo: install "
               "ncurses-term or set a known TERM", term);
  if (getenv("NO_COLOR"))
    return say(out, V_OK, "terminal: %s; NO_COLOR is set: the dashboard draws without colours",
               term);
  if (colors < 8)
    return say(out, V_WARN, "terminal: %s has %s colours: the dashboard draws in plain "
               "attributes", term, colors < 0 ? "no" : "few");
  return say(out, V_OK, "terminal: %s, %d colours", term, colors);
}

/* The character set: UTF-8 gets Braille charts, anything else ASCII. */
static verdict check_utf8(FILE *out) {
  setlocale(LC_CTYPE, "");
  const char *cs = nl_langinfo(CODESET);
  if (!(cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0)))
    return say(out, V_WARN, "UTF-8: the character set is %s: the dashboard's charts fall back "
               "to ASCII (set LANG=C.UTF-8)", cs && *cs ? cs : "unknown");
  return say(out, V_OK, "UTF-8: yes (the charts draw in Braille)");
}

static verdict check_writable(FILE *out, const char *what, const char *dir, bool may_create) {
  char parent[PATH_MAX];
  if (access(dir, F_OK) != 0 && may_create) {
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    else snprintf(parent, sizeof parent, ".");
    if (access(parent, W_OK | X_OK) == 0)
      return say(out, V_OK, "%s: %s will be made on the first run", what, dir);
    return say(out, V_FAIL, "%s: cannot make %s: %s is not writable (%s)", what, dir, parent,
               strerror(errno));
  }
  if (access(dir, W_OK | X_OK) != 0)
    return say(out, V_FAIL, "%s: %s is not writable (%s)", what, dir, strerror(errno));
  return say(out, V_OK, "%s: %s is writable", what, dir);
}

/* Nodes talk TCP; local ones over loopback. */
static verdict check_loopback(FILE *out) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  bool ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && listen(s, 1) == 0;
  int e = errno;
  if (s >= 0) close(s);
  if (!ok)
    return say(out, V_FAIL, "network: cannot listen on 127.0.0.1 (%s): local clusters need it",
               strerror(e));
  return say(out, V_OK, "network: a TCP port on 127.0.0.1");
}

/* ============================== remote =================================== */

static bool plain_host(const char *h) {
  return *h && h[0] != '-' && strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789._@-") == strlen(h);
}

static verdict check_host(FILE *out, const char *spec, double timeout) {
  char host[256], cmd[512], last[256];
  snprintf(host, sizeof host, "%s", spec);
  char *colon = strrchr(host, ':');
  if (colon && strspn(colon + 1, "0123456789") == strlen(colon + 1)) *colon = '\0';
  if (!plain_host(host)) return say(out, V_FAIL, "ssh %s: not a host name", spec);
  snprintf(cmd, sizeof cmd, "ssh -o BatchMode=yes -o ConnectTimeout=%d %s true 2>&1 </dev/null",
           (int)(timeout > 0 ? timeout : 5), host);
  int st = run_cmd(cmd, last, sizeof last, NULL, 0);
  if (st == 0) return say(out, V_OK, "ssh %s: reachable without a password", host);
  return say(out, V_FAIL, "ssh %s: %s", host,
             last[0] ? last : "unreachable (ssh exited with an error and said nothing)");
}

static verdict check_ssh(FILE *out, const doctor_opts *o) {
  if (!in_path("ssh"))
    return say(out, o->nhosts ? V_FAIL : V_NA, "ssh: no ssh client here (needed only for "
               "launcher = \"ssh\")");
  if (o->nhosts == 0)
    return say(out, V_NA, "ssh: no hosts to try (`drover doctor HOST...` tries them)");
  verdict worst = V_OK;
  for (int i = 0; i < o->nhosts; i++)
    if (check_host(out, o->hosts[i], o->ssh_timeout) == V_FAIL) worst = V_FAIL;
  return worst;
}

static verdict check_slurm(FILE *out) {
  bool sbatch = in_path("sbatch"), srun = in_path("srun"), sinfo = in_path("sinfo");
  if (!sbatch && !srun && !sinfo)
    return say(out, V_NA, "Slurm: no sbatch, srun or sinfo here (needed only for "
               "launcher = \"slurm\")");
  if (!srun || !sbatch)
    return say(out, V_FAIL, "Slurm: %s is missing: drover needs srun (and sbatch outside an "
               "allocation)", !srun ? "srun" : "sbatch");
  char last[256], parts[512];
  if (!sinfo) return say(out, V_WARN, "Slurm: no sinfo: partitions cannot be listed");
  if (run_cmd("sinfo -h -o '%P %a' 2>&1", last, sizeof last, parts, sizeof parts) != 0)
    return say(out, V_WARN, "Slurm: sbatch and srun are here but sinfo fails (%s): "
               "launcher = \"slurm\" would fail too", last[0] ? last : "no message");
  const char *job = getenv("SLURM_JOB_ID");
  if (job) say(out, V_OK, "Slurm: inside allocation %s", job);
  if (!parts[0]) return say(out, V_WARN, "Slurm: sinfo lists no partitions");
  return say(out, V_OK, "Slurm: partitions (name, availability): %s", parts);
}

int doctor_run(const doctor_opts *o, FILE *out) {
  const char *tmp = getenv("TMPDIR");
  verdict v[] = {
      check_blas(out),
      check_terminal(out),
      check_utf8(out),
      check_writable(out, "runs", o->runs ? o->runs : RUNDIR_BASE, true),
      check_writable(out, "TMPDIR", tmp && *tmp ? tmp : "/tmp", false),
      check_loopback(out),
      check_ssh(out, o),
      check_slurm(out),
  };
  int fails = 0;
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) fails += v[i] == V_FAIL;
  return fails;
}
