/* test_ps_repl.c - ps replicas on two real ps processes, the fake of
 * node_fake.h playing the coordinator and the clients: the pairing
 * (PS_ROLE to the replica, its PS_ROLE_OK, PS_ROLE to the primary, the
 * replica in sync), pushes applied on both and a push sent again (same
 * PUSH_ID) not applied twice, a replica that serves nobody but its
 * primary (a client; replication from a non-ps identity, refused at the
 * frame header; a wrong token; REPL from another connection), and
 * the promoted replica holding the primary's values bit for bit; a
 * plateau schedule's LR_SCALE reaching the replica both ways (forwarded,
 * and in the REPL_SYNC of a replica paired after it), so a promoted one
 * goes on at the scaled rate; the state streamed in pieces of a few bytes
 * (DROVER_REPL_PIECE) arriving whole (values, optimizer slots, a gradient
 * sum); a SYNC_STOP cap in force reaching a replica paired under it; a
 * ps refusing to start with a DROVER_REPL_PIECE it cannot honour.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "proto/auth.h"
#include "base/err.h"
#include "harness.h"
#include "proto/keyring.h"
#include "node_fake.h"
#include "cluster/ps/ps.h"
#include "proto/wire_msgs.h"

/* to: the replica (PRIMARY), NULL otherwise. */
static void send_role(peer *ctl, int role, uint64_t token, const reg *to) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ps_role(&w, &(wire_msg_ps_role){(uint8_t)role, token, WIRE_STR(to ? to->host : ""),
                                           (uint16_t)(to ? to->port : 0),
                                           (uint32_t)(to ? to->index : 0)});
  nf_send_wr(ctl, &w, WIRE_PS_ROLE, 0);
}

/* The next PS_ROLE_OK on ctl: its synced flag (status 0 checked) and,
 * when msg is not NULL, its message (n bytes). */
static bool role_ok_msg(fake *f, peer *ctl, char *msg, size_t n) {
  fk_frame *fr = NF_EXPECT(f, ctl, WIRE_PS_ROLE_OK);
  wire_msg_ps_role_ok m;
  CHECK_OK(wire_get_ps_role_ok(fr->p, fr->h.len, &m));
  CHECK_INT_EQ(m.status, 0);
  if (msg) CHECK_OK(wire_str_copy(m.message, msg, n));
  bool synced = m.synced;
  nf_frame_free(fr);
  return synced;
}

static bool role_ok(fake *f, peer *ctl) { return role_ok_msg(f, ctl, NULL, 0); }

/* PUSH_ID {client, seq} then a PUSH of grad to var 0; its PUSH_OK's step. */
static uint64_t push_id(fake *f, peer *pe, uint32_t client, uint64_t seq, const tensor *g,
                        uint32_t req) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_push_id(&w, &(wire_msg_push_id){client, seq});
  nf_send_wr(pe, &w, WIRE_PUSH_ID, 0);
  nf_send_push1(pe, 0, g, req);
  return nf_read_push_ok(f, pe, req);
}

/* Sends `type` with an empty-ish payload to the replica as node (role,
 * index); the ERROR's text. */
static const char *refused(nf_cluster *c, int role, uint32_t index, uint8_t type, wire_wr *w) {
  peer *x = nf_cluster_dial_as(c, ROLE_PS, 1, role, index);
  nf_send_wr(x, w, type, 1);
  return nf_expect_error_and_close(&c->f, x);
}

/* The same, refused at the frame header (the accept table: no ERROR, the
 * connection closed). */
static void not_accepted(nf_cluster *c, int role, uint32_t index, uint8_t type, wire_wr *w) {
  peer *x = nf_cluster_dial_as(c, ROLE_PS, 1, role, index);
  nf_send_wr(x, w, type, 1);
  CHECK(nf_pump(&c->f, nf_peer_closed, x, 5000));
}

TEST(ps_replica_pairs_replicates_refuses_and_is_promoted) {
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}}, 2, 50, 5000);
  fake *f = &c.f;
  reg *p = nf_cluster_reg(&c, ROLE_PS, 0), *r = nf_cluster_reg(&c, ROLE_PS, 1);
  send_role(r->ctl, WIRE_PS_REPLICA, 42, NULL);
  CHECK(!role_ok(f, r->ctl)); /* it expects its primary */
  send_role(p->ctl, WIRE_PS_PRIMARY, 42, r);
  CHECK(role_ok(f, r->ctl)); /* in sync (an empty ps) */

  peer *coord = nf_cluster_dial(&c, ROLE_PS, 0), *a = nf_cluster_dial(&c, ROLE_PS, 0);
  optim_cfg adam;
  optim_cfg_default(&adam, OPTIM_ADAM);
  int64_t shape[2] = {2, 3};
  tensor *v0 = nf_filled(2, shape, -1.25f, 0.375f), *g = nf_filled(2, shape, 0.3f, -0.17f);
  nf_var_init(f, coord, 0, 0, &adam, v0, 1);
  CHECK_INT_EQ(push_id(f, a, 7, 1, g, 10), 1);
  CHECK_INT_EQ(push_id(f, a, 7, 2, g, 11), 2);
  CHECK_INT_EQ(push_id(f, a, 7, 2, g, 12), 2); /* sent again: answered, not applied */
  tensor *on_primary = nf_pull1(f, a, 0, 13);

  /* The replica serves nobody else: replication comes from a ps identity
   * only (the coordinator's key or a worker's is refused at the header),
   * and from that ps with the token, on its primary's connection. */
  wire_wr w;
  wire_wr_init(&w);
  wire_put_pull(&w, &(wire_msg_pull){0, {0}});
  CHECK_STR_CONTAINS(refused(&c, AUTH_ROLE_COORD, 0, WIRE_PULL, &w), "this ps is a replica");
  wire_wr_init(&w);
  wire_put_repl_sync(&w, &(wire_msg_repl_sync){.token = 42});
  not_accepted(&c, AUTH_ROLE_COORD, 0, WIRE_REPL_SYNC, &w);
  wire_wr_init(&w);
  wire_put_repl_sync(&w, &(wire_msg_repl_sync){.token = 42});
  not_accepted(&c, ROLE_WORKER, 0, WIRE_REPL_SYNC, &w);
  wire_wr_init(&w);
  wire_put_repl(&w, &(wire_msg_repl){.seq = 1, .type = WIRE_PUSH});
  not_accepted(&c, ROLE_WORKER, 0, WIRE_REPL, &w);
  wire_wr_init(&w);
  wire_put_pull(&w, &(wire_msg_pull){0, {0}});
  not_accepted(&c, ROLE_PS, 0, WIRE_PULL, &w); /* a ps pulls from no ps */
  wire_wr_init(&w);
  wire_put_repl_sync(&w, &(wire_msg_repl_sync){.token = 41});
  CHECK_STR_CONTAINS(refused(&c, ROLE_PS, 0, WIRE_REPL_SYNC, &w), "without the token");
  wire_wr_init(&w);
  wire_put_repl(&w, &(wire_msg_repl){.seq = 1, .type = WIRE_PUSH});
  CHECK_STR_CONTAINS(refused(&c, ROLE_PS, 0, WIRE_REPL, &w), "not this replica's primary");

  /* Promoted: the same values bit for bit, and the push sent again there
   * is still known. */
  send_role(r->ctl, WIRE_PS_ALONE, 0, NULL);
  peer *b = nf_cluster_dial(&c, ROLE_PS, 1);
  tensor *on_replica = nf_pull1(f, b, 0, 20);
  CHECK(nf_same_bits(on_primary, on_replica));
  CHECK_INT_EQ(push_id(f, b, 7, 2, g, 21), 2);
  tensor *again = nf_pull1(f, b, 0, 22);
  CHECK(nf_same_bits(on_primary, again));
  CHECK_INT_EQ(push_id(f, b, 7, 3, g, 23), 3);

  tensor_free(v0), tensor_free(g), tensor_free(on_primary), tensor_free(on_replica);
  tensor_free(again);
  nf_cluster_down(&c);
}

/* LR_SCALE {scale} from the coordinator (no reply). */
static void lr_scale(peer *coord, double scale) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_lr_scale(&w, &(wire_msg_lr_scale){scale, 0});
  nf_send_wr(coord, &w, WIRE_LR_SCALE, 0);
}

/* Pushes g to var 0 on pe and checks the step was lr * scale * g (SGD). */
static void check_rate(fake *f, peer *pe, const tensor *g, double lr, double scale, uint32_t req) {
  tensor *before = nf_pull1(f, pe, 0, req);
  nf_send_push1(pe, 0, g, req + 1);
  (void)nf_read_push_ok(f, pe, req + 1);
  tensor *after = nf_pull1(f, pe, 0, req + 2);
  const float *b = tensor_data(before), *a = tensor_data(after), *d = tensor_data(g);
  for (int64_t i = 0; i < tensor_numel(g); i++)
    CHECK_NEAR(b[i] - a[i], lr * scale * d[i], 1e-6);
  tensor_free(before), tensor_free(after);
}

TEST(ps_replica_takes_lr_scale_forwarded_and_in_its_sync) {
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}, {ROLE_PS, 2}}, 3, 50, 5000);
  fake *f = &c.f;
  reg *p0 = nf_cluster_reg(&c, ROLE_PS, 0), *p1 = nf_cluster_reg(&c, ROLE_PS, 1),
      *p2 = nf_cluster_reg(&c, ROLE_PS, 2);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  sgd.lr = 0.5f;
  sgd.sched = (optim_sched){.kind = OSCHED_PLATEAU, .factor = 0.5f, .patience = 1};
  int64_t shape[2] = {2, 3};
  tensor *v0 = nf_filled(2, shape, -1.25f, 0.375f), *g = nf_filled(2, shape, 0.25f, 0.125f);

  /* ps:0 alone gets its variable and a reduction, then ps:1 as its
   * replica: the reduction reaches ps:1 in REPL_SYNC; a second one is
   * forwarded (REPL). Promoted, ps:1 runs at the last one. */
  peer *coord0 = nf_cluster_dial(&c, ROLE_PS, 0);
  nf_var_init(f, coord0, 0, 0, &sgd, v0, 1);
  lr_scale(coord0, 0.5);
  send_role(p1->ctl, WIRE_PS_REPLICA, 7, NULL);
  CHECK(!role_ok(f, p1->ctl));
  send_role(p0->ctl, WIRE_PS_PRIMARY, 7, p1);
  CHECK(role_ok(f, p1->ctl));
  lr_scale(coord0, 0.25);
  peer *w0 = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 0);
  check_rate(f, w0, g, 0.5, 0.25, 10); /* also: the LR_SCALE went before this push */
  send_role(p1->ctl, WIRE_PS_ALONE, 0, NULL);
  peer *w1 = nf_cluster_dial_as(&c, ROLE_PS, 1, ROLE_WORKER, 0);
  check_rate(f, w1, g, 0.5, 0.25, 20);

  /* ps:1, now the primary, pairs with ps:2: the scale goes in REPL_SYNC
   * alone (no LR_SCALE after), and a promoted ps:2 keeps it. */
  send_role(p2->ctl, WIRE_PS_REPLICA, 8, NULL);
  CHECK(!role_ok(f, p2->ctl));
  send_role(p1->ctl, WIRE_PS_PRIMARY, 8, p2);
  CHECK(role_ok(f, p2->ctl));
  send_role(p2->ctl, WIRE_PS_ALONE, 0, NULL);
  peer *w2 = nf_cluster_dial_as(&c, ROLE_PS, 2, ROLE_WORKER, 0);
  check_rate(f, w2, g, 0.5, 0.25, 30);

  tensor_free(v0), tensor_free(g);
  nf_cluster_down(&c);
}

/* Pairs ps:r as the replica of ps:p (token) and returns once it is in
 * sync; msg gets its PS_ROLE_OK's message. */
static void pair(nf_cluster *c, int p, int r, uint64_t token, char *msg, size_t n) {
  reg *pr = nf_cluster_reg(c, ROLE_PS, p), *rr = nf_cluster_reg(c, ROLE_PS, r);
  send_role(rr->ctl, WIRE_PS_REPLICA, token, NULL);
  CHECK(!role_ok(&c->f, rr->ctl));
  send_role(pr->ctl, WIRE_PS_PRIMARY, token, rr);
  CHECK(role_ok_msg(&c->f, rr->ctl, msg, n));
}

/* A sync push of g to var on pe computed on `version`; PUSH_OK's applied. */
static bool push_v(fake *f, peer *pe, uint64_t version, uint32_t var, const tensor *g,
                   uint32_t req) {
  bool applied = false;
  nf_send_push1_v(pe, version, var, g, req);
  (void)nf_read_push_ok_v(f, pe, req, &applied);
  return applied;
}

/* The version a PULL of no variables reads on pe. */
static uint64_t version_of(fake *f, peer *pe, uint32_t req) {
  nf_send_pull_v(pe, 0, NULL, 0, req);
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_PULL_REPLY);
  uint64_t v = nf_read_pull_reply_v(fr, NULL, 0, NULL);
  nf_frame_free(fr);
  return v;
}

TEST(ps_replica_sync_streams_in_pieces) {
  /* 8-byte pieces: two floats a frame, so every part of every shard is
   * cut in several. The children inherit the knob. */
  CHECK(setenv("DROVER_REPL_PIECE", "8", 1) == 0);
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}}, 2, 50, 5000);
  CHECK(unsetenv("DROVER_REPL_PIECE") == 0);
  fake *f = &c.f;
  optim_cfg adam;
  optim_cfg_default(&adam, OPTIM_ADAM);
  int64_t shape[2] = {2, 3};
  tensor *v0 = nf_filled(2, shape, -1.25f, 0.375f), *v1 = nf_filled(2, shape, 0.5f, -0.25f),
         *g = nf_filled(2, shape, 0.3f, -0.17f);
  /* ps:0 alone, sync with 2 gradients an update: one update applied (the
   * Adam slots are not zero), then half of the next summed on var 0 only
   * (a gradient sum on var 0, none on var 1). */
  peer *coord = nf_cluster_dial(&c, ROLE_PS, 0), *a = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 0);
  nf_var_init_mode(f, coord, 0, 0, true, 2, 100, &adam, v0, 1);
  nf_var_init_mode(f, coord, 1, 0, true, 2, 100, &adam, v1, 2);
  CHECK(push_v(f, a, 0, 0, g, 10));
  CHECK(push_v(f, a, 0, 1, g, 11));
  CHECK_INT_EQ(version_of(f, a, 12), 1);
  CHECK(push_v(f, a, 1, 0, g, 13));

  char msg[256];
  pair(&c, 0, 1, 9, msg, sizeof msg);
  /* var 0: the shard frame, 3 pieces each of values, gradient sum and two
   * slots; var 1 the same without a sum; REPL_SYNC and REPL_SYNC_END. */
  CHECK_STR_CONTAINS(msg, "2 shards, 168 bytes in 25 frames");

  /* Apart, both take the same second gradient and must agree bit for bit. */
  send_role(nf_cluster_reg(&c, ROLE_PS, 1)->ctl, WIRE_PS_ALONE, 0, NULL);
  send_role(nf_cluster_reg(&c, ROLE_PS, 0)->ctl, WIRE_PS_ALONE, 0, NULL);
  peer *b = nf_cluster_dial_as(&c, ROLE_PS, 1, ROLE_WORKER, 1);
  CHECK(push_v(f, a, 1, 0, g, 20));
  CHECK(push_v(f, b, 1, 0, g, 30));
  uint32_t vars[2] = {0, 1};
  tensor *on_a[2], *on_b[2];
  nf_send_pull_v(a, 2, vars, 2, 21);
  fk_frame *fr = NF_EXPECT(f, a, WIRE_PULL_REPLY);
  CHECK_INT_EQ(nf_read_pull_reply_v(fr, vars, 2, on_a), 2);
  nf_frame_free(fr);
  nf_send_pull_v(b, 2, vars, 2, 31);
  fr = NF_EXPECT(f, b, WIRE_PULL_REPLY);
  CHECK_INT_EQ(nf_read_pull_reply_v(fr, vars, 2, on_b), 2);
  nf_frame_free(fr);
  for (int k = 0; k < 2; k++) {
    CHECK(nf_same_bits(on_a[k], on_b[k]));
    tensor_free(on_a[k]), tensor_free(on_b[k]);
  }
  tensor_free(v0), tensor_free(v1), tensor_free(g);
  nf_cluster_down(&c);
}

/* SYNC_STOP {target} from the coordinator (no reply). */
static void sync_stop(peer *coord, uint64_t target) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sync_stop(&w, &(wire_msg_sync_stop){.target = target});
  nf_send_wr(coord, &w, WIRE_SYNC_STOP, 0);
}

TEST(ps_replica_synced_under_a_sync_stop_cap_keeps_it) {
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}}, 2, 50, 5000);
  fake *f = &c.f;
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  int64_t shape[2] = {2, 3};
  tensor *v0 = nf_filled(2, shape, -1.25f, 0.375f), *g = nf_filled(2, shape, 0.25f, 0.125f);
  peer *coord = nf_cluster_dial(&c, ROLE_PS, 0), *a = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 0);
  nf_var_init_mode(f, coord, 0, 0, true, 1, 10, &sgd, v0, 1);
  CHECK(push_v(f, a, 0, 0, g, 10));
  /* capped at version 1: the last step becomes 2, whose gradients the ps
   * still sums once there (the final target may be one further) */
  sync_stop(coord, 0);
  CHECK_INT_EQ(version_of(f, coord, 2), 1);
  CHECK(push_v(f, a, 1, 0, g, 11));
  CHECK_INT_EQ(version_of(f, coord, 3), 2);

  /* ps:1 paired now, under the cap, then promoted: it sums step 3's
   * gradient like its primary would, and the final target applies it. */
  char msg[256];
  pair(&c, 0, 1, 5, msg, sizeof msg);
  CHECK_STR_CONTAINS(msg, "capped");
  send_role(nf_cluster_reg(&c, ROLE_PS, 1)->ctl, WIRE_PS_ALONE, 0, NULL);
  peer *coord1 = nf_cluster_dial(&c, ROLE_PS, 1), *b = nf_cluster_dial_as(&c, ROLE_PS, 1, ROLE_WORKER, 0);
  CHECK(push_v(f, b, 2, 0, g, 20)); /* summed at the cap, not ignored */
  sync_stop(coord1, 3);
  CHECK_INT_EQ(version_of(f, coord1, 4), 3);
  tensor_free(v0), tensor_free(g);
  nf_cluster_down(&c);
}

TEST(ps_refuses_to_start_with_a_bad_repl_piece) {
  uv_loop_t loop;
  CHECK_OK(uv_loop_init(&loop));
  keyring s = {.has_root = true};
  CHECK_OK(auth_secret_generate(&s.root));
  const char *bad[] = {"6", "0", "-4", "4x", "67108868"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK(setenv("DROVER_REPL_PIECE", bad[i], 1) == 0);
    ps_server *ps = NULL;
    int port = 0;
    CHECK(ps_start(&loop, &s, 0, "127.0.0.1", &ps, &port) < 0);
    CHECK(ps == NULL);
    CHECK_STR_CONTAINS(err_msg(), "DROVER_REPL_PIECE=");
    CHECK_STR_CONTAINS(err_msg(), "a multiple of 4");
  }
  CHECK(unsetenv("DROVER_REPL_PIECE") == 0);
  CHECK_OK(uv_loop_close(&loop));
}

/* A push large enough to be read in place on a same-host link (the ps
 * takes its floats where they lie in the ring): forwarded to the replica
 * whole (conn_payload_copy), so the promoted replica holds the primary's
 * values bit for bit, and both are the update of those floats. */
TEST(ps_replica_gets_a_push_read_in_place_whole) {
  conn_set_transport(CONN_TRANSPORT_AUTO); /* the ps processes inherit it */
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}}, 2, 50, 5000);
  fake *f = &c.f;
  reg *p = nf_cluster_reg(&c, ROLE_PS, 0), *r = nf_cluster_reg(&c, ROLE_PS, 1);
  send_role(r->ctl, WIRE_PS_REPLICA, 42, NULL);
  CHECK(!role_ok(f, r->ctl));
  send_role(p->ctl, WIRE_PS_PRIMARY, 42, r);
  CHECK(role_ok(f, r->ctl));
  peer *coord = nf_cluster_dial(&c, ROLE_PS, 0), *a = nf_cluster_dial(&c, ROLE_PS, 0);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  sgd.lr = 0.5f;
  int64_t shape[2] = {512, 256}; /* 512 KiB of floats */
  tensor *v0 = nf_filled(2, shape, -1.25f, 0.001f), *g = nf_filled(2, shape, 0.25f, -0.0005f);
  nf_var_init(f, coord, 0, 0, &sgd, v0, 1);
  CHECK_INT_EQ(push_id(f, a, 9, 1, g, 10), 1);
  CHECK(strcmp(conn_transport(a->c), "shm") == 0);
  tensor *on_primary = nf_pull1(f, a, 0, 11);
  const float *v = tensor_data(v0), *d = tensor_data(g), *got = tensor_data(on_primary);
  for (int64_t i = 0; i < tensor_numel(g); i += 997) CHECK_NEAR(got[i], v[i] - 0.5 * d[i], 1e-4);
  send_role(r->ctl, WIRE_PS_ALONE, 0, NULL);
  peer *b = nf_cluster_dial(&c, ROLE_PS, 1);
  tensor *on_replica = nf_pull1(f, b, 0, 20);
  CHECK(nf_same_bits(on_primary, on_replica));
  tensor_free(v0), tensor_free(g), tensor_free(on_primary), tensor_free(on_replica);
  nf_cluster_down(&c);
}
