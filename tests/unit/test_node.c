/* test_node.c - the node agent as real processes, ps role and lifetime:
 * node_main runs in forked children against the fake coordinator of
 * node_fake.h, which registers them, dials the ps data port like a worker
 * and plays the coordinator's side (including going away or silent).
 * Worker and evaluator cases are in test_node_worker.c.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "node_fake.h"
#include "proto/wire_msgs.h"

/* ============================== ps =========================================== */

TEST(node_ps_registers_and_serves_var_init_pull_push) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 50, 5000);
  fake *f = &c.f;
  reg *r = &c.regs[0];
  CHECK_INT_EQ(r->role, ROLE_PS);
  CHECK_INT_EQ(r->index, 0);
  CHECK_INT_EQ(r->pid, c.pids[0]);
  CHECK(strcmp(r->host, "127.0.0.1") == 0);
  CHECK(r->port > 0 && r->port != f->port);
  CHECK_INT_EQ(r->cpus, 1);
  CHECK(r->memory > ((uint64_t)1 << 20));
  CHECK(r->affinity >= 1);
  char host[64] = "";
  gethostname(host, sizeof host);
  CHECK(strcmp(r->hostname, host) == 0);

  /* Heartbeats start after REGISTERED and carry the node's RSS. */
  fk_frame *hb = NF_EXPECT(f, r->ctl, WIRE_HEARTBEAT);
  wire_rd rd;
  wire_rd_init(&rd, hb->p, hb->h.len);
  wire_rd_u64(&rd);
  CHECK(wire_rd_u64(&rd) > 0);
  nf_frame_free(hb);

  peer *d = nf_cluster_dial(&c, ROLE_PS, 0);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  sgd.lr = 0.5f;
  int64_t shape[2] = {2, 3};
  tensor *v = nf_filled(2, shape, -1.25f, 0.375f);
  nf_var_init(f, d, 7, 0, &sgd, v, 11);
  tensor *got = nf_pull1(f, d, 7, 12);
  CHECK(nf_same_bits(got, v));
  tensor_free(got);

  tensor *g = nf_filled(2, shape, 0.3f, -0.17f);
  nf_send_push1(d, 7, g, 13);
  CHECK_INT_EQ(nf_read_push_ok(f, d, 13), 1);
  got = nf_pull1(f, d, 7, 14);
  tensor *want = tensor_clone(v);
  for (int64_t i = 0; i < 6; i++)
    tensor_data(want)[i] = tensor_data(v)[i] - 0.5f * tensor_data(g)[i];
  CHECK(nf_same_bits(got, want));
  CHECK(!nf_same_bits(got, v));
  tensor_free(got);

  /* VAR_INIT of an existing var replaces it (values and update count). */
  nf_var_init(f, d, 7, 0, &sgd, g, 15);
  got = nf_pull1(f, d, 7, 16);
  CHECK(nf_same_bits(got, g));
  tensor_free(got);

  nf_cluster_down(&c);
  tensor_free(v);
  tensor_free(g);
  tensor_free(want);
}

TEST(node_ps_bad_request_closes_only_that_connection) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 100, 5000);
  fake *f = &c.f;
  peer *a = nf_cluster_dial(&c, ROLE_PS, 0), *b = nf_cluster_dial(&c, ROLE_PS, 0);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  int64_t s4 = 4, s5 = 5, s3 = 3;
  tensor *v = nf_filled(1, &s4, 1, 1), *w = nf_filled(1, &s3, -2, 0.5f);
  nf_var_init(f, a, 1, 0, &sgd, v, 1);
  nf_var_init(f, b, 2, 0, &sgd, w, 1);

  /* A gradient of the wrong shape: ERROR, then that connection closes. */
  tensor *bad = nf_filled(1, &s5, 1, 0);
  nf_send_push1(a, 1, bad, 2);
  CHECK_STR_CONTAINS(nf_expect_error_and_close(f, a), "[5]");
  /* b still works, and the bad push changed nothing. */
  tensor *got = nf_pull1(f, b, 1, 3);
  CHECK(nf_same_bits(got, v));
  tensor_free(got);

  /* Several variables in one PULL come back in the order asked. */
  uint32_t both[2] = {2, 1};
  tensor *two[2];
  nf_send_pull(b, both, 2, 4);
  fk_frame *fr = NF_EXPECT(f, b, WIRE_PULL_REPLY);
  nf_read_pull_reply(fr, both, 2, two);
  nf_frame_free(fr);
  CHECK(nf_same_bits(two[0], w) && nf_same_bits(two[1], v));
  tensor_free(two[0]);
  tensor_free(two[1]);

  /* An unknown variable ends b too; a third client is still served. */
  uint32_t missing = 99;
  nf_send_pull(b, &missing, 1, 5);
  CHECK_STR_CONTAINS(nf_expect_error_and_close(f, b), "unknown var 99");
  peer *third = nf_cluster_dial(&c, ROLE_PS, 0);
  got = nf_pull1(f, third, 2, 6);
  CHECK(nf_same_bits(got, w));
  tensor_free(got);

  nf_cluster_down(&c);
  tensor_free(v);
  tensor_free(w);
  tensor_free(bad);
}

/* A NaN or Inf gradient is refused whole (the variable keeps its values),
 * naming the connection it came from; other clients go on. */
TEST(node_ps_refuses_a_non_finite_push) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 100, 5000);
  fake *f = &c.f;
  /* the refusal names the node that sent the push: the coordinator, a worker */
  peer *a = nf_cluster_dial(&c, ROLE_PS, 0);
  peer *b = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 1);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  int64_t s4 = 4;
  tensor *v = nf_filled(1, &s4, 1, 1), *g = nf_filled(1, &s4, 0.5f, 0);
  nf_var_init(f, a, 1, 0, &sgd, v, 1);
  tensor_data(g)[2] = NAN;
  nf_send_push1(a, 1, g, 2);
  const char *msg = nf_expect_error_and_close(f, a);
  CHECK_STR_CONTAINS(msg, "PUSH from the coordinator (local pid ");
  CHECK_STR_CONTAINS(msg, "refused: the gradient for var 1 holds NaN at element 2");
  tensor_data(g)[2] = -INFINITY;
  nf_send_push1(b, 1, g, 3);
  msg = nf_expect_error_and_close(f, b);
  CHECK_STR_CONTAINS(msg, "PUSH from worker:1 (local pid ");
  CHECK_STR_CONTAINS(msg, "holds -Inf at element 2");
  peer *third = nf_cluster_dial(&c, ROLE_PS, 0);
  tensor *got = nf_pull1(f, third, 1, 4);
  CHECK(nf_same_bits(got, v)); /* unchanged */
  tensor_free(got);
  tensor_data(g)[2] = 0.5f; /* a finite push is still applied */
  nf_send_push1(third, 1, g, 5);
  nf_read_push_ok(f, third, 5);
  nf_cluster_down(&c);
  tensor_free(v);
  tensor_free(g);
}

/* A PULL served without copying must still return the values as they were
 * when it was served, even when a PUSH right behind it updates the shard
 * while the (large) reply is still being written. */
TEST(node_ps_pull_reply_is_a_snapshot) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 100, 5000);
  fake *f = &c.f;
  peer *d = nf_cluster_dial(&c, ROLE_PS, 0);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  sgd.lr = 1.0f;
  int64_t n = 1 << 21; /* 8 MB: more than a socket buffer holds */
  tensor *v = nf_filled(1, &n, 0, 1e-6f), *g = nf_filled(1, &n, 1, 0);
  nf_var_init(f, d, 3, 0, &sgd, v, 1);
  for (uint32_t k = 0; k < 3; k++) {
    uint32_t var = 3;
    nf_send_pull(d, &var, 1, 10 + k);
    nf_send_push1(d, 3, g, 20 + k);
  }
  for (uint32_t k = 0; k < 3; k++) {
    uint32_t var = 3;
    tensor *got;
    fk_frame *fr = NF_EXPECT(f, d, WIRE_PULL_REPLY);
    CHECK_INT_EQ(fr->h.req, 10 + k);
    nf_read_pull_reply(fr, &var, 1, &got);
    nf_frame_free(fr);
    CHECK(nf_same_bits(got, v)); /* before this round's push */
    tensor_free(got);
    CHECK_INT_EQ(nf_read_push_ok(f, d, 20 + k), k + 1);
    for (int64_t i = 0; i < n; i++) tensor_data(v)[i] -= 1.0f;
  }
  tensor *got = nf_pull1(f, d, 3, 99);
  CHECK(nf_same_bits(got, v));
  tensor_free(got);
  nf_cluster_down(&c);
  tensor_free(v);
  tensor_free(g);
}

/* ============================== losing the coordinator ======================= */

TEST(node_exits_when_the_coordinator_closes) {
  nf_cluster c;
  /* A long silence timeout: only the close can end it in time. */
  nf_cluster_up(&c, &(nf_node){ROLE_WORKER, 0}, 1, 100, 60000);
  fake *f = &c.f;
  reg *r = &c.regs[0];
  nf_frame_free(NF_EXPECT(f, r->ctl, WIRE_HEARTBEAT));
  double t0 = nf_now_ms();
  conn_close(r->ctl->c, "coordinator gone");
  CHECK_INT_EQ(nf_cluster_reap(&c, ROLE_WORKER, 0, 3000), 3);
  CHECK(nf_now_ms() - t0 < 3000);
  nf_cluster_down(&c);
}

static void send_heartbeat_every(peer *ctl, uint64_t seq, uint32_t interval_ms) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_heartbeat(&w, &(wire_msg_heartbeat){.seq = seq, .interval_ms = interval_ms});
  nf_send_wr(ctl, &w, WIRE_HEARTBEAT, 0);
}

static void send_heartbeat(peer *ctl, uint64_t seq) { send_heartbeat_every(ctl, seq, 0); }

static int node_heartbeats(reg *r) {
  int count = 0;
  for (fk_frame *fr = r->ctl->head; fr; fr = fr->next) count += fr->h.type == WIRE_HEARTBEAT;
  return count;
}

TEST(node_exits_when_the_coordinator_falls_silent) {
  nf_cluster c;
  const int timeout = 400;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 50, timeout);
  fake *f = &c.f;
  reg *r = &c.regs[0];
  /* Heartbeats every 100 ms for 1.2 s (three timeouts): it stays. */
  double last_sent = 0;
  for (int i = 0; i < 12; i++) {
    send_heartbeat(r->ctl, (uint64_t)i);
    last_sent = nf_now_ms();
    nf_pump_for(f, 100);
  }
  int st;
  CHECK_INT_EQ(waitpid(c.pids[0], &st, WNOHANG), 0);
  /* Its own heartbeats kept coming, numbered in order. */
  int count = 0;
  uint64_t last = 0;
  for (fk_frame *fr = r->ctl->head; fr; fr = fr->next) {
    if (fr->h.type != WIRE_HEARTBEAT) continue;
    wire_rd rd;
    wire_rd_init(&rd, fr->p, fr->h.len);
    uint64_t seq = wire_rd_u64(&rd);
    CHECK(count == 0 || seq == last + 1);
    last = seq;
    count++;
  }
  CHECK(count >= 10);
  /* Then silence: it leaves by itself, after the timeout and not before. */
  CHECK_INT_EQ(nf_cluster_reap(&c, ROLE_PS, 0, 5000), 3);
  double took = nf_now_ms() - last_sent;
  if (took < timeout - 20 || took > 3000)
    harness_fail(__FILE__, __LINE__, "left %.0f ms after the last heartbeat (timeout %d)", took,
                 timeout);
  nf_cluster_down(&c);
}

/* A big cluster's coordinator asks for fewer heartbeats (HEARTBEAT
 * interval_ms): the node speaks at that interval, not at its own 50 ms, and
 * waits eight of them before it calls the coordinator lost. */
TEST(node_heartbeats_at_the_interval_the_coordinator_asks) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 50, 400);
  fake *f = &c.f;
  reg *r = &c.regs[0];
  send_heartbeat_every(r->ctl, 0, 300);
  nf_pump_for(f, 100);
  int before = node_heartbeats(r);
  double last_sent = 0;
  for (int i = 1; i <= 6; i++) { /* 1.2 s, each gap under its 400 ms timeout */
    send_heartbeat_every(r->ctl, (uint64_t)i, 300);
    last_sent = nf_now_ms();
    nf_pump_for(f, 200);
  }
  int spoke = node_heartbeats(r) - before;
  /* 1.2 s at 300 ms is 4 (5 with timer jitter), where 50 ms made 24. */
  if (spoke < 3 || spoke > 6)
    harness_fail(__FILE__, __LINE__, "%d heartbeats in 1.2 s at a 300 ms interval", spoke);
  /* 200 ms gaps passed its own 400 ms timeout's half: still there. Silence
   * now: it leaves after 8 x 300 ms, not after its 400 ms. */
  int st;
  CHECK_INT_EQ(waitpid(c.pids[0], &st, WNOHANG), 0);
  CHECK_INT_EQ(nf_cluster_reap(&c, ROLE_PS, 0, 5000), 3);
  double took = nf_now_ms() - last_sent;
  if (took < 2400 - 20 || took > 5000)
    harness_fail(__FILE__, __LINE__, "left %.0f ms after the last heartbeat (8 x 300 ms)", took);
  nf_cluster_down(&c);
}

TEST(node_exits_1_when_registration_is_refused) {
  fake f;
  nf_fake_start(&f);
  pid_t pid = nf_spawn_node(&f, ROLE_WORKER, 0, 100, 5000);
  nf_accept_n(&f, 1);
  reg r;
  nf_read_register(&f, f.accepted[0], &r);
  wire_wr w;
  wire_wr_init(&w);
  wire_put_registered(&w, &(wire_msg_registered){.message = WIRE_STR("duplicate worker:0")});
  nf_send_wr(r.ctl, &w, WIRE_REGISTERED, 0);
  CHECK_INT_EQ(nf_reap(&f, pid, WAIT_MS), 1);
  nf_fake_stop(&f, NULL, 0);
}
