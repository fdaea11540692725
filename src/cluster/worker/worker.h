/* worker.h - the worker, chief and evaluator roles: a model replica that
 * pulls its parameters from the ps nodes, computes on the libuv thread
 * pool, and (workers) pushes gradients back.
 *
 * The node agent (node.c) owns the coordinator connection and hands the
 * worker the frames meant for it; the worker answers through a send
 * callback and owns its own client connections to every ps. Jobs are
 * SETUP (swap in a new model, data and variable table; reply SETUP_OK),
 * TASK (a training step; reply RESULT) and EVAL (an evaluation; reply
 * EVAL_RESULT); a CALL runs a scheduled Lua function whose `w` methods
 * queue jobs of their own (l_worker.c, through worker_calls). One job at a time pulls or
 * computes; once a training job has sent its pushes, the next may pull on
 * the same connections while the first waits for its PUSH_OKs (TCP order
 * makes the pull see the push). Replies still go out in arrival order
 * (CALL_RESULTs excepted: a call ends when its function does). The loop thread never runs the
 * math: forward, backward and evaluation go through uv_queue_work.
 *
 * Variable numbering: the SETUP table lists variable i as the model's
 * parameter i in nn_collect_params order, and var id i on the wire (in
 * VAR_INIT, PULL and PUSH) is that table index.
 */
#ifndef DROVER_WORKER_H
#define DROVER_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proto/auth.h"
#include "proto/keyring.h"
#include "proto/wire.h"
#include "proto/wire_msgs.h"

/* One node of the cluster spec (SPEC). */
typedef struct node_addr {
  int role;
  uint32_t index;
  char host[64]; /* numeric address */
  uint16_t port; /* a ps's data port; 0 for other roles */
  uint32_t proc; /* a ps group's serving process, ps:<proc> (its key is proved there) */
} node_addr;

typedef struct worker worker;

/* How the worker replies to the coordinator: sends the frame in `w` (which
 * it consumes) with (type, req). */
typedef int (*worker_send_fn)(void *ud, wire_wr *w, uint8_t type, uint32_t req);

/* A worker for `role` (ROLE_WORKER, ROLE_CHIEF or ROLE_EVALUATOR) and
 * `index`. `keys` (its key file: the key it proves at each ps process) is
 * borrowed for the worker's life. NULL when out of memory. */
worker *worker_new(uv_loop_t *loop, const keyring *keys, int role, int index,
                   worker_send_fn send, void *ud);

/* Scheduled functions (CALL) run in Lua, and the Lua bindings sit a layer
 * above the worker: the binary hands each worker the Lua side
 * (l_worker.c's lworker_calls) rather than the worker calling up. Without
 * it, a CALL is refused with an error. `calls` is borrowed (static). */
typedef struct worker_calls {
  int (*call)(worker *w, uint32_t req, const uint8_t *payload, size_t len); /* worker_call */
  void (*close)(worker *w); /* stops the calls' timers and coroutines (worker_close) */
  void (*free)(worker *w);  /* frees them, after the jobs (worker_free) */
  void (*fed)(worker *w);   /* the fed queue changed (may be NULL) */
  int (*inflight)(const worker *w); /* calls started and not over: a drain waits for them */
} worker_calls;
void worker_set_calls(worker *w, const worker_calls *calls);

/* The cluster spec: connects to every ps listed (again, for one whose
 * address changed or whose connection was lost). Returns 0 or a negative
 * code. `nodes` is borrowed for the call. */
int worker_spec(worker *w, const node_addr *nodes, int n, bool ps_replicated);
/* A clock (the coordinator's heartbeats): with ps replicas, connects lost
 * ps links again, within their back-off (their kept requests, or a job
 * waiting for links, go on once connected). */
void worker_tick(worker *w);
/* The transport of each ps link that is up, by the ps process it reaches,
 * consecutive ones with the same transport as a range: "ps:0-3=shm,ps:4=tcp"
 * ("" none) into out, cut at n bytes (node.c sends it in LINKS). */
void worker_links(const worker *w, char *out, size_t n);
/* Per sparse table of the model (at most max): the last step's unique
 * rows and SPARSE_* bytes (SPARSE_STATS); 0 without tables. */
int worker_sparse_stats(const worker *w, wire_item_table_stat *out, int max);

/* Frames from the coordinator (payload borrowed for the call):
 *   worker_setup  queues a job that, behind the jobs already queued,
 *                 builds the new model and data on the thread pool (files
 *                 mode reads the shard there, while the loop answers
 *                 heartbeats), swaps them in and replies SETUP_OK; a
 *                 SETUP that does not build is fatal (worker_set_fatal).
 *   worker_task   queues a TASK (workers and chief).
 *   worker_eval   queues an EVAL (evaluator).
 * A negative return is a failure the node reports with ERROR: a payload
 * that does not parse, a model spec that does not build, a variable table
 * that does not match the model, a frame for another role. Failures of a
 * task itself are answered with a RESULT whose status is negative. */
int worker_setup(worker *w, uint32_t req, const uint8_t *payload, size_t len);
/* What the node does when a queued SETUP fails to build (ERROR to the
 * coordinator, exit status 1): called once, from the loop, with the code
 * and the message. Without it the worker answers ERROR itself. */
void worker_set_fatal(worker *w, void (*fatal)(void *ud, int rc, const char *msg));
int worker_task(worker *w, uint32_t req, const uint8_t *payload, size_t len);
int worker_eval(worker *w, uint32_t req, const uint8_t *payload, size_t len);
/* FEED_BATCH: mode TRAIN queues a train step on the batch (RESULT once its
 * update is applied); mode QUEUE holds it for w:next_batch. FEED_END: no
 * more batches (w:should_stop() once the queue is empty). */
int worker_feed_batch(worker *w, uint32_t req, const uint8_t *payload, size_t len);
int worker_feed_end(worker *w, const uint8_t *payload, size_t len);
/* Direct feeders (worker_direct.c; wire_msgs.h, "Direct feeding").
 * FEED_LISTEN: listen on bind_host (a free port) for feeders proving the
 * feed key it carries, each connection allowed FEED_BATCH only; answers
 * FEED_LISTEN_OK with the port (or why not) through the send callback.
 * FEED_DIRECT_CLOSE: closes that slot's connection; FEED_DIRECT_END
 * answers with the last seq taken from it. 0 or negative (a bad frame). */
int worker_feed_listen(worker *w, const char *bind_host, const uint8_t *payload, size_t len);
int worker_feed_direct_close(worker *w, const uint8_t *payload, size_t len);

/* Data positions for checkpoints and rollbacks (worker_pos.c; wire_msgs.h
 * says what they carry):
 *   worker_position  answers POSITION_OK at once when it can, or once the
 *                    batch it asks about is drawn (a later POSITION
 *                    replaces one still waiting).
 *   worker_rollback  fails every job in hand ("rolled back"), closes the
 *                    ps links, and answers ROLLBACK_OK once the data and
 *                    the Dropout generators stand where it says (after a
 *                    batch on the thread pool, if one is there).
 * A negative return is a payload that does not parse (ERROR). */
int worker_position(worker *w, uint32_t req, const uint8_t *payload, size_t len);
int worker_rollback(worker *w, uint32_t req, const uint8_t *payload, size_t len);

/* A CALL (payload borrowed for the call): runs the scheduled function it
 * carries (closure.h) as a coroutine of the worker's Lua state, made at the
 * first CALL, with a `w` object in front of its arguments:
 *   w.index, w.role ("worker", "chief"), w.name ("worker:1"), w.steps
 *   (whole train steps run by this process, TASKs included);
 *   w:train_step() -> loss, examples, correct (nil when accuracy does
 *   not apply): a step exactly as a TASK runs it
 *   w:pull()  w:compute() -> loss, examples, correct  w:push()   one phase each
 *   w:batch() -> x, y   copies of the shard's next batch (tensors)
 * The methods are jobs in the same queue as TASKs, in order with them; the
 * coroutine yields until its job is over (the loop keeps running), and a
 * failed job raises in Lua. When the function returns or raises, the
 * worker sends CALL_RESULT (task echoed, req echoed): status 0 and its
 * results (closure_encode_values), or a negative status and the message
 * with the coroutine's traceback (also when the closure does not decode,
 * or a result cannot be sent). Calls may finish in any order. A negative
 * return is only for a payload that does not parse or a CALL sent to an
 * evaluator (the node reports it with ERROR). */
int worker_call(worker *w, uint32_t req, const uint8_t *payload, size_t len);

/* c:predict (worker_predict.c): PREDICT_MODEL sets the model to predict
 * with; PREDICT runs one batch through it and answers PREDICT_RESULT.
 * Negative only for a malformed frame. */
int worker_predict_model(worker *w, const uint8_t *payload, size_t len);
int worker_predict(worker *w, uint32_t req, const uint8_t *payload, size_t len);
/* PREDICT_ROWS: rows of a table of the predict model (before its first
 * PREDICT); a frame for another predict is ignored. */
int worker_predict_rows(worker *w, const uint8_t *payload, size_t len);

/* Drops the queued jobs and calls idle(ud) once no job is running (at
 * once, from this call, if none is). The started jobs finish normally,
 * replies included. */
void worker_drain(worker *w, void (*idle)(void *ud), void *ud);

/* Closes the ps connections and drops every queued job. A job running on
 * the thread pool finishes there and is then discarded. Call once; the
 * memory goes with worker_free, after the loop has run to completion. */
void worker_close(worker *w);
void worker_free(worker *w); /* NULL is fine */

/* Jobs queued or running and calls in flight: what a drain waits for. */
int worker_pending(const worker *w);

#endif
