/* coord_ckpt_route.c - where each ps's checkpoint file goes, decided once
 * per registration rather than guessed per write (docs/ARCHITECTURE.md,
 * "The checkpoint commit (cluster)").
 *
 * At start the coordinator writes a random token to <run>/ckpt-token; a
 * node reads it at the run directory it was given and sends what it read
 * in REGISTER. A ps whose token matches sees the run directory and writes
 * and reads its files there (WIRE_CKPT_PATH); any other (a Spark
 * executor, a YARN container, an ssh host without the shared directory)
 * sends and receives them through the coordinator (WIRE_CKPT_COORD,
 * coord_ckpt_xfer.c). With ps replicas a group goes through the
 * coordinator when either of its ps cannot see the directory: the
 * replica applies its primary's RESTORE from the same bytes.
 * DROVER_CKPT_VIA_COORD=1 sends every ps through the coordinator (tests
 * compare both ways). With checkpoint.dir (HDFS) every ps writes and
 * reads its file there itself (WIRE_CKPT_HDFS): HDFS is what every node
 * of a Hadoop cluster reaches, whatever it sees of the run directory.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "cluster/coord/coord_int.h"

int coord__route_init(coord *c) {
  uint8_t raw[16];
  randombytes_buf(raw, sizeof raw);
  for (size_t i = 0; i < sizeof raw; i++) snprintf(c->rundir_token + 2 * i, 3, "%02x", raw[i]);
  char text[sizeof c->rundir_token + 1];
  snprintf(text, sizeof text, "%s\n", c->rundir_token);
  return rundir_write(&c->rd, RUNDIR_CKPT_TOKEN, text, 0644);
}

void coord__route_register(coord *c, int node, wire_str token) {
  c->nodes[node].sees_rundir = token.len == strlen(c->rundir_token) && token.len > 0 &&
                               memcmp(token.s, c->rundir_token, token.len) == 0;
}

static bool forced(void) {
  const char *e = getenv("DROVER_CKPT_VIA_COORD");
  return e && strcmp(e, "1") == 0;
}

int coord__ckpt_route(const coord *c, int group) {
  if (c->ckdir[0]) return WIRE_CKPT_HDFS; /* checkpoint.dir: HDFS, where every ps reaches */
  if (forced()) return WIRE_CKPT_COORD;
  int prim = coord__ps_node(c, group);
  int repl = c->ps_repl && group < c->ngroups ? c->ps_repl[group] : -1;
  if (prim < 0 || !c->nodes[prim].sees_rundir) return WIRE_CKPT_COORD;
  if (repl >= 0 && !c->nodes[repl].sees_rundir) return WIRE_CKPT_COORD;
  return WIRE_CKPT_PATH;
}

/* "ps:0 writes the run directory; ps:1 through the coordinator (...)" */
void coord__route_say(coord *c, int ngroups) {
  char line[2048];
  if (c->ckdir[0]) {
    rundir_event(&c->rd, "checkpoints: every ps writes HDFS itself, to %s", c->ckdir);
    log_info("checkpoints: every ps writes HDFS itself, to %s", c->ckdir);
    return;
  }
  size_t at = 0;
  for (int k = 0; k < ngroups && at < sizeof line - 200; k++) {
    bool via = coord__ckpt_route(c, k) == WIRE_CKPT_COORD;
    at += (size_t)snprintf(line + at, sizeof line - at, "%sps:%d %s", k ? "; " : "", k,
                           !via ? "writes the run directory"
                           : forced() ? "through the coordinator (DROVER_CKPT_VIA_COORD=1)"
                                      : "through the coordinator (the run directory is not "
                                        "visible on its host)");
  }
  rundir_event(&c->rd, "checkpoints: %s", line);
  log_info("checkpoints: %s", line);
}
