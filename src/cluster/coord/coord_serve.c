/* coord_serve.c - predict from a client: c:serve { predict = exp } and the
 * clients that ask it (wire_msgs.h, "Predict from a client";
 * clients/python Run.predict).
 *
 * A predictor is a client on the control port that sent PREDICT_OPEN. It
 * must hold the control key: predictions are the run's model, which a
 * view key (safe to share, it only watches) does not give away, and they
 * cost the cluster work. Its PREDICT_REQUESTs wait in one queue; while the
 * script is inside c:serve, coord_serve takes them one at a time, between
 * turns of the loop, and runs each through coord_predict (the queue's
 * producer: one output per input, a lost worker's batches run again) with
 * the served model. A request that comes while nothing is served is
 * refused at once with what the script must do: a request never waits for
 * a c:serve that may never come.
 *
 * A request for a model with sparse tables (issue 26) carries its rows'
 * ids (sparse: data_sparse_batch_encode's bytes), which coord_predict
 * sends with each batch as c:predict sends a dataset's; the workers get
 * the tables' rows by PREDICT_ROWS. Ids that do not decode are a protocol
 * error of that connection; a request without ids for a model with tables,
 * or ids the model cannot read (another field count...), is refused, found
 * by a forward pass of its first row here before any worker works on it.
 *
 * Callbacks only record (the frame's payload is copied into the queue);
 * the predicts run in coord_serve, never inside a callback, and the
 * client may leave meanwhile: its answer is then dropped.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/coord/coord_int.h"
#include "base/err.h"
#include "base/le.h"
#include "base/log.h"
#include "data/data.h"
#include "numeric/nn_sparse.h"
#include "proto/wire_msgs.h"
#include "train/train.h"

/* Answers at most this large (one frame, the client's own limit). */
#define SERVE_MAX_REPLY (WIRE_DEFAULT_MAX_FRAME - 4096)

typedef struct coord_predictor {
  coord *c;
  conn *cn;
  uint64_t id;          /* for finding it again after a predict pumped the loop */
  char name[64];
  bool open;            /* PREDICT_OPEN accepted */
  bool waiting;         /* a request of it is queued or running */
  uint64_t requests, rows;
  struct coord_predictor *next;
} coord_predictor;

typedef struct serve_req {
  uint64_t client;      /* its predictor's id */
  uint8_t *pl;          /* the PREDICT_REQUEST payload (owned, checked) */
  uint32_t len;
  struct serve_req *next;
} serve_req;

struct coord_serving {
  coord_predictor *list;
  uint64_t next_id;
  serve_req *head, *tail;
  nn_module *model;     /* while c:serve runs (borrowed), else NULL */
  int64_t batch;
};

static struct coord_serving *serving(coord *c) {
  if (!c->serve) c->serve = calloc(1, sizeof *c->serve);
  return c->serve;
}

static coord_predictor *find(struct coord_serving *s, uint64_t id) {
  for (coord_predictor *d = s ? s->list : NULL; d; d = d->next)
    if (d->id == id) return d;
  return NULL;
}

/* PREDICT_REPLY; y NULL: a refusal (y [0]). */
static void reply(conn *cn, uint64_t req, int32_t status, const tensor *y, const char *msg) {
  static const float none[1];
  wire_wr w;
  wire_wr_init(&w);
  wire_tensor empty = {.ndim = 1, .shape = {0}, .data = none};
  wire_put_predict_reply(&w, &(wire_msg_predict_reply){
                                 .req = req, .status = status,
                                 .y = y ? (wire_tensor){.t = y} : empty, .message = WIRE_STR(msg)});
  conn_send_wr(cn, &w, WIRE_PREDICT_REPLY, 0);
}

static const char no_model[] =
    "predict: this run serves no model now: its script must call c:serve { predict = exp } "
    "(requests are answered while c:serve runs)";

/* ============================== frames ================================== */

static int on_open(coord *c, conn *cn, void **state, const uint8_t *pl, uint32_t len) {
  wire_msg_predict_open m;
  char name[64];
  int rc = wire_get_predict_open(pl, len, &m);
  if (rc < 0) return rc;
  if (wire_str_copy(m.name, name, sizeof name) < 0 || !name[0])
    snprintf(name, sizeof name, "%s", conn_peer(cn));
  if (conn_cap(cn) != AUTH_CAP_CONTROL) {
    rundir_event(&c->rd, "predictor %s from %s refused: it holds the view key", name, conn_peer(cn));
    reply(cn, 0, DRV_EPERM, NULL,
          "predict needs the run's control key (control.key): this client proved the view key, "
          "which only watches the run");
    conn_shutdown(cn, "predict refused");
    return 0;
  }
  struct coord_serving *s = serving(c);
  coord_predictor *d = s ? calloc(1, sizeof *d) : NULL;
  if (!d) return err_set(DRV_ENOMEM, "out of memory");
  *d = (coord_predictor){.c = c, .cn = cn, .id = ++s->next_id, .open = true, .next = s->list};
  snprintf(d->name, sizeof d->name, "%s", name);
  s->list = d;
  *state = d;
  rundir_event(&c->rd, "predictor %s connected from %s", d->name, conn_peer(cn));
  reply(cn, 0, 0, NULL, s->model ? "" : no_model);
  return 0;
}

/* The rows that sparse bytes of this length hold by their header (nnz,
 * weights), or -1: ids well formed but for another row count than x's
 * are the request's error, not the connection's. */
static int64_t ids_rows(const uint8_t *p, size_t len) {
  enum { HEAD = 21 }; /* data_sparse_encode's: fields, weighted, bound, nnz */
  if (len < HEAD || p[4] > 1) return -1;
  uint64_t nnz = le_get(p + 13, 8), per = p[4] ? 12 : 8;
  if (nnz > (len - HEAD) / per) return -1;
  uint64_t rest = len - HEAD - per * nnz;
  return rest % 8 || rest < 8 ? -1 : (int64_t)(rest / 8 - 1);
}

/* m's ids: 0 when they decode for x's rows; 1 when they are another row
 * count's (refused now); negative when malformed (a protocol error, as a
 * feeder's). */
static int check_request_ids(coord_predictor *d, const wire_msg_predict_request *m) {
  data_sparse sp;
  char what[64];
  snprintf(what, sizeof what, "PREDICT_REQUEST %" PRIu64 "'s ids", m->req);
  int64_t n = (int64_t)m->x.shape[0];
  int rc = data_sparse_batch_decode(&sp, n, m->sparse.p, m->sparse.len, what);
  data_sparse_free(&sp);
  if (rc == 0) return 0;
  char first[300]; /* the message for x's rows */
  snprintf(first, sizeof first, "%s", err_msg());
  int64_t other = ids_rows(m->sparse.p, m->sparse.len);
  if (other < 0 || other == n || data_sparse_batch_decode(&sp, other, m->sparse.p,
                                                          m->sparse.len, what) < 0)
    return err_set(rc, "%s", first);
  data_sparse_free(&sp);
  char why[160];
  snprintf(why, sizeof why, "predict: ids for %" PRId64 " rows, x has %" PRId64 " rows", other, n);
  reply(d->cn, m->req, DRV_ESHAPE, NULL, why);
  return 1;
}

/* A request: checked, then queued for coord_serve (or refused now). */
static int on_request(coord *c, coord_predictor *d, const uint8_t *pl, uint32_t len) {
  struct coord_serving *s = c->serve;
  wire_msg_predict_request m;
  int rc = wire_get_predict_request(pl, len, &m);
  if (rc < 0) return rc;
  if (m.req == 0) return err_set(DRV_EPROTO, "PREDICT_REQUEST with req 0");
  if (d->waiting) return err_set(DRV_EPROTO, "PREDICT_REQUEST before the previous one's reply");
  if (m.x.ndim < 1 || m.x.shape[0] < 1) {
    reply(d->cn, m.req, DRV_ESHAPE, NULL, "predict: x must be [n, ...] with n >= 1 rows");
    return 0;
  }
  if ((rc = check_request_ids(d, &m)) != 0) return rc < 0 ? rc : 0;
  if (!s->model) {
    reply(d->cn, m.req, DRV_EAGAIN, NULL, no_model);
    return 0;
  }
  serve_req *r = malloc(sizeof *r);
  uint8_t *copy = malloc(len ? len : 1);
  if (!r || !copy) {
    free(r);
    free(copy);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  memcpy(copy, pl, len);
  *r = (serve_req){.client = d->id, .pl = copy, .len = len};
  if (s->tail) s->tail->next = r;
  else s->head = r;
  s->tail = r;
  d->waiting = true;
  return 0;
}

void coord__predictor_frame(coord *c, conn *cn, void **state, bool other, const wire_header *h,
                            const uint8_t *pl) {
  coord_predictor *d = *state;
  int rc;
  if (other)
    rc = err_set(DRV_EPROTO, "PREDICT_OPEN on a node's, an attach client's or a feeder's connection");
  else if (!d)
    rc = h->type == WIRE_PREDICT_OPEN ? on_open(c, cn, state, pl, h->len)
                                      : err_set(DRV_EPROTO, "unexpected frame");
  else if (h->type == WIRE_PREDICT_REQUEST)
    rc = on_request(c, d, pl, h->len);
  else
    rc = err_set(DRV_EPROTO, "a predictor does not send %s", wire_type_name(h->type));
  if (rc < 0) {
    log_warn("%s: %s", conn_peer(cn), err_msg());
    conn_close(cn, "bad predictor frame");
  }
}

void coord__predictor_gone(coord *c, void *state) {
  coord_predictor *d = state;
  struct coord_serving *s = c->serve;
  rundir_event(&c->rd, "predictor %s left after %" PRIu64 " requests (%" PRIu64 " rows)", d->name,
               d->requests, d->rows);
  for (coord_predictor **p = s ? &s->list : NULL; p && *p; p = &(*p)->next)
    if (*p == d) {
      *p = d->next;
      break;
    }
  free(d); /* its queued request stays; its answer finds no one */
}

/* ============================== serving ================================= */

static serve_req *pop(struct coord_serving *s) {
  serve_req *r = s->head;
  if (r && !(s->head = r->next)) s->tail = NULL;
  return r;
}

static void req_free(serve_req *r) {
  if (!r) return;
  free(r->pl);
  free(r);
}

/* Refuses what waits (c:serve is over, or never was). */
static void refuse_queued(coord *c, const char *why) {
  struct coord_serving *s = c->serve;
  for (serve_req *r; s && (r = pop(s));) {
    coord_predictor *d = find(s, r->client);
    wire_msg_predict_request m;
    if (d && wire_get_predict_request(r->pl, r->len, &m) == 0) {
      reply(d->cn, m.req, DRV_ECANCELLED, NULL, why);
      d->waiting = false;
    }
    req_free(r);
  }
}

/* y's bytes on the wire, or -1 past SERVE_MAX_REPLY. */
static int64_t reply_bytes(const tensor *y) {
  int64_t n = tensor_numel(y);
  if (n < 0 || n > (int64_t)SERVE_MAX_REPLY / 4) return -1;
  return n * 4;
}

/* Whether the served model can read x with the ids in ids (NULL: none):
 * 0, or why not (the client's answer). A model with tables is tried on
 * x's first row here, so a wrong field count is named before a worker
 * fails on it. */
static int check_ids(nn_module *model, const tensor *x, const dataset *ids) {
  const nn_module *t = nn_find_table(model);
  if (!t && ids)
    return err_set(DRV_EINVAL, "predict: the served model has no sparse table: send the rows "
                   "without ids");
  if (!t) return 0;
  nn_table_list tl = {0};
  int rc = nn_collect_tables(model, false, &tl);
  char name[96];
  snprintf(name, sizeof name, "%s", rc == 0 && tl.n > 0 ? tl.items[0].name : "?");
  bool from_x = rc == 0 && nn_tables_read_x(&tl); /* its ids are x's values */
  nn_table_list_free(&tl);
  if (rc < 0) return rc;
  if (from_x && ids)
    return err_set(DRV_EINVAL, "predict: the served model reads its ids from x (nn.Embedding { "
                   "sparse = true }, table %s): send the rows without ids", name);
  if (!ids && !from_x)
    return err_set(DRV_EINVAL, "predict: the served model reads ids (sparse table %s): send each "
                   "row's ids with the request (client.predict(x, ids=...))", name);
  tensor row = *x;
  row.shape[0] = 1;
  tensor *y = NULL;
  if (from_x) { /* x's first row: an id out of range is named before a worker fails on it */
    rc = train_predict(model, &row, NULL, 1, &y);
    tensor_free(y);
    return rc < 0 ? err_set(rc, "predict: %s", err_msg()) : 0;
  }
  nn_sparse one = data_sparse_view(&ids->sp, 1);
  rc = train_predict(model, &row, &one, 1, &y);
  tensor_free(y);
  if (rc < 0)
    return err_set(rc, "predict: the served model cannot read this request's ids (%d per row%s%s): "
                   "%s", ids->sp.fields > 0 ? ids->sp.fields : (int)(ids->sp.ptr[1] - ids->sp.ptr[0]),
                   ids->sp.fields > 0 ? ", one per field" : " in the first row",
                   ids->sp.weighted ? ", weighted" : "", err_msg());
  return 0;
}

/* x and the ids of request m as new tensors and a dataset of ids (ids->sp
 * bound 0: none). */
static int request_parts(const wire_msg_predict_request *m, tensor **x, dataset *ids) {
  int64_t shape[TENSOR_MAXDIM] = {0};
  for (int i = 0; i < m->x.ndim; i++) shape[i] = m->x.shape[i];
  *ids = (dataset){.n = shape[0]};
  snprintf(ids->source, sizeof ids->source, "a predict request");
  if (!(*x = tensor_new(m->x.ndim, shape))) return err_set(DRV_ENOMEM, "out of memory for a predict request");
  wire_tensor_to(&m->x, tensor_data(*x));
  int rc = data_sparse_batch_decode(&ids->sp, shape[0], m->sparse.p, m->sparse.len,
                                    "PREDICT_REQUEST's ids"); /* checked when it came */
  if (rc < 0) tensor_free(*x), *x = NULL;
  return rc;
}

/* One request: its rows through coord_predict, the answer to its client
 * (if it is still there). Failures of the predict are the client's
 * answer, not the server's: 0 unless the cluster failed. */
static int run_one(coord *c, struct coord_serving *s, serve_req *r) {
  wire_msg_predict_request m;
  int rc = wire_get_predict_request(r->pl, r->len, &m); /* checked when it came */
  if (rc < 0) return rc;
  tensor *x = NULL, *y = NULL;
  dataset ids;
  if ((rc = request_parts(&m, &x, &ids)) < 0) return rc;
  int64_t shape[TENSOR_MAXDIM];
  memcpy(shape, x->shape, sizeof shape);
  int64_t batch = m.batch > 0 && m.batch <= (uint64_t)INT64_MAX ? (int64_t)m.batch : s->batch;
  if (batch > shape[0]) batch = shape[0]; /* coord_predict's batch count adds n + batch */
  const dataset *spd = data_has_sparse(&ids) ? &ids : NULL;
  rc = check_ids(s->model, x, spd);
  bool refused = rc < 0;
  if (rc == 0) rc = coord_predict(c, s->model, x, spd, NULL, 0, batch, &y);
  data_sparse_free(&ids.sp);
  coord_predictor *d = find(s, r->client); /* the loop ran: it may have left */
  char why[600];
  int32_t status = rc;
  snprintf(why, sizeof why, "%s", rc < 0 ? err_msg() : "");
  if (rc == 0 && reply_bytes(y) < 0) {
    status = DRV_ERANGE;
    snprintf(why, sizeof why, "predict: the answer to %" PRId64 " rows would not fit a frame of "
             "%u bytes: send fewer rows per request", shape[0], (unsigned)SERVE_MAX_REPLY);
  }
  if (d) {
    reply(d->cn, m.req, status, status == 0 ? y : NULL, why);
    d->waiting = false;
    d->requests++;
    d->rows += (uint64_t)shape[0];
  }
  tensor_free(x);
  tensor_free(y);
  /* a lost node the cluster could not replace fails the serve too */
  return rc < 0 && !refused && c->failures ? rc : 0;
}

static bool request_waits(coord *c, void *arg) {
  (void)arg;
  return c->serve && c->serve->head;
}

int coord_serve(coord *c, nn_module *model, const coord_serve_opts *o, coord_serve_stats *st) {
  *st = (coord_serve_stats){0};
  if (c->shut_down || c->shutting_down) return err_set(DRV_EINVAL, "cluster: it was shut down");
  if (o->batch < 1 || o->requests < 0 || !(o->idle >= 0))
    return err_set(DRV_EINVAL, "serve: batch must be positive, requests and idle not negative");
  struct coord_serving *s = serving(c);
  if (!s) return err_set(DRV_ENOMEM, "out of memory");
  if (s->model) return err_set(DRV_EINVAL, "serve: already serving (c:serve inside c:serve)");
  s->model = model;
  s->batch = o->batch;
  rundir_event(&c->rd, "serving predictions: batch %" PRId64 "%s", o->batch,
               o->requests ? "" : " (until stopped)");
  int rc = 0;
  while (o->requests == 0 || st->requests < o->requests) {
    rc = coord__pump(c, request_waits, NULL, o->idle, true);
    if (rc == DRV_ETIMEDOUT) {
      rc = 0;
      st->idle = true;
      break;
    }
    if (rc < 0) break;
    serve_req *r = pop(s);
    wire_msg_predict_request m;
    if (wire_get_predict_request(r->pl, r->len, &m) == 0) st->rows += (int64_t)m.x.shape[0];
    rc = run_one(c, s, r);
    req_free(r);
    st->requests++;
    if (rc < 0) break;
  }
  s->model = NULL;
  refuse_queued(c, "predict: the run stopped serving (c:serve returned) before this request ran");
  rundir_event(&c->rd, "served %" PRId64 " predict requests (%" PRId64 " rows)%s", st->requests,
               st->rows, rc < 0 ? ", then failed" : st->idle ? ", then idle" : "");
  return rc;
}

void coord__serve_free(coord *c) {
  struct coord_serving *s = c->serve;
  if (!s) return;
  for (serve_req *r; (r = pop(s));) req_free(r);
  for (coord_predictor *d = s->list; d; d = d->next) d->c = NULL; /* their peers free them */
  free(s);
  c->serve = NULL;
}
