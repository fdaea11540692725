/* test_ps_sync.c - sync training on a real ps process (VAR_INIT mode 1):
 * the aggregation of `replicas` gradients into one update, PULLs held
 * until the version they ask for, late gradients dropped, and the end of
 * the fit's target. The fake of node_fake.h plays workers and coordinator.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "node_fake.h"
#include "proto/wire_msgs.h"

/* A PULL of var 0 at min_version; its reply's version and values. */
static uint64_t pull_now(fake *f, peer *pe, uint64_t min_version, uint32_t req, tensor **out) {
  uint32_t var = 0;
  nf_send_pull_v(pe, min_version, &var, 1, req);
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_PULL_REPLY);
  CHECK_INT_EQ(fr->h.req, req);
  uint64_t v = nf_read_pull_reply_v(fr, &var, 1, out);
  nf_frame_free(fr);
  return v;
}

static bool push_ok(fake *f, peer *pe, uint64_t version, const tensor *g, uint32_t req,
                    uint64_t *step) {
  bool applied;
  nf_send_push1_v(pe, version, 0, g, req);
  *step = nf_read_push_ok_v(f, pe, req, &applied);
  return applied;
}

/* The expected values after one SGD update with the mean of a and b. */
static tensor *sgd_mean(const tensor *v, const tensor *a, const tensor *b, float lr) {
  tensor *w = tensor_clone(v);
  for (int64_t i = 0; i < tensor_numel(v); i++)
    tensor_data(w)[i] -= lr * ((tensor_data(a)[i] + tensor_data(b)[i]) * 0.5f);
  return w;
}

static void check_close(const tensor *got, const tensor *want) {
  for (int64_t i = 0; i < tensor_numel(want); i++)
    CHECK_NEAR(tensor_data(got)[i], tensor_data(want)[i], 1e-6);
}

TEST(ps_sync_holds_pulls_aggregates_and_drops_late_gradients) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 50, 5000);
  fake *f = &c.f;
  peer *a = nf_cluster_dial(&c, ROLE_PS, 0), *b = nf_cluster_dial(&c, ROLE_PS, 0),
       *coord = nf_cluster_dial(&c, ROLE_PS, 0);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  sgd.lr = 0.5f;
  int64_t shape[2] = {2, 3};
  tensor *v0 = nf_filled(2, shape, -1.25f, 0.375f);
  tensor *ga = nf_filled(2, shape, 0.3f, -0.17f), *gb = nf_filled(2, shape, -0.8f, 0.05f);
  /* 2 gradients per update, 3 updates in the fit. */
  nf_var_init_mode(f, coord, 0, 0, true, 2, 3, &sgd, v0, 1);
  uint32_t zero = 0;
  nf_send_pull_v(coord, 3, &zero, 0, 99); /* the coordinator's probe: no variables */

  tensor *got;
  CHECK_INT_EQ(pull_now(f, a, 0, 10, &got), 0);
  CHECK(nf_same_bits(got, v0));
  tensor_free(got);
  uint64_t step;
  CHECK(push_ok(f, a, 0, ga, 11, &step)); /* summed, not applied yet */
  CHECK_INT_EQ(step, 0);

  /* A's pull for version 1 is held until the second gradient arrives. */
  nf_send_pull_v(a, 1, &zero, 1, 12);
  nf_pump_for(f, 150);
  CHECK(a->head == NULL);
  CHECK(push_ok(f, b, 0, gb, 20, &step));
  CHECK_INT_EQ(step, 1);
  fk_frame *fr = NF_EXPECT(f, a, WIRE_PULL_REPLY);
  CHECK_INT_EQ(fr->h.req, 12);
  CHECK_INT_EQ(nf_read_pull_reply_v(fr, &zero, 1, &got), 1);
  nf_frame_free(fr);
  tensor *v1 = sgd_mean(v0, ga, gb, 0.5f);
  check_close(got, v1); /* ONE update with the mean, not two */
  tensor_free(got);

  /* B's second gradient for version 0 is late: dropped, values unchanged;
   * its next pull is not held and gets the newest version. */
  CHECK(!push_ok(f, b, 0, gb, 21, &step));
  CHECK_INT_EQ(pull_now(f, b, 1, 22, &got), 1);
  check_close(got, v1);
  tensor_free(got);

  /* Versions 1 and 2 complete; the probe is answered at the target. */
  for (uint64_t ver = 1; ver <= 2; ver++) {
    CHECK(push_ok(f, a, ver, ga, (uint32_t)(30 + 2 * ver), &step));
    CHECK(coord->head == NULL);
    CHECK(push_ok(f, b, ver, gb, (uint32_t)(31 + 2 * ver), &step));
    CHECK_INT_EQ(step, ver + 1);
  }
  fr = NF_EXPECT(f, coord, WIRE_PULL_REPLY);
  CHECK_INT_EQ(fr->h.req, 99);
  CHECK_INT_EQ(nf_read_pull_reply_v(fr, &zero, 0, NULL), 3);
  nf_frame_free(fr);

  /* Past the target nothing waits and pushes change nothing. */
  tensor *v3;
  CHECK_INT_EQ(pull_now(f, a, 0, 40, &v3), 3);
  CHECK(!push_ok(f, a, 3, ga, 41, &step));
  CHECK_INT_EQ(pull_now(f, a, 4, 42, &got), 3);
  CHECK(nf_same_bits(got, v3));
  tensor_free(got);
  tensor_free(v3);

  /* A gradient from a version the ps has not reached is a bad request. */
  nf_var_init_mode(f, coord, 0, 0, true, 2, 3, &sgd, v0, 2);
  nf_send_push1_v(b, 5, 0, gb, 50);
  CHECK_STR_CONTAINS(nf_expect_error_and_close(f, b), "gradient for version 5");

  nf_cluster_down(&c);
  tensor_free(v0);
  tensor_free(v1);
  tensor_free(ga);
  tensor_free(gb);
}

/* SYNC_STOP from the coordinator (c:scale's barrier and quorum). */
static void sync_stop(peer *coord, uint32_t replicas, uint64_t hold_at, uint32_t leave_from) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sync_stop(&w, &(wire_msg_sync_stop){.replicas = replicas, .hold_at = hold_at,
                                               .leave_from = leave_from});
  nf_send_wr(coord, &w, WIRE_SYNC_STOP, 0);
}

/* c:scale's barrier on a real ps (ps_push.c, "barrier"): asked at version
 * 1 after a worker pulled version 1, it moves to 2; the step before it
 * completes with the old quorum, the probe answers at 2, trainers' pulls
 * of 2 wait (a leaving worker's too); the new quorum (1 gradient) answers
 * them, closes the leaving worker's connection, and applies alone. */
TEST(ps_sync_barrier_holds_the_quorum_change) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 50, 5000);
  fake *f = &c.f;
  peer *coord = nf_cluster_dial(&c, ROLE_PS, 0);
  peer *a = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 0);
  peer *b = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 1);
  peer *gone = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 2);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  sgd.lr = 0.5f;
  int64_t shape[2] = {2, 3};
  tensor *v0 = nf_filled(2, shape, -1.25f, 0.375f);
  tensor *ga = nf_filled(2, shape, 0.3f, -0.17f), *gb = nf_filled(2, shape, -0.8f, 0.05f);
  tensor *v1 = sgd_mean(v0, ga, gb, 0.5f), *v2 = sgd_mean(v1, ga, gb, 0.5f);
  nf_var_init_mode(f, coord, 0, 0, true, 2, 10, &sgd, v0, 1); /* 2 gradients an update */
  tensor *got;
  uint64_t step;
  CHECK_INT_EQ(pull_now(f, a, 0, 10, &got), 0);
  tensor_free(got);
  CHECK_INT_EQ(pull_now(f, b, 0, 11, &got), 0);
  tensor_free(got);
  CHECK(push_ok(f, a, 0, ga, 12, &step));
  CHECK(push_ok(f, b, 0, gb, 13, &step));
  CHECK_INT_EQ(step, 1);
  CHECK_INT_EQ(pull_now(f, a, 1, 14, &got), 1); /* a computes version 1 */
  tensor_free(got);

  /* The barrier, asked at 1: version 1 was pulled, so it is 2. */
  sync_stop(coord, 2, 1, 2);
  uint32_t zero = 0;
  nf_send_pull_v(coord, 1, &zero, 0, 99); /* the probe */
  nf_pump_for(f, 150);
  CHECK(coord->head == NULL); /* version 1 is not done yet */
  CHECK_INT_EQ(pull_now(f, b, 1, 15, &got), 1); /* before the barrier: served */
  tensor_free(got);
  CHECK(push_ok(f, a, 1, ga, 16, &step));
  CHECK(push_ok(f, b, 1, gb, 17, &step)); /* the old quorum completes it */
  CHECK_INT_EQ(step, 2);
  fk_frame *fr = NF_EXPECT(f, coord, WIRE_PULL_REPLY);
  CHECK_INT_EQ(fr->h.req, 99);
  CHECK_INT_EQ(nf_read_pull_reply_v(fr, &zero, 0, NULL), 2);
  nf_frame_free(fr);

  /* Pulls of version 2 wait: a staying worker's and a leaving one's. */
  nf_send_pull_v(a, 2, &zero, 1, 18);
  nf_send_pull_v(gone, 0, &zero, 1, 19);
  nf_pump_for(f, 150);
  CHECK(a->head == NULL && gone->head == NULL);

  /* The new quorum: 1 gradient an update, worker 2 gone. */
  sync_stop(coord, 1, 0, 2);
  fr = NF_EXPECT(f, a, WIRE_PULL_REPLY);
  CHECK_INT_EQ(fr->h.req, 18);
  CHECK_INT_EQ(nf_read_pull_reply_v(fr, &zero, 1, &got), 2);
  nf_frame_free(fr);
  check_close(got, v2);
  tensor_free(got);
  CHECK_STR_CONTAINS(nf_expect_error_and_close(f, gone), "worker:2 left the cluster");
  CHECK(push_ok(f, a, 2, ga, 20, &step)); /* alone: applied */
  CHECK_INT_EQ(step, 3);

  nf_cluster_down(&c);
  tensor_free(v0);
  tensor_free(v1);
  tensor_free(v2);
  tensor_free(ga);
  tensor_free(gb);
}
