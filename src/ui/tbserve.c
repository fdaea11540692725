/* tbserve.c - `drover tensorboard`: runs side by side in one TensorBoard
 * (see tbserve.h).
 */
#include "ui/tbserve.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/err.h"
#include "base/rundir.h"
#include "ui/runs.h"

/* The logdir_spec being built: "name:/abs/events,..." and the names. */
typedef struct spec {
  char *text;
  size_t len, cap;
  char names[1024]; /* "a, b" for the message */
  int n;
} spec;

static bool has_events(const char *dir) {
  char path[PATH_MAX + 16];
  struct stat st;
  snprintf(path, sizeof path, "%s/" RUNDIR_TB, dir);
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Whether `name:` starts an entry of the spec already. */
static bool taken(const spec *s, const char *name) {
  size_t k = strlen(name);
  for (const char *p = s->text; p && *p;) {
    if (strncmp(p, name, k) == 0 && p[k] == ':') return true;
    const char *comma = strchr(p, ',');
    p = comma ? comma + 1 : NULL;
  }
  return false;
}

/* Appends run directory `dir` under its own name. */
static int add_run(spec *s, const char *dir) {
  char abs[PATH_MAX], events[PATH_MAX + 16], name[300];
  if (!realpath(dir, abs)) return err_set(DRV_EINVAL, "cannot read '%s': %s", dir, strerror(errno));
  if (!has_events(abs))
    return err_set(DRV_EINVAL, "run '%s' has no TensorBoard events (no %s/ in it)", dir, RUNDIR_TB);
  snprintf(events, sizeof events, "%s/" RUNDIR_TB, abs);
  const char *base = strrchr(abs, '/') + 1;
  snprintf(name, sizeof name, "%s", base);
  for (int k = 2; taken(s, name); k++) snprintf(name, sizeof name, "%s-%d", base, k);
  if (!tboard_spec_ok(name, events))
    return err_set(DRV_EINVAL, "run '%s': TensorBoard cannot take a name with ':' or ',' nor a "
                   "path with ',' (%s)", dir, events);
  size_t need = s->len + strlen(name) + strlen(events) + 3;
  if (need > s->cap) {
    char *t = realloc(s->text, need * 2);
    if (!t) return err_set(DRV_ENOMEM, "out of memory");
    s->text = t;
    s->cap = need * 2;
  }
  s->len += (size_t)sprintf(s->text + s->len, "%s%s:%s", s->len ? "," : "", name, events);
  size_t nl = strlen(s->names);
  snprintf(s->names + nl, sizeof s->names - nl, "%s%s", nl ? ", " : "", name);
  s->n++;
  return 0;
}

/* Every run under base with events/, in name order. */
static int add_all(spec *s, const char *base) {
  struct dirent **list;
  int n = scandir(base, &list, NULL, alphasort), rc = 0;
  if (n < 0) return err_set(DRV_EINVAL, "cannot list runs in '%s': %s", base, strerror(errno));
  for (int i = 0; i < n; i++) {
    char dir[PATH_MAX];
    if (rc == 0 && list[i]->d_name[0] != '.' &&
        snprintf(dir, sizeof dir, "%s/%s", base, list[i]->d_name) < (int)sizeof dir &&
        has_events(dir))
      rc = add_run(s, dir);
    free(list[i]);
  }
  free(list);
  if (rc == 0 && s->n == 0)
    rc = err_set(DRV_EINVAL, "no run in '%s' has TensorBoard events (%s/)", base, RUNDIR_TB);
  return rc;
}

static int build(const tbserve_opts *o, spec *s) {
  if (o->nnames == 0) return add_all(s, o->runs);
  for (int i = 0; i < o->nnames; i++) {
    char dir[PATH_MAX];
    int rc = runs_find(o->runs, o->names[i], dir, sizeof dir);
    if (rc == 0) rc = add_run(s, dir);
    if (rc < 0) return rc;
  }
  return 0;
}

/* ============================== serving ================================== */

static void on_signal(int sig) {
  (void)sig;
  err_interrupt_request();
}

/* Until a signal (0) or TensorBoard's own end (DRV_EIO). */
static int serve(tboard *t) {
  struct sigaction sa = {.sa_handler = on_signal}, old[3];
  static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
  char why[64];
  int rc = 0;
  struct timespec nap = {0, 100 * 1000 * 1000};
  while (!err_interrupted() && rc == 0) {
    if (tboard_exited(t, why, sizeof why))
      rc = err_set(DRV_EIO, "TensorBoard %s (its messages are above)", why);
    else nanosleep(&nap, NULL);
  }
  tboard_stop(t);
  for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
  err_interrupt_clear();
  return rc;
}

int tbserve_main(const tbserve_opts *o, FILE *out) {
  spec s = {0};
  tboard *t = NULL;
  int rc = build(o, &s);
  if (rc == 0) rc = tboard_start(&o->tb, s.text, true, "drover runs", NULL, &t);
  if (rc == 0) {
    fprintf(out, "drover: TensorBoard at %s serving %d run%s: %s (Ctrl-C stops it)\n",
            tboard_url(t), s.n, s.n == 1 ? "" : "s", s.names);
    fflush(out);
    rc = serve(t);
  }
  free(s.text);
  return rc;
}
