/* worker_feed.c - a worker's input queue of fed batches, TensorFlowOnSpark
 * style: the coordinator (c:feed) sends FEED_BATCH frames of mode QUEUE,
 * which wait here until a scheduled function takes rows with
 * w:next_batch(n) (l_worker.c). A batch is answered RESULT once all its
 * rows are taken, which returns its credit to the coordinator: the queue
 * never holds more than the coordinator's window. w:terminate() answers
 * what is left unread and tells the coordinator to stop the feed.
 *
 * A batch may carry its rows' ids (issue 26: a model with sparse tables);
 * they stay with their rows when w:next_batch splits or merges batches,
 * and a batch with ids never merges with one without (or with another
 * field count), so w:train_step(x, y, ids) trains each row with its own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/log.h"
#include "proto/wire_msgs.h"
#include "cluster/worker/worker_int.h"

typedef struct fed {
  uint64_t task;
  uint32_t req;
  tensor *x, *y; /* owned */
  data_sparse sp; /* its rows' ids (owned; bound 0: none) */
  int64_t used;  /* rows already taken */
  struct fed *next;
} fed;

static void fed_free(fed *b) {
  if (!b) return;
  tensor_free(b->x);
  tensor_free(b->y);
  data_sparse_free(&b->sp);
  free(b);
}

/* RESULT for a batch whose rows are all taken (examples) or dropped (0). */
static void answer(worker *w, const fed *b, int64_t examples) {
  wire_wr m;
  wire_wr_init(&m);
  wire_put_result(&m, &(wire_msg_result){.task = b->task,
                                         .status = 0,
                                         .loss = 0,
                                         .correct = -1,
                                         .examples = (uint64_t)examples,
                                         .message = WIRE_STR(""),
                                         .grad_norm = NAN});
  if (!w->closed) w->send(w->ud, &m, WIRE_RESULT, b->req);
  else wire_wr_free(&m);
}

int worker__fed_hold(worker *w, uint32_t req, uint64_t task, tensor *x, tensor *y, data_sparse *sp) {
  fed *b = calloc(1, sizeof *b);
  if (!b) {
    tensor_free(x), tensor_free(y);
    data_sparse_free(sp);
    return err_set(DRV_ENOMEM, "out of memory");
  }
  *b = (fed){.task = task, .req = req, .x = x, .y = y, .sp = *sp};
  *sp = (data_sparse){0};
  w->feed_ended = false; /* a feed runs */
  w->feeding = true;
  if (w->fed_tail) w->fed_tail->next = b;
  else w->fed_head = b;
  w->fed_tail = b;
  w->nfed++;
  worker__fed_wake(w);
  return 0;
}

void worker__fed_wake(worker *w) {
  if (w->calls && w->calls->fed) w->calls->fed(w);
}

static fed *pop(worker *w) {
  fed *b = w->fed_head;
  w->fed_head = b->next;
  if (!w->fed_head) w->fed_tail = NULL;
  w->nfed--;
  return b;
}

static bool same_rows(const tensor *a, const tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int k = 1; k < a->ndim; k++)
    if (a->shape[k] != b->shape[k]) return false;
  return true;
}

/* Whether two batches' rows may share one w:next_batch. */
static bool alike(const fed *a, const fed *b) {
  return same_rows(a->x, b->x) && same_rows(a->y, b->y) && !a->sp.bound == !b->sp.bound &&
         a->sp.fields == b->sp.fields && a->sp.weighted == b->sp.weighted;
}

/* ============================== ids ===================================== */

/* d (zeroed) made for `rows` rows and nnz ids, like `like`. */
static int sp_alloc(data_sparse *d, const data_sparse *like, int64_t rows, int64_t nnz) {
  *d = (data_sparse){.fields = like->fields, .weighted = like->weighted, .bound = like->bound};
  d->ptr = calloc((size_t)rows + 1, sizeof *d->ptr);
  d->ids = malloc(((size_t)nnz + 1) * sizeof *d->ids);
  d->vals = like->weighted ? malloc(((size_t)nnz + 1) * sizeof *d->vals) : NULL;
  if (d->ptr && d->ids && (d->vals || !like->weighted)) return 0;
  data_sparse_free(d);
  return err_set(DRV_ENOMEM, "out of memory for a batch's ids");
}

/* Rows [from, from + k) of s into d at row `at` (rows before it filled). */
static void sp_copy(data_sparse *d, int64_t at, const data_sparse *s, int64_t from, int64_t k) {
  int64_t a = s->ptr[from], m = s->ptr[from + k] - a;
  for (int64_t r = 0; r < k; r++)
    d->ptr[at + r + 1] = d->ptr[at + r] + (s->ptr[from + r + 1] - s->ptr[from + r]);
  memcpy(d->ids + d->ptr[at], s->ids + a, (size_t)m * sizeof *d->ids);
  if (d->vals) memcpy(d->vals + d->ptr[at], s->vals + a, (size_t)m * sizeof *d->vals);
  if (s->bound > d->bound) d->bound = s->bound;
}

int worker__sparse_slice(data_sparse *dst, const data_sparse *src, int64_t from, int64_t k) {
  int rc = sp_alloc(dst, src, k, src->ptr[from + k] - src->ptr[from]);
  if (rc == 0) sp_copy(dst, 0, src, from, k);
  return rc;
}

/* The ids of the queue's next k rows (alike batches), for *sp. */
static int sp_gather_alloc(const worker *w, int64_t k, data_sparse *sp) {
  const fed *h = w->fed_head;
  int64_t nnz = 0, left = k;
  for (const fed *b = h; b && left > 0; b = b->next) {
    int64_t take = b->x->shape[0] - b->used < left ? b->x->shape[0] - b->used : left;
    nnz += b->sp.ptr[b->used + take] - b->sp.ptr[b->used];
    left -= take;
  }
  return sp_alloc(sp, &h->sp, k, nnz);
}

/* Rows available in the queue (at most `cap`) in batches shaped as the
 * first: a batch of another shape starts the next w:next_batch. */
static int64_t rows_queued(const worker *w, int64_t cap) {
  const fed *h = w->fed_head;
  int64_t n = 0;
  for (const fed *b = h; b && n < cap && alike(b, h); b = b->next)
    n += b->x->shape[0] - b->used;
  return n < cap ? n : cap;
}

/* Copies rows [from, from + k) of src into dst at row `at`. */
static void copy_rows(tensor *dst, int64_t at, const tensor *src, int64_t from, int64_t k) {
  int64_t row = src->shape[0] > 0 ? tensor_numel(src) / src->shape[0] : 0;
  memcpy(tensor_data(dst) + at * row, tensor_data((tensor *)src) + from * row,
         (size_t)(k * row) * sizeof(float));
}

/* The head batch whole to the caller, no copy. */
static void hand_over(worker *w, tensor **x, tensor **y, data_sparse *sp) {
  fed *h = w->fed_head;
  *x = h->x, *y = h->y, *sp = h->sp;
  h->x = h->y = NULL;
  h->sp = (data_sparse){0};
  answer(w, h, (*x)->shape[0]);
  fed_free(pop(w));
}

int worker__fed_take(worker *w, int64_t n, tensor **x, tensor **y, data_sparse *sp) {
  *x = *y = NULL;
  *sp = (data_sparse){0};
  int64_t k = rows_queued(w, n);
  if (k == 0) return 0;
  fed *h = w->fed_head;
  if (h->used == 0 && k == h->x->shape[0]) {
    hand_over(w, x, y, sp);
    return 1;
  }
  int64_t xs[TENSOR_MAXDIM], ys[TENSOR_MAXDIM];
  memcpy(xs, h->x->shape, sizeof xs);
  memcpy(ys, h->y->shape, sizeof ys);
  xs[0] = ys[0] = k;
  if (!(*x = tensor_new(h->x->ndim, xs)) || !(*y = tensor_new(h->y->ndim, ys)) ||
      (h->sp.bound && sp_gather_alloc(w, k, sp) < 0)) {
    tensor_free(*x), tensor_free(*y);
    *x = *y = NULL;
    return err_set(DRV_ENOMEM, "out of memory");
  }
  int64_t at = 0;
  while (at < k) {
    fed *b = w->fed_head;
    int64_t take = b->x->shape[0] - b->used;
    if (take > k - at) take = k - at;
    copy_rows(*x, at, b->x, b->used, take);
    copy_rows(*y, at, b->y, b->used, take);
    if (sp->bound) sp_copy(sp, at, &b->sp, b->used, take);
    b->used += take;
    at += take;
    if (b->used == b->x->shape[0]) {
      answer(w, b, b->used);
      fed_free(pop(w));
    }
  }
  return 1;
}

void worker__fed_terminate(worker *w) {
  int dropped = 0;
  while (w->fed_head) {
    fed *b = pop(w);
    answer(w, b, b->used);
    fed_free(b);
    dropped++;
  }
  if (w->feeding && !w->closed) { /* a feed runs: it stops */
    wire_wr m;
    wire_wr_init(&m);
    wire_put_feed_end(&m, &(wire_msg_feed_end){.status = 0, .batches = 0,
                                               .message = WIRE_STR("w:terminate()")});
    w->send(w->ud, &m, WIRE_FEED_END, 0);
  }
  w->feed_ended = true;
  w->feeding = false;
  w->feed_ends++;
  log_info("feed terminated: %d queued batches dropped", dropped);
  worker__fed_wake(w);
}

void worker__fed_free(worker *w) {
  while (w->fed_head) fed_free(pop(w));
}
