/* coord_ship.c - files mode on hosts without the coordinator's file
 * system: a recipe's file that is one of the run's `files` reaches the
 * node under the name its launcher shipped it under, and SETUP (and
 * PREDICT_MODEL) tell the node that name, so a worker that can open
 * neither the coordinator's absolute path nor the path as the script wrote
 * it opens that one in its directory (data_recipe.c's file_of).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "data/data.h"
#include "launch/launch.h"

int coord__ship_init(coord *c) {
  int n = c->opts.nfiles;
  if (n <= 0 || !c->opts.files) return 0;
  /* mixed placement: the names of the launcher of the nodes that read data */
  const char *via = coord_role_launcher(&c->opts, c->opts.count[ROLE_WORKER] ? ROLE_WORKER
                                                                             : ROLE_CHIEF);
  c->ship_paths = calloc((size_t)n, sizeof *c->ship_paths);
  c->ship_names = calloc((size_t)n, sizeof *c->ship_names);
  if (!c->ship_paths || !c->ship_names) return err_set(DRV_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    char abs[PATH_MAX], name[PATH_MAX];
    const char *f = c->opts.files[i];
    /* A file that is not there is the launcher's to report. */
    if (!f || !realpath(f, abs) || launch_ship_name(via, f, name, sizeof name) < 0)
      continue;
    char *p = strdup(abs), *nm = strdup(name);
    if (!p || !nm) {
      free(p);
      free(nm);
      return err_set(DRV_ENOMEM, "out of memory");
    }
    c->ship_paths[c->nship] = p;
    c->ship_names[c->nship++] = nm;
  }
  return 0;
}

int coord__ship_recipe(const coord *c, const char *recipe, char **out) {
  *out = NULL;
  if (!recipe || c->nship == 0) return 0;
  return data_recipe_shipped(recipe, (const char *const *)c->ship_paths,
                             (const char *const *)c->ship_names, c->nship, out);
}

void coord__ship_free(coord *c) {
  for (int i = 0; i < c->nship; i++) {
    free(c->ship_paths[i]);
    free(c->ship_names[i]);
  }
  free(c->ship_paths);
  free(c->ship_names);
  c->ship_paths = c->ship_names = NULL;
  c->nship = 0;
}
