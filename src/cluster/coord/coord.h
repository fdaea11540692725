/* coord.h - the coordinator: the run directory, the reservation (gang
 * start), the cluster table, heartbeats, failure detection, training on the
 * cluster, and shutdown.
 *
 * The coordinator lives in the user's process, on the loop Lua runs on.
 * Functions that must wait (coord_start, coord_fit, coord_shutdown) pump
 * that loop (uv_run UV_RUN_ONCE) until their condition holds, so sockets,
 * timers and child processes keep moving while a script "blocks"; they
 * return DRV_EINTERRUPTED when err_interrupted() is set (Ctrl-C).
 *
 * Failure model: a node that exits or stays silent past the heartbeat
 * timeout is marked lost and the event is logged to events.log. A lost
 * worker or chief is recovered: a silent one is killed, its in-flight
 * train steps go back to the front of the queue (at-least-once), and the
 * launcher starts it again with its role and index after a back-off
 * (0.2 s, doubled per restart of that node, at most 5 s), up to
 * max_restarts times per node; once it registers again, a fit in progress
 * sets it up again (its data shard) and sends it work. Recovered losses
 * are not failures of the run. A lost ps or evaluator, or a node out of
 * restarts, fails any training in progress with an error that names the
 * node and quotes the last lines of its log.
 */
#ifndef DROVER_COORD_H
#define DROVER_COORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "proto/runview.h"
#include "launch/launch.h"
#include "proto/nodeinfo.h"
#include "proto/nodestate.h"
#include "data/data.h"
#include "numeric/nn.h"
#include "run/tboard.h"
#include "numeric/optim.h"
#include "train/train.h"
#include "proto/wire.h"

/* A node's state (proto/nodestate.h: the states, what each means, their
 * names); the transitions are in coord_nodes.c (a diagram there and in
 * docs/ARCHITECTURE.md). */
typedef node_state coord_node_state;

/* "starting", ... as users see it (RELAUNCHED shows as "restarting"):
 * nodestate_shown(). Static. */
const char *coord_state_name(coord_node_state s);

/* One task of the cluster: what the dashboard and c:nodes() show. */
typedef struct coord_node {
  int role, index;
  coord_node_state state;
  pid_t pid;
  char host[64];
  int port;               /* ps data port */
  bool sees_rundir;       /* it read the run's ckpt-token at REGISTER */
  node_info got;          /* what it reported of where it runs (threads,
                             memory, host, Slurm job...) */
  const char *launcher;   /* the name of the launcher that starts it ("local") */
  char where[200];        /* where it runs, as its launcher and its REGISTER
                             tell: "local", "spark app-1 exec 0 @ h1",
                             "yarn container_1_0001_01_000002 @ h2" */
  uint64_t rss, cpu_ms;   /* from its last heartbeat */
  double cpu_at;          /* monotonic seconds when cpu_ms arrived (0: never) */
  double last_seen;       /* monotonic seconds of its last frame */
  int64_t steps;          /* train steps completed */
  int64_t examples;       /* training examples in those steps */
  double examples_per_sec; /* over the last fit so far */
  int inflight;           /* tasks sent, not answered */
  double closed_at;       /* its connection closed unexpectedly (0: no) */
  int restarts;           /* times it was started again after a loss */
  double restart_at;      /* RESTARTING: when to start it again;
                             RELAUNCHED: when it was started again */
  bool joined;            /* registered at least once */
  bool exited;
  int64_t exit_status;
  int term_signal;
  char log[1024];         /* absolute path of its log file */
  char links[192];        /* the transport of each connection it dialled besides
                             ours, as it last said (LINKS): "ps:0-1=shm" */
  struct wire_item_table_stat *tstats; /* its last SPARSE_STATS (owned; ntstats) */
  int ntstats;
} coord_node;

/* Nodes of one role a cluster may have: the scale bench runs 10,000
 * workers on one coordinator (tests/bench/scale.sh). */
#define COORD_MAX_PER_ROLE 16384

typedef struct coord_opts {
  const char *name;              /* run name ("cluster") */
  const char *runs_base;         /* "runs" */
  int count[ROLE_COUNT];         /* ps, chief (0/1), worker, evaluator (0/1); each at
                                    most COORD_MAX_PER_ROLE */
  const char *launcher;          /* "local": the default for every role */
  const char *role_launcher[ROLE_COUNT]; /* a role's own launcher (mixed placement,
                                    `ps = { launcher = "local" }`); NULL: launcher */
  const char *bind_host;         /* where we listen (NULL: 127.0.0.1, or
                                    0.0.0.0 for "ssh", "slurm", "spark") */
  const char *const *hosts;      /* launcher "ssh": "name[:slots]"; borrowed
                                    until coord_start returns */
  int nhosts;
  const char *ssh_config;        /* launcher "ssh": ssh -F (NULL or "":
                                    $DROVER_SSH_CONFIG, else the user's) */
  double reservation_timeout;    /* seconds (60) */
  uint32_t heartbeat_ms;         /* 500 */
  uint32_t heartbeat_timeout_ms; /* 5000 */
  int64_t split_threshold;       /* variables with at least this many
                                    elements are split across ps nodes
                                    along their first dimension (65536) */
  int cpus;                      /* per node; 0 = leave alone */
  launch_resources res[ROLE_COUNT]; /* per role (cpus 0: `cpus` above) */
  launch_slurm_opts slurm;       /* launcher "slurm": job submission */
  launch_spark_opts spark;       /* launcher "spark": where and how it
                                    submits; borrowed until coord_start
                                    returns */
  launch_yarn_opts yarn;         /* launcher "yarn": the application; borrowed */
  const char *address;           /* host nodes dial to reach us (NULL:
                                    bind_host, or found for remote launchers) */
  const char *const *files;      /* launchers "ssh", "spark": files to ship; borrowed
                                    until coord_start returns */
  int nfiles;
  int max_restarts;              /* per worker or chief (3); 0 = none */
  int worker_min, worker_max;    /* c:scale's bounds (`worker = { min, max }`);
                                    0: 1 and no ceiling */
  int max_queue;                 /* closures queued at most (1024):
                                    coord_schedule waits beyond */
  const char *resume_dir;        /* NULL, or a run directory to continue
                                    in (`drover run --resume`): fits
                                    resume from its newest checkpoint;
                                    borrowed until coord_start returns */
  int resume_workers;            /* with resume_dir: `--resume --workers N`,
                                    the worker count to go on with (0: the
                                    newest checkpoint's, else count[]) */
  int ps_replicas;               /* 0 or 1: a hot replica per ps (another
                                    ps process, ps:count+k for ps:k) */
  bool tensorboard;              /* serve the run's events/ with TensorBoard
                                    from the start to the shutdown */
  const char *transport;         /* how nodes on one host talk: "auto" (shared
                                    memory), "unix" or "tcp" (net/conn.h); every
                                    node follows it. NULL: this process's own
                                    mode (DROVER_TRANSPORT, else auto) */
  tboard_opts tboard;            /* its port and address */
} coord_opts;

void coord_opts_default(coord_opts *o);

/* The launcher that starts the nodes of `role`: its own, else the
 * cluster's. Static or o's. */
const char *coord_role_launcher(const coord_opts *o, int role);
/* Whether a role with nodes (count > 0) is started by launcher `name`. */
bool coord_uses_launcher(const coord_opts *o, const char *name);

typedef struct coord coord;

/* Creates the run directory and secret, listens (bind_host, port 0),
 * launches every node, and pumps the loop until all have registered and
 * received the cluster spec. On failure (reservation timeout: the message
 * names each missing role:index and quotes its log; a node that exits
 * early; a launcher error) everything started is stopped and *out is NULL.
 * The coordinator's own log goes to <run>/logs/coordinator.log. */
int coord_start(uv_loop_t *loop, const coord_opts *o, coord **out);

/* A feed's source (train = { feed = ... }; docs/ARCHITECTURE.md, "Feed
 * mode"): the coordinator asks it for batches between two turns of its
 * loop, never from a libuv callback, and streams them to the workers'
 * input queues (FEED_BATCH), a few per worker. */
typedef struct coord_feed_source {
  /* The next batch: 1 with *x and *y (the source's, valid until its next
   * call or its end: x [n, ...], y [n] or [n, k], n >= 1) and *epoch
   * (from 1); 0 at the end;
   * DRV_EAGAIN when none is ready yet (asked again when `fd` is readable,
   * or at the next tick); another negative code fails the fit (message
   * set). NULL with `external`. */
  int (*next)(void *ud, tensor **x, tensor **y, uint32_t *epoch);
  /* The ids of the batch `next` gave last (the source's, valid as x is),
   * NULL when it has none; *bound the ids' bound (0: unknown). NULL: the
   * source never has ids. */
  const nn_sparse *(*sparse)(void *ud, uint64_t *bound);
  void *ud;
  int fd;           /* readable when next may have more; -1: asked every tick */
  bool external;    /* feed = "external": the batches come from feeders on
                       the control port (FEED_OPEN; wire_msgs.h) */
  int feeders;      /* external: the fit ends once this many feeders (at
                       least 1) joined and every one that joined ended */
  int64_t epochs;   /* external: train.epochs, the passes asked of the
                       feeders (FEED_CREDIT.epochs) */
  double timeout;   /* feed_timeout: seconds without progress (a batch read
                       or trained) before the fit fails; 0: none */
  int64_t batches;  /* batches the source will give, when known (progress); 0: unknown */
  bool share_x;     /* x's elements never change once lent: the source never
                       writes into a storage that another view still holds
                       (a dataset's rows; its iterator gathers a batch held
                       elsewhere into a new block). The feed then keeps a
                       view of x and sends its bytes from there (no copy). */
  const char *no_replay; /* why it cannot be read again from its start with the
                            same batches (stdin, a pipe, a function, external
                            feeders); NULL when it can (a dataset, a file):
                            `--resume` then passes over what was trained */
} coord_feed_source;

/* A built-in source: `epochs` passes over d in batches of `batch`
 * (shuffled per epoch with seed when `shuffle`, as train_fit does). d is
 * borrowed until coord_feed_source_free. 0 or DRV_ENOMEM. */
int coord_feed_source_dataset(coord_feed_source *s, const dataset *d, int64_t batch,
                              int64_t epochs, bool shuffle, uint64_t seed);
/* Frees what coord_feed_source_dataset made (a no-op for other sources). */
void coord_feed_source_free(coord_feed_source *s);
/* The last feed's batches read from its source and trained (each once). */
void coord_feed_counts(const coord *c, int64_t *fed, int64_t *trained);
/* c:feed: streams the source's batches into the workers' input queues
 * (FEED_BATCH mode QUEUE), where scheduled functions read them with
 * w:next_batch; returns once every batch is taken (or a worker's
 * w:terminate() stopped the feed), after FEED_END to every worker.
 * *fed: batches read, *taken: batches taken. 0 or negative (feed_timeout,
 * a failed scheduled function, a lost node without restarts). */
int coord_feed(coord *c, const coord_feed_source *src, int64_t *fed, int64_t *taken);
/* During a feed: the fed batches node i holds (sent, not answered); else -1. */
int coord_feed_backlog(const coord *c, int i);

/* What a cluster fit needs; all borrowed for the call. The model's
 * current weights are the starting point; afterwards they hold the
 * trained values (pulled back from the ps nodes). */
typedef struct coord_fit_args {
  nn_module *model;
  nn_loss *loss;
  const optim_cfg *optim;
  const dataset *train;
  const train_cfg *cfg; /* batch, epochs, shuffle, seed, max_steps, eval,
                           eval_every, progress output, on_progress */
  bool sync;            /* sync training (see coord_fit) */
  int backup_workers;   /* sync: k, 0 <= k < trainers */
  const struct fitrun_ckpt *ckpt; /* checkpoint = {...} (NULL: none): checkpoints
                           of the ps nodes' shards under <run>/checkpoints,
                           and a lost ps restored from the newest */
  const coord_feed_source *feed; /* NULL: worker i trains on shard i of train;
                           else feed mode: the workers train on the batches
                           the source gives, each once (train may be NULL) */
} coord_fit_args;

/* Trains on the cluster (async: each ps applies every push on arrival).
 * Worker i of n trains on shard i of the training data. With an evaluator,
 * it evaluates every eval_every steps; the final evaluation runs here on
 * the pulled-back model. Fills *res like train_fit: res->steps counts the
 * train steps the workers ran (one batch each), in both modes.
 *
 * Sync (a->sync): each ps applies one update per global step, with the
 * average of the first n - k gradients computed on that step's values
 * (n trainers, k = backup_workers); later ones are dropped. The fit runs
 * ceil(W / (n - k)) global steps, W being the worker steps an async fit
 * would run (epochs x batches, or max_steps), so both see about as many
 * examples; workers get tasks until every ps has applied them, then the
 * fit ends. coord_global_steps() tells how many were applied. */
int coord_fit(coord *c, const coord_fit_args *a, train_result *res);

/* What c:fit does before training, without training: places the model's
 * variables on the ps nodes with its current weights and sets every
 * worker up (model, loss, its shard of a->train, batch, seed), so that
 * scheduled closures can train through w. a->cfg needs batch and epochs.
 *
 * After coord_setup or coord_fit, a worker or chief restarted later is
 * set up again from a->model, a->loss and a->train: the caller keeps them
 * alive and unchanged in shape until the next setup or fit (or the
 * coordinator's end); the rest of *a is copied. */
int coord_setup(coord *c, const coord_fit_args *a);

/* Global steps (updates applied by every ps) of the last sync fit; 0 for
 * an async one or before any fit. */
int64_t coord_global_steps(const coord *c);

/* Whether the last coord_fit ran nothing because the run is resumed
 * (opts.resume_dir) and that fit had ended before its newest checkpoint. */
bool coord_fit_skipped(const coord *c);

/* Copies the current parameters from the ps nodes into `model` (whose
 * architecture must be the one last fitted). A no-op before any fit. */
int coord_pull(coord *c, nn_module *model);

/* Forward passes of `model` (in evaluation mode) over the rows of x
 * ([n, ...], contiguous) spread over the workers in batches of `batch`
 * rows (coord_predict.c). *out is a new [n, k] tensor, the caller's: one
 * output row per input row, in input order; a worker lost meanwhile has
 * its batches run again elsewhere, each row counted once. The values are
 * the cluster's (pulled from the ps nodes) when it trained this model,
 * else the model's own. With `recipe` (a dataset read from a file: files
 * mode) the workers read the rows themselves and only row ranges travel:
 * x then only gives the rows' shape (any first dimension, e.g. [0, ...]),
 * and there are n rows; NULL sends x's rows (n is ignored). `ids` (not
 * files mode; NULL: none) is the dataset whose sparse part holds the
 * rows' ids, x's rows in order: each batch carries its rows' ids (in files
 * mode the workers read them with x). A model with sparse tables sends
 * each worker every row its tables hold (PREDICT_ROWS) before its first
 * batch. */
int coord_predict(coord *c, nn_module *model, const tensor *x, const dataset *ids,
                  const char *recipe, int64_t n, int64_t batch, tensor **out);

/* c:serve { predict = exp } (coord_serve.c): answers the PREDICT_REQUESTs
 * of clients holding the control key (clients/python Run.predict) with
 * `model`'s outputs, each request through coord_predict in batches of its
 * own `batch` or o->batch rows, one request at a time in arrival order.
 * Serves until o->requests are answered (0: no limit), o->idle seconds
 * pass without a request (0: no limit; st->idle then), Ctrl-C
 * (DRV_EINTERRUPTED) or a node failure the cluster cannot recover from.
 * A failed predict is its client's answer, not an error here. Requests
 * that come while no c:serve runs are refused, naming c:serve. `model` is
 * borrowed until the call returns. */
typedef struct coord_serve_opts {
  int64_t batch;    /* rows per worker batch when a request gives none (> 0) */
  int64_t requests; /* stop after this many (0: no limit) */
  double idle;      /* stop after this many seconds without a request (0: never) */
} coord_serve_opts;
typedef struct coord_serve_stats {
  int64_t requests, rows; /* answered (a failed predict counts) */
  bool idle;              /* it ended for o->idle */
} coord_serve_stats;
int coord_serve(coord *c, nn_module *model, const coord_serve_opts *o, coord_serve_stats *st);

/* A checkpoint of the cluster's variables now (c:checkpoint()): during a
 * fit it is requested and taken between two steps; otherwise taken and
 * committed before returning. 0 or a negative code (a failure of the
 * checkpoint: the previous ones are kept). */
int coord_checkpoint(coord *c);

/* c:scale { worker = N } (coord_scale.c; during a fit coord_scale_fit.c),
 * on every launcher with launch_ops.room: the highest-indexed workers
 * beyond `want` finish, exit and become "removed" (no loss, no restart),
 * or new ones start (up to `max`). Between fits the next fit plans for the
 * workers then, and it returns once the change is over (removed ones
 * killed after 30 s); during a fit the fit takes the change in (its
 * shards, a sync fit's quorum at a boundary the ps hold, fed batches to
 * more or fewer workers) and it returns once the change started. by: who
 * asked, for events.log (borrowed). Refused with a message naming why:
 * another role, a launcher without room for them, above `max` or below
 * `min` (or 1), removing a worker a direct feeder feeds, while a change
 * asked during the fit is not over. */
int coord_scale(coord *c, int role, int want, const char *by);
/* Its first half, for a caller inside the loop (`drover scale`, COMMAND
 * SCALE): checked and started, not waited for; what happens in out
 * ("scaling: worker 2 -> 4", or why not). 0 or the refusal's code. */
int coord_scale_begin(coord *c, int role, int want, const char *by, char *out, size_t n);
/* Nodes of `role` not taken away by c:scale. */
int coord_scale_count(const coord *c, int role);
/* coord_scale_begin from text: "worker=N", or "worker=+K" / "worker=-K"
 * relative to the workers now (the dashboard's + and -). */
int coord_scale_text(coord *c, const char *text, const char *by, char *out, size_t n);

/* ---- scheduled closures (coord_sched.c) ---------------------------------
 * ClusterCoordinator semantics. A closure is the output of closure_encode
 * (a Lua function, its upvalues and arguments); it runs on a worker or the
 * chief, which answers with its results (closure_encode_values) or its
 * error and traceback. Closures and c:fit's train steps share one FIFO:
 * each goes to the least busy worker that can take it, and back to the
 * front of the queue when that worker is lost (at-least-once: a closure
 * may run more than once; its first result counts).
 *
 * The first closure that fails is remembered and every closure still
 * queued is cancelled; the error is returned once, as DRV_ECLOSURE, by the
 * next coord_schedule, coord_join or coord_done (then cleared, so the
 * cluster can be used again). A node failure the coordinator cannot
 * recover (coord_failure) makes them return DRV_ENODE. */

/* Queues a closure (n bytes, copied); waits, pumping the loop, while
 * max_queue closures are queued. Returns its id (> 0), or DRV_ECLOSURE (an
 * earlier closure failed: err_msg() has "closure 7 failed on worker:1:
 * MESSAGE\nstack traceback: ..."; this one was not queued), DRV_ENODE,
 * DRV_EINTERRUPTED, DRV_ENOMEM. */
int64_t coord_schedule(coord *c, const void *closure, size_t n);

/* Waits for closure id. 0 with *res, *n its encoded results (borrowed
 * until coord_release(id)); DRV_ECLOSURE with its own error; DRV_ECANCELLED
 * when it was cancelled by an earlier failure; DRV_ENODE, DRV_EINTERRUPTED;
 * DRV_EINVAL for an id that is not a closure held. */
int coord_fetch(coord *c, int64_t id, const uint8_t **res, size_t *n);

/* Waits until no closure is queued or running; 0, or the pending error
 * (DRV_ECLOSURE, as soon as a closure fails), DRV_ENODE, DRV_EINTERRUPTED. */
int coord_join(coord *c);

/* Never waits (handles what already arrived): 1 when no closure is queued
 * or running, 0 when some are, or the pending error as coord_join. */
int coord_done(coord *c);

/* The future of closure id is gone: its outcome may be dropped. */
void coord_release(coord *c, int64_t id);

/* "queued", "running", "done", "failed", "cancelled" ("unknown" when
 * released). Static. */
const char *coord_call_state(coord *c, int64_t id);

/* The same, with how many times it was sent to a node (more than once:
 * it was retried after a loss) and the node it was last sent to (index
 * into coord_nodes, -1 when never sent). */
const char *coord_call_info(coord *c, int64_t id, int *runs, int *node);

/* The queue as the dashboard shows it (closures and train steps). */
typedef struct coord_queue {
  int64_t queued, capacity, running, done, failed, retried, cancelled;
} coord_queue;
void coord_queue_stats(const coord *c, coord_queue *q);

/* Stops the cluster: SHUTDOWN to workers, chief and evaluator, wait for
 * them (grace seconds), then the ps nodes; whoever is still running after
 * `timeout` seconds is killed. Reaps every child. Returns the number of
 * nodes that failed during the run (lost, non-zero exit, killed), and a
 * report of them in buf. Idempotent. */
int coord_shutdown(coord *c, double grace, double timeout, char *buf, size_t n);

/* Who ends the run once `drover stop` asked (after the checkpoint it
 * waits for, or at once): NULL, the default, raises SIGINT at this
 * process, and the run ends as a script's does on Ctrl-C. A host that
 * Ctrl-C does not end (the REPL: it stops a line, the cluster stays) sets
 * its own: fn(ud) is called from a callback of the loop, so it only notes
 * the stop (and may interrupt Lua), and shuts the cluster down (and frees
 * it) after the turn. The STOP_RUN reply and events.log say which. */
typedef void (*coord_stop_fn)(void *ud);
void coord_set_stop_handler(coord *c, coord_stop_fn fn, void *ud);

/* Kills what is left, frees everything (closing handles; the loop may
 * need a UV_RUN_NOWAIT afterwards for close callbacks). NULL is fine. */
void coord_free(coord *c);

const char *coord_run_dir(const coord *c);
/* The cluster table (count entries, ps first). Borrowed. */
const coord_node *coord_nodes(const coord *c, int *count);
/* A node's state as users see it: BUSY for a READY node with tasks in
 * flight, else its state. */
coord_node_state coord_node_status(const coord_node *n);
/* Node i's connections and the transport of each: ours first (our side of
 * its control connection), then those it dialled, "coord=shm,ps:0-1=shm";
 * "-" when it is not connected. Into out, cut at n bytes. */
void coord_node_links(const coord *c, int i, char *out, size_t n);

/* The sparse tables of the fit set up last, as the nodes said
 * (SPARSE_STATS): rows held summed over the ps, a worker's step's unique
 * rows and SPARSE_* bytes averaged over the workers that reported. */
typedef struct coord_table_stat {
  const char *name; /* the model's (valid while the fit's model lives) */
  uint64_t rows, dim, held;
  double touched, bytes;
} coord_table_stat;
/* Up to max of them into out; how many the fit has (0 without tables). */
int coord_tables(const coord *c, coord_table_stat *out, int max);
/* The same as lines "NAME ROWS DIM HELD TOUCHED BYTES\n" (the snapshot's
 * `tables`), cut at a line that does not fit n. */
void coord_tables_summary(const coord *c, char *out, size_t n);
/* Records a line in events.log (and the dashboard's events pane). */
void coord_note(coord *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The first failure message of the run ("" when none). */
const char *coord_failure(const coord *c);
/* "127.0.0.1:40123" */
const char *coord_address(const coord *c);
/* The URL of the TensorBoard serving the run, "" when none. */
const char *coord_tensorboard_url(const coord *c);
/* Starts TensorBoard over the run's events/ (an experiment's tensorboard
 * = ... fitted on the cluster) unless one serves already or the cluster
 * is shutting down; it stops with the cluster. 0 or the error. */
int coord_tensorboard(coord *c, const tboard_opts *o);

/* ---- the dashboard's data (coord_dash.c) --------------------------------
 * The coordinator keeps a runview as its metric store: train/loss and
 * train/accuracy per train step, eval/loss and eval/accuracy per
 * evaluation, examples/s once a second while a fit runs, and every
 * events.log line as an event. Attach clients (`drover attach`) connect to
 * the coordinator's address, authenticate like nodes, send ATTACH and get
 * SNAPSHOTs at up to 10 Hz from the loop, and a node's log tail when they
 * ask; clients attached with control may send commands (a Lua line, or
 * stop a node). A client that goes away never affects the run. */

/* Refreshes the model's header (run, launcher, state, uptime, step,
 * total_steps, examples/s and ETA of the fit in progress or the last,
 * mode, attach clients), its nodes (CPU % from heartbeat CPU time over
 * time, heartbeat age, ...) and queue, and returns it. Borrowed: valid
 * until coord_free; refreshed again by the next call. */
const runview *coord_dash(coord *c);

/* Runs one line of Lua for an attach client: the reply (a value or an
 * error message) goes to out[n]; returns 0 or a negative code. */
typedef int (*coord_command_fn)(void *ud, const char *line, char *out, size_t n);

/* Sets who runs the Lua lines attach clients send (NULL: they are refused
 * with "this run takes no Lua commands"). The coordinator has no Lua
 * state: the caller (l_cluster.c) does. */
void coord_set_command_handler(coord *c, coord_command_fn fn, void *ud);

/* Runs the Lua lines attach clients sent since the last call, in order,
 * each through the handler, and sends each reply. The handler may run Lua
 * that pumps the loop (a line may call c:fit), so call this between turns
 * of the loop, never from a libuv callback: coord__pump does it, and so
 * must any other place that runs the loop while Lua waits (the REPL's
 * prompt, drover.sleep). A handler running Lua that pumps does not run
 * the next line before it returns (no nesting); the handler must not free
 * the coordinator. Nothing runs once shutdown began. Returns the number
 * of lines run. */
int coord_run_commands(coord *c);

/* Queues one line of Lua from the in-process dashboard (':'): it runs
 * through the handler at the next coord_run_commands, and its reply is
 * recorded as an event ("command LINE -> REPLY"). out[n] gets "queued..."
 * or why not (no handler; a line already waiting). 0 or negative. */
int coord_queue_command(coord *c, const char *line, char *out, size_t n);

/* Stops node `name` ("worker:1"): the launcher sends it SIGTERM; it is
 * then lost like any other node that exits (a worker or chief restarted,
 * a ps failing the run). 0 with "stopping worker:1 (pid 123)" in out, or
 * DRV_EINVAL with the reason in out and err_msg() (no such node, not
 * running, shutting down). */
int coord_stop_node(coord *c, const char *name, char *out, size_t n);
/* What stopping node `name` would do, in out: for a ps "promote replica
 * ps:2: no update is lost", "restore from step N (checkpoint): ...", "no
 * checkpoint: updates since the start are lost ..."; for other nodes that
 * their tasks run again. 0, or a negative code for an unknown node. */
int coord_stop_plan(coord *c, const char *name, char *out, size_t n);

/* The last `lines` lines of node `name`'s log (the newest that fit in
 * out[n]), or one line in parentheses saying why there are none
 * (rundir_log_tail): what the dashboard's detail view shows, read here
 * because the log is on the coordinator's host. 0, or DRV_EINVAL with
 * "(no node 'NAME' in this cluster)" in out. */
int coord_node_log_tail(coord *c, const char *name, int lines, char *out, size_t n);

#endif
