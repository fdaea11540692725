/* worker_compute.c - a job's compute phase, on a thread-pool thread: a
 * train step's forward and backward on its batch (drawn here, or before
 * the pull when the model has sparse tables: worker_sparse.c), running
 * statistics' changes, gradient clipping, an evaluation, or a SETUP's
 * state built. The phases around it are in worker.c.
 */
#include <math.h>
#include <stdio.h>

#include "base/err.h"
#include "numeric/optim.h"
#include "train/train.h"
#include "cluster/worker/worker_int.h"

/* The next batch of the shard; at the end of an epoch, the first of the
 * next one (as train_fit does). */
int worker__next_batch(wstate *st, const tensor **x, const tensor **y) {
  if (!st->has_iter)
    return err_set(DRV_EINVAL, "this worker has no data of its own (it is fed: train.feed)");
  int rc = data_iter_next(&st->it, x, y);
  if (rc == 0) {
    data_iter_reset(&st->it);
    rc = data_iter_next(&st->it, x, y);
  }
  return rc == 0 ? err_set(DRV_EINVAL, "the training data is empty") : rc;
}

/* Running statistics (BatchNorm's) live on the ps like parameters; what a
 * worker pushes for one is the change its batch made to the values it
 * pulled, so that the ps's SGD at rate 1 (coord_vars.c) applies it:
 * stats_begin keeps the pulled values in grad, stats_end turns them into
 * pulled - local. */
static void stats_begin(wstate *st) {
  for (uint32_t i = (uint32_t)st->ntrained; i < st->nvars; i++)
    tensor_copy(st->vars[i].grad, st->vars[i].value);
}

static void stats_end(wstate *st) {
  for (uint32_t i = (uint32_t)st->ntrained; i < st->nvars; i++) {
    float *g = tensor_data(st->vars[i].grad);
    const float *v = tensor_data(st->vars[i].value);
    int64_t n = tensor_numel(st->vars[i].value);
    for (int64_t k = 0; k < n; k++) g[k] -= v[k];
  }
}

/* A training job's compute phase: forward/backward on the next batch, the
 * gradients left in the model; or (JP_BATCH) only a copy of that batch. */
static int compute(job *j) {
  wstate *st = j->st;
  const tensor *x = j->fx ? j->fx : j->px, *y = j->fx ? j->fy : j->py;
  if (st->tables.n && !j->px && !j->fx) /* its rows come with a pull of the batch's ids */
    return err_set(DRV_EINVAL, "a model with sparse tables computes only in whole steps on a "
                   "cluster (w:train_step), on batches of its own data or fed ones");
  int rc = x ? 1 : worker__next_batch(st, &x, &y);
  if (rc < 0) return rc;
  j->examples = x->shape[0];
  if (j->phases & JP_BATCH) {
    if (!(j->bx = tensor_clone(x)) || !(j->by = tensor_clone(y)))
      return err_set(DRV_ENOMEM, "out of memory");
    return 0;
  }
  nn_zero_grad(st->model);
  stats_begin(st);
  nn_sparse fed = data_sparse_view(&j->fsp, x->shape[0]);
  if (j->fx && j->fsp.bound) nn_set_sparse(st->model, &fed); /* the ids it came with */
  else if (j->px) nn_set_sparse(st->model, data_iter_sparse(&st->it));
  rc = train_step(st->model, st->loss, x, y, &j->loss, &j->correct);
  nn_set_sparse(st->model, NULL);
  stats_end(st);
  if (j->w->slow_ms) uv_sleep(j->w->slow_ms); /* DROVER_FAULT=slow:... */
  /* Gradients of a non-finite loss would poison the variables: the step
   * fails here instead (the coordinator names the step and this node). */
  if (rc == 0 && (j->phases & JP_PUSH) && !isfinite(j->loss))
    return err_set(DRV_ERANGE, "the loss is %s; its gradients were not pushed",
                   isnan(j->loss) ? "NaN" : "infinite");
  /* The worker holds the whole model's gradient, so its norm here is the
   * global one over every ps shard; clipped before it is split by shard. */
  if (rc == 0 && st->clip_norm > 0) {
    nn_param_list trained = st->params;
    trained.n = st->ntrained; /* not the running statistics */
    j->grad_norm = optim_clip_grads(&trained, &st->tables, st->clip_norm); /* rows too */
  }
  return rc;
}

/* On a thread-pool thread: touches only the job and the state, which the
 * loop thread leaves alone while w->in_pool. */
void worker__work_cb(uv_work_t *req) {
  job *j = req->data;
  wstate *st = j->st;
  int rc;
  if (j->kind == JOB_SETUP) {
    /* Building the state reads this node's shard in files mode: a large
     * file takes seconds, which the loop spends answering heartbeats. */
    rc = worker__state_parse(j->w->role, j->w->index, j->payload, j->payload_len, &j->setup);
  } else if (j->kind == JOB_EVAL) {
    rc = train_evaluate_metrics(st->model, st->loss, st->data, st->batch, j->eval_metrics,
                                &j->eval);
    j->examples = st->data->n;
  } else {
    rc = compute(j);
  }
  j->rc = rc < 0 ? rc : 0;
  if (rc < 0) snprintf(j->msg, sizeof j->msg, "%s", err_msg());
}

