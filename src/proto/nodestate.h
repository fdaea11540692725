/* nodestate.h - a cluster node's states, written down once: the
 * coordinator keeps each node in one of them (coord_nodes.c adds what a
 * state means there and where it may go), and whoever shows a node shows
 * one by its shown name (SNAPSHOT's node state, c:nodes(), the dashboard,
 * which sorts and colours by the row it finds).
 *
 * XX(NAME, name, shown, rank, tone); the first row is a zeroed node's.
 *   name   the coordinator's word for it (its log, an illegal change)
 *   shown  what users see (at most NODESTATE_SHOWN_MAX - 1 bytes);
 *          RELAUNCHED is shown as the RESTARTING it continues, and ranks
 *          with it
 *   rank   where the dashboard's sort by state puts it: worst first, from
 *          0, below NODE_STATE_COUNT
 *   tone   how it reads, in rank order: BAD a failure of the run, WARN on
 *          its way up or back, BUSY working, OK up, or done well
 * A new state: a row here, and its row in coord_nodes.c.
 *
 *   STARTING    launched, not registered
 *   READY       registered; takes tasks
 *   BUSY        READY with tasks in flight: what coord_node_status()
 *               shows, never a node's stored state
 *   LOST        exited or silent while it was needed
 *   DONE        exited cleanly after SHUTDOWN
 *   FAILED      exited with an error status, or was killed at shutdown
 *   RESTARTING  lost and recoverable: waiting out its back-off
 *   RELAUNCHED  started again after a loss, not registered yet
 *   RESTORING   a ps back after a loss, its shards being restored from a
 *               checkpoint; no tasks meanwhile
 *   SYNCING     a ps replica taking its primary's state
 *   REPLICA     a ps replica in sync with its primary (ps_replicas)
 *   REMOVING    a worker c:scale takes away: told SHUTDOWN, no tasks; its
 *               exit, whatever its status, is no loss
 *   REMOVED     a worker c:scale took away, exited
 */
#ifndef DROVER_NODESTATE_H
#define DROVER_NODESTATE_H

#define NODESTATE_MAP(XX)                             \
  XX(STARTING, "starting", "starting", 6, WARN)     \
  XX(READY, "ready", "ready", 8, OK)                \
  XX(BUSY, "busy", "busy", 7, BUSY)                 \
  XX(LOST, "lost", "lost", 1, BAD)                  \
  XX(DONE, "done", "done", 10, OK)                  \
  XX(FAILED, "failed", "failed", 0, BAD)            \
  XX(RESTARTING, "restarting", "restarting", 2, WARN)\
  XX(RELAUNCHED, "relaunched", "restarting", 2, WARN)\
  XX(RESTORING, "restoring", "restoring", 3, WARN)  \
  XX(SYNCING, "syncing", "syncing", 4, WARN)        \
  XX(REPLICA, "replica", "replica", 9, OK)          \
  XX(REMOVING, "removing", "removing", 5, WARN)     \
  XX(REMOVED, "removed", "removed", 11, OK)

typedef enum node_state {
#define XX(NAME, name, shown, rank, tone) NODE_##NAME,
  NODESTATE_MAP(XX)
#undef XX
  NODE_STATE_COUNT
} node_state;

typedef enum nodestate_tone {
  NODESTATE_BAD,
  NODESTATE_WARN,
  NODESTATE_BUSY,
  NODESTATE_OK,
  NODESTATE_UNKNOWN /* a name no row shows */
} nodestate_tone;

#define NODESTATE_SHOWN_MAX 16 /* bytes of a shown name with its NUL (runview_node.state) */

/* The coordinator's word for s ("relaunched"), what users see
 * ("restarting"); "?" when s is no state. Static strings. */
const char *nodestate_name(node_state s);
const char *nodestate_shown(node_state s);
/* The rank of the state shown as `shown`; NODE_STATE_COUNT (after every
 * state) for a name no row shows. */
int nodestate_rank(const char *shown);
/* The tone of the state shown as `shown`; NODESTATE_UNKNOWN for none. */
nodestate_tone nodestate_tone_of(const char *shown);

#endif
