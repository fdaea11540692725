/* worker_int.h - internals shared by worker.c (jobs and their phases),
 * worker_ps.c (the ps links), worker_setup.c (the state a SETUP builds)
 * and l_worker.c (scheduled closures). Not a public API: include
 * worker.h instead.
 */
#ifndef DROVER_WORKER_INT_H
#define DROVER_WORKER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "net/conn.h"
#include "data/data.h"
#include "numeric/nn.h"
#include "numeric/rng.h"
#include "train/train.h"
#include "cluster/worker/worker.h"

/* Highest ps index a SETUP or SPEC may name (plus one). */
#define WORKER_MAX_PS 4096

/* One shard of a variable: rows [row0, row0 + rows) live on ps `ps`. */
typedef struct wshard {
  uint32_t ps;
  uint64_t row0, rows;
} wshard;

/* A model variable as SETUP describes it, bound to the model's parameter
 * of the same position. */
typedef struct wvar {
  char *name;                      /* owned */
  int ndim;
  int64_t dims[TENSOR_MAXDIM];
  size_t row_elems;                /* elements per row: prod(dims[1..]) */
  uint32_t nshards;
  wshard *shards;                  /* owned */
  tensor *value, *grad;            /* the model's parameter (borrowed) */
  /* A running statistic (var >= ntrained): no gradient; `grad` is owned
   * and pushed as the change this node's batch made (see stats_begin). */
  bool stat;
} wvar;

/* What one ps holds of the model, in the order PULL and PUSH list it. */
typedef struct ps_part {
  int n;
  uint32_t *var;   /* var ids (table indices) */
  uint32_t *shard; /* the shard of that var held by this ps */
} ps_part;

/* Dropout generators a data position carries, at most (worker_pos.c). */
#define WPOS_MAX_RNG 16
/* Batches whose starting point a worker remembers (worker_pos.c). */
#define WPOS_RING 16

/* Where a worker's data stood just before it drew one batch: the batches
 * drawn since SETUP, the ps version of the values that batch was computed
 * on, and the model's Dropout generators (depth first). */
typedef struct wpos {
  uint64_t version, batches;
  int nrng;
  rng_t rng[WPOS_MAX_RNG];
} wpos;

/* Everything a SETUP builds; swapped in whole between jobs. */
typedef struct wstate {
  nn_module *model;
  nn_loss *loss;
  nn_param_list params; /* parameters, then running statistics (nn_collect_synced) */
  int ntrained;         /* how many of them are parameters */
  wvar *vars;
  uint32_t nvars;
  ps_part *parts; /* indexed by ps index */
  int nparts;
  dataset *data;
  data_iter it;   /* workers: batches of `data`, shuffled when `shuffle` */
  bool has_iter;
  int64_t batch;
  uint64_t seed;
  bool shuffle; /* SETUP's: the fit's train.shuffle */
  int nrng;                     /* the model's Dropout generators as built */
  rng_t init_rng[WPOS_MAX_RNG]; /* (a ROLLBACK to the start restores them) */
  /* > 0: each gradient is clipped to this global norm (over the whole
   * model, so over every ps shard) before it is pushed. */
  double clip_norm;
  char summary[160]; /* for the log */
  /* Sparse tables (worker_sparse.c): the model's (borrowed), each holding
   * only the rows of the current batch, pulled from the ps that own them.
   * route: the batch's ids deduped and grouped by ps, ps p's at
   * route[offs[p] .. offs[p + 1]) (offs: nps + 1). */
  nn_table_list tables;
  uint64_t *route;
  size_t route_cap, *offs;
  uint32_t nps;
  uint64_t touched;      /* the batch's unique ids (route's length) */
  struct wsp_push *push; /* per table: its gradient's rows grouped by ps */
} wstate;

/* Builds the state a SETUP describes (see wire.h for the layout): the
 * model from its spec with weights drawn from `seed` (they are overwritten
 * by the first pull), the loss, the variable table checked against the
 * model's parameters, the data, and for workers and the chief the batch
 * iterator, shuffled (when SETUP says so) with seed (index 0) or
 * rng_derive(seed, index), else in the rows' order.
 * Returns 0 with *out owned by the caller, or a negative code. */
int worker__state_parse(int role, int index, const uint8_t *p, size_t len, wstate **out);
void worker__state_free(wstate *st); /* NULL is fine */

enum { JOB_SETUP, JOB_TRAIN, JOB_EVAL };

/* The phases a JOB_TRAIN runs: a TASK runs JP_TRAIN; the methods of the
 * `w` object of a scheduled function (l_worker.c) run one phase each.
 * JP_BATCH is a compute phase that only copies the next batch. */
enum {
  JP_PULL = 1,
  JP_COMPUTE = 2,
  JP_PUSH = 4,
  JP_BATCH = 8,
  JP_TRAIN = JP_PULL | JP_COMPUTE | JP_PUSH,
};

typedef struct worker worker;

/* Where a started job is (job.phase); see the file comment of worker.c. */
enum { PH_LINKS, PH_PULL, PH_COMPUTE, PH_PUSH };

/* Jobs started and not yet answered, at most: one pulling or computing,
 * the others waiting for their PUSH_OKs (see worker.c). */
#define WORKER_PIPE_MAX 4

typedef struct job {
  worker *w;
  int kind;
  uint32_t req;       /* the coordinator's request id, echoed in the reply */
  uint64_t id;        /* task id, or eval step */
  uint8_t task_kind;
  unsigned phases;    /* JP_* (JOB_TRAIN, JOB_EVAL) */
  /* A job of a scheduled function: on_done(j) replaces the reply (see
   * worker_submit). */
  void (*on_done)(struct job *j);
  void *ud;
  wstate *setup;      /* JOB_SETUP: the state to swap in (owned) */
  uint8_t *payload;   /* JOB_SETUP: a copy of the SETUP, parsed on the thread pool (owned) */
  size_t payload_len;
  wstate *st;         /* the state the compute phase uses */
  struct job *next;   /* in the queue, then in the started list */
  int phase;          /* PH_* */
  int waiting;        /* ps replies the current phase still waits for */
  bool done;          /* outcome known; the reply waits for earlier jobs' */
  /* outcome */
  int rc;
  char msg[512];
  float loss;
  int64_t correct, examples;
  double grad_norm;   /* before clipping, with clip_norm; else NAN */
  int push_oks, pushes_taken; /* PUSH_OKs back, and those whose ps applied the gradient */
  train_eval eval;       /* JOB_EVAL's result (NAN: not computed) */
  unsigned eval_metrics; /* EVAL's BINEVAL_* bits */
  tensor *bx, *by;    /* JP_BATCH: copies of the batch (owned; on_done may take them) */
  bool rolled_back;   /* a ROLLBACK came: it fails instead of going on */
  bool superseded;    /* a SETUP { supersede } came before it computed: dropped */
  tensor *fx, *fy;    /* a FEED_BATCH's batch: compute trains on it, not on the shard (owned) */
  data_sparse fsp;    /* its ids (owned; bound 0: none), for the sparse route and compute */
  const tensor *px, *py; /* sparse tables: the batch drawn before the pull (the iterator's) */
  uint64_t drawn;     /* sparse tables: 1 + the batch count before px was drawn; 0: none */
  bool direct;        /* from a direct feeder (worker_direct.c): FEED_ACK, not RESULT */
  uint32_t slot;      /* its feeder's slot (FEED_ACK.slot); id is its seq */
} job;

/* A request sent on a ps link and not yet answered. A ps answers the
 * requests of one connection in order, so these form a FIFO. */
typedef struct link_wait {
  uint32_t req;
  uint8_t type;       /* the reply it expects */
  job *j;             /* NULL once that job is over: the reply is dropped */
  uint8_t *frame;     /* ps replicas: the whole request, sent again on the
                         next connection (owned; NULL otherwise) */
  size_t len;
} link_wait;

/* A client connection to one ps. */
typedef struct ps_link {
  worker *w;
  int index;
  uint32_t proc;      /* the ps process serving group `index` (SPEC): whose key to prove */
  char host[64];
  int port;
  conn_opts opts;     /* kept for the conn's life */
  conn *c;            /* NULL when not connected */
  uint32_t next_req;
  link_wait *waits;   /* outstanding requests, oldest first (owned) */
  int nwaits, capwaits;
  /* Versions (see PULL and PUSH in wire.h): of the values last pulled,
   * and of the last gradient pushed (when `pushed`). The next pull asks
   * for a version past the pushed one, so in sync training it waits for
   * the update that gradient is part of. Reset by SETUP and reconnects. */
  uint64_t version, pushed_version;
  bool pushed;
  char last_error[256];
  /* A link lost while its ps lives on (a refused request, a dropped
   * handshake) is connected again by the next job that needs it, at most
   * once per back-off: 0.1 s doubled per failed attempt, at most 5 s
   * (worker__link_reconnect). */
  int attempts;
  uint64_t retry_at; /* uv_now, ms */
  /* ps replicas: the SPARSE_PUSH frames of the PUSH about to be sent,
   * kept with it (one kept frame), so that a failover sends them again
   * together (owned; worker_sparse.c) */
  uint8_t *pre;
  size_t npre;
} ps_link;

struct worker {
  uv_loop_t *loop;
  const keyring *keys; /* borrowed: the key to prove at each ps process */
  int role, index;
  worker_send_fn send;
  void *ud;
  ps_link **links;    /* indexed by ps index; NULL entries for unknown ones */
  int nlinks;
  bool have_spec;
  /* SPEC's ps_replicated: a lost ps link keeps its requests (their frames)
   * and sends them again, in order, once connected to the ps group's
   * (new) primary; pushes carry (client, seq) so none is applied twice. */
  bool ps_replicated;
  uint32_t client;    /* this worker's PUSH.client */
  uint64_t push_seq;  /* the last PUSH.seq */
  wstate *st;         /* current state, NULL before the first SETUP */
  job *head, *tail;   /* queued */
  job *run, *run_tail; /* started and not yet answered, in start order */
  int nrun;
  int njobs;          /* queued + started */
  job *cur;           /* the started job pulling or computing (at most one) */
  uv_work_t work;
  bool in_pool;
  bool closed;
  bool settling, resettle; /* settle() is running / must run again */
  void (*idle)(void *ud);
  void *idle_ud;
  bool draining;      /* worker_drain was called: no new tasks; running calls finish */
  uint64_t dropped;   /* gradients a ps dropped as late (sync) */
  uint64_t steps;     /* whole train steps completed (TASKs and w:train_step) */
  unsigned slow_ms;   /* fault injection: sleep per train step (tests) */
  /* Data positions (worker_pos.c): batches drawn since SETUP; the
   * starting points of the last WPOS_RING of them (ring[(ring_next - 1)
   * % WPOS_RING] the newest); a POSITION waiting for its version (or, at
   * 0, for the batch on the thread pool to end); a ROLLBACK waiting for
   * that batch too. */
  uint64_t batches;
  wpos ring[WPOS_RING];
  int nring, ring_next;
  bool pos_wanted;
  uint64_t pos_at;
  uint32_t pos_req;
  bool rb_wanted;
  uint32_t rb_req;
  uint64_t rb_batches;
  int rb_nrng;
  rng_t rb_rng[WPOS_MAX_RNG];
  const worker_calls *calls; /* worker_set_calls; may be NULL */
  struct wlua *lua;   /* scheduled closures (l_worker.c); NULL until the first CALL */
  /* Feed (FEED_BATCH mode QUEUE): batches held for w:next_batch, oldest
   * first; each is answered RESULT when taken. feed_ended: FEED_END came
   * (or w:terminate()). */
  struct fed *fed_head, *fed_tail;
  int nfed;
  bool feed_ended;
  bool feeding;       /* a QUEUE batch came since the last FEED_END */
  uint64_t feed_ends; /* FEED_ENDs so far: a scheduled function's feed is over
                         once one came after it started (l_worker.c) */
  struct wpredict *pred; /* the predict model (worker_predict.c); NULL until PREDICT_MODEL */
  struct wdirect *direct; /* direct feeders' listener (worker_direct.c); NULL until FEED_LISTEN */
  void (*fatal)(void *ud, int rc, const char *msg); /* worker_set_fatal; may be NULL */
};

/* worker_predict.c */
void worker__predict_free(worker *w);

/* worker_direct.c */
void worker__direct_close(worker *w); /* worker_close: the listener and its connections */
void worker__direct_free(worker *w);  /* worker_free */
/* worker.c: a FEED_BATCH payload (mode TRAIN) from direct feeder `slot`
 * queued as a train step acknowledged by FEED_ACK; *seq its seq. */
int worker__direct_batch(worker *w, uint32_t slot, const uint8_t *payload, size_t len, uint64_t *seq);

/* Queues a job for a scheduled function (l_worker.c): a JOB_TRAIN that
 * runs `phases` (JP_*) in order with the other jobs. Once it is over,
 * on_done(j) is called from settle, in job order, instead of a reply to
 * the coordinator; j (j->ud == ud) is freed when it returns, so on_done
 * copies the outcome (rc, msg, loss, examples) and takes bx/by (setting
 * them NULL). on_done is never called once the worker is closed.
 * Returns 0, or DRV_EINVAL when the worker is closed, DRV_ENOMEM (nothing
 * queued then). A draining worker takes them: they belong to calls that
 * were running when the SHUTDOWN came. */
int worker_submit(worker *w, unsigned phases, void (*on_done)(job *j), void *ud);
/* The same for a batch of the caller's (w:train_step(x, y, ids)): x, y
 * and sp are taken (freed on failure too; sp bound 0: no ids), so the job
 * trains on them as on a fed batch (FEED_BATCH mode TRAIN). */
int worker_submit_batch(worker *w, unsigned phases, tensor *x, tensor *y, data_sparse *sp,
                        void (*on_done)(job *j), void *ud);
/* A call is over (l_worker.c): a drain waiting for it may end. */
void worker__call_over(worker *w);

/* worker_feed.c: the input queue of fed batches (FEED_BATCH mode QUEUE)
 * that w:next_batch reads. */
/* Holds a batch (x, y and its ids sp taken; sp bound 0: none) for
 * w:next_batch; answered RESULT when taken. */
int worker__fed_hold(worker *w, uint32_t req, uint64_t task, tensor *x, tensor *y, data_sparse *sp);
/* The queue changed (a batch, FEED_END): calls waiting in w:next_batch may go on. */
void worker__fed_wake(worker *w);
/* Up to n rows from the queue, oldest first, across batches: 1 with *x, *y
 * and *sp, those rows' ids (the caller's; bound 0: the batches had none),
 * 0 when the queue is empty, negative on failure. Rows are merged only
 * across batches alike in shape and ids (with or without, fields,
 * weights), so each row keeps its own ids. Every batch used up is answered
 * RESULT (examples: its rows). */
int worker__fed_take(worker *w, int64_t n, tensor **x, tensor **y, data_sparse *sp);
/* dst (zeroed first) = rows [from, from + k) of src, which has ids. */
int worker__sparse_slice(data_sparse *dst, const data_sparse *src, int64_t from, int64_t k);
/* w:terminate(): queued batches answered (examples 0), FEED_END to the
 * coordinator (the feed stops), the queue ended. */
void worker__fed_terminate(worker *w);
/* Frees the queue (worker_free). */
void worker__fed_free(worker *w);

/* worker.c (internal), for the ps links: */

/* Sends the replies of the jobs that are over, in order, and starts queued
 * jobs when they may. A call from inside itself only makes the outer one
 * go round again. Jobs that are over are freed, and the drain callback
 * may close the worker, before it returns. */
void worker__settle(worker *w);
/* Marks j over (its outcome is set: its outstanding requests are
 * forgotten) and settles; j may be freed by the time it returns. */
void worker__finish(worker *w, job *j);
/* Ends j with status rc (DRV_EIO when rc is not negative) and the message,
 * unless j is already over (it then keeps its outcome). Does not settle:
 * the caller does. */
__attribute__((format(printf, 4, 5)))
void worker__doom(worker *w, job *j, int rc, const char *fmt, ...);
/* j's LINKS phase, run again when a link becomes ready or is lost: fails j
 * when a ps it needs is unknown or not connected, returns while one is
 * still connecting, and goes on to the pull (or the push) once every one
 * is ready. */
void worker__go_links(worker *w, job *j);
/* Every PULL_REPLY of j is in: compute next, or (a pull alone) j is over. */
void worker__pulled(worker *w, job *j);

/* worker_pos.c (internal): data positions. */

/* j is about to draw a batch (on the loop thread, nothing on the thread
 * pool): remembers where the data stands, answers a POSITION waiting for
 * this batch's version, and counts the batch. */
void worker__pos_batch(worker *w, job *j);
/* j drew its batch before its pulls (sparse tables: the ids route them)
 * and they are in: the position before that batch is of the version they
 * brought, as a batch drawn after its pulls is (worker__pos_batch). */
void worker__pos_pulled(worker *w, job *j);
/* The thread pool's job is over: a POSITION for "now" and a ROLLBACK
 * waiting for it are served. */
void worker__pos_idle(worker *w);
/* A SETUP swapped the state in: no batch drawn yet; a POSITION waiting is
 * answered with an error. */
void worker__pos_reset(worker *w);
/* The Dropout modules of m's generators, depth first, into out (at most
 * max); returns how many. */
int worker__rngs(nn_module *m, rng_t **out, int max);

/* worker_ps.c (internal), for the phases: */

/* Sends m (consumed, also on failure) on l's open connection as a request
 * of `type` for job j, expecting a `reply` frame back; link_frame hands
 * that reply to j (and decrements j->waiting). Returns 0, or a negative
 * code with nothing left expected. */
int worker__link_send(ps_link *l, wire_wr *m, uint8_t type, uint8_t reply, job *j);
/* Forgets l's outstanding requests (and their kept frames). */
void worker__link_forget(ps_link *l);
/* Connects l again when its back-off allows: true when a connection is
 * under way (link_ready resumes the job waiting for links). */
bool worker__link_reconnect(worker *w, ps_link *l);
/* Closes every link (a ROLLBACK): the jobs waiting on one fail, versions
 * are forgotten, and the next job that needs a ps connects at once. */
void worker__links_reset(worker *w);
/* Writes the PUSH payload for one ps into m: `version`, then the gradient
 * rows of each of part's shards, from st's parameters' gradients. */
void worker__write_push(const wstate *st, const ps_part *part, uint64_t version, wire_wr *m);
/* PUSH of job j's gradients for `part` on l, expecting PUSH_OK: encoded
 * once, into a shared-memory link's ring when it has room (conn_send_reserve);
 * with ps replicas kept as worker__link_send keeps it. */
int worker__link_push(ps_link *l, const wstate *st, const ps_part *part, job *j);


/* worker_sparse.c: the model's sparse tables on the ps. */
int worker__sparse_bind(wstate *st);  /* lists the tables; refuses what is not served */
void worker__sparse_free(wstate *st);
/* Ps links a job involves: nparts, or every ps when the model has tables. */
int worker__nps_involved(const worker *w, const wstate *st);
bool worker__involves(const worker *w, const wstate *st, int p);
/* Before the pull: a train job draws its batch (j->px), an eval job takes
 * its whole set; their ids are routed by ps and the tables emptied. */
int worker__sparse_route(worker *w, job *j);
/* SPARSE_PULLs of ps p's rows of every table; *sent of them. */
int worker__sparse_pull(worker *w, job *j, int p, uint64_t min_version, int *sent);
/* A SPARSE_PULL_REPLY from ps p into the tables; its version to *version. */
int worker__sparse_take(job *j, int p, const uint8_t *pl, size_t len, uint64_t *version);
/* After compute: groups each table's row gradients by ps. */
int worker__sparse_push_prep(wstate *st);
/* SPARSE_PUSHes of ps p's row gradients, sent before its PUSH (with ps
 * replicas: kept in the link's `pre`, sent with that PUSH's kept frame). */
int worker__sparse_push(worker *w, job *j, int p);
/* Every push sent: the step's figures become SPARSE_STATS' (the last step's). */
void worker__sparse_step_done(wstate *st);


/* worker_compute.c: the compute phase of w->work's job (uv_queue_work). */
void worker__work_cb(uv_work_t *req);
/* The next batch of st's shard; at the end of an epoch, the first of the
 * next one (as train_fit does). Views into the iterator: valid until the
 * next call. 1, or an error (no data of its own, an empty set). */
int worker__next_batch(wstate *st, const tensor **x, const tensor **y);

#endif
