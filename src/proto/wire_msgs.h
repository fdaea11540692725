/* wire_msgs.h - every wire message's payload, described once.
 *
 * Each message type of WIRE_TYPE_MAP (wire.h) has a field list here,
 * WIRE_MSG_<name>(X), and each repeated item inside one a list
 * WIRE_ITEM_<name>(X). From these lists wire_msgs.c generates, per
 * message: a struct (wire_msg_<name>), an encoder (wire_put_<name>), a
 * bounds-checked decoder (wire_get_<name>), the payload's size limits, its
 * part of the validator (wire_validate_payload) and sample frames
 * (wire_sample) for the unit tests and the fuzz corpus.
 *
 * Adding a message: a row in WIRE_TYPE_MAP, whose last column says who
 * may send it to a server (WIRE_FROM(PEER) | ..., or 0 for what only a
 * server sends: wire.h), a WIRE_MSG_<name> list below (and WIRE_ITEM_
 * lists plus WIRE_ITEM_MAP rows for its repeated parts), then the sender
 * calls wire_put_<name> and the receiver wire_get_<name>.
 *
 * Field kinds, X(KIND, field, ...), all little-endian without padding:
 *   U8 U16 U32 U64 I32 I64 F64 (field)   fixed-size numbers
 *   FLAG (field, "what")          u8 0 or 1 (bool in the struct)
 *   ROLE (field)                  u8 below ROLE_COUNT
 *   ENUM (field, max, "what")     u8 from 0 to max
 *   POS  (field, "what")          f64, finite and > 0
 *   RAW  (field, size)            size bytes, no length (a view)
 *   STR  (field)                  u32 length + at most WIRE_MAX_STR bytes
 *                                 without NUL (a wire_str view)
 *   BYTES (field)                 u32 length + bytes (a wire_bytes view)
 *   SHAPE (field)                 u8 ndim (1..4) + ndim u64 dims
 *   TENSOR (field)                SHAPE + prod(dims) float32 (wire_tensor)
 *   OPTIM (field)                 optimizer config (wire_wr_optim's layout;
 *                                 bit 7 of its last byte: a schedule follows)
 *   ITEMS (field, item, "what")   u32 count + count WIRE_ITEM_<item>s
 *   EMPTY (field)                 no bytes: a message without payload
 *
 * Decoded structs borrow the payload: views (strings, bytes, tensors, item
 * lists) point into it and live as long as it does.
 */
#ifndef DROVER_WIRE_MSGS_H
#define DROVER_WIRE_MSGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numeric/optim.h"
#include "numeric/tensor.h"
#include "proto/wire.h"

/* ---- messages ----------------------------------------------------------- */

/* Direction: C = coordinator, N = any node, W = worker or chief, E =
 * evaluator, P = ps, A = an attach client (`drover attach`). */

/* Handshake: the only frames allowed before authentication.
 *  HELLO    server -> client: server_kind 0 coordinator, 1 ps; host and
 *           link (not all zero): a same-host link is offered (conn.h)
 *  AUTH     client -> server: mac over both nonces, under the key of the
 *           identity it claims: who 0 a node (role 0..3, or 4 the
 *           coordinator on a ps link; index), 1 an attach client (role
 *           and index 0; the control or the view key)
 *  AUTH_OK  server -> client: mac proves the server's secret */
#define WIRE_MSG_hello(X)                                                           \
  X(RAW, nonce, WIRE_NONCE_SIZE) X(FLAG, server_kind, "server kind")                  \
  X(RAW, host, WIRE_HOST_ID_SIZE) X(RAW, link, WIRE_LINK_SIZE)
#define WIRE_MSG_auth(X)                                                                  \
  X(RAW, nonce, WIRE_NONCE_SIZE) X(RAW, mac, WIRE_MAC_SIZE) X(ENUM, who, 1, "AUTH who") \
  X(ENUM, role, 4, "AUTH role") X(U32, index)
#define WIRE_MSG_auth_ok(X) X(RAW, mac, WIRE_MAC_SIZE)

/* Control, node <-> coordinator.
 *  REGISTER    N -> C: port is the ps data port (0 otherwise); hostname to
 *              slurm_node and place are what the node got (nodeinfo.h);
 *              rundir_token what it read in <run>/ckpt-token ("" none):
 *              whether the run directory is visible where it runs
 *              (coord_ckpt_route.c)
 *  REGISTERED  C -> N (reply): message is the refusal reason when !ok;
 *              sees_rundir: the token matched. A chief writes its own
 *              summaries only then; else the coordinator writes them from
 *              its RESULTs (coord_summaries.c): one writer either way.
 *              transport (WIRE_TRANSPORT_*): the cluster's, which the node
 *              follows from then on whatever its own DROVER_TRANSPORT says
 *              (its links to the ps nodes are dialled after SPEC; a ps
 *              offers same-host links only when it is not tcp)
 *  SPEC        C -> N: the ps nodes (where workers dial them), sent once
 *              all registered; with ps replicas only each group's primary
 *              is listed (as ps:<group>; `proc` is the index of the ps
 *              process serving it, whose key a worker proves there:
 *              auth.h), and ps_replicated tells workers to keep their
 *              requests across a lost ps link and send them again
 *  HEARTBEAT   both: rss in bytes (0 from the coordinator), cpu_ms the
 *              process CPU time
 *  SHUTDOWN    C -> N: finish the running task, then exit 0
 *  ERROR       any: code is a DRV_E* code; the sender then closes
 *  LOG         N -> C: whole records of the node's log, appended to its
 *              log in the run directory (`drover node --log-forward`: a
 *              node whose output stays on another machine, as on Spark)
 *  LINKS       N -> C: the transport of each connection the node dialled
 *              and has up, besides the coordinator's ("ps:0-1=shm,ps:2=tcp";
 *              "" none), sent when it changes: what the dashboard shows */
#define WIRE_MSG_register(X)                                                          \
  X(ROLE, role) X(U32, index) X(U32, pid) X(STR, host) X(U16, port) X(STR, hostname) \
  X(U32, threads) X(U32, cpus) X(U64, memory) X(STR, gpus) X(STR, slurm_job)          \
  X(STR, slurm_step) X(STR, slurm_node) X(STR, rundir_token) X(STR, place)
#define WIRE_MSG_registered(X)                                                              \
  X(FLAG, ok, "REGISTERED ok") X(STR, message) X(FLAG, sees_rundir, "REGISTERED sees_rundir") \
  X(ENUM, transport, WIRE_TRANSPORT_LAST, "REGISTERED transport")
#define WIRE_MSG_spec(X) \
  X(ITEMS, nodes, spec_node, "SPEC node") X(FLAG, ps_replicated, "SPEC ps_replicated")
/* interval_ms: the coordinator's to its nodes, the interval at which the
 * cluster's heartbeats go (it grows with the node count); a node's: 0. */
#define WIRE_MSG_heartbeat(X) X(U64, seq) X(U64, rss) X(U64, cpu_ms) X(U32, interval_ms)
#define WIRE_MSG_shutdown(X) X(U32, grace_ms)
#define WIRE_MSG_error(X) X(I32, code) X(STR, message)
#define WIRE_MSG_log(X) X(STR, text)
#define WIRE_MSG_links(X) X(STR, links)

/* Training setup, coordinator -> nodes, once per fit.
 *  VAR_INIT  C -> P: row0 is this shard's first row; mode 0 async, 1
 *            sync; replicas (sync) gradients averaged per update, n -
 *            backup workers; target (sync) the fit's updates: past it
 *            pulls are never held and pushes are ignored; value the shard.
 *            Resets the ps's version to 0; reply VAR_INIT_OK (req echoed)
 *  SETUP     C -> W,E: model is an nn spec (nn_spec.c); shuffle: a
 *            worker draws its batches in a seeded order new each epoch,
 *            else in its rows' order (the fit's train.shuffle); per
 *            variable its shards (ps index, rows); x and y this node's
 *            data (worker i's shard, or the eval data); files mode:
 *            recipe (JSON, data_from_recipe) is not empty, x and y have
 *            no rows, and the node reads shard `shard` of `shards`
 *            itself; sparse: x's ids per row when the data has them
 *            (data_sparse_encode's bytes; empty: none); supersede: a
 *            sync fit's new shards at c:scale's barrier: the train steps
 *            sent before it that have not begun computing end at once,
 *            dropped (RESULT dropped), so that none draws from the old
 *            shard past the barrier; reply SETUP_OK */
#define WIRE_MSG_var_init(X)                                                              \
  X(U32, var) X(U64, row0) X(FLAG, mode, "VAR_INIT mode") X(U32, replicas) X(U64, target) \
  X(OPTIM, optim) X(TENSOR, value)
#define WIRE_MSG_var_init_ok(X) X(EMPTY, unused)
#define WIRE_MSG_setup(X)                                                                 \
  X(STR, model) X(STR, loss) X(U64, batch) X(U64, seed) X(FLAG, shuffle, "SETUP shuffle") \
  X(F64, clip_norm) X(ITEMS, vars, setup_var, "SETUP variable") X(TENSOR, x) X(TENSOR, y) \
  X(BYTES, recipe) X(U32, shard) X(U32, shards) X(BYTES, sparse)                        \
  X(FLAG, supersede, "SETUP supersede")
#define WIRE_MSG_setup_ok(X) X(EMPTY, unused)

/* Tasks, coordinator -> worker (a few in flight per worker).
 *  TASK         C -> W: kind WIRE_TASK_*, arg unused by TRAIN_STEP
 *  RESULT       W -> C: status 0 ok; correct -1 when accuracy does not
 *               apply; message the error text when status != 0; dropped
 *               1: no ps applied the step's gradient (sync: late, or past
 *               the last global step), so the step does not count;
 *               grad_norm the gradient's global norm before clipping (a
 *               step with clip_norm), else NaN
 *  EVAL         C -> E: pull the latest parameters, evaluate; metrics:
 *               BINEVAL_* bits (train/bineval.h: 1 auc, 2 logloss), the
 *               evaluator computing them over its whole eval set
 *  EVAL_RESULT  E -> C: auc and logloss NaN unless asked
 *  CALL         C -> W: closure_encode's bytes (a Lua function, its
 *               upvalues and arguments; c:schedule)
 *  CALL_RESULT  W -> C: status 0: data is closure_encode_values' results;
 *               else the error message with its traceback (text) */
#define WIRE_MSG_task(X) X(U64, task) X(U8, kind) X(U64, arg)
#define WIRE_MSG_result(X) \
  X(U64, task) X(I32, status) X(F64, loss) X(I64, correct) X(U64, examples) X(STR, message) \
  X(FLAG, dropped, "RESULT dropped") X(F64, grad_norm)
#define WIRE_MSG_eval(X) X(U64, step) X(U32, metrics)
#define WIRE_MSG_eval_result(X) \
  X(U64, step) X(I32, status) X(F64, loss) X(F64, accuracy) X(U64, examples) X(STR, message) \
  X(F64, auc) X(F64, logloss)
#define WIRE_MSG_call(X) X(U64, task) X(BYTES, closure)

/* Predict (c:predict, coord_predict.c): forward passes spread over the
 * workers, one output row per input row.
 *  PREDICT_MODEL   C -> W: the model of predict number `predict`: its nn
 *                  spec and every parameter's values (variable i is
 *                  parameter i); sent before that predict's batches, and
 *                  again to a worker that registers anew. recipe (files
 *                  mode, not empty): the inputs are that dataset's x,
 *                  which the worker reads itself (data_from_recipe)
 *  PREDICT_ROWS    C -> W: a model with sparse tables (issue 26): rows of
 *                  table `table` (nn_collect_tables' order) the model
 *                  holds, ids[i]'s values rows[i] ([n, dim]); sent after
 *                  PREDICT_MODEL and before the first PREDICT, in frames
 *                  of at most PREDICT_ROWS_MAX bytes. A row not sent has
 *                  its initial values (seed and id), as in process
 *  PREDICT         C -> W: a batch of input rows (a task of the queue):
 *                  x, or in files mode (x without rows) the dataset's
 *                  rows [row0, row0 + rows); sparse: those rows' ids as
 *                  data_sparse_encode lays them out (empty: none, or in
 *                  files mode the worker's own from the recipe)
 *  PREDICT_RESULT  W -> C: the outputs, one row per input row, or status
 *                  != 0 and the error */
#define WIRE_MSG_predict_model(X) \
  X(U64, predict) X(STR, model) X(ITEMS, vars, var_tensor, "PREDICT_MODEL variable") \
  X(BYTES, recipe)
#define WIRE_MSG_predict_rows(X) \
  X(U64, predict) X(U32, table) X(ITEMS, ids, sparse_id, "PREDICT_ROWS id") X(TENSOR, rows)
#define WIRE_MSG_predict(X) \
  X(U64, task) X(U64, predict) X(U64, row0) X(U64, rows) X(TENSOR, x) X(BYTES, sparse)
#define WIRE_MSG_predict_result(X) X(U64, task) X(I32, status) X(TENSOR, y) X(STR, message)
#define WIRE_MSG_call_result(X) X(U64, task) X(I32, status) X(BYTES, data)

/* Data positions, coordinator <-> worker and chief (checkpoints and
 * rollbacks, docs/ARCHITECTURE.md "The checkpoint commit (cluster)").
 *  POSITION     C -> W: where the node's data stood at ps version
 *               at_version: the batches it had drawn and its Dropout
 *               generators just before its first batch computed on values
 *               of that version or later (0: now, between two batches)
 *  POSITION_OK  W -> C (req echoed): status 0, or DRV_ERANGE when that
 *               point is out of its memory (asked again further ahead);
 *               batches since SETUP, the version of that batch's values,
 *               rng: 32 bytes (xoshiro state, little-endian) per Dropout
 *  ROLLBACK     C -> W: drop the jobs in hand, close the ps links (pushes
 *               computed before cannot reach a restored ps on a new one),
 *               and go to `batches` with these generators (rng empty: the
 *               ones SETUP made)
 *  ROLLBACK_OK  W -> C (req echoed): status 0 or a DRV_E* code */
#define WIRE_MSG_position(X) X(U64, at_version)
#define WIRE_MSG_position_ok(X) \
  X(I32, status) X(U64, batches) X(U64, version) X(BYTES, rng) X(STR, message)
#define WIRE_MSG_rollback(X) X(U64, batches) X(BYTES, rng)
#define WIRE_MSG_rollback_ok(X) X(I32, status) X(STR, message)

/* Parameters, worker/evaluator/coordinator <-> ps.
 *  PULL        -> P: sync: the reply waits until the ps's version is >=
 *              min_version (0: any; an async ps never waits)
 *  PULL_REPLY  P ->: version = the ps's updates so far (pushes applied in
 *              async, aggregated updates in sync); per var its shard.
 *              A worker's PULL_REPLY and PUSH carry all it has on that
 *              ps: placement keeps what one ps holds under a frame
 *              (coord_vars.c, check_frames)
 *  PUSH        -> P: version of the values the gradients were computed
 *              on; per var the shard's gradient, same shape. Async:
 *              applied on arrival; sync: summed into that version's
 *              update, or dropped when it is already applied (late)
 *  PUSH_ID     W -> P: the next PUSH on this connection is push `seq`
 *              of `client` (ps replicas: a ps answers a seq at or below
 *              the last it took from that client without applying it
 *              again, a push sent again after a failover)
 *  PUSH_OK     P ->: step the ps's version after this push; applied 0:
 *              dropped as late or past the target */
/*  LR_SCALE    C -> P: a plateau schedule reduced the rate: every shard's
 *              and plateau table's rate is the schedule's times `scale`
 *              (until the next VAR_INIT) from now on, or (sync) from the
 *              update after global step `after` when the ps is not there
 *              yet: every ps of a sync fit changes rate at the same step;
 *              no reply; a primary forwards it to its replica (REPL),
 *              whose REPL_SYNC shards carry lr_scale too */
#define WIRE_MSG_lr_scale(X) X(F64, scale) X(U64, after)
/*  SYNC_STOP   C -> P: a sync fit stops early (docs/ARCHITECTURE.md,
 *              "Early stopping"). target 0: cap, the fit's last global
 *              step becomes at most the one being summed (version + 1),
 *              whose gradients are still summed once reached; else the
 *              last global step becomes `target` (never below the
 *              version). replicas > 0: no stop (target ignored): c:scale
 *              during the fit, the gradients per update become `replicas`
 *              from the update being summed (the coordinator sends it at a
 *              global-step boundary; coord_scale_fit.c), and the workers of
 *              index leave_from and up (0: none) have left. hold_at > 0:
 *              c:scale's barrier (ps_push.c): trainers' pulls of version
 *              max(hold_at, the version, past any version pulled) wait
 *              for the next replicas (the quorum before it when replicas
 *              > 0 too: a worker lost meanwhile), leave_from leaving then.
 *              Replicated to a ps replica; no reply (a PULL behind it
 *              reads the version) */
#define WIRE_MSG_sync_stop(X) X(U64, target) X(U32, replicas) X(U64, hold_at) X(U32, leave_from)
/* Sparse tables (issue 26; docs/sparse.md), sharded by row: ps k of nps
 * holds the ids with sptable_owner(id, nps) == k.
 *  SPARSE_INIT        C -> P: table `table` of `rows` declared rows of
 *                     dim floats, initialised from (seed, id) with std
 *                     (sptable.h); this ps is `shard` of `shards`; mode,
 *                     replicas, target and optim as VAR_INIT's. Reply
 *                     SPARSE_INIT_OK (req echoed)
 *  SPARSE_PULL        -> P: ids sorted, unique, below rows and owned by
 *                     this ps (sptable_check_ids); sync: waits as PULL
 *  SPARSE_PULL_REPLY  P ->: the rows of those ids in order, [n, dim],
 *                     (a row not held yet: its initial values; rows are
 *                     created by their first push)
 *  SPARSE_PUSH        -> P: version as PUSH's; grads [n, dim], row i the
 *                     gradient of ids[i]; the ps applies the per-row
 *                     optimizer (async) or sums it into the step (sync) */
#define WIRE_MSG_sparse_init(X)                                                           \
  X(U32, table) X(U64, rows) X(U32, dim) X(F64, std) X(U64, seed) X(U32, shard)           \
  X(U32, shards) X(FLAG, mode, "SPARSE_INIT mode") X(U32, replicas) X(U64, target)        \
  X(OPTIM, optim)
#define WIRE_MSG_sparse_init_ok(X) X(EMPTY, unused)
#define WIRE_MSG_sparse_pull(X) \
  X(U32, table) X(U64, min_version) X(ITEMS, ids, sparse_id, "SPARSE_PULL id")
#define WIRE_MSG_sparse_pull_reply(X) X(U32, table) X(U64, version) X(TENSOR, rows)
#define WIRE_MSG_sparse_push(X) \
  X(U32, table) X(U64, version) X(ITEMS, ids, sparse_id, "SPARSE_PUSH id") X(TENSOR, grads)
/*  SPARSE_DUMP        C -> P: every row of `table` this ps holds
 *  SPARSE_DUMP_REPLY  P -> C: their ids (in the order rows were created)
 *                     and values [n, dim]: the coordinator's copy of the
 *                     trained table, for its model (c:save, evals) */
/*  SPARSE_STATS       P, W -> C: per table, with a heartbeat when it
 *                     changed: a ps its rows held (touched, bytes 0); a
 *                     worker its last step's unique rows and the bytes of
 *                     its SPARSE_* frames (held 0). The dashboard's and
 *                     c:tables()'s figures. */
#define WIRE_MSG_sparse_stats(X) X(ITEMS, tables, table_stat, "SPARSE_STATS table")
#define WIRE_ITEM_table_stat(X) X(U32, table) X(U64, held) X(U64, touched) X(U64, bytes)
/*  SPARSE_LOAD        C -> P: after SPARSE_INIT, rows the coordinator's
 *                     model already holds (a second fit, a loaded model):
 *                     ids sorted, unique, this ps's; their values [n, dim]
 *                     (optimizer slots start afresh, as VAR_INIT's do).
 *                     Reply SPARSE_INIT_OK (req echoed) */
#define WIRE_MSG_sparse_load(X) \
  X(U32, table) X(ITEMS, ids, sparse_id, "SPARSE_LOAD id") X(TENSOR, rows)
#define WIRE_MSG_sparse_dump(X) X(U32, table)
#define WIRE_MSG_sparse_dump_reply(X) \
  X(U32, table) X(ITEMS, ids, sparse_id, "SPARSE_DUMP_REPLY id") X(TENSOR, rows)
#define WIRE_MSG_pull(X) X(U64, min_version) X(ITEMS, vars, var_id, "PULL variable")
#define WIRE_MSG_pull_reply(X) X(U64, version) X(ITEMS, vars, var_tensor, "PULL_REPLY variable")
#define WIRE_MSG_push(X) X(U64, version) X(ITEMS, vars, var_tensor, "PUSH variable")
#define WIRE_MSG_push_ok(X) X(U64, step) X(FLAG, applied, "PUSH_OK applied")
#define WIRE_MSG_push_id(X) X(U32, client) X(U64, seq)

/* Checkpoints and failover, coordinator <-> ps (docs/ARCHITECTURE.md,
 * "The checkpoint commit (cluster)").
 *  CHECKPOINT     C -> P: snapshot every shard (values, optimizer slots,
 *                 update counts) and write it to `path` as safetensors,
 *                 tensors named as `names` says (PyTorch names). Sync
 *                 (at_version > 0): the snapshot is taken when the ps's
 *                 version is at_version (held until then; at once when it
 *                 is there already); async (0): at once. The copy is
 *                 taken on the loop, the write runs on a thread
 *  CHECKPOINT_OK  P -> C (req echoed): status 0 or a DRV_E* code, the
 *                 version snapshotted, the file's bytes, the failure, the
 *                 file's SHA-256 (hex, hashed as it was written)
 *  RESTORE        C -> P: after VAR_INIT of every shard: load values,
 *                 slots and update counts from `path` (a CHECKPOINT's
 *                 file, tensors named by `names`); the version becomes
 *                 `version` (sync); held PULLs from before are answered
 *  RESTORE_OK     P -> C (req echoed): status 0 or a DRV_E* code
 * CHECKPOINT `to` and RESTORE `from` (WIRE_CKPT_*): PATH, the ps writes or
 * reads `path` itself; COORD (the run directory is not visible where the
 * ps runs), the file's bytes travel over this connection instead, P -> C
 * before CHECKPOINT_OK, C -> P before RESTORE (ps_ckpt_xfer.c,
 * coord_ckpt_xfer.c):
 *  CKPT_FILE      the file `path` follows: `size` bytes
 *  CKPT_PIECE     its bytes from `offset`, in order, at most
 *                 DROVER_REPL_PIECE (4 MiB by default) each
 *  CKPT_FILE_END  all of it came: `size` bytes in `pieces` pieces, digest
 *                 `sha256` (manifest.h's form: what CHECKPOINT_OK
 *                 reports); the receiver checks all three before it takes
 *                 it. The digest comes last so that a sender can hash the
 *                 bytes as it sends them: the first piece leaves before
 *                 the file is whole anywhere */
#define WIRE_MSG_checkpoint(X) \
  X(U64, at_version) X(STR, path) X(ITEMS, names, var_name, "CHECKPOINT variable") \
  X(ENUM, to, WIRE_CKPT_LAST, "CHECKPOINT to")
#define WIRE_MSG_checkpoint_ok(X) \
  X(I32, status) X(U64, version) X(U64, bytes) X(STR, message) X(STR, sha256)
#define WIRE_MSG_restore(X) \
  X(U64, version) X(STR, path) X(ITEMS, names, var_name, "RESTORE variable") \
  X(ENUM, from, WIRE_CKPT_LAST, "RESTORE from")
#define WIRE_MSG_ckpt_file(X) X(U64, size) X(STR, path)
#define WIRE_MSG_ckpt_piece(X) X(U64, offset) X(BYTES, data)
#define WIRE_MSG_ckpt_file_end(X) X(U64, size) X(U32, pieces) X(STR, sha256)
#define WIRE_MSG_restore_ok(X) X(I32, status) X(STR, message)

/* ps replicas (docs/ARCHITECTURE.md, "ps replicas").
 *  PS_ROLE     C -> P (control): role WIRE_PS_*: ALONE serves without a
 *              replica (a promotion); PRIMARY replicates to the replica
 *              at host:port, ps:`ps` (whose key it proves there), presenting token; REPLICA takes replication
 *              frames only from a connection presenting token, serves
 *              nothing else until promoted
 *  PS_ROLE_OK  P -> C (control): a replica is ready for its primary
 *              (synced 0: the coordinator then sends the primary its
 *              PS_ROLE), then has loaded its state (synced 1, status 0)
 *              at `version`
 *  REPL_SYNC   P -> R (data): the first frame of a replication
 *              connection and its proof (token): the primary's state but
 *              its shards (sync mode, versions, a SYNC_STOP cap, the
 *              clients' last push) and how many shards follow. Then, per
 *              shard, REPL_SHARD and its floats in REPL_PIECEs, then
 *              REPL_SYNC_END: the state is streamed in frames of a
 *              bounded size (ps_repl_sync.c, DROVER_REPL_PIECE), whatever the
 *              shards weigh, and the replica takes it only at the end
 *  REPL_SHARD  P -> R: the next shard's description (no floats): its
 *              variable, rows, update count, rate factor, gradients
 *              summed (acc_n), optimizer and shape
 *  REPL_PIECE  P -> R: floats of the last REPL_SHARD's shard: part
 *              WIRE_PIECE_VALUE, _ACC (the gradient sum, when acc_n) or
 *              _SLOT0 + j (optimizer slot j), from element `offset`; each
 *              part's pieces come in order and cover it exactly
 *  REPL_TABLE  P -> R: after the shards, per sparse table the ps holds
 *              a shard of (issue 26): its SPARSE_INIT fields, its
 *              plateau factor (LR_SCALE's; 0: none), the rows it holds
 *              (`held`) and, sync, the rows summed into the step being
 *              aggregated (`acc`); their REPL_ROWS follow
 *  REPL_ROWS   P -> R: rows of the last REPL_TABLE's table, in the
 *              table's order, held rows first: acc 0, their values [n,
 *              dim], optimizer slots (slot j's rows [n, dim] after slot
 *              j - 1's) and update counts (i64); acc 1, summed gradient
 *              rows (values only). At most DROVER_REPL_PIECE bytes a
 *              frame (one row at least)
 *  REPL_SYNC_END P -> R: the stream is complete: `shards` shards of
 *              `bytes` float bytes in all and `tables` tables; the
 *              replica switches to the new state now, and only now
 *  REPL        P -> R: frame `type` (VAR_INIT, PUSH, RESTORE, SYNC_STOP, LR_SCALE,
 *              SPARSE_INIT, SPARSE_LOAD; a SPARSE_PUSH right before its
 *              sender's PUSH, which it goes with) as the primary received it (a PUSH with its PUSH_ID, 0 0: none); the replica applies it
 *              as the primary will, then answers REPL_OK {seq}; the
 *              primary applies it and answers its client only after that
 *              REPL_OK */
#define WIRE_MSG_ps_role(X) \
  X(ENUM, role, WIRE_PS_REPLICA, "PS_ROLE role") X(U64, token) X(STR, host) X(U16, port) \
      X(U32, ps)
#define WIRE_MSG_ps_role_ok(X) \
  X(I32, status) X(FLAG, synced, "PS_ROLE_OK synced") X(U64, version) X(STR, message)
#define WIRE_MSG_repl_sync(X)                                                                \
  X(U64, token) X(FLAG, sync, "REPL_SYNC sync") X(U32, replicas) X(U64, target)               \
  X(U64, version) X(U64, dropped) X(U64, pushes) X(U32, agg) X(FLAG, restored, "REPL_SYNC restored") \
  X(FLAG, capped, "REPL_SYNC capped") X(U32, shards) X(ITEMS, clients, repl_client, "REPL_SYNC client")
#define WIRE_MSG_repl_shard(X)                                                                \
  X(U32, var) X(U64, row0) X(I64, updates) X(F64, lr_scale) X(U32, acc_n) X(OPTIM, optim)     \
  X(SHAPE, shape)
#define WIRE_MSG_repl_piece(X) \
  X(ENUM, part, WIRE_PIECE_LAST, "REPL_PIECE part") X(U64, offset) X(BYTES, data)
#define WIRE_MSG_repl_sync_end(X) X(U32, shards) X(U64, bytes) X(U32, tables)
#define WIRE_MSG_repl_table(X)                                                            \
  X(U32, table) X(U64, rows) X(U32, dim) X(F64, std) X(U64, seed) X(U32, shard)           \
  X(U32, shards) X(FLAG, mode, "REPL_TABLE mode") X(OPTIM, optim) X(F64, lr_scale)         \
  X(U64, held) X(U64, acc)
#define WIRE_MSG_repl_rows(X)                                                             \
  X(FLAG, acc, "REPL_ROWS acc") X(ITEMS, ids, sparse_id, "REPL_ROWS id") X(BYTES, values) \
  X(BYTES, slots) X(BYTES, counts)
#define WIRE_MSG_repl(X) \
  X(U64, seq) X(U8, type) X(U32, client) X(U64, push_seq) X(BYTES, frame)
#define WIRE_MSG_repl_ok(X) X(U64, seq)

/* Attach: a dashboard client on the coordinator's control port; it
 * authenticates like a node, then sends ATTACH where a node sends REGISTER.
 *  ATTACH    A -> C: control 1: may send COMMAND; hz snapshots per second
 *            wanted (at most 10 come)
 *  SNAPSHOT  C -> A: the run as runview.h has it (runsnap.c): header
 *            (tensorboard: the URL of the TensorBoard serving the run, ""),
 *            queue counts, nodes (log "": run_dir/logs/ROLE-INDEX.log, a
 *            relative path is under run_dir; got "": unchanged; links:
 *            the transport of each of its connections, "coord=shm,ps:0=shm",
 *            "-" none, "" unchanged), series
 *            (reset 1: replace the client's copy, 0: append) and events.
 *            feed_per_sec: batches per second a feed delivers (< 0: no
 *            feed; a node's backlog is then its fed batches not yet
 *            trained). Header, queue and nodes are whole in every frame; series and
 *            events carry only what that client has not received yet
 *  COMMAND   A -> C: kind WIRE_COMMAND_*: a line of Lua, stop the node
 *            named in text ("worker:1"), the tail of that node's log, or
 *            what stopping it would do ("promote replica ps:2: ..."; the
 *            last two also for read-only clients), or stop the run (text
 *            "": a checkpoint first; "now"); reply COMMAND_REPLY
 *  COMMAND_REPLY  C -> A (req echoed): status 0 or a DRV_E* code */
#define WIRE_MSG_attach(X) X(FLAG, control, "ATTACH control") X(POS, hz, "ATTACH hz")
#define WIRE_MSG_snapshot(X)                                                              \
  X(STR, run_dir) X(STR, launcher) X(STR, tensorboard) X(STR, state) X(STR, mode) X(F64, uptime) X(I64, step) \
  X(I64, total_steps) X(F64, examples_per_sec) X(F64, eta) X(F64, feed_per_sec)           \
  X(U32, attach_clients)                                                                  \
  X(I64, queued) X(I64, capacity) X(I64, running) X(I64, done) X(I64, failed)             \
  X(I64, retried) X(I64, cancelled) X(ITEMS, nodes, snap_node, "SNAPSHOT node")           \
  X(ITEMS, series, snap_series, "SNAPSHOT series")                                        \
  X(ITEMS, events, snap_event, "SNAPSHOT event") X(STR, tables)
#define WIRE_MSG_command(X) X(ENUM, kind, WIRE_COMMAND_LAST, "COMMAND kind") X(STR, text)
#define WIRE_MSG_command_reply(X) X(I32, status) X(STR, text)

/* Feed: batches streamed to the workers' input queues with credit-based
 * backpressure (docs/ARCHITECTURE.md, "Feed mode"; F = an external
 * feeder, e.g. clients/python).
 *
 * Coordinator -> worker (train = { feed = SOURCE }, or c:feed):
 *  FEED_BATCH  C -> W: one batch, a task of the queue: task is its id
 *              (the RESULT echoes it), seq its number in the feed (from
 *              1), epoch its pass over SOURCE (from 1), mode
 *              WIRE_FEED_TRAIN (the worker trains it as one train step;
 *              RESULT once its update is applied) or WIRE_FEED_QUEUE
 *              (held for w:next_batch; RESULT once taken). x is [n, ...],
 *              y [n] or [n, k] (n >= 1); sparse: the batch's ids, its n
 *              rows of CSR in data_sparse_encode's layout
 *              (data_sparse_batch_encode; empty: none). A malformed one
 *              is a protocol error of its connection
 *  RESULT      W -> C: as for TASK; it returns the batch's credit. A
 *              worker holds at most a few batches (the queue's per-node
 *              limit), so a slow worker gets fewer; a lost worker's
 *              batches without a RESULT go to another worker, each
 *              trained once
 *  FEED_END    C -> W: no batch will follow (status 0; batches = the
 *              batches sent to this worker); w:should_stop() turns true
 *              once its queue is empty
 *  FEED_END    W -> C: w:terminate() in a scheduled function: the feed
 *              stops (no more batches to anyone); the worker answered its
 *              queued batches with RESULTs (examples 0: not trained)
 *
 * An external feeder (train = { feed = "external" }) authenticates on the
 * coordinator's control port as an attach client does (HELLO, AUTH,
 * AUTH_OK) and sends FEED_OPEN where an attach client sends ATTACH:
 *  FEED_OPEN    F -> C: name (for events.log: "feeder NAME"), window the
 *               batches it wants in flight at most (0: the coordinator's
 *               choice), key "" or the identity of what it feeds (a Spark
 *               partition of one pass): a feeder that opens with the key
 *               of an earlier one of this fit (a retried task) carries on
 *               from it: the first FEED_CREDIT's sent says how many of its
 *               batches the coordinator already took, and the feeder skips
 *               that many (each batch trained once); an earlier feeder of
 *               that key still connected is closed (the newest wins)
 *  FEED_CREDIT  C -> F: credits: the feeder may send that many more
 *               FEED_BATCHes. The first comes when a fit with feed =
 *               "external" runs (credits 0 meanwhile is legal); later ones
 *               as its batches are trained. sent: batches of this feeder
 *               (of its key) accepted so far; trained: of those, trained;
 *               epochs: the running fit's train.epochs (the passes it asks
 *               of its feeders), 0 while no fit with feed = "external" runs
 *  FEED_BATCH   F -> C: task 0, seq the feeder's running number from 1,
 *               epoch 0 or the feeder's own, mode WIRE_FEED_TRAIN; a batch
 *               beyond the credit granted is a protocol error
 *  FEED_END     F -> C: no more batches from this feeder (status 0), or
 *               it gives up (status != 0, message why: the fit fails)
 *  FEED_END     C -> F: the feeder's batches are over: status 0 all
 *               trained, else the DRV_E* code and why (the fit failed or
 *               ended); batches = its batches trained. A feeder that sent
 *               no batch is answered when the fit's feed is over (every
 *               feeder ended, every batch trained). Then the coordinator
 *               closes the connection. A feeder may also leave once the
 *               `sent` of a FEED_CREDIT covers all its batches: they are
 *               the coordinator's and are trained once
 * The fit ends once every feeder that opened has ended and its batches
 * are trained (at least one must open within feed_timeout).
 *
 * Direct feeding (docs/ARCHITECTURE.md, "Direct feeders"): a feeder whose
 * FEED_OPEN says direct 1 and whose host runs a worker of the fit sends
 * its batches to that worker, not through the coordinator; the
 * coordinator keeps the accounting.
 *  FEED_OPEN.host   the feeder's host name (gethostname), matched with
 *                   the workers' (REGISTER.hostname); direct: it can feed
 *                   a worker directly
 *  FEED_LISTEN      C -> W: listen for direct feeders proving `key` (the
 *                   feed key, HMAC-SHA-256(control key, "drover feed"),
 *                   which the feeder derives from the control key it
 *                   holds); their connections may send FEED_BATCH only
 *  FEED_LISTEN_OK   W -> C: status 0 and the port, or why not
 *  FEED_ROUTE       C -> F: before its first credit: port > 0, send the
 *                   batches to node (its name) at host:port, authenticated
 *                   with the feed key, task = slot in each FEED_BATCH;
 *                   port 0 (later): that worker is gone, send every batch
 *                   not acknowledged yet to the coordinator again
 *  FEED_BATCH       F -> W: task the slot, seq the feeder's running number
 *                   (increasing), mode TRAIN; the worker trains it as one
 *                   train step and acknowledges it to the coordinator
 *  FEED_ACK         W -> C: slot, seq and the train step's RESULT fields,
 *                   in the order the batches came (RESULTs keep arrival
 *                   order); the coordinator counts it, and FEED_CREDIT
 *                   (credits 1, acked seq) tells the feeder
 *  FEED_CREDIT.acked  the direct batch this credit returns for (0: none)
 *  FEED_DIRECT_END  W -> C: slot's connection closed; received is the last
 *                   seq it took (its batches still train and are acked)
 *  FEED_DIRECT_CLOSE  C -> W: close slot's connection (a newer feeder
 *                   took its key), answered by FEED_DIRECT_END */
#define WIRE_MSG_feed_route(X) X(STR, node) X(STR, host) X(U16, port) X(U32, slot)
#define WIRE_MSG_feed_listen(X) X(RAW, key, WIRE_MAC_SIZE)
#define WIRE_MSG_feed_listen_ok(X) X(I32, status) X(U16, port) X(STR, message)
#define WIRE_MSG_feed_ack(X)                                                          \
  X(U32, slot) X(U64, seq) X(I32, status) X(F64, loss) X(I64, correct) X(U64, examples) \
  X(STR, message) X(F64, grad_norm)
#define WIRE_MSG_feed_direct_end(X) X(U32, slot) X(U64, received)
#define WIRE_MSG_feed_direct_close(X) X(U32, slot)
#define WIRE_MSG_feed_open(X) \
  X(STR, name) X(U32, window) X(STR, key) X(STR, host) X(FLAG, direct, "FEED_OPEN direct")
#define WIRE_MSG_feed_credit(X) \
  X(U32, credits) X(U64, sent) X(U64, trained) X(U32, epochs) X(U64, acked)
#define WIRE_MSG_feed_batch(X)                                              \
  X(U64, task) X(U64, seq) X(U32, epoch) X(ENUM, mode, WIRE_FEED_LAST, "FEED_BATCH mode") \
  X(TENSOR, x) X(TENSOR, y) X(BYTES, sparse)
#define WIRE_MSG_feed_end(X) X(I32, status) X(U64, batches) X(STR, message)

/* Predict from a client (coord_serve.c; e.g. clients/python Run.predict):
 * a client with the control key asks the model the script serves
 * (c:serve { predict = exp }) for outputs. It authenticates on the
 * coordinator's control port as an attach client does and sends
 * PREDICT_OPEN where an attach client sends ATTACH:
 *  PREDICT_OPEN     P -> C: name (for events.log: "predictor NAME")
 *  PREDICT_REPLY    C -> P: req 0 answers PREDICT_OPEN: status 0 the
 *                   client may send requests; else the DRV_E* code and why
 *                   (a view key cannot predict), then the coordinator
 *                   closes the connection
 *  PREDICT_REQUEST  P -> C: req the client's running number from 1; x
 *                   [n, ...] (n >= 1) the input rows; batch the rows per
 *                   worker batch (0: the served batch); sparse: x's ids
 *                   for a model with sparse tables, its n rows of CSR in
 *                   data_sparse_encode's layout (data_sparse_batch_encode;
 *                   empty: none; malformed ones close the connection). One
 *                   request in flight per client (the next waits for its
 *                   reply)
 *  PREDICT_REPLY    C -> P: req echoed; status 0 and y [n, k], one output
 *                   row per input row in input order (a worker lost
 *                   meanwhile has its batches run again, each row once);
 *                   else the DRV_E* code and why, with y [0]: nothing is
 *                   served now (the script is not inside c:serve), the
 *                   input does not fit the model, the answer would not fit
 *                   a frame, a model with tables asked without ids or
 *                   with ids it cannot read. A refused request leaves the
 *                   connection open */
#define WIRE_MSG_predict_open(X) X(STR, name)
#define WIRE_MSG_predict_request(X) X(U64, req) X(U64, batch) X(TENSOR, x) X(BYTES, sparse)
#define WIRE_MSG_predict_reply(X) X(U64, req) X(I32, status) X(TENSOR, y) X(STR, message)

/* ---- repeated items ----------------------------------------------------- */

#define WIRE_ITEM_spec_node(X) X(ROLE, role) X(U32, index) X(STR, host) X(U16, port) X(U32, proc)
#define WIRE_ITEM_setup_var(X) \
  X(STR, name) X(SHAPE, shape) X(ITEMS, shards, setup_shard, "SETUP shard")
#define WIRE_ITEM_setup_shard(X) X(U32, ps) X(U64, row0) X(U64, rows)
#define WIRE_ITEM_var_id(X) X(U32, var)
#define WIRE_ITEM_sparse_id(X) X(U64, id)
#define WIRE_ITEM_var_name(X) X(U32, var) X(STR, name)
#define WIRE_ITEM_var_tensor(X) X(U32, var) X(TENSOR, value)
#define WIRE_ITEM_repl_client(X) X(U32, client) X(U64, seq)
#define WIRE_ITEM_snap_node(X)                                                          \
  X(ROLE, role) X(U32, index) X(U32, pid) X(U32, restarts) X(U32, inflight) X(I64, steps) \
  X(I64, backlog) X(U64, rss) X(F64, examples_per_sec) X(F64, cpu_pct)                    \
  X(F64, heartbeat_age) X(STR, state) X(STR, host) X(STR, log) X(STR, got)             \
  X(STR, where) X(STR, links)
#define WIRE_ITEM_snap_series(X) \
  X(STR, tag) X(FLAG, reset, "SNAPSHOT series reset") X(ITEMS, points, snap_point, "SNAPSHOT point")
#define WIRE_ITEM_snap_point(X) X(F64, step) X(F64, wall) X(F64, value)
#define WIRE_ITEM_snap_event(X) X(F64, wall) X(STR, text)

/* Every item list, innermost first (an item's items come before it). */
#define WIRE_ITEM_MAP(XX) \
  XX(spec_node) XX(setup_shard) XX(setup_var) XX(var_id) XX(sparse_id) XX(var_name) XX(var_tensor) XX(snap_point) \
  XX(repl_client) XX(table_stat) \
  XX(snap_node) XX(snap_series) XX(snap_event)

/* ---- views -------------------------------------------------------------- */

typedef struct wire_bytes {
  const uint8_t *p; /* borrowed */
  uint32_t len;
} wire_bytes;

/* A tensor (or SHAPE) field. Encoding: t when set (any strides); else
 * ndim and shape[] with data: prod(shape) little-endian float32s, or NULL
 * to write the header alone (the caller appends the floats; ps.c lays
 * them out aligned). Decoded: ndim, shape and data (borrowed, unaligned:
 * memcpy it or use wire_tensor_to). SHAPE fields use ndim and shape. */
typedef struct wire_tensor {
  int ndim;
  int64_t shape[TENSOR_MAXDIM];
  const void *data;
  const tensor *t;
} wire_tensor;

/* A list of items. Encoding: n items, each written by put(w, ud, i) with
 * wire_put_item_<item>, for i = 0 .. n-1 in order; when put is NULL, the len bytes at p (a decoded
 * list written back). Decoded: n and the items' bytes (p, len; borrowed,
 * already validated): read them in order with wire_items_reader and
 * wire_get_item_<item>. */
typedef struct wire_items {
  uint32_t n;
  const uint8_t *p;
  size_t len;
  void (*put)(wire_wr *w, void *ud, uint32_t i);
  void *ud;
} wire_items;

/* A reader over a decoded list's items. */
wire_rd wire_items_reader(const wire_items *it);

/* Copies a decoded tensor's floats into dst (its element count must be
 * the view's). */
void wire_tensor_to(const wire_tensor *v, float *dst);
/* The element count of a decoded tensor view. */
int64_t wire_tensor_numel(const wire_tensor *v);

/* ---- the generated API -------------------------------------------------- */

#define WIRE_MSGS_FIELD_(kind, ...) WIRE_MSGS_F_##kind(__VA_ARGS__)
#define WIRE_MSGS_F_U8(f) uint8_t f;
#define WIRE_MSGS_F_U16(f) uint16_t f;
#define WIRE_MSGS_F_U32(f) uint32_t f;
#define WIRE_MSGS_F_U64(f) uint64_t f;
#define WIRE_MSGS_F_I32(f) int32_t f;
#define WIRE_MSGS_F_I64(f) int64_t f;
#define WIRE_MSGS_F_F64(f) double f;
#define WIRE_MSGS_F_FLAG(f, what) bool f;
#define WIRE_MSGS_F_ROLE(f) uint8_t f;
#define WIRE_MSGS_F_ENUM(f, max, what) uint8_t f;
#define WIRE_MSGS_F_POS(f, what) double f;
#define WIRE_MSGS_F_RAW(f, size) const uint8_t *f;
#define WIRE_MSGS_F_STR(f) wire_str f;
#define WIRE_MSGS_F_BYTES(f) wire_bytes f;
#define WIRE_MSGS_F_SHAPE(f) wire_tensor f;
#define WIRE_MSGS_F_TENSOR(f) wire_tensor f;
#define WIRE_MSGS_F_OPTIM(f) optim_cfg f;
#define WIRE_MSGS_F_ITEMS(f, item, what) wire_items f;
#define WIRE_MSGS_F_EMPTY(f) char f;

/* Per message <name>:
 *   wire_msg_<name>     the struct
 *   wire_put_<name>(w, m)       appends m's payload to w (wire_wr_init'ed;
 *                               the caller finishes and sends the frame)
 *   wire_get_<name>(p, n, m)    decodes and checks a whole payload; 0 or
 *                               DRV_EPARSE ("SPEC: ...") with the reason
 * Per item <name>:
 *   wire_item_<name>, wire_put_item_<name>(w, it),
 *   wire_get_item_<name>(r, it)   reads the next item of a list reader */
#define XX(num, NAME, name, pre_auth, max, from)                                \
  typedef struct wire_msg_##name {                                              \
    WIRE_MSG_##name(WIRE_MSGS_FIELD_)                                           \
  } wire_msg_##name;                                                            \
  void wire_put_##name(wire_wr *w, const wire_msg_##name *m);                   \
  int wire_get_##name(const uint8_t *p, size_t n, wire_msg_##name *m);
WIRE_TYPE_MAP(XX)
#undef XX

#define XX(name)                                                    \
  typedef struct wire_item_##name {                                 \
    WIRE_ITEM_##name(WIRE_MSGS_FIELD_)                              \
  } wire_item_##name;                                               \
  void wire_put_item_##name(wire_wr *w, const wire_item_##name *m); \
  void wire_get_item_##name(wire_rd *r, wire_item_##name *m);
WIRE_ITEM_MAP(XX)
#undef XX

/* Frames read in place (conn.h, conn_set_in_place): a PUSH or PULL_REPLY
 * payload of `len` bytes at src, memory a peer may rewrite at any moment,
 * copied into dst except the float bytes of its tensors. Each field is
 * copied before it is read, and every length that decides what comes next
 * is read from dst, so the layout dst holds is the one checked, whatever
 * src becomes; dst then validates as the payload would (its float bytes
 * are left as they were). 0, or DRV_EPARSE when the layout does not walk
 * to exactly len bytes (the caller then copies it whole and validates
 * that), DRV_EINVAL for another type. */
int wire_copy_tensor_meta(uint8_t type, uint8_t *dst, const uint8_t *src, size_t len);

/* Sample frames: wire_sample writes a whole valid frame of `type` (every
 * field filled from `variant`: lists of 2, 1 or 0 items, strings of
 * several lengths, a 2x3 tensor) into w, which it initialises; on success
 * the caller owns w->buf (free with wire_wr_free). 0, or DRV_EINVAL for an
 * unknown type, or the writer's error. */
#define WIRE_SAMPLE_VARIANTS 3
int wire_sample(uint8_t type, unsigned variant, wire_wr *w);

#endif
