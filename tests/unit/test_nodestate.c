/* test_nodestate.c - the node states' table (nodestate.h): names, the
 * rank the dashboard sorts by and the tone it colours by agree. */
#include <string.h>

#include "harness.h"
#include "proto/nodestate.h"

TEST(nodestate_names) {
  CHECK(strcmp(nodestate_name(NODE_RELAUNCHED), "relaunched") == 0);
  CHECK(strcmp(nodestate_shown(NODE_RELAUNCHED), "restarting") == 0); /* as users saw it */
  CHECK(strcmp(nodestate_shown(NODE_REPLICA), "replica") == 0);
  CHECK(strcmp(nodestate_shown(NODE_STATE_COUNT), "?") == 0);
  CHECK(strcmp(nodestate_name((node_state)-1), "?") == 0);
  CHECK(NODE_STARTING == 0); /* a zeroed node has not started, not failed */
  for (int s = 0; s < NODE_STATE_COUNT; s++) CHECK(strlen(nodestate_shown(s)) < NODESTATE_SHOWN_MAX);
}

/* Worst first, as the dashboard sorts: the ranks follow the tones, one
 * rank per shown name. */
TEST(nodestate_ranks_follow_the_tones) {
  CHECK_INT_EQ(nodestate_rank("failed"), 0);
  CHECK(nodestate_rank("lost") < nodestate_rank("restarting"));
  CHECK(nodestate_rank("starting") < nodestate_rank("busy"));
  CHECK(nodestate_rank("busy") < nodestate_rank("ready"));
  CHECK(nodestate_rank("replica") < nodestate_rank("done"));
  CHECK_INT_EQ(nodestate_rank("idle"), NODE_STATE_COUNT); /* no such state: last */
  CHECK(nodestate_tone_of("idle") == NODESTATE_UNKNOWN);
  CHECK(nodestate_tone_of("restarting") == NODESTATE_WARN);
  for (int a = 0; a < NODE_STATE_COUNT; a++)
    for (int b = 0; b < NODE_STATE_COUNT; b++) {
      const char *x = nodestate_shown(a), *y = nodestate_shown(b);
      int rx = nodestate_rank(x), ry = nodestate_rank(y);
      CHECK(rx < NODE_STATE_COUNT);
      CHECK((rx == ry) == (strcmp(x, y) == 0));
      if (rx < ry) CHECK(nodestate_tone_of(x) <= nodestate_tone_of(y));
    }
}
