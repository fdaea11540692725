/* nodestate.c - the node states' names and ranks (nodestate.h). */
#include "proto/nodestate.h"

#include <stdbool.h>
#include <string.h>

#define XX(NAME, name, shown, rank, tone)                                                   \
  _Static_assert(sizeof(shown) <= NODESTATE_SHOWN_MAX, "node state " #NAME ": shown too long"); \
  _Static_assert((rank) >= 0 && (rank) < NODE_STATE_COUNT, "node state " #NAME ": rank");
NODESTATE_MAP(XX)
#undef XX

static const struct {
  const char *name, *shown;
  int rank;
  nodestate_tone tone;
} rows[NODE_STATE_COUNT] = {
#define XX(NAME, name, shown, rank, tone) [NODE_##NAME] = {name, shown, rank, NODESTATE_##tone},
    NODESTATE_MAP(XX)
#undef XX
};

static bool valid(node_state s) { return (unsigned)s < NODE_STATE_COUNT; }

const char *nodestate_name(node_state s) { return valid(s) ? rows[s].name : "?"; }

const char *nodestate_shown(node_state s) { return valid(s) ? rows[s].shown : "?"; }

/* The first state shown as `shown`, or NODE_STATE_COUNT. */
static int shown_as(const char *shown) {
  int s = 0;
  while (s < NODE_STATE_COUNT && strcmp(rows[s].shown, shown) != 0) s++;
  return s;
}

int nodestate_rank(const char *shown) {
  int s = shown_as(shown);
  return s < NODE_STATE_COUNT ? rows[s].rank : NODE_STATE_COUNT;
}

nodestate_tone nodestate_tone_of(const char *shown) {
  int s = shown_as(shown);
  return s < NODE_STATE_COUNT ? rows[s].tone : NODESTATE_UNKNOWN;
}
