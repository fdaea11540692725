/* test_accept.c - who may send which message, as the servers check it at
 * each frame's header: every accept table of the coordinator
 * (coord_keys.c), of a ps (ps_accept.c) and of a worker's direct-feeder
 * port (worker_direct.c) written out type by type, so
 * that a change to any of them (or to the WIRE_TYPE_MAP column they come
 * from) shows here as the exact types it lets in or shuts out. */
#include <stdio.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "cluster/ps/ps_int.h"
#include "harness.h"
#include "proto/wire.h"

/* "what: TYPE TYPE ..." in type order; fails when an allowed type's
 * bound is not its layout's largest payload, or a refused one has one. */
static const char *allowed(const conn_accept *a) {
  static char out[1024];
  size_t n = (size_t)snprintf(out, sizeof out, "%s:", a->what);
  for (int t = 0; t < 256; t++) {
    if (!a->allow[t]) {
      CHECK_INT_EQ(a->max_len[t], 0);
      continue;
    }
    CHECK(wire_msg((uint8_t)t) != NULL);
    CHECK_INT_EQ(a->max_len[t], wire_msg((uint8_t)t)->max_len);
    n += (size_t)snprintf(out + n, sizeof out - n, " %s", wire_type_name((uint8_t)t));
    CHECK(n < sizeof out);
  }
  return out;
}

#define CHECK_ALLOWS(table, want)                                                            \
  do {                                                                                       \
    const char *got_ = allowed(table);                                                       \
    if (strcmp(got_, want) != 0)                                                             \
      harness_fail(__FILE__, __LINE__, "%s:\n  allows \"%s\"\n  wanted \"%s\"", #table, got_, \
                   want);                                                                    \
  } while (0)

TEST(accept_coordinator_by_peer) {
  CHECK_ALLOWS(coord__accept_fresh(AUTH_CAP_NODE), "a node before REGISTER: REGISTER");
  CHECK_ALLOWS(coord__accept_fresh(AUTH_CAP_CONTROL),
               "a control client before ATTACH, FEED_OPEN or PREDICT_OPEN: ATTACH FEED_OPEN "
               "PREDICT_OPEN");
  CHECK_ALLOWS(coord__accept_fresh(AUTH_CAP_VIEW), "a view client before ATTACH: ATTACH PREDICT_OPEN");
  CHECK(coord__accept_fresh(AUTH_CAP_NONE) == coord__accept_fresh(AUTH_CAP_VIEW));
  CHECK_ALLOWS(coord__accept_node(ROLE_PS),
               "a ps: HEARTBEAT ERROR LOG PS_ROLE_OK LINKS SPARSE_STATS");
  static const char trainer[] =
      "a registered node: HEARTBEAT ERROR LOG SETUP_OK RESULT EVAL_RESULT CALL_RESULT "
      "POSITION_OK ROLLBACK_OK FEED_END FEED_LISTEN_OK FEED_ACK FEED_DIRECT_END PREDICT_RESULT "
      "LINKS SPARSE_STATS";
  for (int r = ROLE_CHIEF; r < ROLE_COUNT; r++) CHECK_ALLOWS(coord__accept_node(r), trainer);
  CHECK_ALLOWS(coord__accept_attach(), "an attach client: COMMAND");
  CHECK_ALLOWS(coord__accept_feeder(), "an external feeder: FEED_BATCH FEED_END");
  CHECK_ALLOWS(coord__accept_predictor(), "a predict client: PREDICT_REQUEST");
}

TEST(accept_ps_by_peer) {
  CHECK_ALLOWS(ps__accept_as(AUTH_CAP_NODE, AUTH_ROLE_COORD),
               "the coordinator: HEARTBEAT VAR_INIT PULL PUSH CHECKPOINT RESTORE PUSH_ID "
               "LR_SCALE SYNC_STOP CKPT_FILE CKPT_PIECE CKPT_FILE_END SPARSE_INIT SPARSE_PULL "
               "SPARSE_DUMP SPARSE_LOAD");
  for (int r = ROLE_CHIEF; r < ROLE_COUNT; r++)
    CHECK_ALLOWS(ps__accept_as(AUTH_CAP_NODE, r),
                 "a worker, chief or evaluator: HEARTBEAT PULL PUSH PUSH_ID SPARSE_PULL SPARSE_PUSH");
  CHECK_ALLOWS(ps__accept_as(AUTH_CAP_NODE, ROLE_PS),
               "another ps, a primary: HEARTBEAT REPL_SYNC REPL REPL_SHARD REPL_PIECE REPL_SYNC_END "
               "REPL_TABLE REPL_ROWS");
  static const char none[] = "a node that does not pull, push or replicate:";
  for (int cap = AUTH_CAP_NONE; cap <= AUTH_CAP_VIEW; cap++)
    if (cap != AUTH_CAP_NODE) CHECK_ALLOWS(ps__accept_as((auth_cap)cap, ROLE_WORKER), none);
}

TEST(accept_direct_feeder_at_a_worker) {
  conn_accept a = {0};
  a.what = wire_peer_allow(WIRE_PEER_DIRECT_FEEDER, a.allow, a.max_len);
  CHECK_ALLOWS(&a, "a direct feeder: FEED_BATCH");
}
