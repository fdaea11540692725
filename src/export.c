/* export.c - writing the model of a run's checkpoint (see export.h). */
#include "export.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "afile.h"
#include "err.h"
#include "manifest.h"

static bool is_dir(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The run's directory: RUN itself when it is one, else <runs>/RUN. */
static int find_run(const export_opts *o, char *dir, size_t n) {
  if (is_dir(o->run)) return snprintf(dir, n, "%s", o->run), 0;
  if (!strchr(o->run, '/') && snprintf(dir, n, "%s/%s", o->runs, o->run) < (int)n && is_dir(dir))
    return 0;
  if (strchr(o->run, '/'))
    return drv_error(DRV_EINVAL, "no run '%s': not a directory", o->run);
  return drv_error(DRV_EINVAL, "no run '%s': not a directory nor a run in %s (`drover ls %s` "
                   "lists them)", o->run, o->runs, o->runs);
}

/* "8, 16, 24" (the last few when there are many) into buf. */
static const char *steps_of(const ckpt_entry *c, int n, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  int from = n > 20 ? n - 20 : 0;
  if (from) at += (size_t)snprintf(buf, len, "..., ");
  for (int i = from; i < n && at < len; i++)
    at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, i > from ? ", " : "", c[i].step);
  return buf;
}

static void warn_bad(void *ud, const char *msg) {
  if (ud) fprintf(ud, "drover: %s\n", msg);
}

/* The checkpoint to export into *found. */
static int pick(const export_opts *o, const char *ckdir, FILE *warn, ckpt_entry *found) {
  ckpt_entry *all;
  int n = ckpt_list(ckdir, &all);
  if (n < 0) return n;
  int rc = 0;
  if (n == 0) {
    rc = drv_error(DRV_EINVAL, "run '%s' has no checkpoint (checkpoint = { every = STEPS } in "
                   "its experiment takes them)", o->run);
  } else if (o->step >= 0) {
    int i = 0;
    while (i < n && all[i].step != o->step) i++;
    char steps[400];
    if (i == n)
      rc = drv_error(DRV_EINVAL, "run '%s' has no checkpoint of step %" PRId64 "; it has steps %s",
                     o->run, o->step, steps_of(all, n, steps, sizeof steps));
    else *found = all[i];
  } else {
    int got = ckpt_newest(ckdir, found, warn_bad, warn);
    if (got == 0)
      rc = drv_error(DRV_EIO, "run '%s': none of its %d checkpoints is intact", o->run, n);
    else if (got < 0) rc = got;
  }
  free(all);
  return rc;
}

/* Copies src to dst through a temporary renamed over it (afile.h). */
static int copy_file(const char *src, const char *dst) {
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) return drv_error(DRV_EIO, "cannot read '%s': %s", src, strerror(errno));
  afile out;
  int rc = afile_open(&out, dst);
  char buf[1 << 16];
  ssize_t k = 0;
  while (rc == 0 && !out.err && (k = read(in, buf, sizeof buf)) != 0) {
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      rc = drv_error(DRV_EIO, "cannot read '%s': %s", src, strerror(errno));
      afile_abort(&out);
    } else {
      afile_write(&out, buf, (size_t)k);
    }
  }
  close(in);
  return rc < 0 ? rc : afile_commit(&out, 0644);
}

int export_model(const export_opts *o, FILE *warn, int64_t *step) {
  char dir[PATH_MAX], ckdir[PATH_MAX + 16], src[PATH_MAX + 4200];
  int rc = find_run(o, dir, sizeof dir);
  if (rc < 0) return rc;
  snprintf(ckdir, sizeof ckdir, "%s/checkpoints", dir);
  ckpt_entry c;
  if ((rc = pick(o, ckdir, warn, &c)) < 0) return rc;
  manifest m;
  rc = ckpt_open(c.path, &m);
  manifest_free(&m);
  if (rc < 0) {
    char why[1024];
    snprintf(why, sizeof why, "%s", drv_errmsg()); /* drv_error reuses its buffer */
    return drv_error(DRV_EIO, "checkpoint step-%" PRId64 " of run '%s' is damaged: %s", c.step,
                     o->run, why);
  }
  snprintf(src, sizeof src, "%s/" CKPT_MODEL, c.path);
  if ((rc = copy_file(src, o->out)) < 0) return rc;
  if (step) *step = c.step;
  return 0;
}
