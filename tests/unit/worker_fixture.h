/* worker_fixture.h - what the worker node tests share: a toy model and
 * data, its variables placed over two ps, the SETUP/TASK/RESULT frames of
 * the fake coordinator (node_fake.h), and the in-process training that a
 * worker must reproduce bit for bit. Every helper fails the case (CHECK)
 * rather than return an error.
 */
#ifndef DROVER_WORKER_FIXTURE_H
#define DROVER_WORKER_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "data/data.h"
#include "numeric/nn.h"
#include "node_fake.h"
#include "numeric/optim.h"

#define WF_SPEC "Sequential(Linear(4,8),ReLU,Linear(8,3))"
#define WF_SEED 42
#define WF_BATCH 6
#define WF_STEPS 9

/* n examples, 4 features in [0, 1), 3 classes (caller frees: data_free). */
dataset *wf_toy_data(int64_t n, uint64_t seed);

/* Rows [row0, row0 + rows) of variable `var` live on ps `ps`. */
typedef struct wf_place {
  uint32_t var, ps;
  uint64_t row0, rows;
} wf_place;

/* The placement of most tests: the model's four variables over ps 0 and 1,
 * one of them split over both. */
extern const wf_place WF_PLACES[];
#define WF_NPLACES 5

/* SETUP frames for the model WF_SPEC with the variables of pl (placed by
 * places[], or WF_PLACES) and data d, request id req. */
void wf_send_setup_placed(peer *ctl, const nn_param_list *pl, const dataset *d, int64_t batch,
                          uint32_t req, const wf_place *places, size_t nplaces);
void wf_send_setup(peer *ctl, const nn_param_list *pl, const dataset *d, int64_t batch,
                   uint32_t req);
/* A TASK of kind TRAIN_STEP, and the next RESULT read back. */
void wf_send_task(peer *ctl, uint64_t id, uint32_t req);
typedef struct wf_result {
  uint64_t task;
  int32_t status;
  double loss;
  int64_t correct;
  uint64_t examples;
  char msg[1024];
} wf_result;
void wf_read_result(fake *f, peer *ctl, wf_result *res);

/* VAR_INIT of every shard of pl's parameters on ps[0] and ps[1] (WF_PLACES). */
void wf_init_vars(fake *f, peer *ps[2], const nn_param_list *pl, const optim_cfg *cfg);
/* Pulls every shard back into out[i], new tensors shaped like pl's. */
void wf_pull_model(fake *f, peer *ps[2], const nn_param_list *pl, tensor **out);

/* WF_STEPS in-process steps (batch WF_BATCH, shuffled with WF_SEED) of the
 * model on d: each step's loss, correct count and examples, and the
 * trained parameters (checked against train_fit). */
typedef struct wf_reference {
  nn_module *model;
  nn_loss *loss;
  nn_param_list params;
  float losses[WF_STEPS];
  int64_t correct[WF_STEPS], examples[WF_STEPS];
} wf_reference;
void wf_run_reference(wf_reference *ref, const dataset *d, const optim_cfg *cfg);
void wf_free_reference(wf_reference *ref);
/* Adam with lr 0.05. */
optim_cfg wf_adam_cfg(void);

#endif
