/* launch_ship.c - the ssh launcher's setup and cleanup on each host:
 * whether the host has this very drover, copying it there with the run's
 * files when it does not, and removing that copy at the end.
 *
 * All of it runs before the first node starts (and after the last one
 * ended), so it blocks: one ssh per host, all hosts in parallel, each
 * bounded, with ssh's output appended to <run_dir>/logs/ssh-<host>.log
 * (quoted when a step fails).
 *
 * Probe: `sha256sum EXE` on the host, EXE being this binary's own path,
 * compared with libsodium's SHA-256 of /proc/self/exe. A host without
 * sha256sum, or without the file, counts as lacking it.
 *
 * Ship, to a host that lacks the binary, or to every host when the run has
 * `files`: a fresh `mktemp -d ${TMPDIR:-/tmp}/drover-run-XXXXXX` (0700) on
 * the host receives a ustar archive on ssh's stdin, unpacked by the host's
 * `tar -xf -`:
 *   drover-run-XXXXXX/drover       this binary (0755), when the host lacks it
 *   drover-run-XXXXXX/<file>       each of `files`: a relative path as given
 *                                  (no ".." in it), an absolute one by its
 *                                  last component
 * Nodes on that host run with the directory as their working directory
 * (relative paths in closures find the files) and run its drover when one
 * was shipped, else EXE.
 *
 * Clean: `rm -rf` of each such directory, when the launcher is destroyed.
 * A coordinator killed outright leaves the directories behind (they are
 * named drover-run-* in the host's TMPDIR).
 */
#include "launch/launch_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/rundir.h"

#define PROBE_TIMEOUT_MS 30000
#define SHIP_TIMEOUT_MS 300000
#define CLEAN_TIMEOUT_MS 10000
#define BLOCK 512

/* Double quotes only: each script travels inside single quotes. */
static const char PROBE[] =
    "if h=$(sha256sum -- \"$1\" 2>/dev/null); then echo \"drover-probe ${h%% *}\"; "
    "else echo \"drover-probe none\"; fi";
static const char UNPACK[] =
    "umask 077; d=$(mktemp -d \"${TMPDIR:-/tmp}/drover-run-XXXXXX\") || exit 125; "
    "if cd \"$d\" && tar -xf - && { [ ! -f drover ] || chmod 755 drover; }; "
    "then echo \"drover-run-dir $d\"; else cd /; rm -rf \"$d\"; exit 125; fi";
static const char CLEAN[] = "rm -rf -- \"$1\"";

/* ============================== quoting ================================== */

bool launch__sh_quote(char *out, size_t cap, size_t *len, const char *s) {
  size_t k = *len;
  if (k + 3 > cap) return false;
  if (k) out[k++] = ' ';
  out[k++] = '\'';
  for (; *s; s++) {
    if (*s == '\'') {
      if (k + 5 > cap) return false;
      memcpy(out + k, "'\\''", 4);
      k += 4;
    } else {
      if (k + 2 > cap) return false;
      out[k++] = *s;
    }
  }
  if (k + 2 > cap) return false;
  out[k++] = '\'';
  out[k] = '\0';
  *len = k;
  return true;
}

/* "sh -c SCRIPT NAME ARG..." quoted for the remote login shell. */
static int sh_command(char *out, size_t cap, const char *script, const char *arg) {
  const char *a[] = {"sh", "-c", script, "drover-ship", arg};
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < (arg ? 5u : 4u); i++)
    if (!launch__sh_quote(out, cap, &len, a[i]))
      return err_set(DRV_ERANGE, "ssh: remote command too long");
  return 0;
}

/* ============================== ssh jobs ================================= */

typedef struct job {
  pid_t pid;
  int in;      /* our end of ssh's stdin (-1: /dev/null) */
  int status;  /* waitpid's, once reaped; -1: timed out */
  char log[PATH_MAX];
} job;

int launch__host_log(const char *run_dir, const char *host, char *out, size_t n) {
  int k = rundir_host_log(out, n, run_dir, host);
  return k < 0 || (size_t)k >= n ? err_set(DRV_ERANGE, "ssh: log path too long") : 0;
}

/* Starts `ssh [-F config] ... host cmd` in its own process group (the
 * terminal's Ctrl-C is the coordinator's), output appended to j->log;
 * with `feed`, stdin is a socket whose other end is j->in. */
static int spawn_job(const launch_ship_ctx *x, const char *host, const char *cmd, bool feed,
                     job *j) {
  j->pid = 0;
  j->in = -1;
  int sv[2] = {-1, -1}, in = -1, rc = 0;
  int log = open(j->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (log < 0) return err_set(DRV_EIO, "ssh: cannot open '%s': %s", j->log, strerror(errno));
  if (feed ? socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0
           : (in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    rc = err_set(DRV_EIO, "ssh: %s", strerror(errno));
    close(log);
    return rc;
  }
  if (feed) in = sv[1];
  char *argv[24];
  int n = 0;
  argv[n++] = "ssh";
  if (x->config) argv[n++] = "-F", argv[n++] = (char *)x->config;
  argv[n++] = "-T", argv[n++] = "-o", argv[n++] = "BatchMode=yes";
  argv[n++] = "-o", argv[n++] = "ConnectTimeout=15";
  argv[n++] = "--", argv[n++] = (char *)host, argv[n++] = (char *)cmd, argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in, 0);
  posix_spawn_file_actions_adddup2(&fa, log, 1);
  posix_spawn_file_actions_adddup2(&fa, log, 2);
  posix_spawnattr_init(&at);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&at, 0);
  extern char **environ;
  int e = posix_spawnp(&j->pid, "ssh", &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  close(log);
  close(in);
  if (e != 0) {
    if (feed) close(sv[0]);
    j->pid = 0;
    return err_set(DRV_EIO, "ssh to host '%s': cannot run ssh: %s", host, strerror(e));
  }
  j->in = feed ? sv[0] : -1;
  return 0;
}

/* Reaps every job, waiting ms at most in all; the late ones are killed
 * and marked status -1. */
static void wait_jobs(job *j, int n, long ms) {
  long long deadline = launch__now_ms() + ms;
  for (;;) {
    int left = 0;
    for (int i = 0; i < n; i++) {
      if (j[i].pid <= 0) continue;
      int st;
      pid_t k = waitpid(j[i].pid, &st, WNOHANG);
      if (k == j[i].pid) {
        j[i].status = st;
        j[i].pid = 0;
      } else if (k < 0 && errno != EINTR) {
        j[i].status = -1;
        j[i].pid = 0;
      } else {
        left++;
      }
    }
    if (!left) return;
    if (launch__now_ms() >= deadline) break;
    struct timespec pause = {0, 10 * 1000000L};
    nanosleep(&pause, NULL);
  }
  for (int i = 0; i < n; i++)
    if (j[i].pid > 0) {
      kill(j[i].pid, SIGKILL);
      waitpid(j[i].pid, NULL, 0);
      j[i].pid = 0;
      j[i].status = -1;
    }
}

/* The last line of the job's log that starts with `mark`, the rest of it
 * (newline dropped) into out. */
static bool find_mark(const job *j, const char *mark, char *out, size_t n) {
  FILE *f = fopen(j->log, "re");
  if (!f) return false;
  char line[PATH_MAX + 64];
  size_t m = strlen(mark);
  bool got = false;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, mark, m) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(out, n, "%s", line + m);
      got = true;
    }
  fclose(f);
  return got;
}

/* The job's failure as an error naming the host, quoting the last lines
 * of its log (ssh's own words: "Connection refused"). */
static int job_error(const job *j, const char *host, const char *what) {
  char last[4][256] = {{0}}, tail[1100] = "";
  int n = 0;
  FILE *f = fopen(j->log, "re");
  if (f) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      line[strcspn(line, "\n")] = '\0';
      if (!line[0] || strncmp(line, "drover-", 7) == 0) continue;
      snprintf(last[n++ % 4], sizeof last[0], "%s", line);
    }
    fclose(f);
  }
  for (int i = n > 4 ? n - 4 : 0; i < n; i++) {
    size_t k = strlen(tail);
    snprintf(tail + k, sizeof tail - k, "%s%s", k ? " / " : ": ", last[i % 4]);
  }
  char why[64];
  if (j->status == -1)
    snprintf(why, sizeof why, "timed out");
  else if (WIFEXITED(j->status))
    snprintf(why, sizeof why, "ssh exit status %d", WEXITSTATUS(j->status));
  else
    snprintf(why, sizeof why, "ssh killed by signal %d", WTERMSIG(j->status));
  return err_set(DRV_EIO, "ssh: host '%s': %s failed (%s)%s", host, what, why, tail);
}

static bool job_ok(const job *j) {
  return j->status >= 0 && WIFEXITED(j->status) && WEXITSTATUS(j->status) == 0;
}

/* ============================== archive ================================== */

static int send_all(int fd, const void *p, size_t n) {
  const char *b = p;
  while (n) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    b += k;
    n -= (size_t)k;
  }
  return 0;
}

static void octal(char *field, size_t width, unsigned long long v) {
  snprintf(field, width, "%0*llo", (int)width - 1, v);
}

/* One ustar member: `name` (<= 100 bytes, or prefix/name split at a '/'),
 * the contents of the open file fd (size bytes), mode. */
static int send_member(int out, const char *name, int fd, unsigned long long size, int mode) {
  unsigned char h[BLOCK] = {0};
  size_t len = strlen(name);
  const char *base = name;
  if (len > 100) {
    const char *cut = name + len - 101;
    while (*cut && *cut != '/') cut++;
    if (!*cut || (size_t)(cut - name) > 155) return -2;
    memcpy(h + 345, name, (size_t)(cut - name));
    base = cut + 1;
  }
  memcpy(h, base, strlen(base));
  octal((char *)h + 100, 8, (unsigned)mode);
  octal((char *)h + 108, 8, 0);
  octal((char *)h + 116, 8, 0);
  octal((char *)h + 124, 12, size);
  octal((char *)h + 136, 12, (unsigned long long)time(NULL));
  h[156] = '0';
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (int i = 0; i < BLOCK; i++) sum += h[i];
  snprintf((char *)h + 148, 8, "%06o", sum);
  if (send_all(out, h, BLOCK) < 0) return -1;
  char buf[65536];
  unsigned long long left = size;
  while (left) {
    ssize_t k = read(fd, buf, left < sizeof buf ? (size_t)left : sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -3; /* the file shrank under us */
    if (send_all(out, buf, (size_t)k) < 0) return -1;
    left -= (unsigned long long)k;
  }
  size_t pad = (size_t)(size % BLOCK);
  if (pad) {
    memset(buf, 0, BLOCK - pad);
    if (send_all(out, buf, BLOCK - pad) < 0) return -1;
  }
  return 0;
}

int launch__ship_name(const char *path, char *out, size_t n) {
  const char *name = path[0] == '/' ? strrchr(path, '/') + 1 : path;
  while (name[0] == '.' && name[1] == '/') name += 2;
  if (!*name) return err_set(DRV_EINVAL, "files: '%s' names no file", path);
  for (const char *p = name; p; p = strchr(p, '/')) {
    if (*p == '/') p++;
    if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || p[2] == '\0'))
      return err_set(DRV_EINVAL, "files: '%s' leaves the run directory (..)", path);
  }
  if (strlen(name) >= n) return err_set(DRV_ERANGE, "files: '%s' is too long", path);
  snprintf(out, n, "%s", name);
  return 0;
}

/* Writes the archive (the binary when with_exe, then the files) to out. */
static int send_archive(const launch_ship_ctx *x, int out, bool with_exe, const char *host) {
  int n = x->nfiles + (with_exe ? 1 : 0);
  for (int i = 0; i < n; i++) {
    const char *path = with_exe && i == 0 ? launch_self_exe() : x->files[i - (with_exe ? 1 : 0)];
    char name[256];
    int rc = with_exe && i == 0 ? (snprintf(name, sizeof name, "drover"), 0)
                                : launch__ship_name(path, name, sizeof name);
    if (rc < 0) return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
      rc = err_set(DRV_EIO, "files: cannot ship '%s': %s", path,
                   fd < 0 ? strerror(errno) : "not a regular file");
      if (fd >= 0) close(fd);
      return rc;
    }
    rc = send_member(out, name, fd, (unsigned long long)st.st_size, with_exe && i == 0 ? 0755 : 0644);
    close(fd);
    if (rc == -2) return err_set(DRV_ERANGE, "files: '%s': path too long for the archive", path);
    if (rc == -3) return err_set(DRV_EIO, "files: '%s' changed while it was shipped", path);
    if (rc < 0) return err_set(DRV_EIO, "ssh: host '%s' stopped reading the archive", host);
  }
  char zero[2 * BLOCK] = {0};
  if (send_all(out, zero, sizeof zero) < 0)
    return err_set(DRV_EIO, "ssh: host '%s' stopped reading the archive", host);
  return 0;
}

/* ============================== the steps ================================ */

/* The hex SHA-256 of this binary. */
static int self_hash(char hex[65]) {
  int fd = open(launch_self_exe(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || sodium_init() < 0) {
    if (fd >= 0) close(fd);
    return err_set(DRV_EIO, "ssh: cannot read '%s' to hash it", launch_self_exe());
  }
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  unsigned char buf[65536], out[crypto_hash_sha256_BYTES];
  ssize_t k;
  while ((k = read(fd, buf, sizeof buf)) > 0 || (k < 0 && errno == EINTR))
    if (k > 0) crypto_hash_sha256_update(&st, buf, (unsigned long long)k);
  close(fd);
  if (k < 0) return err_set(DRV_EIO, "ssh: reading '%s': %s", launch_self_exe(), strerror(errno));
  crypto_hash_sha256_final(&st, out);
  sodium_bin2hex(hex, 65, out, sizeof out);
  return 0;
}

static void note(const launch_ship_ctx *x, const char *fmt, const char *a, const char *b) {
  if (!x->note) return;
  char msg[PATH_MAX + 256];
  snprintf(msg, sizeof msg, fmt, a, b);
  x->note(x->note_ud, msg);
}

static job *new_jobs(const launch_ship_ctx *x, launch_site *s, int n) {
  job *j = calloc((size_t)n, sizeof *j);
  if (!j) {
    err_set(DRV_ENOMEM, "out of memory");
    return NULL;
  }
  for (int i = 0; i < n; i++)
    if (launch__host_log(x->run_dir, s[i].name, j[i].log, sizeof j[i].log) < 0) {
      free(j);
      return NULL;
    }
  return j;
}

/* Starts `sh -c script drover-ship arg[i]` on each host with want[i],
 * feeding it the archive (with the binary when with_exe[i]) when with_exe
 * is not NULL, and waits for all (ms at most). A failure to start or feed
 * one is returned; the exits are the caller's to read. */
static int run_jobs(const launch_ship_ctx *x, launch_site *s, int n, job *j, const bool *want,
                    const char *script, const char *const *arg, const bool *with_exe, long ms) {
  bool feed = with_exe != NULL;
  char cmd[PATH_MAX * 2 + 1024];
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    j[i].status = 0;
    if (!want[i]) continue;
    if ((rc = sh_command(cmd, sizeof cmd, script, arg[i])) == 0)
      rc = spawn_job(x, s[i].name, cmd, feed, &j[i]);
  }
  for (int i = 0; i < n && feed; i++) {
    if (j[i].in < 0) continue;
    if (rc == 0) rc = send_archive(x, j[i].in, with_exe[i], s[i].name);
    close(j[i].in);
    j[i].in = -1;
  }
  wait_jobs(j, n, rc == 0 ? ms : 0);
  return rc;
}

/* Reads the probes: which hosts lack this binary (lacks[i]). */
static int read_probes(const launch_ship_ctx *x, launch_site *s, int n, const job *j,
                       bool *lacks) {
  char mine[65];
  int rc = self_hash(mine);
  for (int i = 0; i < n && rc == 0; i++) {
    char theirs[80] = "";
    if (!job_ok(&j[i]) || !find_mark(&j[i], "drover-probe ", theirs, sizeof theirs))
      return job_error(&j[i], s[i].name, "checking for drover");
    lacks[i] = strcmp(theirs, mine) != 0;
    if (!lacks[i]) note(x, "host '%s' has this drover at %s", s[i].name, launch_self_exe());
  }
  return rc;
}

/* Records where each shipped host's directory is (even after a failure of
 * another, so that clean removes it); the first failure is returned. */
static int read_ships(const launch_ship_ctx *x, launch_site *s, int n, const job *j,
                      const bool *want, const bool *lacks) {
  int rc = 0;
  for (int i = 0; i < n; i++) {
    if (!want[i]) continue;
    char dir[PATH_MAX];
    if (!job_ok(&j[i]) || !find_mark(&j[i], "drover-run-dir ", dir, sizeof dir) || dir[0] != '/') {
      if (rc == 0) rc = job_error(&j[i], s[i].name, "shipping drover and the run's files");
      continue;
    }
    size_t len = strlen(dir) + sizeof "/drover";
    if (!(s[i].dir = strdup(dir)) || (lacks[i] && !(s[i].exe = malloc(len)))) {
      if (rc == 0) rc = err_set(DRV_ENOMEM, "out of memory");
      continue;
    }
    if (lacks[i]) snprintf(s[i].exe, len, "%s/drover", dir);
    note(x, lacks[i] ? "host '%s' lacks this drover: shipped it to %s"
                     : "host '%s': the run's files shipped to %s", s[i].name, dir);
  }
  return rc;
}

int launch__ship(const launch_ship_ctx *x, launch_site *s, int n) {
  int rc;
  job *j = new_jobs(x, s, n);
  bool *want = calloc((size_t)n, sizeof *want), *lacks = calloc((size_t)n, sizeof *lacks);
  const char **arg = calloc((size_t)n, sizeof *arg);
  if (!j || !want || !lacks || !arg) {
    rc = j ? err_set(DRV_ENOMEM, "out of memory") : DRV_ENOMEM;
    goto out;
  }
  for (int i = 0; i < n; i++) want[i] = true, arg[i] = launch_self_exe();
  if ((rc = run_jobs(x, s, n, j, want, PROBE, arg, NULL, PROBE_TIMEOUT_MS)) < 0 ||
      (rc = read_probes(x, s, n, j, lacks)) < 0)
    goto out;
  for (int i = 0; i < n; i++) want[i] = lacks[i] || x->nfiles > 0, arg[i] = NULL;
  rc = run_jobs(x, s, n, j, want, UNPACK, arg, lacks, SHIP_TIMEOUT_MS);
  int rc2 = read_ships(x, s, n, j, want, lacks);
  if (rc == 0) rc = rc2;
out:
  free(want);
  free(lacks);
  free(arg);
  free(j);
  return rc;
}

void launch__ship_clean(const launch_ship_ctx *x, launch_site *s, int n) {
  job *j = new_jobs(x, s, n);
  bool *want = calloc((size_t)(n ? n : 1), sizeof *want);
  const char **arg = calloc((size_t)(n ? n : 1), sizeof *arg);
  if (j && want && arg) {
    int k = 0;
    for (int i = 0; i < n; i++)
      if ((want[i] = s[i].dir != NULL)) arg[i] = s[i].dir, k++;
    if (k) run_jobs(x, s, n, j, want, CLEAN, arg, NULL, CLEAN_TIMEOUT_MS);
  }
  free(j);
  free(want);
  free(arg);
}
