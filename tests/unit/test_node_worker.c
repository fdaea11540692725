/* test_node_worker.c - the worker and evaluator roles as real processes
 * (forked node_main children, the fake coordinator of node_fake.h): the
 * key check is that one worker training through two ps nodes reproduces
 * in-process training bit for bit; then failure reports.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/data.h"
#include "harness.h"
#include "numeric/nn.h"
#include "node_fake.h"
#include "numeric/optim.h"
#include "train/bineval.h"
#include "train/train.h"
#include "proto/wire_msgs.h"
#include "worker_fixture.h"

TEST(node_worker_matches_in_process_training) {
  dataset *train = wf_toy_data(20, 7), *evald = wf_toy_data(10, 8);
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}, {ROLE_WORKER, 0}, {ROLE_EVALUATOR, 0}},
                4, 100, 10000);
  fake *f = &c.f;
  reg *wk = nf_cluster_reg(&c, ROLE_WORKER, 0), *ev = nf_cluster_reg(&c, ROLE_EVALUATOR, 0);
  CHECK_INT_EQ(wk->port, 0);
  peer *ps[2] = {nf_cluster_dial(&c, ROLE_PS, 0), nf_cluster_dial(&c, ROLE_PS, 1)};

  /* The coordinator's side: the initial model, its variables on the ps. */
  rng_t r;
  rng_seed(&r, WF_SEED);
  nn_module *init = nn_from_spec(WF_SPEC, &r);
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(init, &pl));
  CHECK_INT_EQ(pl.n, 4);
  optim_cfg cfg = wf_adam_cfg();
  wf_init_vars(f, ps, &pl, &cfg);

  wf_send_setup(wk->ctl, &pl, train, WF_BATCH, 5);
  wf_send_setup(ev->ctl, &pl, evald, 4, 6);
  fk_frame *fr = NF_EXPECT(f, wk->ctl, WIRE_SETUP_OK);
  CHECK_INT_EQ(fr->h.req, 5);
  nf_frame_free(fr);
  nf_frame_free(NF_EXPECT(f, ev->ctl, WIRE_SETUP_OK));

  /* All tasks at once: the worker queues them and runs them in order. */
  for (int s = 0; s < WF_STEPS; s++) wf_send_task(wk->ctl, 1000 + (uint64_t)s, 50 + (uint32_t)s);
  wf_reference ref;
  wf_run_reference(&ref, train, &cfg);
  for (int s = 0; s < WF_STEPS; s++) {
    wf_result res;
    wf_read_result(f, wk->ctl, &res);
    if (res.status != 0) harness_fail(__FILE__, __LINE__, "task failed: %s", res.msg);
    CHECK_INT_EQ(res.task, 1000 + s);
    CHECK_INT_EQ(res.examples, ref.examples[s]);
    CHECK(res.loss == (double)ref.losses[s]);
    CHECK_INT_EQ(res.correct, ref.correct[s]);
  }
  CHECK_INT_EQ(ref.examples[3], 2); /* the run crossed an epoch boundary */

  /* The parameters on the ps are the in-process ones, bit for bit. */
  tensor *got[4];
  wf_pull_model(f, ps, &pl, got);
  for (int i = 0; i < 4; i++) {
    CHECK(nf_same_bits(got[i], ref.params.items[i].value));
    CHECK(!nf_same_bits(got[i], pl.items[i].value)); /* and training moved them */
    tensor_free(got[i]);
  }

  /* The evaluator pulls the same parameters and evaluates like train_evaluate. */
  wire_wr w;
  wire_wr_init(&w);
  wire_put_eval(&w, &(wire_msg_eval){WF_STEPS, 0});
  nf_send_wr(ev->ctl, &w, WIRE_EVAL, 77);
  fr = NF_EXPECT(f, ev->ctl, WIRE_EVAL_RESULT);
  CHECK_INT_EQ(fr->h.req, 77);
  wire_msg_eval_result er;
  CHECK_OK(wire_get_eval_result(fr->p, fr->h.len, &er));
  CHECK_INT_EQ(er.step, WF_STEPS);
  CHECK_INT_EQ(er.status, 0);
  double el = er.loss, ea = er.accuracy;
  CHECK_INT_EQ(er.examples, 10);
  char msg[64];
  CHECK_OK(wire_str_copy(er.message, msg, sizeof msg));
  nf_frame_free(fr);
  double wl, wa;
  CHECK_OK(train_evaluate(ref.model, ref.loss, evald, 4, &wl, &wa));
  CHECK(el == wl && ea == wa);
  CHECK(isnan(er.auc) && isnan(er.logloss)); /* not asked */

  /* EVAL's metrics reach the evaluator: AUC of a three-class model is
   * refused there, and the refusal comes back as the eval's status. */
  wire_wr_init(&w);
  wire_put_eval(&w, &(wire_msg_eval){WF_STEPS, BINEVAL_AUC});
  nf_send_wr(ev->ctl, &w, WIRE_EVAL, 78);
  fr = NF_EXPECT(f, ev->ctl, WIRE_EVAL_RESULT);
  CHECK_OK(wire_get_eval_result(fr->p, fr->h.len, &er));
  CHECK(er.status < 0);
  char why[512];
  CHECK_OK(wire_str_copy(er.message, why, sizeof why));
  CHECK_STR_CONTAINS(why, "binary classifier");
  nf_frame_free(fr);

  nf_cluster_down(&c);
  wf_free_reference(&ref);
  nn_param_list_free(&pl);
  nn_unref(init);
  data_free(train);
  data_free(evald);
}

/* A worker tells the coordinator which transport each ps link took
 * (LINKS), following the cluster's from REGISTERED whatever its own
 * process's mode; so do the ps nodes for what they offer. */
static void links_in(uint8_t transport, const char *want) {
  nf_cluster c;
  nf_registered_transport(transport);
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}, {ROLE_WORKER, 0}}, 3, 50, 10000);
  reg *wk = nf_cluster_reg(&c, ROLE_WORKER, 0);
  char links[64] = "";
  /* one link may come up a heartbeat before the other: a LINKS each */
  for (int k = 0; k < 3 && strcmp(links, want) != 0; k++) {
    fk_frame *fr = NF_EXPECT(&c.f, wk->ctl, WIRE_LINKS);
    wire_msg_links l;
    CHECK_OK(wire_get_links(fr->p, fr->h.len, &l));
    CHECK_OK(wire_str_copy(l.links, links, sizeof links));
    nf_frame_free(fr);
  }
  if (strcmp(links, want) != 0)
    harness_fail(__FILE__, __LINE__, "LINKS '%s', wanted '%s'", links, want);
  nf_cluster_down(&c);
}

TEST(node_worker_links_follow_the_cluster_auto) { links_in(WIRE_TRANSPORT_AUTO, "ps:0-1=shm"); }
TEST(node_worker_links_follow_the_cluster_unix) { links_in(WIRE_TRANSPORT_UNIX, "ps:0-1=unix"); }
TEST(node_worker_links_follow_the_cluster_tcp) { links_in(WIRE_TRANSPORT_TCP, "ps:0-1=tcp"); }

TEST(node_worker_reports_failures) {
  dataset *train = wf_toy_data(12, 3);
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}, {ROLE_WORKER, 1}}, 3, 100, 10000);
  fake *f = &c.f;
  reg *regs = c.regs;
  reg *wk = nf_cluster_reg(&c, ROLE_WORKER, 1);
  wf_result res;

  /* A task before any SETUP fails, and says why. */
  wf_send_task(wk->ctl, 1, 1);
  wf_read_result(f, wk->ctl, &res);
  CHECK(res.status < 0);
  CHECK_INT_EQ(res.task, 1);
  CHECK_STR_CONTAINS(res.msg, "SETUP");

  /* Variables the ps never received: the ps refuses the pull, the task
   * fails with its message. */
  rng_t r;
  rng_seed(&r, WF_SEED);
  nn_module *init = nn_from_spec(WF_SPEC, &r);
  nn_param_list pl = {0};
  CHECK_OK(nn_collect_params(init, &pl));
  wf_send_setup(wk->ctl, &pl, train, 4, 2);
  nf_frame_free(NF_EXPECT(f, wk->ctl, WIRE_SETUP_OK));
  wf_send_task(wk->ctl, 2, 3);
  wf_read_result(f, wk->ctl, &res);
  CHECK(res.status < 0);
  CHECK_STR_CONTAINS(res.msg, "unknown var");

  /* Once the variables exist and the worker has the spec again (it
   * reconnects to the ps that dropped it), tasks succeed. */
  peer *ps[2] = {nf_cluster_dial(&c, ROLE_PS, 0), nf_cluster_dial(&c, ROLE_PS, 1)};
  optim_cfg cfg;
  optim_cfg_default(&cfg, OPTIM_SGD);
  wf_init_vars(f, ps, &pl, &cfg);
  nf_send_spec(wk->ctl, regs, 3);
  wf_send_task(wk->ctl, 3, 4);
  wf_read_result(f, wk->ctl, &res);
  if (res.status != 0) harness_fail(__FILE__, __LINE__, "task failed: %s", res.msg);
  CHECK_INT_EQ(res.examples, 4);
  CHECK(res.loss > 0 && res.correct >= 0 && res.correct <= 4);

  /* A SETUP whose variables do not match the model is fatal: ERROR with
   * the reason, then exit status 1. */
  int64_t odd[2] = {8, 5};
  tensor *saved = pl.items[0].value;
  pl.items[0].value = tensor_new(2, odd);
  wf_send_setup(wk->ctl, &pl, train, 4, 5);
  fk_frame *fr = NF_EXPECT(f, wk->ctl, WIRE_ERROR);
  char msg[512];
  wire_rd_error(fr->p, fr->h.len, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "[8, 5]");
  nf_frame_free(fr);
  tensor_free(pl.items[0].value);
  pl.items[0].value = saved;
  CHECK_INT_EQ(nf_cluster_reap(&c, ROLE_WORKER, 1, WAIT_MS), 1);

  nf_cluster_down(&c);
  nn_param_list_free(&pl);
  nn_unref(init);
  data_free(train);
}

/* ============================== pipelining =================================== */

/* The fake plays ps:0 itself (the worker dials the fake's own port), so it
 * decides when each reply goes out. */
static const wf_place ONE_PS[] = {{0, 0, 0, 8}, {1, 0, 0, 8}, {2, 0, 0, 3}, {3, 0, 0, 3}};
#define NONE_PS (sizeof ONE_PS / sizeof ONE_PS[0])

static void send_spec_ps0(peer *ctl, int port) {
  reg ps0 = {.role = ROLE_PS, .index = 0, .host = "127.0.0.1", .port = port, .fake = true};
  nf_send_spec(ctl, &ps0, 1);
}

/* PULL_REPLY item i: variable i with vals[i]. */
static void put_val(wire_wr *w, void *ud, uint32_t i) {
  tensor *const *vals = ud;
  wire_put_item_var_tensor(w, &(wire_item_var_tensor){i, {.t = vals[i]}});
}

static void send_pull_reply(peer *ps, uint64_t version, int n, tensor *const *vals,
                            uint32_t req) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_pull_reply(&w, &(wire_msg_pull_reply){version, {(uint32_t)n, .put = put_val,
                                                           .ud = (void *)vals}});
  nf_send_wr(ps, &w, WIRE_PULL_REPLY, req);
}

/* A PULL of every variable (0..n-1, as one ps holding all of them gets
 * it) that asks for min_version; answered with the values vals[] as the
 * ps's `version`. */
static void answer_pull(fake *f, peer *ps, int n, tensor *const *vals, uint64_t min_version,
                        uint64_t version) {
  fk_frame *fr = NF_EXPECT(f, ps, WIRE_PULL);
  wire_msg_pull m;
  CHECK_OK(wire_get_pull(fr->p, fr->h.len, &m));
  CHECK_INT_EQ(m.min_version, min_version);
  CHECK_INT_EQ(m.vars.n, n);
  wire_rd rd = wire_items_reader(&m.vars);
  for (int i = 0; i < n; i++) {
    wire_item_var_id v;
    wire_get_item_var_id(&rd, &v);
    CHECK_INT_EQ(v.var, i);
  }
  send_pull_reply(ps, version, n, vals, fr->h.req);
  nf_frame_free(fr);
}

/* A PUSH of every variable computed on `version`, whose gradients must be
 * want[] bit for bit; returns its request id (the PUSH_OK is the caller's
 * to send). */
static uint32_t read_push(fake *f, peer *ps, int n, tensor *const *want, uint64_t version) {
  fk_frame *fr = NF_EXPECT(f, ps, WIRE_PUSH);
  uint32_t req = fr->h.req;
  wire_msg_push m;
  CHECK_OK(wire_get_push(fr->p, fr->h.len, &m));
  CHECK_INT_EQ(m.version, version);
  CHECK_INT_EQ(m.vars.n, n);
  wire_rd rd = wire_items_reader(&m.vars);
  for (int i = 0; i < n; i++) {
    wire_item_var_tensor v;
    wire_get_item_var_tensor(&rd, &v);
    CHECK_INT_EQ(v.var, i);
    tensor *g = tensor_new(v.value.ndim, v.value.shape);
    CHECK(g != NULL);
    wire_tensor_to(&v.value, tensor_data(g));
    CHECK(nf_same_bits(g, want[i]));
    tensor_free(g);
  }
  nf_frame_free(fr);
  return req;
}

static void send_push_ok(peer *ps, uint64_t step, bool applied, uint32_t req) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_push_ok(&w, &(wire_msg_push_ok){step, applied});
  nf_send_wr(ps, &w, WIRE_PUSH_OK, req);
}

/* The gradients worker 0 must push for its next batch at parameters vals:
 * the in-process step on the same batch, into grads[] (new tensors). */
static void expected_grads(nn_module *m, nn_loss *loss, const nn_param_list *pl, data_iter *it,
                           tensor *const *vals, tensor **grads) {
  for (int i = 0; i < pl->n; i++) CHECK_OK(tensor_copy(pl->items[i].value, vals[i]));
  const tensor *x, *y;
  CHECK(data_iter_next(it, &x, &y) == 1);
  nn_zero_grad(m);
  float l;
  int64_t correct;
  CHECK_OK(train_step(m, loss, x, y, &l, &correct));
  for (int i = 0; i < pl->n; i++) grads[i] = tensor_clone(pl->items[i].grad);
}

static bool has_result(const peer *ctl) {
  for (const fk_frame *fr = ctl->head; fr; fr = fr->next)
    if (fr->h.type == WIRE_RESULT) return true;
  return false;
}

TEST(node_worker_pulls_behind_its_push) {
  dataset *train = wf_toy_data(12, 5);
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_WORKER, 0}, 1, 100, 10000);
  fake *f = &c.f;
  peer *ctl = c.regs[0].ctl;
  send_spec_ps0(ctl, f->port);
  nf_accept_n(f, 2);
  peer *ps = f->accepted[1];

  rng_t r;
  rng_seed(&r, WF_SEED);
  nn_module *m = nn_from_spec(WF_SPEC, &r);
  nn_loss *loss = nn_cross_entropy();
  nn_param_list pl = {0};
  CHECK(m && loss);
  CHECK_OK(nn_collect_params(m, &pl));
  CHECK_INT_EQ(pl.n, 4);
  wf_send_setup_placed(ctl, &pl, train, 4, 2, ONE_PS, NONE_PS);
  nf_frame_free(NF_EXPECT(f, ctl, WIRE_SETUP_OK));
  for (uint32_t t = 1; t <= 3; t++) wf_send_task(ctl, t, 10 + t);

  /* Two sets of values the "ps" serves: v1 for task 1, v2 for task 2. */
  tensor *v1[4], *v2[4], *g1[4], *g2[4];
  for (int i = 0; i < 4; i++) {
    const tensor *t = pl.items[i].value;
    v1[i] = nf_filled(t->ndim, t->shape, -0.5f, 0.03f);
    v2[i] = nf_filled(t->ndim, t->shape, 0.4f, -0.02f);
  }
  data_iter it;
  CHECK_OK(data_iter_init(&it, train, 4, true, WF_SEED)); /* worker 0's batches */
  expected_grads(m, loss, &pl, &it, v1, g1);
  expected_grads(m, loss, &pl, &it, v2, g2);

  /* The first pull takes any version; the push names the version pulled
   * (5) and the pull behind it asks for the next one (the sync wait). */
  answer_pull(f, ps, 4, v1, 0, 5);
  uint32_t push1 = read_push(f, ps, 4, g1, 5);
  /* Task 1's PUSH_OK is held back, yet task 2 pulls right behind the push
   * (the ps would apply the push first), and task 1 is not reported. */
  fk_frame *pull2 = NF_EXPECT(f, ps, WIRE_PULL);
  CHECK(pull2->h.req != push1);
  CHECK_INT_EQ(pull2->h.len, 8 + 4 + 4 * 4);
  CHECK(pull2->p[0] == 6 && pull2->p[1] == 0); /* min_version 6, little-endian */
  nf_pump_for(f, 100);
  CHECK(!has_result(ctl));
  CHECK(ps->head == NULL); /* task 3 waits: one job pulls or computes at a time */
  /* Replies in order on the connection: the PUSH_OK, then the pull. */
  send_push_ok(ps, 6, false, push1); /* dropped as late: the task still succeeds */
  send_pull_reply(ps, 9, 4, v2, pull2->h.req); /* newer than asked for: what a late worker gets */
  nf_frame_free(pull2);
  wf_result res;
  wf_read_result(f, ctl, &res);
  if (res.status != 0) harness_fail(__FILE__, __LINE__, "task failed: %s", res.msg);
  CHECK_INT_EQ(res.task, 1);
  CHECK_INT_EQ(res.examples, 4);

  /* Task 2 computed on the values its own pull returned; task 3 pulls
   * behind its push. Then the ps goes away with both waiting on it: both
   * fail, reported in order. */
  read_push(f, ps, 4, g2, 9);
  fk_frame *pull3 = NF_EXPECT(f, ps, WIRE_PULL);
  CHECK(pull3->p[0] == 10);
  nf_frame_free(pull3);
  CHECK(!has_result(ctl));
  conn_close(ps->c, "test: the ps goes away");
  for (uint32_t t = 2; t <= 3; t++) {
    wf_read_result(f, ctl, &res);
    CHECK_INT_EQ(res.task, t);
    CHECK(res.status < 0);
    CHECK_STR_CONTAINS(res.msg, "ps:0");
  }

  nf_cluster_down(&c);
  for (int i = 0; i < 4; i++) {
    tensor_free(v1[i]);
    tensor_free(v2[i]);
    tensor_free(g1[i]);
    tensor_free(g2[i]);
  }
  data_iter_free(&it);
  nn_param_list_free(&pl);
  nn_loss_unref(loss);
  nn_unref(m);
  data_free(train);
}
