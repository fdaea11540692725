/* coord_fit_int.h - the state of training on the cluster, shared by
 * coord_fit.c (setup, the task stream, evaluation) and coord_vars.c (the
 * variables on the ps nodes: connections, placement, initial values,
 * pulls); not a public API. */
#ifndef DROVER_COORD_FIT_INT_H
#define DROVER_COORD_FIT_INT_H

#include <stdio.h>

#include "cluster/coord/coord_int.h"
#include "numeric/nn_sparse.h"
#include "run/events.h"
#include "run/fitrun.h"
#include "run/metrics.h"
#include "train/progress.h"

#define INFLIGHT_PER_WORKER 2 /* a queued task hides the RESULT -> TASK round trip */
#define PS_CONNECT_TIMEOUT 10.0
#define PS_REDIAL 0.1 /* seconds between dials of a ps link that did not come up */
/* The bound on a ps's answers (VAR_INIT_OK, PULL_REPLY, RESTORE_OK) and on
 * the trainers' ROLLBACK_OKs: this many seconds, plus one per
 * PS_REPLY_BYTES_PER_S of the model (a RESTORE reads its shard from disk).
 * Loopback answers take milliseconds; the bound is there so that a lost
 * answer fails with a message naming it rather than waiting for ever. */
#define PS_REPLY_TIMEOUT 60.0
#define PS_REPLY_BYTES_PER_S 20e6
/* A ps link closed with replies owed: how long to let the loop notice that
 * ps's process went too (its exit, or CLOSE_GRACE after its control
 * connection closed), for the better message. */
#define LOST_NODE_GRACE 2.0
#define SYNC_PROBE_REQ 0xfffffff0u /* the PULL that waits for the last global step */
#define CK_PROBE_REQ 0xfffffff1u   /* sync: the PULL that asks a ps its version (checkpoint) */
#define RESTORE_REQ 0xfffffff2u
#define STOP_REQ 0xfffffff3u       /* sync early stop: the PULL behind a cap (coord_stop.c) */
#define SCALE_REQ 0xfffffff4u      /* sync c:scale: the PULL waiting for its step (coord_scale_fit.c) */
#define PLATEAU_META "optim_plateau" /* a checkpoint's plateau schedule state (as in process) */
#define STOP_META "train_stop"        /* its early stopping state (as in process) */
#define COORD_MAX_PS_FILES (MANIFEST_MAX_FILES - 1) /* ps with shards in a checkpoint */

/* A trainer's data position in a checkpoint (coord_pos.c). */
#define COORD_POS_RNG_MAX 512 /* 16 Dropout generators of 32 bytes */
typedef struct ckpos {
  bool got;         /* POSITION_OK came for this attempt */
  bool rb_out;      /* a ROLLBACK is out, its ROLLBACK_OK not back */
  uint64_t batches; /* drawn since SETUP */
  uint32_t nrng;    /* bytes of rng */
  uint8_t rng[COORD_POS_RNG_MAX];
} ckpos;

/* A cluster checkpoint in progress (coord_ckpt.c). */
enum { CK_IDLE, CK_PROBING, CK_WRITING };
typedef struct coord_ck {
  int state;
  int waiting;         /* replies outstanding */
  int64_t step;        /* the step it is of */
  uint64_t version;    /* sync: the global step it snapshots (the max seen while probing) */
  int failed;          /* ps that failed; why says the first */
  int passed;          /* sync: ps already past the version asked (asked again) */
  char why[1024];
  char dir[2300];      /* <run>/checkpoints/step-N, or its URL on HDFS */
  uint64_t bytes;
  char (*sha)[MANIFEST_DIGEST_MAX]; /* per ps: its file's digest as it reported it ("" none) */
  uint64_t *size;      /* per ps: its file's bytes */
  double last_time;    /* of the last commit (or the fit's start) */
  int64_t last_step;   /* of the last commit, -1 none */
  bool requested;      /* c:checkpoint() during a fit */
  bool restoring;      /* a ps was lost: roll back once it is back (coord_ckpt.c) */
  int lost_ps;         /* the ps lost, and when */
  double lost_at;
  float **initial;     /* per variable: its values when the fit began (no checkpoint yet) */
  /* the trainers' data positions (coord_pos.c) */
  uint32_t seq;        /* of this attempt: the req of its POSITIONs */
  bool want_pos;       /* this checkpoint records them (not a fit's last step) */
  int pos_waiting;     /* POSITION_OKs outstanding */
  int rb_waiting;      /* ROLLBACK_OKs outstanding */
  ckpos *pos;          /* per trainer, npos of them */
  int npos;
  /* a fed fit's position at this checkpoint (coord_feed_ckpt.c): "feed.read"
   * then "feed.pending" values, each NUL-terminated; NULL: not fed */
  char *feed_pos;
} coord_ck;

/* Feed mode (coord_feed.c): batches from a source, in flight as tasks of
 * the feed's producer. */
#define FEED_WINDOW 3 /* fed batches a worker holds at most (its credit) */
typedef struct feed_slot {
  uint64_t id;     /* the task */
  uint64_t seq;    /* the batch's number in the feed, from 1 */
  int feeder;      /* an external feeder's number, -1 the source's */
} feed_slot;

typedef struct coord_feed_state {
  const coord_feed_source *src; /* NULL: no feed in progress */
  int producer;    /* the queue's producer number (coord__feed_tasks) */
  bool ended;      /* the source has no more (or max_steps were read) */
  bool terminated; /* a worker's w:terminate() stopped it */
  uint8_t mode;    /* WIRE_FEED_TRAIN (c:fit) or WIRE_FEED_QUEUE (c:feed) */
  int *trainers;   /* node indices of the workers and chief it feeds */
  int ntrainers;
  uint64_t seq;    /* batches read */
  int64_t trained; /* batches trained (RESULT counted once) */
  uint32_t epoch;  /* of the newest batch read */
  double last_progress;    /* a batch read or trained (feed_timeout) */
  double rate, rate_t;     /* batches trained per second, and when sampled */
  int64_t rate_n;
  feed_slot *slots;        /* batches queued or in flight */
  int nslots, capslots;
  uv_poll_t *poll;         /* on src->fd: wakes the loop when it is readable */
  struct coord_feeders *ext; /* external feeders (coord_feed_ext.c) */
} coord_feed_state;

typedef struct shard {
  int ps;
  int64_t row0, rows;
} shard;

typedef struct fvar {
  tensor *value; /* the model's parameter (borrowed) */
  int nshards;
  shard *sh;
} fvar;

typedef struct pslink {
  coord_fit_state *f;
  int ps;
  auth_secret key; /* the coordinator's key at that ps process (its conn borrows it) */
} pslink;

struct coord_fit_state {
  coord *c;
  int nps;
  conn **ps;       /* coordinator -> ps data connections */
  pslink *links;
  int ps_ready;
  nn_param_list params;
  nn_param_list torch; /* the same, named as PyTorch names them (checkpoint files) */
  fvar *vars;
  int nvars;
  int ntrained;    /* vars[0 .. ntrained-1] are parameters, the rest running statistics */
  bool placed;
  nn_table_list tables; /* the model's sparse tables (coord_sparse.c; borrowed from it) */
  struct coord_tinit *tinit; /* per table: its rows as the fit found them (owned) */
  int *pend_ps; /* ps replies outstanding per ps link (VAR_INIT_OK, PULL_REPLY,
                 * RESTORE_OK; coord__ps_request); a link that closes drops
                 * its own, which will never come (lost_replies) */
  int lost_replies, lost_reply_ps; /* since the last coord__wait_replies */
  /* the fit in progress (cfg NULL when none) */
  const train_cfg *cfg;
  int *trainers; /* node indices of chief and workers, shard order */
  int64_t *examples0; /* each trainer's example count when this fit began */
  int ntrainers;
  int workers_said; /* ntrainers as metrics.jsonl last has it (or the fit began with) */
  int64_t workers_step0; /* the step the fit began at; -1 once its count was written */
  int evaluator; /* node index or -1 */
  const coord_fit_args *args; /* while a fit sets up or runs; then &kept */
  coord_fit_args kept;        /* the last fit's or setup's (keep_args) */
  train_cfg kept_cfg;
  bool *setup_ok;  /* per node: SETUP_OK came for this fit */
  /* Train steps: `total` to run (async), `produced` queued so far (the
   * queue holds a few per trainer; the fit's refill tops it up), `done`
   * counted. Sync runs until every ps applied sync_target updates. */
  int64_t total, produced, done, per_epoch, examples;
  bool looping; /* in fit_loop: train steps may be queued */
  int producer; /* the fit's number as the queue's producer (coord__fit_tasks) */
  /* sync: global steps to apply, gradients per step, ps that applied
   * them all (replies to the probe) */
  int64_t sync_target, sync_applied;
  uint32_t replicas;
  int sync_reached;
  bool *probed;    /* per ps group: its probe answered (a promotion asks again) */
  bool sync;
  /* sync, per node: its steps whose gradient a ps applied since its
   * process (or the last rollback) began; a process gives at most one
   * gradient per global step, so past sync_target it gets no more steps */
  int64_t *taken;
  /* sync, per node: its process was restarted during this fit, so its
   * taken counts from the global step the ps were at then, unknown here:
   * c:scale's barrier does not go by it (coord_scale_fit.c) */
  bool *fresh;
  int64_t dropped; /* sync: RESULTs of steps whose gradient no ps applied, not counted */
  int64_t epoch_seen, epoch_correct, epoch_no;
  double epoch_loss;
  bool epoch_has_acc;
  int evals_out;           /* EVAL sent, EVAL_RESULT not yet back */
  int64_t last_eval_step;  /* step of the last finished evaluation */
  int64_t local_eval_due;  /* step at which a local eval is owed, 0 none */
  bool eval_fresh;         /* an eval finished since the last on_progress */
  /* The controls the evals drive (coord_fit.c, eval_done): a plateau
   * schedule's state (its reductions go to every ps as LR_SCALE) and
   * early stopping's. */
  optim_plateau plateau;
  train_stopper stopper;
  bool stopped_early;
  bool stopped;        /* the progress callback asked to stop (as early stopping ends) */
  /* sync early stop (coord_stop.c): 0 none, 1 capping (stop_waiting ps
   * to answer, the highest cap so far in stop_target), 2 ended there */
  int stop_phase, stop_waiting;
  int64_t stop_target;
  bool *stop_seen; /* per ps group: its cap answered */
  /* c:scale during this fit (coord_scale_fit.c) */
  struct {
    bool active;    /* a change asked during the fit is not over */
    int phase;      /* SC_* (coord_scale_fit.c) */
    int from, want; /* the worker counts */
    bool barrier;   /* sync: the quorum changes once every ps applied global step `at` */
    bool reprobe;   /* its probe was answered by a rollback: asked again */
    int64_t at;     /* asked of the ps; crossed: the highest version they held at */
    int64_t crossed;
    uint32_t leave_from; /* sync, shrinking: the lowest index of a worker leaving (0 none) */
    bool supersede;      /* the SETUPs being sent are a sync barrier's (SETUP supersede) */
    bool requorum;       /* a ps's link was down: the quorum is sent again */
    uint32_t was;        /* the quorum before the change */
    int probed;     /* ps that answered the barrier's probe */
    bool *seen;     /* per ps group */
    bool *joining;  /* per node: added; sync: no steps before the barrier */
    bool *leaving;  /* per node: sync: removed at the barrier */
    /* sync, sharded data: the trainers' shards were computed for `shards`
     * trainers and each began its pass at global step epoch0 (taken's
     * count): the next barrier waits for the end of a pass */
    int64_t epoch0;
    int shards;
  } sc;
  train_progress p;
  progress out;
  double t0;
  metrics metrics;       /* metrics.jsonl, open during a fit */
  events_writer *events; /* events/coordinator/: TensorBoard's global view */
  bool has_ckpt;         /* the fit's checkpoint = {...} */
  fitrun_ckpt ckpol;
  coord_ck ck;
  struct coord_xfer *xfer; /* per ps: its checkpoint file in transit (coord_ckpt_xfer.c) */
  int64_t fit_no;        /* fits so far on this cluster */
  bool skipped;          /* `--resume`: this fit had ended before the checkpoint */
  /* Checkpoint directories are numbered across the cluster's fits
   * (step-<step_base + step>), so a later fit's sort after an earlier
   * one's and `keep` keeps the newest: step_base is the steps of the
   * fits before this one, prev_steps the last fit's. */
  int64_t step_base, prev_steps;
  coord_feed_state feed;
  /* `--resume` of a fed fit (coord_feed_ckpt.c): batches 1..skip of the
   * source were trained before the checkpoint, except the nredo in redo
   * (in flight then), which are trained again */
  struct {
    uint64_t skip;
    uint64_t *redo;
    int nredo;
    int64_t skipped; /* batches passed over so far */
  } feed_rs;
};

/* coord_fit.c: the fit's train steps as a producer of the task queue
 * (registered by coord__fit_state). */
extern const coord_producer_ops coord__fit_tasks;

/* coord_feed.c: feed mode. */
extern const coord_producer_ops coord__feed_tasks;
/* Before a fit's first turn (mode WIRE_FEED_TRAIN), or c:feed's
 * (WIRE_FEED_QUEUE): 0, or negative (the source is refused). */
int coord__feed_begin(coord_fit_state *f, const coord_feed_source *src, uint8_t mode);
/* Between two turns: reads batches while workers would run short, checks
 * feed_timeout (DRV_ETIMEDOUT naming the worker waited for), samples the
 * rate. 0 or negative: the fit fails. */
int coord__feed_tick(coord_fit_state *f);
/* Whether every batch is read and trained. */
bool coord__feed_over(const coord_fit_state *f);
/* The fit is over (rc its outcome): FEED_END to the trainers and the
 * external feeders, the poll handle closed. */
void coord__feed_end(coord_fit_state *f, int rc);
/* Queues a batch of external feeder `feeder`: buf (malloc'ed, taken) is
 * WIRE_HEADER_SIZE bytes of room and a FEED_BATCH payload. */
int coord__feed_queue_raw(coord_fit_state *f, uint8_t *buf, uint32_t len, int feeder);
struct wire_msg_feed_batch;
/* Whether a FEED_BATCH's ids (if any) are well formed for its x's rows:
 * 0, or DRV_EPARSE naming the batch (its sender's protocol error). */
int coord__feed_check_ids(const struct wire_msg_feed_batch *m);

/* coord_feed_ext.c: external feeders on the control port. */
/* An external fit begins: every feeder connected gets its window. */
void coord__feeders_begin(coord_fit_state *f);
/* Between turns: a feeder's failure (negative), or *over once every
 * feeder that joined has ended. */
int coord__feeders_check(coord_fit_state *f, bool *over);
/* A batch of feeder `index` was trained: its credit goes back. */
void coord__feeder_trained(coord_fit_state *f, int index);
/* The fit is over: FEED_END to every feeder of it. */
void coord__feeders_end(coord_fit_state *f, int rc);
void coord__feeders_free(coord_fit_state *f);
/* coord_feed_direct.c: worker `node` was lost: the feeders that fed it
 * directly go through the coordinator again. */
void coord__feeders_node_lost(coord_fit_state *f, int node);
/* c:scale down to `want` workers would remove (remove_beyond: the
 * highest-indexed) a worker a direct feeder routes to or waits for: that
 * node, or -1. Such a shrink is refused (the batches it holds unacked
 * would need the feeder's hand-over, which only a lost worker has). */
int coord__feeders_direct_to_beyond(const coord_fit_state *f, int want);
/* Worker `node` is set up for the fit (SETUP_OK) or listens: feeders that
 * waited for it get their route and credit. */
void coord__feeders_node_ready(coord_fit_state *f, int node);
/* Between turns: feeders waiting for their worker to be set up get their
 * route once it is. */
void coord__feeders_tick(coord_fit_state *f);
/* A direct feeder's batches are not all acknowledged yet. */
bool coord__feeders_direct_pending(const coord_fit_state *f);
/* feed_timeout's why: "waited for worker:1, fed directly by feeder X, to
 * acknowledge its batch 7" into buf, when a direct slot waits. */
bool coord__feeders_direct_who(coord_fit_state *f, char *buf, size_t n);
/* events.log: how many batches went to workers directly. */
/* metrics.jsonl, TensorBoard (cluster/workers) and the dashboard get the
 * fit's trainer count at step f->done if it changed since last said, once
 * a membership change took effect; the first change also writes the count
 * the fit began with, at its first step (a fit that keeps its workers has
 * no such line: readers counting step lines see none). */
void coord__fit_workers(coord_fit_state *f);
void coord__feeders_summary(coord_fit_state *f);
/* A RESULT of a fed batch (from step_done): its slot is forgotten. */
void coord__feed_trained(coord_fit_state *f, int node, uint64_t id);
/* FEED_END from a worker (w:terminate). */
void coord__feed_worker_end(coord_fit_state *f, int node);
/* c:scale during a fed fit: the feed's trainers listed again (the fit's,
 * f->trainers), so new workers get batches and FEED_END, and the
 * coordinator reads one more batch ahead per trainer. */
void coord__feed_relist(coord_fit_state *f);
/* The fit state goes (coord__fit_free). */
void coord__feed_free(coord_fit_state *f);

/* coord_fit.c: the queue's done() of a train step, shared by the feed. */
int coord__step_done(void *ud, int node, uint64_t id, const uint8_t *pl, uint32_t len);
/* coord_fit.c: the fit state may take tasks on node (set up, not restoring). */
bool coord__fit_ready(void *ud, int node);
/* coord_fit.c: a rollback: the ps apply the global steps since it again,
 * so every node may give one gradient for each of them again. */
void coord__fit_taken_reset(coord_fit_state *f);

/* coord_fit.c: sends every ps the plateau schedule's current scale
 * (LR_SCALE), after a reduction (sync: taken after global step `after`)
 * and after a rollback's VAR_INIT (`after` 0: at once). */
void coord__send_lr_scale(coord_fit_state *f, uint64_t after);
/* coord_fit.c: sync: asks every ps to answer once it applied the last
 * global step. */
int coord__send_sync_probes(coord_fit_state *f);
/* The same to group k's ps (its primary changed before it answered). */
int coord__send_sync_probe(coord_fit_state *f, int k);

/* coord_scale_fit.c: c:scale during a fit (see there). */
/* want workers instead of have: 0 or negative (refused, why in err_msg). */
int coord__scale_fit(coord_fit_state *f, int have, int want);
/* Whether that change may start now: 0, or negative (why in err_msg). */
int coord__scale_fit_check(coord_fit_state *f, int have, int want);
/* Between two turns of the fit loop. */
void coord__scale_tick(coord_fit_state *f);
/* Whether node may take no train step now (sync: the barrier). */
bool coord__scale_holds(const coord_fit_state *f, int node);
/* The barrier's probe answered by ps group k at `version`. */
void coord__scale_probe_reply(coord_fit_state *f, int k, uint64_t version);
/* Ps group k's link closed (a promotion): what the change sent it is sent
 * again to its next primary. */
void coord__scale_ps_gone(coord_fit_state *f, int k);
/* The fit is over: what a change still asked completes without it. */
void coord__scale_fit_end(coord_fit_state *f);
/* Worker i, a trainer of the running fit, was lost and the cluster shrank
 * (coord__scale_lost): the fit goes on with the trainers left (async:
 * their new shards; sync: the quorum of the count left, at once). */
void coord__scale_fit_lost(coord_fit_state *f, int i);
void coord__scale_free(coord_fit_state *f);

/* coord_setup.c: SETUP of trainer t (shard t of f->ntrainers) when its
 * node is registered (else it gets it when it registers). */
int coord__setup_trainer(coord *c, int t);

/* coord_stop.c: a sync fit's early stop (see there). begin: phase 1 to
 * every ps; reply: ps k's version behind its cap; again: group k's new
 * primary (k >= 0) or every ps after a rollback (k < 0) gets what it
 * missed. */
void coord__sync_stop_begin(coord_fit_state *f);
void coord__sync_stop_reply(coord_fit_state *f, int k, uint64_t version);
void coord__sync_stop_again(coord_fit_state *f, int k);
/* coord_setup.c: SETUP of every trainer and the evaluator, waiting for
 * their SETUP_OKs (a node restarting meanwhile is set up as it comes
 * back, coord__fit_node_back). */
int coord__setup_nodes(coord *c, const coord_fit_args *a);

/* coord_vars.c */
/* Records a failure of the run found by the fit (coord__fail). */
void coord__fail_fit(coord_fit_state *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends w (consumed) to ps k as a request whose one reply f->pend_ps[k]
 * counts (VAR_INIT, PULL, RESTORE); an error when k is not connected. */
int coord__ps_request(coord_fit_state *f, int k, wire_wr *w, uint8_t type, uint32_t req);
/* A reply to such a request came from ps k (one from a link that closed
 * meanwhile, or that nobody waits for any more, is not counted). */
void coord__ps_replied(coord_fit_state *f, int k);
/* Pumps until every request's reply came, within PS_REPLY_TIMEOUT (and
 * the model's size): DRV_ETIMEDOUT naming `what` and the ps that owe it,
 * DRV_ENODE when a ps link closed before its reply came ("ps:K was lost
 * before it sent <what>"), 0. */
int coord__wait_replies(coord_fit_state *f, const char *what);
/* Group k's data link is no longer the one to use (closed, or its primary
 * replaced): f->ps[k] NULL and the replies it owed counted as lost. */
void coord__ps_link_gone(coord_fit_state *f, int k);
/* The bound coord__wait_replies uses, in seconds. */
double coord__reply_bound(const coord_fit_state *f);
/* The fit state, made on first use (NULL when out of memory). */
coord_fit_state *coord__fit_state(coord *c);
/* Connects to every ps not connected yet and waits until all are ready. */
int coord__connect_ps(coord *c);
/* Between two turns of the fit loop (ps replicas): starts connecting to a
 * group's primary whose link is gone (a promotion), without waiting. */
void coord__ps_reconnect(coord_fit_state *f);
/* Places the model's variables over the ps nodes (events.log records it). */
int coord__place(coord_fit_state *f, nn_module *model);
/* VAR_INIT of every shard; replies counted in f->pend_ps. */
int coord__init_vars(coord_fit_state *f, const optim_cfg *opt);
/* Pulls every variable back into the model, pumping until all replied. */
int coord__pull_all(coord *c);
void coord__free_vars(coord_fit_state *f);

/* coord_sparse.c: the model's sparse tables, sharded by row over every ps. */
/* Lists model's tables in f->tables, refusing what a cluster does not do
 * with them yet (nn.Embedding's ids from x, ps replicas). */
int coord__sparse_place(coord_fit_state *f, nn_module *model);
int coord__sparse_init(coord_fit_state *f, const optim_cfg *opt); /* SPARSE_INIT to every ps */
/* SPARSE_DUMP of every table to every ps (the tables cleared first); each
 * SPARSE_DUMP_REPLY fills the model's table (coord__sparse_dump_reply). */
int coord__sparse_dump(coord_fit_state *f);
int coord__sparse_dump_reply(coord_fit_state *f, int ps, const uint8_t *pl, uint32_t len);
void coord__sparse_free(coord_fit_state *f);

/* coord_ckpt.c: checkpoints of the ps nodes' shards, committed by the
 * coordinator, and the rollback after a ps was lost. */
/* Between two turns of the fit loop: starts a checkpoint when one is due. */
void coord__ckpt_tick(coord_fit_state *f);
/* Starts a checkpoint now (sync: at the next global step boundary when
 * `sync_boundary`). 0, or negative when it cannot start. */
int coord__ckpt_begin(coord_fit_state *f, bool sync_boundary);
/* Every reply of a checkpoint is in: commits it, or fails it, or asks
 * again (sync: a node had passed the version). */
void coord__ckpt_finish(coord_fit_state *f);
/* Whether no checkpoint is being taken. */
bool coord__ckpt_idle(coord *c, void *arg);
/* Pumps until the checkpoint in progress is committed or failed, within
 * coord__reply_bound: past it the checkpoint fails (ck.failed, ck.why
 * naming what did not come) and the previous one stays the newest. */
int coord__ckpt_wait(coord_fit_state *f);
/* CHECKPOINT_OK, RESTORE_OK or a probe's PULL_REPLY from ps `ps`. */
void coord__ckpt_frame(coord_fit_state *f, int ps, const wire_header *h, const uint8_t *pl);

/* coord_ckpt_xfer.c: checkpoint files through the coordinator */
typedef struct coord_xfer coord_xfer;
/* ps k will send its file `path` before its CHECKPOINT_OK. */
int coord__xfer_expect(coord_fit_state *f, int k, const char *path);
/* CKPT_FILE, CKPT_PIECE or CKPT_FILE_END from ps k's data connection. */
void coord__xfer_frame(coord_fit_state *f, int k, const wire_header *h, const uint8_t *pl);
/* At ps k's CHECKPOINT_OK (its status): 1, its file was not to come here;
 * 0, it came whole and is in place (its digest and size into digest and
 * size when status is 0); -1, it did not (why). The transfer is over. */
int coord__xfer_result(coord_fit_state *f, int k, int status, char *digest, uint64_t *size,
                       char *why, size_t n);
/* A CHECKPOINT_OK (h, pl) from ps k while its file is being committed
 * (fsync, rename) off the loop: kept, and handed to coord__ckpt_frame
 * once the commit ended; true when so. */
bool coord__xfer_hold(coord_fit_state *f, int k, const wire_header *h, const uint8_t *pl);
/* The transfer ends (why NULL: forgotten; else failed for that reason),
 * its temporary removed. */
void coord__xfer_abort(coord_fit_state *f, int k, const char *why);
void coord__xfer_free(coord_fit_state *f);
/* Queues the file `path` of checkpoint dir (checked against its manifest)
 * to ps k, before the RESTORE that names it. */
int coord__xfer_send(coord_fit_state *f, int k, const char *dir, const char *path);
/* A fit begins: keeps the initial values (a ps lost before the first
 * checkpoint restarts from them). */
int coord__ckpt_fit_begin(coord_fit_state *f);
void coord__ckpt_fit_end(coord_fit_state *f);
/* ps `ps` was lost and will be restarted (coord__fit_node_lost). */
void coord__ckpt_ps_lost(coord_fit_state *f, int ps);
/* A checkpoint in progress is dropped (ps `ps` will not answer). */
void coord__ckpt_abandon(coord_fit_state *f, int ps);
/* Between two turns of the fit loop, once every ps is back: the rollback. */
int coord__ckpt_restore_tick(coord_fit_state *f);
/* `drover run --resume`: at the start of a fit (set up, before its first
 * step), continues from the run's newest cluster checkpoint when it is of
 * this fit (ps restored, trainers rolled back, the step count set).
 * Returns 0 (going on, resumed or from the start), 1 when this fit had
 * ended before that checkpoint (f->skipped; nothing to run), or negative. */
int coord__ckpt_resume(coord_fit_state *f);

/* coord_pos.c: the trainers' data positions in a checkpoint. */
/* Asks every trainer where its data stood at ps version `at` (0: now)
 * when the checkpoint records positions (ck->want_pos: during a fit, not
 * of its last step). Replies come to coord__pos_frame. */
int coord__pos_ask(coord_fit_state *f, uint64_t at);
/* POSITION_OK or ROLLBACK_OK from node `node`. */
int coord__pos_frame(coord_fit_state *f, int node, const wire_header *h, const uint8_t *pl);
/* The positions as manifest meta ("trainers", "pos.<t>"), appended to
 * meta at *m (room for 2 * ntrainers + 2 more, then NULL); the strings
 * are in *owned (malloc'ed, freed by the caller). */
int coord__pos_meta(coord_fit_state *f, const char **meta, int *m, char **owned);
/* Rolls every trainer back to its position in checkpoint m (NULL: to the
 * start of the fit), pumping until all answered. A checkpoint without
 * positions (or of another number of trainers) rolls nothing back and
 * says so. */
int coord__pos_rollback(coord_fit_state *f, const manifest *m);

/* coord_feed_ckpt.c: a fed fit's position in its checkpoints. At a
 * checkpoint's start (the ps snapshot after it), the batches read and
 * those not yet trained; every batch trained by then is in the snapshot. */
int coord__feed_ckpt_mark(coord_fit_state *f);
/* Appends "feed.read" and "feed.pending" to meta (4 entries) when marked. */
void coord__feed_ckpt_meta(coord_fit_state *f, const char **meta, int *m);
void coord__feed_ckpt_clear(coord_fit_state *f);
/* `--resume` from manifest m: the batches to pass over (f->feed_rs).
 * DRV_EINVAL when the source cannot be read again from its start. */
int coord__feed_ckpt_resume(coord_fit_state *f, const manifest *m);
/* Whether the source's batch seq was trained before the checkpoint. */
bool coord__feed_ckpt_skip(coord_fit_state *f, uint64_t seq);
/* A trainer was lost: a checkpoint waiting for its position fails; a
 * rollback stops waiting for it. */
void coord__pos_node_lost(coord_fit_state *f, int node);
/* Frees the attempt's positions. */
void coord__pos_clear(coord_fit_state *f);

#endif
