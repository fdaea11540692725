/* rundir.c - the run directory: creation with a unique stamped name, the
 * events log, atomic file writes and reading the tail of a node's log.
 *
 * Every file descriptor opened here is close-on-exec: the coordinator
 * spawns node processes, which must not inherit its files.
 */
#include "base/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "base/afile.h"
#include "base/err.h"
#include "base/util.h"

/* A run name that is taken this many times over is a bug, not bad luck. */
#define RUNDIR_MAX_SUFFIX 1000
#define TAIL_CHUNK 4096

static void touch(const rundir *rd);

/* ============================== creation ================================= */

/* mkdir -p: creates every missing component of `path`. The error names the
 * path asked for, and the component that failed when it is a different one
 * (a regular file in the way, a read-only parent). */
int rundir_mkdirs(const char *path) {
  char tmp[PATH_MAX];
  size_t len = strlen(path);
  if (len == 0) return err_set(DRV_EINVAL, "cannot create '': empty path");
  if (len >= sizeof tmp) return err_set(DRV_ERANGE, "cannot create '%.64s...': path too long", path);
  memcpy(tmp, path, len + 1);
  for (size_t i = 1; i <= len; i++) {
    if (tmp[i] != '/' && tmp[i] != '\0') continue;
    if (tmp[i - 1] == '/') continue; /* "a//b" */
    char saved = tmp[i];
    tmp[i] = '\0';
    if (mkdir(tmp, 0755) != 0) {
      int e = errno;
      struct stat st;
      if (e == EEXIST && stat(tmp, &st) == 0 && S_ISDIR(st.st_mode)) {
        tmp[i] = saved;
        continue;
      }
      const char *why = e == EEXIST ? "exists and is not a directory" : strerror(e);
      if (strcmp(tmp, path) == 0) return err_set(DRV_EIO, "cannot create '%s': %s", path, why);
      if (e == EEXIST) return err_set(DRV_EIO, "cannot create '%s': '%s' %s", path, tmp, why);
      return err_set(DRV_EIO, "cannot create '%s': mkdir '%s': %s", path, tmp, why);
    }
    tmp[i] = saved;
  }
  return 0;
}

static int check_name(const char *name) {
  if (!name || !*name) return err_set(DRV_EINVAL, "run name is empty");
  if (strchr(name, '/'))
    return err_set(DRV_EINVAL, "run name '%s' contains '/': give a plain name", name);
  if (name[0] == '.')
    return err_set(DRV_EINVAL, "run name '%s' starts with '.': give a plain name", name);
  if (strlen(name) > 200) return err_set(DRV_EINVAL, "run name '%.32s...' is too long", name);
  return 0;
}

/* "yyyymmdd-hhmmss" in local time: run directories sort by start. */
static void stamp_now(char out[32]) {
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(out, 32, "%Y%m%d-%H%M%S", &tm);
}

/* Makes <abs>/<name>-<stamp>[-N] and leaves it in rd->path. mkdir itself
 * decides who got a name, so two coordinators starting in the same second
 * never share a directory. */
static int make_unique_dir(const char *abs, const char *name, rundir *rd) {
  char stamp[32];
  stamp_now(stamp);
  for (int n = 1; n <= RUNDIR_MAX_SUFFIX; n++) {
    int k = n == 1 ? snprintf(rd->path, sizeof rd->path, "%s/%s-%s", abs, name, stamp)
                   : snprintf(rd->path, sizeof rd->path, "%s/%s-%s-%d", abs, name, stamp, n);
    if (k < 0 || (size_t)k >= sizeof rd->path)
      return err_set(DRV_ERANGE, "cannot create a run directory in '%s': path too long", abs);
    if (mkdir(rd->path, 0755) == 0) return 0;
    if (errno != EEXIST)
      return err_set(DRV_EIO, "cannot create '%s': %s", rd->path, strerror(errno));
  }
  return err_set(DRV_EIO, "cannot create a run directory for '%s' in '%s': %d names taken",
                 name, abs, RUNDIR_MAX_SUFFIX);
}

int rundir_create(const char *base, const char *name, rundir *rd) {
  if (!rd) return err_set(DRV_EINVAL, "rundir_create: NULL rundir");
  memset(rd, 0, sizeof *rd);
  if (!base) return err_set(DRV_EINVAL, "rundir_create: NULL base");
  int rc = check_name(name);
  if (rc < 0 || (rc = rundir_mkdirs(base)) < 0) return rc;
  char abs[PATH_MAX];
  if (!realpath(base, abs))
    return err_set(DRV_EIO, "cannot resolve '%s': %s", base, strerror(errno));
  if ((rc = make_unique_dir(abs, name, rd)) < 0) {
    rd->path[0] = '\0';
    return rc;
  }
  if ((rc = rundir_lock(rd->path)) < 0) return rc;
  rd->locked = 1;
  char p[sizeof rd->path + 32];
  snprintf(p, sizeof p, "%s/" RUNDIR_LOGS, rd->path);
  if (mkdir(p, 0755) != 0)
    return err_set(DRV_EIO, "cannot create '%s': %s", p, strerror(errno));
  snprintf(p, sizeof p, "%s/" RUNDIR_EVENTS_LOG, rd->path);
  rd->events = util_fopen_append(p, 0644);
  if (!rd->events) return err_set(DRV_EIO, "cannot open '%s': %s", p, strerror(errno));
  setvbuf(rd->events, NULL, _IOLBF, 0);
  touch(rd);
  return 0;
}

int rundir_open(const char *path, rundir *rd) {
  if (!rd || !path) return err_set(DRV_EINVAL, "rundir_open: NULL argument");
  memset(rd, 0, sizeof *rd);
  char p[sizeof rd->path + 32];
  if (!realpath(path, rd->path))
    return err_set(DRV_EIO, "cannot open run directory '%s': %s", path, strerror(errno));
  snprintf(p, sizeof p, "%s/" RUNDIR_EVENTS_LOG, rd->path);
  if (access(p, F_OK) != 0)
    return err_set(DRV_EINVAL, "'%s' is not a run directory (it has no " RUNDIR_EVENTS_LOG ")",
                   path);
  int rc = rundir_lock(rd->path);
  if (rc < 0) return rc;
  rd->locked = 1;
  rd->events = util_fopen_append(p, 0644);
  if (!rd->events) return err_set(DRV_EIO, "cannot open '%s': %s", p, strerror(errno));
  setvbuf(rd->events, NULL, _IOLBF, 0);
  touch(rd);
  return 0;
}

/* ============================== this process's runs ====================== */

/* The run directories this process created or reopened, for
 * rundir_record_exit: the exit status is known only after every cluster
 * and fit has closed its rundir. Past RUNDIR_MAX_TOUCHED, runs go
 * unrecorded (`drover ls` then judges them by their events alone). */
#define RUNDIR_MAX_TOUCHED 64
static char touched[RUNDIR_MAX_TOUCHED][sizeof ((rundir *)0)->path];
static int ntouched;

static void touch(const rundir *rd) {
  for (int i = 0; i < ntouched; i++)
    if (strcmp(touched[i], rd->path) == 0) return;
  if (ntouched < RUNDIR_MAX_TOUCHED) snprintf(touched[ntouched++], sizeof touched[0], "%s", rd->path);
}

void rundir_record_exit(int status, int signo) {
  for (int i = 0; i < ntouched; i++) {
    rundir rd = {0};
    memcpy(rd.path, touched[i], sizeof rd.path);
    char p[sizeof rd.path + 32];
    rd.events = util_fopen_append(rundir_file(&rd, RUNDIR_EVENTS_LOG, p, sizeof p), 0644);
    if (!rd.events) continue;
    if (signo) rundir_event(&rd, "process exit: %d (signal %d)", status, signo);
    else rundir_event(&rd, "process exit: %d", status);
    fclose(rd.events);
  }
  ntouched = 0;
}

/* ============================== events =================================== */

void rundir_event(rundir *rd, const char *fmt, ...) {
  if (!rd || !rd->events || !fmt) return;
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  /* One event, one line: readers split the file on newlines. */
  for (char *c = text; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';

  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
  char line[2200];
  int k = snprintf(line, sizeof line, "%s.%03ldZ %s", when, ts.tv_nsec / 1000000L, text);
  rundir_append(rd, rd->events, RUNDIR_EVENTS_LOG, line, k < 0 ? 0 : (size_t)k);
  if (rd->hook) rd->hook(rd->hook_ud, text);
}

/* ============================== records ================================== */

/* Records lost by this process (every run directory it writes): a run
 * that lost any exits non-zero (main.c). */
static int64_t lost_records;
static bool lost_said, lost_logged; /* on stderr; in an events.log */

int64_t rundir_records_lost(void) { return lost_records; }

/* The first loss is said loudly: stderr, events.log (when it still takes
 * a line) and so the dashboard (rundir_event's hook). Later ones are
 * counted only: a full disk fails every write. A loss without a run
 * directory at hand (rd NULL: a TensorBoard file) goes to stderr only, and
 * the next one with a directory still reaches its events.log. */
void rundir_lost(rundir *rd, const char *why) {
  lost_records++;
  if (!lost_said)
    fprintf(stderr, "drover: records lost: %s (the run will end with status 1)\n", why);
  lost_said = true;
  if (!rd || lost_logged) return;
  lost_logged = true;
  rundir_event(rd, "records lost: %s; the run ends with status 1", why);
}

int rundir_append(rundir *rd, FILE *f, const char *name, const char *rec, size_t len) {
  if (!rd || !f) return -1;
  int fd = fileno(f);
  /* O_APPEND: the record goes at the end, wherever that is now. */
  off_t at = lseek(fd, 0, SEEK_END);
  struct iovec iov[2] = {{(void *)rec, len}, {"\n", 1}};
  ssize_t n;
  do n = writev(fd, iov, 2);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)(len + 1)) return 0;
  int err = n < 0 ? errno : ENOSPC; /* a short write: the disk filled up */
  /* Whole or not at all: a half line is cut off again. */
  if (n > 0 && at >= 0 && ftruncate(fd, at) < 0) { /* nothing better to do */ }
  char why[1400];
  snprintf(why, sizeof why, "cannot write %s/%s: %s", rd->path, name, strerror(err));
  rundir_lost(rd, why);
  return -1;
}

void rundir_set_hook(rundir *rd, void (*fn)(void *ud, const char *text), void *ud) {
  rd->hook = fn;
  rd->hook_ud = ud;
}

/* ============================== files ==================================== */

const char *rundir_file(const rundir *rd, const char *name, char *buf, size_t n) {
  if (n) snprintf(buf, n, "%s/%s", rd->path, name);
  return buf;
}

const char *rundir_ckdir(const char *run, char *buf, size_t n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/" RUNDIR_CKPT_DIR, run);
  FILE *f = fopen(path, "r");
  if (f && fgets(buf, (int)n, f)) {
    buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
    if (buf[0]) return buf;
  } else if (f)
    fclose(f);
  snprintf(buf, n, "%s/" RUNDIR_CHECKPOINTS, run);
  return buf;
}

int rundir_set_ckdir(const rundir *rd, const char *base, char *buf, size_t n) {
  const char *name = strrchr(rd->path, '/') ? strrchr(rd->path, '/') + 1 : rd->path;
  size_t bl = strlen(base);
  while (bl > 1 && base[bl - 1] == '/') bl--;
  snprintf(buf, n, "%.*s/%s", (int)bl, base, name);
  char text[4300];
  snprintf(text, sizeof text, "%s\n", buf);
  return rundir_write(rd, RUNDIR_CKPT_DIR, text, 0644);
}

/* Refuses names that would leave the run directory. */
static int check_file_name(const char *name) {
  if (!name || !*name) return err_set(DRV_EINVAL, "rundir_write: empty file name");
  if (name[0] == '/')
    return err_set(DRV_EINVAL, "rundir_write: '%s' is absolute; give a name inside the run "
                   "directory", name);
  for (const char *c = name; *c; c = strchr(c, '/') ? strchr(c, '/') + 1 : c + strlen(c))
    if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == '\0'))
      return err_set(DRV_EINVAL, "rundir_write: '%s' leaves the run directory", name);
  return 0;
}

int rundir_write(const rundir *rd, const char *name, const char *content, mode_t mode) {
  if (!rd || !content) return err_set(DRV_EINVAL, "rundir_write: NULL argument");
  int rc = check_file_name(name);
  if (rc < 0) return rc;
  char path[sizeof rd->path + 256];
  int k = snprintf(path, sizeof path, "%s/%s", rd->path, name);
  if (k < 0 || (size_t)k >= sizeof path)
    return err_set(DRV_ERANGE, "rundir_write: '%s': path too long", name);
  afile f;
  if ((rc = afile_open(&f, path)) < 0) return rc;
  afile_write(&f, content, strlen(content));
  return afile_commit(&f, mode);
}

/* ============================== names ==================================== */

/* "DIR/" then the name fmt makes, or the name alone without a dir. */
__attribute__((format(printf, 4, 5)))
static int name_in(char *buf, size_t n, const char *dir, const char *fmt, ...) {
  int k = dir ? snprintf(buf, n, "%s/", dir) : 0;
  if (k < 0) return k;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf((size_t)k < n ? buf + k : NULL, (size_t)k < n ? n - (size_t)k : 0, fmt, ap);
  va_end(ap);
  return m < 0 ? m : k + m;
}

int rundir_node_log(char *buf, size_t n, const char *dir, const char *role, int index) {
  return name_in(buf, n, dir, RUNDIR_LOGS "/%s-%d.log", role, index);
}

int rundir_node_key(char *buf, size_t n, const char *dir, const char *role, int index) {
  return name_in(buf, n, dir, RUNDIR_KEYS "/%s-%d.key", role, index);
}

int rundir_host_log(char *buf, size_t n, const char *dir, const char *host) {
  return name_in(buf, n, dir, RUNDIR_LOGS "/ssh-%s.log", host);
}

#define STEP_PREFIX "step-"

int rundir_step(char *buf, size_t n, const char *dir, int64_t step) {
  return name_in(buf, n, dir, STEP_PREFIX "%" PRId64, step);
}

int64_t rundir_step_of(const char *name) {
  size_t p = sizeof STEP_PREFIX - 1;
  if (strncmp(name, STEP_PREFIX, p) != 0 || name[p] < '0' || name[p] > '9') return -1;
  char *end;
  errno = 0;
  long long v = strtoll(name + p, &end, 10);
  return *end || v < 0 || errno ? -1 : (int64_t)v;
}

int rundir_ps_shards(char *buf, size_t n, const char *dir, int ps) {
  return name_in(buf, n, dir, "ps-%d.safetensors", ps);
}

/* ============================== tail ===================================== */

/* Offset where the last `lines` lines of the fd's `size` bytes begin. A
 * final newline ends the last line rather than starting an empty one.
 * Reads backwards in chunks, so a long log costs only its tail. */
static off_t tail_start(int fd, off_t size, int lines) {
  char chunk[TAIL_CHUNK];
  off_t end = size;
  int seen = 0;
  char last;
  if (end > 0 && pread(fd, &last, 1, end - 1) == 1 && last == '\n') end--;
  while (end > 0) {
    off_t from = end > TAIL_CHUNK ? end - TAIL_CHUNK : 0;
    ssize_t k = pread(fd, chunk, (size_t)(end - from), from);
    if (k != end - from) return -1;
    for (ssize_t i = k - 1; i >= 0; i--)
      if (chunk[i] == '\n' && ++seen == lines) return from + i + 1;
    end = from;
  }
  return 0;
}

const char *rundir_tail(const char *path, int lines, char *buf, size_t n) {
  if (!buf || n == 0) return buf;
  buf[0] = '\0';
  if (!path || lines <= 0) return buf;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return buf;
  struct stat st;
  off_t start;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      (start = tail_start(fd, st.st_size, lines)) >= 0) {
    /* When the lines do not fit, keep their end: the newest is what
     * explains a failure. */
    if (st.st_size - start > (off_t)(n - 1)) start = st.st_size - (off_t)(n - 1);
    size_t want = (size_t)(st.st_size - start), got = 0;
    while (got < want) {
      ssize_t k = pread(fd, buf + got, want - got, start + (off_t)got);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      got += (size_t)k;
    }
    buf[got] = '\0';
  }
  close(fd);
  return buf;
}

const char *rundir_log_tail(const char *path, int lines, char *buf, size_t n) {
  struct stat st;
  if (!path || !path[0]) snprintf(buf, n, "(this node has no log file)");
  else if (stat(path, &st) != 0) snprintf(buf, n, "(cannot read %s: %s)", path, strerror(errno));
  else if (!rundir_tail(path, lines, buf, n)[0]) snprintf(buf, n, "(the log is empty)");
  return buf;
}

void rundir_close(rundir *rd) {
  if (!rd) return;
  if (rd->events) fclose(rd->events);
  rd->events = NULL;
  if (rd->locked) rundir_unlock(rd->path);
  rd->locked = 0;
}

/* ============================== the lock ================================= */

/* The locks this process holds, counted: flock() conflicts between two
 * open files even in one process, and a resumed run's coordinator opens
 * the directory `drover run --resume` already holds. A slot with count 0
 * is free (a sweep's experiments each hold theirs while they live). */
static struct held {
  char dir[sizeof ((rundir *)0)->path];
  int fd, count;
} *held;
static size_t nheld, capheld;

static struct held *find_held(const char *dir) {
  for (size_t i = 0; i < nheld; i++)
    if (held[i].count > 0 && strcmp(held[i].dir, dir) == 0) return &held[i];
  return NULL;
}

/* A free slot, or NULL (out of memory: the message is set). */
static struct held *free_slot(void) {
  for (size_t i = 0; i < nheld; i++)
    if (held[i].count == 0) return &held[i];
  if (util_grow(&held, &capheld, nheld + 1, sizeof *held, 8) < 0) return NULL;
  return &held[nheld++];
}

/* The pid in a lock file: written right after its holder locked it, so a
 * reader may find it empty, or the previous holder's, for a moment. */
static long read_holder(int fd) {
  for (int tries = 0; tries < 50; tries++) {
    char buf[32] = "";
    ssize_t k = pread(fd, buf, sizeof buf - 1, 0);
    long pid = k > 0 ? strtol(buf, NULL, 10) : 0;
    if (pid > 0 && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)) return pid;
    usleep(2000);
  }
  return -1;
}

static int lock_path(const char *dir, char *path, size_t n) {
  if (snprintf(path, n, "%s/%s", dir, RUNDIR_LOCK) >= (int)n)
    return err_set(DRV_ERANGE, "run directory '%.64s...': path too long", dir);
  return 0;
}

int rundir_lock(const char *dir) {
  struct held *h = find_held(dir);
  if (h) return h->count++, 0;
  char path[PATH_MAX + 16];
  int rc = lock_path(dir, path, sizeof path);
  if (rc < 0) return rc;
  if (strlen(dir) >= sizeof h->dir)
    return err_set(DRV_ERANGE, "run directory '%.64s...': path too long", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return err_set(DRV_EIO, "cannot lock run directory '%s': %s", dir, strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    long pid = e == EWOULDBLOCK ? read_holder(fd) : 0;
    close(fd);
    if (e != EWOULDBLOCK)
      return err_set(DRV_EIO, "cannot lock run directory '%s': %s", dir, strerror(e));
    if (pid > 0)
      return err_set(DRV_EAGAIN, "run directory '%s' is in use by another drover process (pid "
                     "%ld): one process runs a run at a time", dir, pid);
    return err_set(DRV_EAGAIN, "run directory '%s' is in use by another drover process: one "
                   "process runs a run at a time", dir);
  }
  struct held *slot = free_slot();
  if (!slot) {
    close(fd);
    return DRV_ENOMEM;
  }
  char pid[32];
  int k = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)k, 0) != k) { /* the lock holds anyway */ }
  snprintf(slot->dir, sizeof slot->dir, "%s", dir);
  slot->fd = fd;
  slot->count = 1;
  return 0;
}

void rundir_unlock(const char *dir) {
  struct held *h = find_held(dir);
  if (!h || --h->count > 0) return;
  /* The file stays: unlinking it would let a process that opened it just
   * before lock the unlinked file while another locks a new one. */
  close(h->fd);
  h->fd = -1;
}

long rundir_lock_holder(const char *dir) {
  if (find_held(dir)) return 0;
  char path[PATH_MAX + 16];
  if (lock_path(dir, path, sizeof path) < 0) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0; /* no lock file: a run from before the lock, or none */
  long pid = 0;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) pid = errno == EWOULDBLOCK ? read_holder(fd) : 0;
  close(fd); /* a shared lock taken here goes with it */
  return pid;
}
