/* coord_int.h - the coordinator's internals, shared by coord.c (cluster
 * lifecycle) and coord_fit.c (training); not a public API. */
#ifndef DROVER_COORD_INT_H
#define DROVER_COORD_INT_H

#include <stdio.h>

#include "proto/auth.h"
#include "net/conn.h"
#include "cluster/coord/coord.h"
#include "launch/launch.h"
#include "base/rundir.h"

#define TICK_MS 100 /* heartbeat/silence timer period */

typedef struct coord_fit_state coord_fit_state; /* coord_fit.c */
typedef struct coord_dash_state coord_dash_state; /* coord_dash.c */

/* ---- the task queue's producers (coord_sched.c) ----
 * Besides closures (its own), the queue serves producers: the fit's train
 * steps today, predict and feed next. A producer registers its ops and
 * keeps tasks of its own queued (refill); the queue knows nothing of what
 * they mean. It sends each as TASK {id, task_kind, 0} to the least busy
 * worker or chief that takes tasks, has fewer than max_inflight tasks in
 * flight, and ready() accepts; it puts a lost node's tasks back in front;
 * and it hands the RESULT of the node holding a task to done(), once.
 * refill runs at the start of each serving of the queue (coord__dispatch;
 * a dispatch from inside it does nothing), ready while nodes are picked,
 * done from the RESULT's callback; they may call the functions below. */
typedef struct coord_producer_ops {
  const char *what;  /* its tasks in events.log: "train step" ("retry 2 train
                        steps of worker:1") */
  uint8_t task_kind; /* the TASK frame's kind (WIRE_TASK_TRAIN_STEP) */
  int max_inflight;  /* a node takes one more of its tasks while it has
                        fewer than this in flight */
  /* Whether node may take its tasks now (a node set up for them). */
  bool (*ready)(void *ud, int node);
  /* Before each serving of the queue: top up its tasks (coord__sched_add). */
  void (*refill)(void *ud);
  /* Task id is over: node, which held it, answered RESULT (pl, len: the
   * payload, its layout checked; the id first). The task is forgotten
   * after. Negative for a payload that has no business there: the node's
   * connection is closed. */
  int (*done)(void *ud, int node, uint64_t id, const uint8_t *pl, uint32_t len);
  /* Optional, asked before done() for a RESULT: true when the task failed
   * for a cause outside it (a ps lost under it) and must run again. It
   * then goes back to the front of the queue, same id and data, and
   * done() is not called. NULL: every RESULT is done(). */
  bool (*again)(void *ud, int node, uint64_t id, const uint8_t *pl, uint32_t len);
  /* For tasks that carry their data (coord__sched_add_data): the type of
   * the frame whose payload is that data, sent as it is (by reference, no
   * copy) each time the task is sent, a retry included; the producer
   * writes the task id into it. 0: TASK {id, task_kind, 0}. */
  uint8_t data_type;
  /* Optional: writes task id's own frame (its type in *type) instead of
   * TASK {id, task_kind, 0}, for tasks that carry their input (PREDICT).
   * Its answer still starts with the task id (PREDICT_RESULT). */
  void (*put)(void *ud, uint64_t id, wire_wr *w, uint8_t *type);
} coord_producer_ops;

#define COORD_MAX_PRODUCERS 8

/* Registers a producer (ops static, ud borrowed until removed); its
 * number for the calls below, or DRV_ERANGE when there are too many. */
int coord__sched_add_producer(coord *c, const coord_producer_ops *ops, void *ud);
/* Producer p is gone: its queued tasks are dropped, its running ones let
 * go (their results ignored); its ops are never called again. */
void coord__sched_remove_producer(coord *c, int p);
/* Queues one more task of producer p; its id, or negative. */
int64_t coord__sched_add(coord *c, int p);
/* The same for a task that carries data: data (malloc'ed) is
 * WIRE_HEADER_SIZE bytes of room, then the payload of the frame of type
 * ops->data_type. The queue owns it from now on, also on failure, and
 * frees it once the task is over or dropped and no write of it is under
 * way; until then the producer may write into it (the task id). A lost
 * node's task is sent again with it. */
int64_t coord__sched_add_data(coord *c, int p, uint8_t *data, uint32_t len);
/* The same for data in a blockcache block of `block` bytes (blockcache.h),
 * given back to the cache once the task is over: a stream of big tasks
 * (fed batches) reuses its blocks. block 0: data is malloc'ed. */
int64_t coord__sched_add_block(coord *c, int p, uint8_t *data, uint32_t len, size_t block);
/* The same with part of the payload sent from where it is: `ref`'s
 * elements (contiguous, little-endian floats; taken: freed with the task)
 * go between data[.. split) and data[split .. len), by one writev, never
 * copied. A fed batch's x rows travel so. */
int64_t coord__sched_add_ref(coord *c, int p, uint8_t *data, uint32_t len, size_t block,
                             tensor *ref, uint32_t split);
/* The node holding producer p's running task id, or -1. */
int coord__sched_owner(const coord *c, int p, uint64_t id);
/* Drops p's queued tasks; with `all`, its running ones are let go too
 * (their results ignored; done() is not called for them). */
void coord__sched_drop(coord *c, int p, bool all);
/* Producer p's tasks waiting in the queue, and sent and not answered. */
int64_t coord__sched_queued(const coord *c, int p);
int64_t coord__sched_running(const coord *c, int p);

/* ---- the task queue (coord_sched.c) ---- */
enum { TK_CALL = 1, TK_PRODUCED = 2 };
enum { TS_QUEUED, TS_RUNNING, TS_DONE, TS_FAILED, TS_CANCELLED, TS_FREE };

typedef struct task {
  uint8_t kind, state;
  uint8_t producer; /* TK_PRODUCED: whose */
  bool released;  /* no future holds it (a produced task: its producer let go) */
  int32_t owner;  /* RUNNING: the node it was sent to */
  int32_t ran_on; /* the node it was last sent to (-1: none yet) */
  uint32_t runs;  /* times sent */
  uint8_t *data;  /* CALL: the closure until it runs, then its encoded
                     results or its error message (owned) */
  uint32_t len;
  struct task_buf *buf; /* a produced task's data (coord__sched_add_data):
                           shared with the writes sending it */
} task;

typedef struct coord_sched {
  task *t;             /* t[i] is task base + i; ids start at 1 */
  int64_t n, cap;
  uint64_t base;
  uint64_t *q;         /* ring of queued task ids; retries go in front */
  int64_t qhead, qlen, qcap;
  int64_t calls_queued, calls_running; /* closures */
  int64_t queued, running;             /* every task */
  struct {
    const coord_producer_ops *ops; /* NULL: removed (the slot is reused once
                                      queued and running are 0) */
    void *ud;
    int64_t queued, running;
  } prod[COORD_MAX_PRODUCERS];
  int nprod;
  int64_t scheduled, done, failed, retried, cancelled;
  int rr;              /* round-robin start of pick_node */
  bool dispatching;
  bool later;          /* coord__dispatch_later: serve the queue after the reads */
  uv_check_t *check;
  wire_wr *out;        /* per node: the frames of the dispatch in progress */
  int *touched;        /* the nodes whose `out` holds frames, ntouched of them */
  bool *is_touched;    /* per node: in `touched` */
  int ntouched;
  bool error_pending;  /* the first failure, not raised yet */
  uint64_t error_id;
  char *error;
} coord_sched;

struct coord {
  uv_loop_t *loop;
  coord_opts opts;
  rundir rd;
  FILE *log;
  auth_secret secret;    /* the nodes' root (coord_keys.c) */
  auth_secret control, view; /* attach clients' keys */
  auth_secret feed_key;  /* auth_feed_key(control): workers' direct feeders prove it */
  conn_server *server;
  int port;
  conn_transport_mode transport; /* the cluster's (coord_addr.c), in REGISTERED */
  char addr[80];      /* where a process on this machine dials us (coord_addr.c) */
  char node_addr[80]; /* what nodes are told to dial; a wildcard host: found by each */
  const char *node_bind; /* where nodes listen (static) */
  char local_addr[80];   /* what nodes of the local launcher dial, and where they */
  const char *local_bind; /* listen (static): beside remote ones, routable addresses */
  launcher *launchers[ROLE_COUNT]; /* each launcher the run uses, once (coord_launch.c) */
  int nlaunchers;
  launcher *role_launch[ROLE_COUNT]; /* the one starting each role's nodes (NULL: none yet) */
  tboard *tb;        /* TensorBoard over events/ (run/tboard.h), or NULL */
  coord_node *nodes; /* nnodes entries, ps first (role order) */
  conn **ctl;        /* control connection per node, NULL until registered */
  int nnodes, registered;
  int node_cap;      /* room in nodes and ctl, and in every per-node array
                        sized once: beyond nnodes, the workers c:scale may
                        add (coord_scale.c) */
  uv_timer_t *tick;
  double last_tick, last_heartbeat, last_sweep;
  uint64_t hb_seq;
  uint32_t hb_said;     /* the interval events.log last named (0: none yet) */
  bool shutting_down, shut_down;
  bool spec_sent; /* the reservation is over; SPEC went to everyone */
  bool nodes_dirty;     /* nodes.tsv is behind (coord__nodes_file) */
  double nodes_written; /* when it was last written */
  int failures;         /* counted by coord__node_set_state and coord__fail only */
  char failure[4096];
  bool strict_states;   /* an illegal state change aborts (tests; DROVER_STRICT_STATES=1) */
  coord_fit_state *fit; /* placement and ps connections, kept across fits */
  /* ps groups (coord_repl.c): group k's variables are served by node
   * ps_prim[k] and replicated to node ps_repl[k] (-1: no replicas);
   * ps_pair[k]: the pair is to be made (again) once both are registered */
  int ngroups;
  int *ps_prim, *ps_repl;
  bool *ps_pair;
  uint64_t *ps_token; /* the pairing in progress's (PS_ROLE_OK matches it) */
  coord_sched sched;
  coord_dash_state *dash; /* the metric store and attach clients */
  struct coord_serving *serve; /* predict clients and c:serve (coord_serve.c) */
  /* The run's `files` (coord_ship.c): their absolute real paths and the
   * names the launcher puts them under on a node, for files mode. */
  char **ship_paths, **ship_names;
  int nship;
  /* Teardown. Connections whose on_close still uses this struct (control
   * peers, the fit's ps links) are counted; coord_free closes them and the
   * last close callback frees the coordinator (coord__conn_gone). */
  struct peer *peers; /* every authenticated control connection (coord.c) */
  int open_conns;
  bool freeing;
  bool resume; /* `drover run --resume`: the first fits continue from the run's checkpoints */
  /* `drover stop` (coord_runstop.c): RUN_STOP_*, the step whose checkpoint
   * it waits for, and since when */
  int run_stop;
  int64_t run_stop_step;
  double run_stop_at;
  coord_stop_fn stop_fn; /* who ends the run then (NULL: SIGINT), and its argument */
  void *stop_ud;
  bool *freed; /* coord_free's, set once the struct is gone */
  char rundir_token[33]; /* in <run>/ckpt-token (coord_ckpt_route.c) */
  /* events/chief/ written here for a chief that cannot see the run
   * directory (coord_summaries.c); tried: opened, or failed once */
  struct events_writer *chief_events;
  bool chief_events_tried;
  char ckdir[2200]; /* checkpoint.dir's webhdfs://.../<run name>: every ps writes there
                     * itself (WIRE_CKPT_HDFS); "" for <run>/checkpoints */
};

const char *coord__node_name(const coord_node *n, char *buf, size_t len);
/* The last thing the on_close of a connection counted in c->open_conns
 * does: after coord_free, the last one frees c. */
void coord__conn_gone(coord *c);
int coord__find_node(const coord *c, int role, int index);
void coord__fail(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of a failure already counted: logged, an "error" event,
 * kept when it is the run's first. */
void coord__keep_failure(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* coord_launch.c: the node table, launching, exits, losses, restarts. */
int coord__processes(const coord *c, int role); /* with ps replicas: ps x (1 + k) */
int coord__make_nodes(coord *c);
int coord__launch_all(coord *c);
/* Starts node i's process through its launcher (n->pid set); 0 or negative. */
int coord__launch_node(coord *c, int i);
void coord__on_exit(launcher *l, void *task_ud, int64_t status, int sig);
/* A node with a process is lost: restarted with back-off when it can be,
 * else the run's failure; a silent process is killed either way. */
void coord__node_lost(coord *c, int i, const char *why);
void coord__check_restarts(coord *c, double now);
/* The launcher is "external": its nodes have no process of ours (a node's
 * connection is all there is of it). Never mixed with another. */
bool coord__external(const coord *c);
/* The roles' own launchers: known names, what each needs given, "external"
 * never mixed. 0, or DRV_EINVAL / DRV_EUNSUPPORTED naming the role. */
int coord__check_launchers(const coord_opts *o);
/* Opens every launcher the roles use, once each, with the options and the
 * counts of its own roles (borrowed strings of c->opts are dropped after). */
int coord__open_launchers(coord *c);
/* The launcher of node i (NULL before coord__open_launchers). */
launcher *coord__launcher(const coord *c, int i);
/* Sends sig to node i through its launcher (no-op without one). */
void coord__signal(coord *c, int i, int sig);
/* Started tasks whose exit no launcher has reported yet. */
int coord__running(const coord *c);
/* Destroys every launcher (their tasks SIGKILLed). */
void coord__close_launchers(coord *c);
/* The launchers as the dashboard's header shows them ("local + yarn
 * application_1_0001 ..."), into buf. */
const char *coord__launch_where(const coord *c, char *buf, size_t n);
/* Sets node i's `where` from its launcher and what it registered with. */
void coord__node_where(coord *c, int i);
/* Sends on node i's control connection (dropped when it has none). */
void coord__send(coord *c, int node, wire_wr *w, uint8_t type, uint32_t req);
/* Pumps the loop until done(c, arg): 0; DRV_ETIMEDOUT after `timeout`
 * seconds (0: none); DRV_EINTERRUPTED on Ctrl-C; DRV_ENODE when a node
 * fails and fail_on_loss. */
int coord__pump(coord *c, bool (*done)(coord *c, void *arg), void *arg, double timeout,
               bool fail_on_loss);

/* ---- coord_scale.c ---- */
#define COORD_SCALE_GRACE_MS 5000 /* a removed worker's time to finish and exit */
#define COORD_SCALE_TIMEOUT 30.0  /* then it is killed; its exit still ends it */
/* Node n was taken away by c:scale (REMOVING or REMOVED): fits and feeds
 * plan without it. */
bool coord__scaled_away(const coord_node *n);
/* Launches workers from `have` to `want` (removed ones back first). */
int coord__scale_grow(coord *c, int have, int want);
/* SHUTDOWN to the highest-indexed workers beyond `want` (REMOVING). */
void coord__scale_remove_beyond(coord *c, int want);
/* coord__pump conditions: no worker removing (each removed one's exit
 * reported); that, and every worker not taken away registered. */
bool coord__scale_none_removing(coord *c, void *arg);
bool coord__scale_settled(coord *c, void *arg);
/* Worker i was lost and will not be restarted (restarts exhausted, or its
 * restart failed; `why` says how it was lost): with worker = { min } and
 * at least min workers left it goes REMOVED, its tasks back to the queue,
 * and a running fit goes on without it (coord__scale_fit_lost); true then.
 * Else false, with what the failure should add (the count left below min)
 * in left[n] ("" when nothing). */
bool coord__scale_lost(coord *c, int i, const char *why, char *left, size_t n);
/* coord_ckpt.c: `drover run --resume`: the worker count the run goes on
 * with into o->count[ROLE_WORKER] (before the nodes are made): --workers
 * (o->resume_workers), else the one the run's newest cluster checkpoint
 * recorded, else the script's. DRV_EINVAL outside [min, max]. What was
 * chosen and why into note[n] ("" when the script's count stays). */
int coord__ckpt_resume_workers(coord_opts *o, char *note, size_t n);
/* Workers c:scale may add beyond the configured ones: worker = { max }. */
int coord__scale_room(const coord_opts *o);

/* ---- coord_nodes.c: the node state machine ---- */
/* What a state means, as flags: the code asks these, never for a list of
 * states, so a new state is one row of the table in coord_nodes.c. */
enum {
  NS_PROCESS = 1 << 0,    /* a process of ours runs (or is starting): its loss matters */
  NS_REGISTERED = 1 << 1, /* it registered: it holds a control connection */
  NS_TASKS = 1 << 2,      /* the queue may send it tasks */
  NS_FAILURE = 1 << 3,    /* entering it is a failure of the run (counted) */
  NS_FINAL = 1 << 4,      /* nothing follows */
  NS_DERIVED = 1 << 5     /* shown, never stored (BUSY) */
};
unsigned coord__state_flags(coord_node_state s);
/* Whether the table lets a node go from `from` to `to`. */
bool coord__state_legal(coord_node_state from, coord_node_state to);
/* Node i goes to state `to`: checked against the table; logged to the
 * coordinator's log and to events.log (hence the dashboard) as
 * "node VERB NAME" followed by why_fmt's text as is (": silent for 5 s",
 * " pid 42 host h"); a failure state adds one to c->failures. An illegal
 * change is logged and not made (DRV_EINVAL); with c->strict_states it
 * aborts. 0 when made. */
int coord__node_set_state(coord *c, int i, coord_node_state to, const char *why_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- coord_nodes.c ---- */
/* 0, or DRV_EINVAL naming the option out of range. */
int coord__check_opts(const coord_opts *o);
/* Node i registered with what it got: kept, logged to events.log, and
 * <run>/nodes.tsv rewritten. */
void coord__node_info(coord *c, int i, const node_info *got);
/* LOG from node n: its text appended to n's log file (`drover node
 * --log-forward`); a write failure is only logged. */
void coord__node_log(coord_node *n, const uint8_t *pl, uint32_t len);
/* LINKS from node n: kept for the dashboard (coord_node_links). 0, or
 * DRV_EPARSE for a payload that does not decode. */
int coord__node_links(coord_node *n, const uint8_t *pl, uint32_t len);
/* SPARSE_STATS from node n: kept (coord_tables). 0, DRV_EPARSE, DRV_ENOMEM. */
int coord__node_sparse_stats(coord_node *n, const uint8_t *pl, uint32_t len);
/* ---- coord_runstop.c: `drover stop` ---- */
/* A control client asks the run to stop: with a checkpoint of the running
 * fit first (now false, and the fit takes checkpoints), else at once. The
 * reply's text into out[n]; 0 (a repeated request is not an error). */
int coord__run_stop(coord *c, bool now, char *out, size_t n);
/* Each tick: once the checkpoint asked for is committed (or failed, or
 * did not come in time), the run ends as on Ctrl-C. */
void coord__run_stop_tick(coord *c, double now);

/* coord_addr.c: sets the cluster's transport (c->transport, the process's
 * mode: events.log says which), listens with o (where: see there), sets
 * addr, node_addr and node_bind, and writes the run's coordinator file. */
int coord__listen(coord *c, const conn_opts *o);

/* coord_nodes.c: raises RLIMIT_NOFILE's soft limit toward what the
 * nodes need (the hard limit at most), and says so when it falls short. */
void coord__raise_fd_limit(coord *c);
/* Writes nodes.tsv when a registration changed it: `now`, or at most once
 * a second (the tick, during a reservation). */
void coord__nodes_file(coord *c, bool now);
/* The heartbeat interval of the cluster as it is now (coord.c): grows with
 * the node count past 1,000 nodes. */
uint32_t coord__hb_interval_ms(const coord *c);

/* coord_keys.c: the run's keys and what each peer may send. */
/* Generates the secret, control and view keys, saves them 0600 in the run
 * directory and makes keys/. */
int coord__keys_create(coord *c);
/* The key file node i gets (DROVER_SECRET_FILE), keys/<role>-<index>.key
 * (keyring.h: its keys here and at the ps it dials; a ps its root too),
 * written if absent (a restarted node keeps its index and its keys). */
int coord__node_key_file(coord *c, int i, char *path, size_t n);
/* Node i registered: its key file has done its work (read by the node, or
 * sent by its launcher: ssh's stdin, Spark's file server) and goes, if
 * still there. The next start writes it again. */
void coord__node_key_forget(coord *c, int i);
/* What the coordinator proves when it dials ps `ps` (a process index). */
void coord__ps_coord_key(const coord *c, uint32_t ps, auth_secret *out);
/* Accept tables (static, borrowed): an authenticated peer before it
 * registered or attached (by its capability), a registered node (by its
 * role), an attach client. */
const conn_accept *coord__accept_fresh(auth_cap cap);
const conn_accept *coord__accept_node(int role);
const conn_accept *coord__accept_attach(void);
const conn_accept *coord__accept_feeder(void);
const conn_accept *coord__accept_predictor(void);

/* coord_sched.c (internal): sends queued tasks to nodes that can take
 * them (the producers refill first). */
void coord__dispatch(coord *c);
/* The same, once the loop's current round of reads is handled. */
void coord__dispatch_later(coord *c);
/* Closes the queue's loop handle (before the loop's last turns). */
void coord__sched_close(coord *c);
/* CALL_RESULT or RESULT from node. Negative for a malformed frame. */
int coord__sched_frame(coord *c, int node, const wire_header *h, const uint8_t *payload);
/* Node was lost: the tasks it held go back to the front of the queue. */
void coord__sched_node_lost(coord *c, int node);
void coord__sched_free(coord *c);

/* coord_ckpt_route.c: where each ps's checkpoint file goes */
int coord__route_init(coord *c); /* writes <run>/ckpt-token */
/* REGISTER's token: whether that node sees the run directory. */
void coord__route_register(coord *c, int node, wire_str token);
/* WIRE_CKPT_PATH or WIRE_CKPT_COORD for ps group `group` as it is now. */
int coord__ckpt_route(const coord *c, int group);
/* The decision for groups 0..ngroups-1, in events.log and the log. */
void coord__route_say(coord *c, int ngroups);

/* coord_summaries.c: the chief's summaries, written here when the chief
 * cannot see the run directory (its REGISTERED sees_rundir is false). */
void coord__summaries_register(coord *c, int node); /* after coord__route_register */
/* A RESULT's payload from node: its scalars when it is such a chief. */
void coord__summaries_result(coord *c, int node, const uint8_t *payload, uint32_t len);
void coord__summaries_tick(coord *c);  /* the last steps before a pause reach the disk */
void coord__summaries_flush(coord *c); /* at a fit's end */
void coord__summaries_close(coord *c); /* at shutdown; again is fine */

/* coord_repl.c: ps replicas. */
int coord__repl_init(coord *c); /* after the nodes exist */
void coord__repl_free(coord *c);

/* ---- shipped files (coord_ship.c) ------------------------------------- */

/* Notes the run's files (c->opts.files, before the launcher takes them)
 * with the names the launcher ships them under. */
int coord__ship_init(coord *c);
/* The recipe a node gets: with the shipped names of its files
 * (data_recipe_shipped), in *out (the caller frees it), or NULL when the
 * recipe goes as it is. */
int coord__ship_recipe(const coord *c, const char *recipe, char **out);
void coord__ship_free(coord *c);
/* The node serving ps group k (ps:k without replicas), or -1. */
int coord__ps_node(const coord *c, int group);
/* The path of this coordinator's data link to ps node `node` ("shm", "tcp"...),
 * or NULL without one (coord_vars.c: dialled by the first fit, kept after). */
const char *coord__ps_data_transport(const coord *c, int node);
/* The group node is the primary or replica of, or -1. */
int coord__ps_group(const coord *c, int node);
bool coord__repl_is_replica(const coord *c, int node);
/* Whether losing ps node `node` costs no rollback: it is a replica, or
 * its replica is in sync. */
bool coord__repl_covers(const coord *c, int node);
/* Replica placement, pure: group k's primary runs on machine prim[k],
 * the candidate replicas on cand[0..n-1]; out[k] gets the candidate of
 * group k, on another machine than its primary's when the first free
 * such candidate, or a swap with another group, finds one (enough for
 * the launchers' round-robin placements; not an exhaustive matching).
 * Returns the groups left on their
 * primary's machine. Strings are compared, not kept. */
int coord__repl_match(const char *const *prim, const char *const *cand, int n, int *out);
/* Once every ps registered: each group's replica chosen by machine
 * (coord__repl_match); a group left with both on one machine is said in
 * events.log (a run on more than one machine only). */
int coord__repl_place(coord *c);
/* SPEC's payload into w (initialised): the nodes as workers see them.
 * Negative (w freed) when out of memory. */
int coord__write_spec(const coord *c, wire_wr *w);
/* Every tick: pairs the groups whose primary and replica are registered
 * and not paired yet (PS_ROLE to both). */
void coord__repl_tick(coord *c);
/* PS_ROLE_OK from a replica: in sync. Negative for a malformed frame. */
int coord__repl_frame(coord *c, int node, const wire_header *h, const uint8_t *pl);
/* Node i (a ps) was lost: true when its group goes on without a rollback
 * (its replica promoted, or it was the replica). */
bool coord__repl_lost(coord *c, int i);
/* What stopping node `node` does (a ps): "promote replica ps:2: ...",
 * "restore from step N (checkpoint)", ...; "" for other nodes. */
int coord__stop_plan(const coord *c, int node, char *out, size_t n);
/* coord_ckpt.c: what losing a ps without a replica costs now. */
int coord__ckpt_plan(const coord *c, char *out, size_t n);
/* coord_fit.c: group k's replica was promoted: the fit's link and a
 * checkpoint in progress follow. */
void coord__fit_ps_promoted(coord *c, int k);

/* coord.c: SPEC again to every registered node (a ps moved). */
void coord__spec_all(coord *c);

/* coord_fit.c: frames from workers and the evaluator on their control
 * connections (EVAL_RESULT, SETUP_OK; RESULT goes to the queue, which
 * hands it to the fit as a producer); negative for a frame that has no
 * business there. */
int coord__fit_frame(coord *c, int node, const wire_header *h, const uint8_t *payload);
/* Node `node` (a worker or chief) was lost and will be restarted: its
 * in-flight train steps go back to the front of the queue. */
void coord__fit_node_lost(coord *c, int node);
/* coord_feed_direct.c: FEED_LISTEN_OK, FEED_ACK, FEED_DIRECT_END from
 * worker `node` (direct feeders). 0, or negative: the frame is bad. */
int coord__feeders_worker_frame(coord *c, int node, const wire_header *h, const uint8_t *pl);
/* Node `node` registered again after a restart: a fit in progress (or
 * setting up) sends it SETUP again before any work. */
void coord__fit_node_back(coord *c, int node);
/* Whether a fit is training (a ps lost now is restarted and restored). */
bool coord__fit_running(const coord *c);
/* Closes the coordinator's connections to the ps nodes. */
void coord__fit_close(coord *c);
void coord__fit_free(coord *c);

/* coord_dash.c (internal). After the run directory exists: the store, its
 * events hook and the run's start time. */
int coord__dash_start(coord *c);
/* Every tick: the throughput sample, SNAPSHOTs to the clients due. */
void coord__dash_heartbeat(coord *c, int i); /* node i's heartbeat came: its CPU share */
void coord__dash_tick(coord *c, double now);
/* A point of series tag at the fit's step (non-finite values skipped). */
void coord__dash_point(coord *c, const char *tag, int64_t step, double value);
/* A frame on a control connection that is, or becomes, an attach client
 * (*attach: NULL until ATTACH). Closes that connection when the frame has
 * no business there (an ATTACH on a node's connection, a REGISTER after
 * ATTACH...). */
void coord__attach_frame(coord *c, conn *cn, void **attach, bool is_node, const wire_header *h,
                         const uint8_t *payload);
/* The attach client's connection closed: forget it. */
void coord__attach_gone(coord *c, void *attach);
/* coord_feed_ext.c: a frame of an external feeder (*feeder: NULL until
 * FEED_OPEN; `other`: the connection is a node's or an attach client's,
 * which may not feed). Closes the connection on a bad frame. */
void coord__feeder_frame(coord *c, conn *cn, void **feeder, bool other, const wire_header *h,
                         const uint8_t *payload);
/* The feeder's connection closed: forget it (its batches still train). */
void coord__feeder_gone(coord *c, void *feeder);
/* coord_serve.c: a frame of a predict client (*predictor: NULL until
 * PREDICT_OPEN; `other`: the connection is a node's, an attach client's
 * or a feeder's). Closes the connection on a bad frame. */
void coord__predictor_frame(coord *c, conn *cn, void **predictor, bool other, const wire_header *h,
                            const uint8_t *payload);
/* The predictor's connection closed: forget it (an answer due is dropped). */
void coord__predictor_gone(coord *c, void *predictor);
void coord__serve_free(coord *c);
/* A snapshot to every attach client now, whatever its rate: the run's end
 * ("stopping", then "shut down") is how `drover attach` tells a finished
 * run from a lost coordinator. */
void coord__dash_push(coord *c);
/* Closes every attach connection (coord_free, before the loop's last
 * turns); after coord_shutdown, a last snapshot first. */
void coord__dash_close(coord *c);
void coord__dash_free(coord *c);

/* CPU % of one core of a node, from the CPU time its heartbeats report:
 * the previous sample is kept, and a new one (a later `at`) gives the
 * share over the time between them. A new process (pid) or CPU time going
 * back starts over (-1: unknown until the next sample). Returns pct. */
typedef struct coord_cpu {
  pid_t pid;
  uint64_t ms;
  double at, pct;
} coord_cpu;
double coord__cpu_update(coord_cpu *s, pid_t pid, uint64_t cpu_ms, double at);

#endif
