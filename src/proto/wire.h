/* wire.h - drover's framed binary protocol: headers, message types,
 * payload encoding and validation.
 *
 * Every message is one frame: a 16-byte little-endian header followed by
 * `len` payload bytes.
 *
 *   offset size field
 *   0      4    magic    "DRV1" (0x31565244 read as little-endian u32)
 *   4      1    version  WIRE_VERSION
 *   5      1    type     a wire_type below
 *   6      2    flags    WIRE_F_* (0 unless stated)
 *   8      4    req      request id: a reply carries its request's id
 *   12     4    len      payload length, <= the receiver's maximum
 *
 * Payloads are sequences of fields, little-endian, without padding:
 *   u8 u16 u32 u64 i32 f64    fixed-size integers and doubles
 *   str     u32 length + that many bytes (no NUL; at most WIRE_MAX_STR)
 *   bytes   u32 length + bytes (at most the frame)
 *   tensor  u8 ndim (1..4), ndim x u64 dims, then prod(dims) float32 raw
 *           (little-endian IEEE; the element count is checked against the
 *           bytes that remain, overflow-safe)
 * Each message's layout and meaning is written down once, as a field list
 * in wire_msgs.h, which generates its struct, encoder, decoder, limits,
 * validation and sample frames. Every field read goes through a wire_rd
 * that checks bounds and remembers the first failure, so a decoder reads
 * its fields straight through and checks once at the end (and that no
 * bytes are left over).
 *
 * A frame that fails validation (bad magic or version, unknown type, a
 * length over the maximum or outside the type's limits, a malformed
 * payload) is a protocol error: the connection that sent it is closed
 * with a logged reason; the process goes on.
 */
#ifndef DROVER_WIRE_H
#define DROVER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "numeric/optim.h"
#include "numeric/tensor.h"

#define WIRE_MAGIC 0x31565244u /* "DRV1" */
#define WIRE_VERSION 1
#define WIRE_HEADER_SIZE 16
#define WIRE_MAX_STR 4096
#define WIRE_DEFAULT_MAX_FRAME (256u << 20) /* 256 MiB: a dataset shard fits */
#define WIRE_NONCE_SIZE 32
#define WIRE_MAC_SIZE 32
/* HELLO's same-host offer (conn.h): the server's boot id and network
 * namespace, and the token naming its Unix socket; all zero: no offer. */
#define WIRE_HOST_ID_SIZE 24
#define WIRE_LINK_SIZE 16

/* Who may send a type to a server once authenticated: a peer as the
 * server tells it apart, by the key it proved (auth.h) and how far its
 * conversation got. XX(NAME, "what"): `what` names it in the server's log
 * when it sends a type it may not ("refused PUSH from 10.0.0.7:4711 (a
 * node before REGISTER)"). A server takes from each peer exactly the
 * types whose `from` column below names it (conn_accept: coord_keys.c,
 * ps_accept.c), each up to its largest payload; a frame of any other type
 * closes that connection at its header. */
#define WIRE_PEER_MAP(XX)                                                          \
  /* at the coordinator */                                                         \
  XX(NEW_NODE, "a node before REGISTER")                                           \
  XX(NEW_CONTROL, "a control client before ATTACH, FEED_OPEN or PREDICT_OPEN")     \
  XX(NEW_VIEW, "a view client before ATTACH")                                      \
  XX(PS, "a ps")                           /* registered */                        \
  XX(TRAINER, "a registered node")         /* a worker, chief or evaluator */      \
  XX(ATTACH, "an attach client")           /* after ATTACH */                      \
  XX(FEEDER, "an external feeder")         /* after FEED_OPEN (control key) */     \
  XX(PREDICTOR, "a predict client")        /* after PREDICT_OPEN (control key) */  \
  /* at a ps (its data port) */                                                    \
  XX(PS_COORD, "the coordinator")                                                  \
  XX(PS_TRAINER, "a worker, chief or evaluator")                                   \
  XX(PS_PRIMARY, "another ps, a primary")  /* ps_repl.c */                         \
  XX(PS_OTHER, "a node that does not pull, push or replicate") /* any other key */ \
  /* at a worker (its direct-feeder port, worker_direct.c) */                      \
  XX(DIRECT_FEEDER, "a direct feeder")

typedef enum wire_peer {
#define XX(NAME, what) WIRE_PEER_##NAME,
  WIRE_PEER_MAP(XX)
#undef XX
  WIRE_PEER_COUNT
} wire_peer;
/* A `from` column's bit: WIRE_FROM(PS) | WIRE_FROM(TRAINER). */
#define WIRE_FROM(peer) (1u << WIRE_PEER_##peer)

/* One row per message type: XX(number, NAME, name, pre_auth, max_len, from).
 *   name      the field list WIRE_MSG_<name> in wire_msgs.h, which gives
 *             the payload's struct, encoder, decoder, limits and samples
 *   pre_auth  may arrive before the handshake completes (handshake only)
 *   max_len   the largest payload when the layout alone does not bound it
 *             usefully; 0: computed from the layout (exact for fixed
 *             layouts, a few KiB for strings, the receiver's max_frame for
 *             bulk data)
 *   from      the peers (WIRE_PEER_MAP) a server takes it from, once
 *             authenticated, as WIRE_FROM(PEER) | ...; 0 when no server
 *             takes it: the handshake's, and what servers send their
 *             clients (replies, orders), which a client takes from the
 *             server it dialed without a table */
#define WIRE_SPEC_MAX (1u << 20)              /* thousands of nodes */
#define WIRE_PULL_MAX (8 + 4 + 4 * 65536)     /* 64 Ki variables: beyond any model */
#define WIRE_REPL_SHARD_MAX 4096              /* OPTIM's schedule is beyond the layout's bound */
#define WIRE_TYPE_MAP(XX)                                                                    \
  XX(1, HELLO, hello, true, 0, 0)                                                            \
  XX(2, AUTH, auth, true, 0, 0)                                                              \
  XX(3, AUTH_OK, auth_ok, true, 0, 0)                                                        \
  XX(10, REGISTER, register, false, 0, WIRE_FROM(NEW_NODE))                                  \
  XX(11, REGISTERED, registered, false, 0, 0)                                                \
  XX(12, SPEC, spec, false, WIRE_SPEC_MAX, 0)                                                \
  XX(13, HEARTBEAT, heartbeat, false, 0,                                                     \
     WIRE_FROM(PS) | WIRE_FROM(TRAINER) | WIRE_FROM(PS_COORD) | WIRE_FROM(PS_TRAINER) |      \
         WIRE_FROM(PS_PRIMARY))                                                              \
  XX(14, SHUTDOWN, shutdown, false, 0, 0)                                                    \
  XX(15, ERROR, error, false, 0, WIRE_FROM(PS) | WIRE_FROM(TRAINER))                         \
  XX(16, LOG, log, false, 0, WIRE_FROM(PS) | WIRE_FROM(TRAINER))                             \
  XX(20, VAR_INIT, var_init, false, 0, WIRE_FROM(PS_COORD))                                  \
  XX(21, VAR_INIT_OK, var_init_ok, false, 0, 0)                                              \
  XX(22, SETUP, setup, false, 0, 0)                                                          \
  XX(23, SETUP_OK, setup_ok, false, 0, WIRE_FROM(TRAINER))                                   \
  XX(30, TASK, task, false, 0, 0)                                                            \
  XX(31, RESULT, result, false, 0, WIRE_FROM(TRAINER))                                       \
  XX(32, EVAL, eval, false, 0, 0)                                                            \
  XX(33, EVAL_RESULT, eval_result, false, 0, WIRE_FROM(TRAINER))                             \
  XX(34, CALL, call, false, 0, 0)                                                            \
  XX(35, CALL_RESULT, call_result, false, 0, WIRE_FROM(TRAINER))                             \
  XX(36, POSITION, position, false, 0, 0)                                                    \
  XX(37, POSITION_OK, position_ok, false, 0, WIRE_FROM(TRAINER))                             \
  XX(38, ROLLBACK, rollback, false, 0, 0)                                                    \
  XX(39, ROLLBACK_OK, rollback_ok, false, 0, WIRE_FROM(TRAINER))                             \
  XX(40, PULL, pull, false, WIRE_PULL_MAX, WIRE_FROM(PS_COORD) | WIRE_FROM(PS_TRAINER))      \
  XX(41, PULL_REPLY, pull_reply, false, 0, 0)                                                \
  XX(42, PUSH, push, false, 0, WIRE_FROM(PS_COORD) | WIRE_FROM(PS_TRAINER))                  \
  XX(43, PUSH_OK, push_ok, false, 0, 0)                                                      \
  XX(44, CHECKPOINT, checkpoint, false, 0, WIRE_FROM(PS_COORD))                              \
  XX(45, CHECKPOINT_OK, checkpoint_ok, false, 0, 0)                                          \
  XX(46, RESTORE, restore, false, 0, WIRE_FROM(PS_COORD))                                    \
  XX(47, RESTORE_OK, restore_ok, false, 0, 0)                                                \
  XX(48, PS_ROLE, ps_role, false, 0, 0)                                                      \
  XX(49, PS_ROLE_OK, ps_role_ok, false, 0, WIRE_FROM(PS))                                    \
  XX(54, REPL_SYNC, repl_sync, false, 0, WIRE_FROM(PS_PRIMARY))                              \
  XX(55, REPL, repl, false, 0, WIRE_FROM(PS_PRIMARY))                                        \
  XX(56, REPL_OK, repl_ok, false, 0, 0)                                                      \
  XX(57, PUSH_ID, push_id, false, 0, WIRE_FROM(PS_COORD) | WIRE_FROM(PS_TRAINER))            \
  XX(58, LR_SCALE, lr_scale, false, 0, WIRE_FROM(PS_COORD))                                  \
  XX(59, SYNC_STOP, sync_stop, false, 0, WIRE_FROM(PS_COORD))                                \
  XX(50, ATTACH, attach, false, 0, WIRE_FROM(NEW_CONTROL) | WIRE_FROM(NEW_VIEW))             \
  XX(51, SNAPSHOT, snapshot, false, 0, 0)                                                    \
  XX(52, COMMAND, command, false, 0, WIRE_FROM(ATTACH))                                      \
  XX(53, COMMAND_REPLY, command_reply, false, 0, 0)                                          \
  XX(60, FEED_OPEN, feed_open, false, 0, WIRE_FROM(NEW_CONTROL))                             \
  XX(61, FEED_CREDIT, feed_credit, false, 0, 0)                                              \
  XX(62, FEED_BATCH, feed_batch, false, 0, WIRE_FROM(FEEDER) | WIRE_FROM(DIRECT_FEEDER))     \
  XX(63, FEED_END, feed_end, false, 0, WIRE_FROM(FEEDER) | WIRE_FROM(TRAINER))               \
  XX(64, FEED_ROUTE, feed_route, false, 0, 0)                                                \
  XX(65, FEED_LISTEN, feed_listen, false, 0, 0)                                              \
  XX(66, FEED_LISTEN_OK, feed_listen_ok, false, 0, WIRE_FROM(TRAINER))                       \
  XX(67, FEED_ACK, feed_ack, false, 0, WIRE_FROM(TRAINER))                                   \
  XX(68, FEED_DIRECT_END, feed_direct_end, false, 0, WIRE_FROM(TRAINER))                     \
  XX(69, FEED_DIRECT_CLOSE, feed_direct_close, false, 0, 0)                                  \
  XX(70, PREDICT_MODEL, predict_model, false, 0, 0)                                          \
  XX(71, PREDICT, predict, false, 0, 0)                                                      \
  XX(72, PREDICT_RESULT, predict_result, false, 0, WIRE_FROM(TRAINER))                       \
  XX(73, PREDICT_OPEN, predict_open, false, 0, WIRE_FROM(NEW_CONTROL) | WIRE_FROM(NEW_VIEW)) \
  XX(74, PREDICT_REQUEST, predict_request, false, 0, WIRE_FROM(PREDICTOR))                   \
  XX(75, PREDICT_REPLY, predict_reply, false, 0, 0)                                          \
  XX(76, REPL_SHARD, repl_shard, false, WIRE_REPL_SHARD_MAX, WIRE_FROM(PS_PRIMARY))          \
  XX(77, REPL_PIECE, repl_piece, false, 0, WIRE_FROM(PS_PRIMARY))                            \
  XX(78, REPL_SYNC_END, repl_sync_end, false, 0, WIRE_FROM(PS_PRIMARY))                      \
  XX(79, CKPT_FILE, ckpt_file, false, 0, WIRE_FROM(PS_COORD))                                \
  XX(80, CKPT_PIECE, ckpt_piece, false, 0, WIRE_FROM(PS_COORD))                              \
  XX(81, CKPT_FILE_END, ckpt_file_end, false, 0, WIRE_FROM(PS_COORD))                        \
  XX(82, LINKS, links, false, 0, WIRE_FROM(PS) | WIRE_FROM(TRAINER))                         \
  XX(83, SPARSE_INIT, sparse_init, false, WIRE_REPL_SHARD_MAX, WIRE_FROM(PS_COORD))         \
  XX(84, SPARSE_INIT_OK, sparse_init_ok, false, 0, 0)                                        \
  XX(85, SPARSE_PULL, sparse_pull, false, 0, WIRE_FROM(PS_COORD) | WIRE_FROM(PS_TRAINER))    \
  XX(86, SPARSE_PULL_REPLY, sparse_pull_reply, false, 0, 0)                                  \
  XX(87, SPARSE_PUSH, sparse_push, false, 0, WIRE_FROM(PS_TRAINER))                          \
  XX(88, SPARSE_DUMP, sparse_dump, false, 0, WIRE_FROM(PS_COORD))                            \
  XX(89, SPARSE_DUMP_REPLY, sparse_dump_reply, false, 0, 0)                                  \
  XX(90, SPARSE_STATS, sparse_stats, false, 0, WIRE_FROM(PS) | WIRE_FROM(TRAINER))            \
  XX(91, SPARSE_LOAD, sparse_load, false, 0, WIRE_FROM(PS_COORD))                            \
  XX(92, PREDICT_ROWS, predict_rows, false, 0, 0)                                           \
  XX(93, REPL_TABLE, repl_table, false, WIRE_REPL_SHARD_MAX, WIRE_FROM(PS_PRIMARY))          \
  XX(94, REPL_ROWS, repl_rows, false, 0, WIRE_FROM(PS_PRIMARY))

typedef enum wire_type {
#define XX(num, NAME, name, pre_auth, max, from) WIRE_##NAME = num,
  WIRE_TYPE_MAP(XX)
#undef XX
} wire_type;

enum { WIRE_TASK_TRAIN_STEP = 1 };
/* PS_ROLE role: what a ps is in its shard group (ps replicas). */
enum { WIRE_PS_ALONE = 0, WIRE_PS_PRIMARY = 1, WIRE_PS_REPLICA = 2 };
/* REPL_PIECE part: which array of the shard the floats belong to. */
enum {
  WIRE_PIECE_VALUE = 0,
  WIRE_PIECE_ACC = 1,
  WIRE_PIECE_SLOT0 = 2,
  WIRE_PIECE_LAST = 3 /* WIRE_PIECE_SLOT0 + OPTIM_MAX_SLOTS - 1 (ps_repl.c checks) */
};
/* CHECKPOINT `to` and RESTORE `from`: where a ps's checkpoint file is
 * (coord_ckpt_route.c decides it per ps). */
enum {
  WIRE_CKPT_PATH = 0,  /* the ps writes or reads `path` itself */
  WIRE_CKPT_COORD = 1, /* its bytes travel over the connection (CKPT_FILE) */
  WIRE_CKPT_HDFS = 2,  /* `path` is a webhdfs:// URL the ps writes or reads itself */
  WIRE_CKPT_LAST = WIRE_CKPT_HDFS
};
/* COMMAND kind; WIRE_COMMAND_LAST is the highest one known. */
enum {
  WIRE_COMMAND_LUA = 0,
  WIRE_COMMAND_STOP_NODE = 1,
  WIRE_COMMAND_LOG_TAIL = 2,
  WIRE_COMMAND_STOP_PLAN = 3, /* what stopping the node would do (asked before a stop) */
  WIRE_COMMAND_STOP_RUN = 4,  /* `drover stop`: text "" (checkpoint first) or "now" */
  WIRE_COMMAND_SCALE = 5,     /* `drover scale`: text "worker=N" */
  WIRE_COMMAND_LAST = WIRE_COMMAND_SCALE
};

/* REGISTERED transport: how the cluster's nodes on one host talk (net/conn.h's
 * conn_transport_mode, the same numbers); WIRE_TRANSPORT_LAST is the highest. */
enum {
  WIRE_TRANSPORT_AUTO = 0, /* shared memory */
  WIRE_TRANSPORT_UNIX = 1, /* a Unix socket */
  WIRE_TRANSPORT_TCP = 2,  /* loopback TCP, as across hosts */
  WIRE_TRANSPORT_LAST = WIRE_TRANSPORT_TCP
};

/* FEED_BATCH mode (wire_msgs.h, "Feed"); WIRE_FEED_LAST is the highest. */
enum {
  WIRE_FEED_TRAIN = 0, /* the worker trains it as one train step */
  WIRE_FEED_QUEUE = 1, /* held for w:next_batch in a scheduled function */
  WIRE_FEED_LAST = WIRE_FEED_QUEUE
};

/* Roles, in TensorFlowOnSpark's order (ps first). */
typedef enum wire_role { ROLE_PS = 0, ROLE_CHIEF = 1, ROLE_WORKER = 2, ROLE_EVALUATOR = 3 } wire_role;
#define ROLE_COUNT 4
const char *wire_role_name(int role); /* "ps", ...; "?" when out of range */
int wire_role_from_name(const char *name); /* -1 when unknown */

/* ---- message table ------------------------------------------------------ */

typedef struct wire_msg_info {
  uint8_t type;
  const char *name;  /* "PUSH" */
  uint32_t min_len;  /* smallest valid payload */
  uint32_t max_len;  /* largest valid payload (UINT32_MAX: the frame max) */
  bool pre_auth;     /* may be sent before authentication completes */
  uint32_t from;     /* the peers a server takes it from: WIRE_FROM() bits */
} wire_msg_info;

/* The table entry for `type`, or NULL for an unknown type. */
const wire_msg_info *wire_msg(uint8_t type);
const char *wire_type_name(uint8_t type); /* "PUSH"; "type 0x7f" style when unknown (static buffer) */

/* How a server's log names peer p ("a node before REGISTER"; static). */
const char *wire_peer_what(wire_peer p);
/* The types p may send, from the table's `from` column: sets allow[t]
 * and max_len[t] (t's largest payload) for each, leaves the other
 * entries alone (the caller zeroes them: a conn_accept, net/conn.h).
 * Returns wire_peer_what(p). */
const char *wire_peer_allow(wire_peer p, bool allow[256], uint32_t max_len[256]);

/* Checks an authenticated payload against its type's documented layout
 * (lengths, counts that fit the bytes left, roles and flags in range,
 * tensor headers) without allocating or copying. conn.c runs it on every
 * frame before its owner sees it, so handlers may read fields knowing
 * they are there. 0 or DRV_EPARSE with the reason. */
int wire_validate_payload(uint8_t type, const uint8_t *p, size_t n);

/* ---- header --------------------------------------------------------------- */

typedef struct wire_header {
  uint8_t type;
  uint16_t flags;
  uint32_t req;
  uint32_t len;
} wire_header;

/* Encodes h into out[WIRE_HEADER_SIZE]. */
void wire_header_encode(const wire_header *h, uint8_t *out);
/* Decodes and validates a header: magic, version, known type, len within
 * max_frame and within the type's limits, and (when !authed) that the type
 * may come before authentication. Returns 0 or DRV_EPARSE with the reason
 * in err_msg() ("frame type PUSH before authentication"). */
int wire_header_decode(const uint8_t *in, uint32_t max_frame, bool authed, wire_header *h);

/* A string field as wire_msgs.h carries it. Encoding: s NUL-terminated
 * (len 0: measured, capped at WIRE_MAX_STR) or len bytes of s; NULL is
 * "". Decoded (wire_rd_str_view): len bytes at s, borrowed from the
 * payload, NOT NUL-terminated ("" when empty), no NUL inside. */
typedef struct wire_str {
  const char *s;
  uint32_t len;
} wire_str;
#define WIRE_STR(cstr) ((wire_str){(cstr), 0})

/* Copies a decoded s into out[n] with a NUL; DRV_EPARSE ("string of 20
 * bytes does not fit in 15") when it does not fit. */
int wire_str_copy(wire_str s, char *out, size_t n);

/* ---- payload writer ------------------------------------------------------- */

/* A growable buffer that starts with room for the header; wire_wr_finish
 * writes the header in front. On allocation failure it records the error
 * and ignores further writes (check wire_wr_finish's return). */
typedef struct wire_wr {
  uint8_t *buf; /* owned (unless fixed); WIRE_HEADER_SIZE reserved at the front */
  size_t len, cap;
  int err;
  bool fixed; /* buf is the caller's, of cap bytes: never grown nor freed */
} wire_wr;

void wire_wr_init(wire_wr *w);
/* A writer into the caller's frame of exactly cap bytes (header room
 * included; conn_send_reserve's): a field past its end fails the writer
 * (DRV_ERANGE), nothing is reallocated, wire_wr_free frees nothing. The
 * writer only stores into buf, never reads it back: buf may be memory a
 * peer shares. */
void wire_wr_init_fixed(wire_wr *w, uint8_t *buf, size_t cap);
void wire_wr_u8(wire_wr *w, uint8_t v);
void wire_wr_u16(wire_wr *w, uint16_t v);
void wire_wr_u32(wire_wr *w, uint32_t v);
void wire_wr_u64(wire_wr *w, uint64_t v);
void wire_wr_i32(wire_wr *w, int32_t v);
void wire_wr_i64(wire_wr *w, int64_t v);
void wire_wr_f64(wire_wr *w, double v);
void wire_wr_str(wire_wr *w, const char *s); /* truncated at WIRE_MAX_STR */
void wire_wr_strv(wire_wr *w, wire_str s);   /* the same for a wire_str */
void wire_wr_bytes(wire_wr *w, const void *p, uint32_t n);
void wire_wr_raw(wire_wr *w, const void *p, size_t n); /* no length prefix */
void wire_wr_tensor(wire_wr *w, const tensor *t); /* any strides */
/* The optimizer config as VAR_INIT carries it (layout in the table above). */
void wire_wr_optim(wire_wr *w, const optim_cfg *c);
/* Writes the header for (type, req) in front. On success the caller owns
 * w->buf (w->len bytes: a whole frame) and frees it with free(). Returns 0
 * or a negative code (the buffer is then freed). */
int wire_wr_finish(wire_wr *w, uint8_t type, uint32_t req);
void wire_wr_free(wire_wr *w);

/* ---- payload reader ------------------------------------------------------- */

/* Reads fields from a payload it borrows. The first failure (reading past
 * the end, a string over WIRE_MAX_STR or with a NUL, a bad tensor header)
 * is remembered with a message; later reads return zeros. */
typedef struct wire_rd {
  const uint8_t *p;
  size_t len, off;
  int err;          /* 0 or DRV_EPARSE */
  char why[160];    /* the first failure */
} wire_rd;

void wire_rd_init(wire_rd *r, const uint8_t *payload, size_t len);
uint8_t wire_rd_u8(wire_rd *r);
uint16_t wire_rd_u16(wire_rd *r);
uint32_t wire_rd_u32(wire_rd *r);
uint64_t wire_rd_u64(wire_rd *r);
int32_t wire_rd_i32(wire_rd *r);
int64_t wire_rd_i64(wire_rd *r);
double wire_rd_f64(wire_rd *r);
/* Copies a string into out[n] (NUL-terminated); fails if it does not fit. */
void wire_rd_str(wire_rd *r, char *out, size_t n);
/* Points *s at a string in the payload (borrowed; see wire_str). */
void wire_rd_str_view(wire_rd *r, wire_str *s);
/* The next n bytes, without a length prefix (borrowed), or NULL after a
 * failure. */
const uint8_t *wire_rd_raw(wire_rd *r, size_t n);
/* Points *p at `n` bytes of a length-prefixed field (borrowed). */
uint32_t wire_rd_bytes(wire_rd *r, const uint8_t **p);
/* Reads a tensor header and points *data at its float32 payload
 * (borrowed, possibly unaligned: memcpy it). shape[] gets the dims. */
int wire_rd_tensor_view(wire_rd *r, int *ndim, int64_t shape[TENSOR_MAXDIM],
                        const uint8_t **data);
/* Reads a tensor into a new one (caller frees), or NULL on failure. */
tensor *wire_rd_tensor(wire_rd *r);
/* Reads a tensor into dst, whose shape must match exactly. */
int wire_rd_tensor_into(wire_rd *r, tensor *dst);
/* Reads an optimizer config and validates it (optim_cfg_check). */
int wire_rd_optim(wire_rd *r, optim_cfg *c);
/* Reads an ERROR payload's message into msg[n] ("(malformed ERROR)" when
 * it is not one); returns its code. */
int32_t wire_rd_error(const uint8_t *payload, size_t len, char *msg, size_t n);
/* 0 when every read succeeded and the payload was consumed exactly; else
 * DRV_EPARSE with "PUSH: ..." (the type's name and the first failure). */
int wire_rd_done(wire_rd *r, uint8_t type);
static inline bool wire_rd_ok(const wire_rd *r) { return r->err == 0; }
/* Bytes not read yet (to bound a count before looping over it). */
static inline size_t wire_rd_left(const wire_rd *r) { return r->len - r->off; }

#endif
