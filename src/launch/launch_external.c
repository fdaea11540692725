/* launch_external.c - the "external" launcher: nodes someone else starts.
 *
 * The coordinator waits for each node to register, as with any launcher,
 * but starts no process: whoever runs the nodes (a simulator of many
 * nodes in one process for the scale bench, a test's own peers, a
 * scheduler of another kind) dials the coordinator with each node's key
 * (no key files are written for them: whoever runs them holds the
 * secret and derives each node's key, auth_node_key). With no
 * process of ours, a node's exit is its connection closing: after
 * SHUTDOWN a clean one (coord.c), before it a loss found by the
 * heartbeat. A lost node "restarted" here is only waited for again: its
 * peer may register once more.
 */
#include <stdlib.h>

#include "base/err.h"
#include "launch/launch.h"

static int ext_start(launcher *l, const launch_task *t, void *task_ud, pid_t *pid) {
  (void)l, (void)t, (void)task_ud;
  if (pid) *pid = 0;
  return 0;
}

/* Nothing to signal: the coordinator's SHUTDOWN is how such a node stops. */
static int ext_signal(launcher *l, void *task_ud, int sig) {
  (void)l, (void)task_ud, (void)sig;
  return 0;
}

static int ext_running(launcher *l) {
  (void)l;
  return 0;
}

static void ext_destroy(launcher *l) { free(l); }

static const launch_ops external_ops = {"external", ext_start, ext_signal, ext_running,
                                        ext_destroy, NULL, NULL, NULL};

int launch_external_new(uv_loop_t *loop, const launch_config *cfg, launch_exit_cb on_exit,
                        void *ud, launcher **out) {
  (void)cfg;
  *out = NULL;
  launcher *l = calloc(1, sizeof *l);
  if (!l) return err_set(DRV_ENOMEM, "out of memory creating the external launcher");
  *l = (launcher){.ops = &external_ops, .loop = loop, .on_exit = on_exit, .ud = ud};
  *out = l;
  return 0;
}
