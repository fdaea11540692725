/* coord_launchers.c - the run's launchers (mixed placement, TensorFlowOnSpark's
 * driver_ps_nodes): each role is started by its own launcher or the
 * cluster's; each launcher used is opened once, with its own options and
 * the counts of its own roles only (a YARN application or a Slurm job is
 * sized for the nodes it runs), and every node is signalled, stopped and
 * restarted through the launcher that started it. Also where each node
 * runs, as users see it ("local", "yarn container_... @ host").
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/log.h"

const char *coord_role_launcher(const coord_opts *o, int role) {
  return o->role_launcher[role] ? o->role_launcher[role] : o->launcher ? o->launcher : "local";
}

bool coord_uses_launcher(const coord_opts *o, const char *name) {
  for (int r = 0; r < ROLE_COUNT; r++)
    if (o->count[r] > 0 && strcmp(coord_role_launcher(o, r), name) == 0) return true;
  return false;
}

/* A launcher's news while the start waits (a pending Slurm job): events
 * and the user's terminal. */
static void launcher_note(void *ud, const char *msg) {
  coord *c = ud;
  rundir_event(&c->rd, "launcher: %s", msg);
  log_info("launcher: %s", msg);
  fprintf(stderr, "drover: %s\n", msg);
}

/* Opens the launcher `name` for the roles that name it. */
static int open_one(coord *c, const char *name) {
  const coord_opts *o = &c->opts;
  launch_config lc = {.hosts = o->hosts, .nhosts = o->nhosts, .ssh_config = o->ssh_config,
                      .run_dir = c->rd.path, .slurm = o->slurm, .spark = o->spark,
                      .yarn = o->yarn, .files = o->files, .nfiles = o->nfiles,
                      .note = launcher_note, .note_ud = c};
  for (int r = 0; r < ROLE_COUNT; r++)
    if (strcmp(coord_role_launcher(o, r), name) == 0) {
      lc.count[r] = coord__processes(c, r);
      lc.extra[r] = r == ROLE_WORKER ? coord__scale_room(o) : 0;
      lc.res[r] = o->res[r];
    }
  launcher *l = NULL;
  int rc = launch_open(name, &lc, c->loop, coord__on_exit, c, &l);
  if (rc < 0) return rc;
  c->launchers[c->nlaunchers++] = l;
  for (int r = 0; r < ROLE_COUNT; r++)
    if (strcmp(coord_role_launcher(o, r), name) == 0) c->role_launch[r] = l;
  return 0;
}

int coord__open_launchers(coord *c) {
  int rc = 0;
  for (int r = 0; r < ROLE_COUNT && rc == 0; r++)
    if (c->opts.count[r] > 0 && !c->role_launch[r])
      rc = open_one(c, coord_role_launcher(&c->opts, r));
  if (rc == 0 && c->nlaunchers > 1) { /* "local+spark" is what `drover ls` shows */
    char names[64] = "", roles[160] = "";
    size_t a = 0, b = 0;
    for (int k = 0; k < c->nlaunchers && a < sizeof names; k++)
      a += (size_t)snprintf(names + a, sizeof names - a, "%s%s", k ? "+" : "",
                            c->launchers[k]->ops->name);
    for (int r = 0; r < ROLE_COUNT && b < sizeof roles; r++)
      if (c->opts.count[r] > 0)
        b += (size_t)snprintf(roles + b, sizeof roles - b, "%s%s on %s", b ? ", " : "",
                              wire_role_name(r), coord_role_launcher(&c->opts, r));
    rundir_event(&c->rd, "mixed placement: %s (%s)", names, roles);
  }
  /* The names were the options table's (borrowed for the call): from here
   * on, the launchers' own (static) names; a default no role uses, the
   * first launcher's. */
  const char *def = c->nlaunchers ? c->launchers[0]->ops->name : "local";
  for (int r = 0; r < ROLE_COUNT; r++)
    if (c->role_launch[r]) {
      if (strcmp(c->opts.launcher, c->role_launch[r]->ops->name) == 0)
        def = c->role_launch[r]->ops->name;
      c->opts.role_launcher[r] = c->role_launch[r]->ops->name;
    }
  c->opts.launcher = def;
  for (int i = 0; i < c->nnodes; i++) {
    c->nodes[i].launcher = coord_role_launcher(&c->opts, c->nodes[i].role);
    coord__node_where(c, i);
  }
  /* borrowed for the call: the launchers keep copies */
  c->opts.hosts = c->opts.files = c->opts.slurm.sbatch = NULL;
  c->opts.ssh_config = NULL;
  memset(&c->opts.spark, 0, sizeof c->opts.spark);
  memset(&c->opts.yarn, 0, sizeof c->opts.yarn);
  for (int r = 0; r < ROLE_COUNT; r++) c->opts.res[r].label = NULL;
  return rc;
}

launcher *coord__launcher(const coord *c, int i) { return c->role_launch[c->nodes[i].role]; }

void coord__signal(coord *c, int i, int sig) {
  launcher *l = coord__launcher(c, i);
  if (l) l->ops->signal(l, &c->nodes[i], sig);
}

int coord__running(const coord *c) {
  int n = 0;
  for (int k = 0; k < c->nlaunchers; k++) n += c->launchers[k]->ops->running(c->launchers[k]);
  return n;
}

void coord__close_launchers(coord *c) {
  for (int k = 0; k < c->nlaunchers; k++) c->launchers[k]->ops->destroy(c->launchers[k]);
  c->nlaunchers = 0;
  memset(c->role_launch, 0, sizeof c->role_launch);
}

const char *coord__launch_where(const coord *c, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int k = 0; k < c->nlaunchers && len < n; k++) {
    launcher *l = c->launchers[k];
    const char *w = l->ops->where ? l->ops->where(l) : NULL;
    len += (size_t)snprintf(buf + len, n - len, "%s%s", k ? " + " : "", w ? w : l->ops->name);
  }
  if (!c->nlaunchers) snprintf(buf, n, "%s", c->opts.launcher);
  return buf;
}

/* "local" for a node of this machine; else the launcher, its place there
 * (a YARN container, a Spark executor, a Slurm step, an ssh host) and the
 * host it reported. */
void coord__node_where(coord *c, int i) {
  coord_node *n = &c->nodes[i];
  const char *name = n->launcher ? n->launcher : c->opts.launcher;
  launcher *l = coord__launcher(c, i);
  const char *m = l && l->ops->machine ? l->ops->machine(l, n->role, n->index) : NULL;
  char place[sizeof n->got.place + 4] = "";
  if (n->got.place[0])
    snprintf(place, sizeof place, " %s", n->got.place);
  else if (n->got.slurm_job[0])
    snprintf(place, sizeof place, " %s.%s", n->got.slurm_job, n->got.slurm_step);
  const char *host = n->got.hostname[0] ? n->got.hostname : m;
  if (strcmp(name, "local") == 0) /* its environment is ours: no place of its own */
    snprintf(n->where, sizeof n->where, "local");
  else if (!host)
    snprintf(n->where, sizeof n->where, "%s%s", name, place);
  else
    snprintf(n->where, sizeof n->where, "%s%s @ %s", name, place, host);
}

/* What the launcher a role names cannot do without, refused before the run
 * directory exists (the launchers refuse it too, later and without the
 * role: for the cluster's own launcher they still do). */
static int check_role_needs(const coord_opts *o, int r) {
  const char *l = o->role_launcher[r], *role = wire_role_name(r);
  const char *rm = o->yarn.rm ? o->yarn.rm : getenv("DROVER_YARN_RM");
  if (strcmp(l, "spark") == 0 && (!o->spark.master || !*o->spark.master))
    return err_set(DRV_EINVAL, "cluster: %s.launcher = \"spark\" needs spark = { master = "
                   "\"spark://host:7077\" }", role);
  if (strcmp(l, "ssh") == 0 && o->nhosts < 1)
    return err_set(DRV_EINVAL, "cluster: %s.launcher = \"ssh\" needs hosts = { \"host\", ... }",
                   role);
  if (strcmp(l, "yarn") == 0 && (!rm || !*rm))
    return err_set(DRV_EINVAL, "cluster: %s.launcher = \"yarn\" needs yarn = { rm = "
                   "\"host:port\" } (or $DROVER_YARN_RM)", role);
  return 0;
}

int coord__check_launchers(const coord_opts *o) {
  for (int r = 0; r < ROLE_COUNT; r++) {
    if (!o->role_launcher[r]) continue;
    if (launch_check_name(o->role_launcher[r]) < 0)
      return err_set(DRV_EUNSUPPORTED, "cluster: %s.launcher: %s", wire_role_name(r), err_msg());
    int rc = o->count[r] > 0 ? check_role_needs(o, r) : 0;
    if (rc < 0) return rc;
  }
  /* external nodes are someone else's: the coordinator treats the whole
   * cluster so (no processes, connections as exits) */
  for (int r = 0; r < ROLE_COUNT; r++)
    if (o->count[r] > 0 && strcmp(coord_role_launcher(o, r), "external") != 0 &&
        coord_uses_launcher(o, "external"))
      return err_set(DRV_EINVAL, "cluster: the \"external\" launcher cannot be mixed with "
                     "others (%s runs on \"%s\"): all roles or none", wire_role_name(r),
                     coord_role_launcher(o, r));
  return 0;
}
