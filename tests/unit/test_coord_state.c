/* test_coord_state.c - the node state machine (coord_nodes.c) on its own:
 * the table's legal and illegal transitions, what each state means
 * (flags), BUSY derived from the in-flight count, the events.log line of
 * each change, failures counted by the change to a failure state, and an
 * illegal change refused (logged) or, in strict mode, fatal. No process
 * is started: a coordinator with two nodes and a run directory. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster/coord/coord_int.h"
#include "harness.h"
#include "base/log.h"

#define CHECK_STR_EQ(a, b)                                                             \
  do {                                                                                 \
    const char *a_ = (a), *b_ = (b);                                                   \
    if (strcmp(a_, b_) != 0) harness_fail(__FILE__, __LINE__, "\"%s\" != \"%s\"", a_, b_); \
  } while (0)

/* ---- fixture: a coord with worker:0 and worker:1, events captured ------ */

static char last_event[2048];
static int nevents;

static void on_event(void *ud, const char *text) {
  (void)ud;
  snprintf(last_event, sizeof last_event, "%s", text);
  nevents++;
}

static coord *make(void) {
  coord *c = calloc(1, sizeof *c);
  CHECK(c);
  c->nnodes = 2;
  c->nodes = calloc(2, sizeof *c->nodes);
  CHECK(c->nodes);
  for (int i = 0; i < 2; i++) c->nodes[i] = (coord_node){.role = ROLE_WORKER, .index = i};
  FILE *log = fopen("coordinator.log", "a"); /* the case's temporary directory */
  CHECK(log);
  log_setup(log, "coordinator", LOG_INFO);
  CHECK_OK(rundir_create("runs", "state", &c->rd));
  rundir_set_hook(&c->rd, on_event, NULL);
  return c;
}

static void drop(coord *c) {
  rundir_close(&c->rd);
  free(c->nodes);
  free(c);
}

/* ---- the table ----------------------------------------------------------- */

typedef struct arrow {
  coord_node_state from, to;
} arrow;

/* Every arrow of the diagram in coord_nodes.c, and nothing else. */
static const arrow legal[] = {
    {NODE_STARTING, NODE_READY},        {NODE_STARTING, NODE_RESTARTING},
    {NODE_STARTING, NODE_LOST},         {NODE_STARTING, NODE_DONE},
    {NODE_READY, NODE_RESTARTING},      {NODE_READY, NODE_LOST},
    {NODE_READY, NODE_DONE},            {NODE_READY, NODE_FAILED},
    {NODE_RESTARTING, NODE_RELAUNCHED}, {NODE_RESTARTING, NODE_LOST},
    {NODE_RESTARTING, NODE_DONE},       {NODE_RELAUNCHED, NODE_READY},
    {NODE_RELAUNCHED, NODE_RESTARTING}, {NODE_RELAUNCHED, NODE_LOST},
    {NODE_RELAUNCHED, NODE_DONE},
    /* a ps back after a loss during a fit (coord_ckpt.c) */
    {NODE_READY, NODE_RESTORING},       {NODE_RESTORING, NODE_READY},
    {NODE_RESTORING, NODE_RESTARTING},  {NODE_RESTORING, NODE_LOST},
    {NODE_RESTORING, NODE_DONE},        {NODE_RESTORING, NODE_FAILED},
    /* a ps replica (coord_repl.c): paired, in sync, promoted, paired again */
    {NODE_READY, NODE_SYNCING},         {NODE_SYNCING, NODE_REPLICA},
    {NODE_SYNCING, NODE_RESTARTING},    {NODE_SYNCING, NODE_LOST},
    {NODE_SYNCING, NODE_DONE},          {NODE_SYNCING, NODE_FAILED},
    {NODE_REPLICA, NODE_READY},         {NODE_REPLICA, NODE_SYNCING},
    {NODE_REPLICA, NODE_RESTARTING},    {NODE_REPLICA, NODE_LOST},
    {NODE_REPLICA, NODE_DONE},          {NODE_REPLICA, NODE_FAILED},
    /* a worker c:scale takes away (coord_scale.c) */
    {NODE_READY, NODE_REMOVING},        {NODE_REMOVING, NODE_REMOVED},
    {NODE_REMOVING, NODE_DONE},         {NODE_REMOVING, NODE_FAILED},
    {NODE_REMOVED, NODE_RELAUNCHED},
    /* a worker lost past its restarts with worker = { min } (coord__scale_lost) */
    {NODE_STARTING, NODE_REMOVED},      {NODE_READY, NODE_REMOVED},
    {NODE_RELAUNCHED, NODE_REMOVED},    {NODE_RESTARTING, NODE_REMOVED},
};

static bool is_legal(coord_node_state from, coord_node_state to) {
  for (size_t k = 0; k < sizeof legal / sizeof *legal; k++)
    if (legal[k].from == from && legal[k].to == to) return true;
  return false;
}

TEST(coord_state_table_is_the_diagram) {
  for (int a = 0; a < NODE_STATE_COUNT; a++)
    for (int b = 0; b < NODE_STATE_COUNT; b++)
      if (coord__state_legal(a, b) != is_legal(a, b))
        harness_fail(__FILE__, __LINE__, "%s -> %s: the table says %s", coord_state_name(a),
                     coord_state_name(b), coord__state_legal(a, b) ? "legal" : "illegal");
  CHECK(!coord__state_legal(NODE_STATE_COUNT, NODE_READY));
  CHECK(!coord__state_legal(NODE_READY, (coord_node_state)-1));
}

TEST(coord_state_flags_say_what_a_state_means) {
  for (int s = 0; s < NODE_STATE_COUNT; s++) {
    unsigned f = coord__state_flags(s);
    /* final: no way out; derived (BUSY): no way in */
    if (f & NS_FINAL)
      for (int t = 0; t < NODE_STATE_COUNT; t++) CHECK(!coord__state_legal(s, t));
    if (f & NS_DERIVED)
      for (int t = 0; t < NODE_STATE_COUNT; t++) CHECK(!coord__state_legal(t, s));
    if (f & NS_TASKS) CHECK((f & NS_REGISTERED) && (f & NS_PROCESS));
  }
  CHECK(coord__state_flags(NODE_READY) & NS_TASKS);
  CHECK(!(coord__state_flags(NODE_STARTING) & NS_TASKS));
  CHECK(coord__state_flags(NODE_RELAUNCHED) & NS_PROCESS);
  CHECK(!(coord__state_flags(NODE_RESTARTING) & NS_PROCESS));
  CHECK(coord__state_flags(NODE_LOST) & NS_FAILURE);
  CHECK(coord__state_flags(NODE_FAILED) & NS_FAILURE);
  CHECK(!(coord__state_flags(NODE_DONE) & NS_FAILURE));
  CHECK_STR_EQ(coord_state_name(NODE_RELAUNCHED), "restarting"); /* as users saw it */
  CHECK_STR_EQ(coord_state_name(NODE_BUSY), "busy");
  CHECK_STR_EQ(coord_state_name(NODE_STATE_COUNT), "?");
}

TEST(coord_state_busy_follows_the_inflight_count) {
  coord_node n = {.state = NODE_READY};
  CHECK(coord_node_status(&n) == NODE_READY);
  n.inflight = 2;
  CHECK(coord_node_status(&n) == NODE_BUSY);
  n.state = NODE_RESTARTING; /* tasks of a lost node are not its work */
  CHECK(coord_node_status(&n) == NODE_RESTARTING);
}

/* ---- changes --------------------------------------------------------------- */

TEST(coord_state_changes_are_logged_and_failures_counted) {
  coord *c = make();
  CHECK_OK(coord__node_set_state(c, 1, NODE_READY, " pid %d host %s", 42, "h"));
  CHECK_STR_EQ(last_event, "node up worker:1 pid 42 host h");
  CHECK_OK(coord__node_set_state(c, 1, NODE_RESTARTING, ": %s", "killed by signal 9"));
  CHECK_STR_EQ(last_event, "node lost worker:1: killed by signal 9");
  CHECK_OK(coord__node_set_state(c, 1, NODE_RELAUNCHED, " (%d of %d) pid %d", 1, 3, 43));
  CHECK_STR_EQ(last_event, "node restart worker:1 (1 of 3) pid 43");
  CHECK_INT_EQ(c->failures, 0); /* a recovered loss is no failure */
  CHECK_OK(coord__node_set_state(c, 1, NODE_LOST, ": %s", "silent"));
  CHECK_INT_EQ(c->failures, 1);
  CHECK_OK(coord__node_set_state(c, 0, NODE_READY, " pid 7"));
  CHECK_OK(coord__node_set_state(c, 0, NODE_FAILED, ": exited with status 1"));
  CHECK_STR_EQ(last_event, "node failed worker:0: exited with status 1");
  CHECK_INT_EQ(c->failures, 2);
  CHECK(c->nodes[0].state == NODE_FAILED && c->nodes[1].state == NODE_LOST);
  drop(c);
}

/* Every state the table lets a node enter has its events.log word. */
TEST(coord_state_every_entry_is_logged) {
  coord *c = make();
  for (int a = 0; a < NODE_STATE_COUNT; a++)
    for (int b = 0; b < NODE_STATE_COUNT; b++) {
      if (!coord__state_legal(a, b)) continue;
      c->nodes[0].state = a;
      last_event[0] = 0;
      CHECK_OK(coord__node_set_state(c, 0, b, ": x"));
      char verb[32] = "";
      if (sscanf(last_event, "node %31s worker:0: x", verb) != 1 || !strcmp(verb, "(null)"))
        harness_fail(__FILE__, __LINE__, "%s -> %s logged \"%s\"", nodestate_name(a),
                     nodestate_name(b), last_event);
    }
  drop(c);
}

TEST(coord_state_illegal_change_is_refused_and_logged) {
  coord *c = make();
  int before = nevents;
  CHECK_ERR(coord__node_set_state(c, 0, NODE_RELAUNCHED, " (1 of 3)"), DRV_EINVAL,
            "illegal state change starting -> relaunched");
  CHECK(c->nodes[0].state == NODE_STARTING);
  CHECK(nevents == before + 1 && strstr(last_event, "illegal state change"));
  CHECK_ERR(coord__node_set_state(c, 0, NODE_BUSY, " busy"), DRV_EINVAL, "illegal");
  CHECK_OK(coord__node_set_state(c, 0, NODE_DONE, ": exited with status 0"));
  CHECK_ERR(coord__node_set_state(c, 0, NODE_FAILED, ": killed"), DRV_EINVAL, "done -> failed");
  CHECK(c->nodes[0].state == NODE_DONE && c->failures == 0); /* final: not counted */
  fflush(NULL);
  FILE *f = fopen("coordinator.log", "r");
  char text[4096] = "";
  CHECK(f && fread(text, 1, sizeof text - 1, f) > 0);
  fclose(f);
  CHECK_STR_CONTAINS(text, "worker:0: illegal state change done -> failed: killed; ignored");
  drop(c);
}

TEST(coord_state_illegal_change_aborts_when_strict) {
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    coord *c = make();
    c->strict_states = true;
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) dup2(fd, 2); /* the abort's message is expected */
    coord__node_set_state(c, 0, NODE_LOST, ": x");
    coord__node_set_state(c, 0, NODE_READY, ": back from the dead");
    _exit(0);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
}
