/* test_ps_repl_sparse.c - ps replicas with sparse tables (issue 26), on
 * real ps processes with the fake of node_fake.h as coordinator and
 * workers: a replica paired in the middle of a sync step takes its
 * primary's table in REPL_SYNC (rows cut in frames of a few rows by
 * DROVER_REPL_PIECE, lazy Adam's slots and counts, the step's summed
 * rows), a SPARSE_PUSH sent before its PUSH is forwarded with it, and the
 * promoted replica and its old primary, given the same pushes apart, hold
 * the same rows bit for bit; a SPARSE_PUSH sent again with its PUSH (same
 * PUSH_ID, as a worker does after a failover) is not applied twice.
 * (tests/cli/test_sparse_replicas.sh: the same on whole clusters.)
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "node_fake.h"
#include "numeric/optim.h"
#include "proto/wire_msgs.h"

#define DIM 3
#define NIDS 6

static const uint64_t g_ids[NIDS] = {1, 5, 9, 17, 20, 999};

static void send_role(peer *ctl, int role, uint64_t token, const reg *to) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_ps_role(&w, &(wire_msg_ps_role){(uint8_t)role, token, WIRE_STR(to ? to->host : ""),
                                           (uint16_t)(to ? to->port : 0),
                                           (uint32_t)(to ? to->index : 0)});
  nf_send_wr(ctl, &w, WIRE_PS_ROLE, 0);
}

/* The next PS_ROLE_OK on ctl: synced, status 0; its message into msg. */
static bool role_ok(fake *f, peer *ctl, char *msg, size_t n) {
  fk_frame *fr = NF_EXPECT(f, ctl, WIRE_PS_ROLE_OK);
  wire_msg_ps_role_ok m;
  CHECK_OK(wire_get_ps_role_ok(fr->p, fr->h.len, &m));
  CHECK_INT_EQ(m.status, 0);
  if (msg) CHECK_OK(wire_str_copy(m.message, msg, n));
  bool synced = m.synced;
  nf_frame_free(fr);
  return synced;
}

static void sparse_init_with(fake *f, peer *coord, bool sync, const optim_cfg *optim) {
  wire_msg_sparse_init m = {.table = 0, .rows = 1000, .dim = DIM, .std = 0.1, .seed = 5,
                            .shard = 0, .shards = 1, .mode = sync, .replicas = 2, .target = 100,
                            .optim = *optim};
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sparse_init(&w, &m);
  nf_send_wr(coord, &w, WIRE_SPARSE_INIT, 3);
  nf_frame_free(NF_EXPECT(f, coord, WIRE_SPARSE_INIT_OK));
}

static void sparse_init(fake *f, peer *coord) {
  optim_cfg adam;
  optim_cfg_default(&adam, OPTIM_ADAM);
  adam.lr = 0.05f;
  sparse_init_with(f, coord, true, &adam);
}

static void put_ids(wire_wr *w, void *ud, uint32_t k) {
  wire_put_item_sparse_id(w, &(wire_item_sparse_id){((const uint64_t *)ud)[k]});
}

/* SPARSE_PUSH of ids (sorted) with gradient rows base + 0.01 * i, then a
 * PUSH_ID {7, seq} and a PUSH of g to var 0 computed on version; whether
 * it counted. */
static bool push(fake *f, peer *pe, uint64_t version, const uint64_t *ids, uint32_t n,
                 float base, uint64_t seq, const tensor *g, uint32_t req) {
  float rows[NIDS * DIM];
  for (uint32_t i = 0; i < n * DIM; i++) rows[i] = base + 0.01f * (float)i;
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sparse_push(&w, &(wire_msg_sparse_push){
      0, version, {n, .put = put_ids, .ud = (void *)ids}, {.ndim = 2, .shape = {n, DIM}, .data = rows}});
  nf_send_wr(pe, &w, WIRE_SPARSE_PUSH, 0);
  wire_wr_init(&w);
  wire_put_push_id(&w, &(wire_msg_push_id){7, seq});
  nf_send_wr(pe, &w, WIRE_PUSH_ID, 0);
  bool applied = false;
  nf_send_push1_v(pe, version, 0, g, req);
  (void)nf_read_push_ok_v(f, pe, req, &applied);
  return applied;
}

/* Every row of g_ids as pe's ps holds it now, into out. */
static void pull_rows(fake *f, peer *pe, uint32_t req, float *out) {
  wire_wr w;
  wire_wr_init(&w);
  wire_put_sparse_pull(&w, &(wire_msg_sparse_pull){0, 0, {NIDS, .put = put_ids, .ud = (void *)g_ids}});
  nf_send_wr(pe, &w, WIRE_SPARSE_PULL, req);
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_SPARSE_PULL_REPLY);
  wire_msg_sparse_pull_reply m;
  CHECK_OK(wire_get_sparse_pull_reply(fr->p, fr->h.len, &m));
  CHECK(m.rows.ndim == 2 && m.rows.shape[0] == NIDS && m.rows.shape[1] == DIM);
  wire_tensor_to(&m.rows, out);
  nf_frame_free(fr);
}

TEST(ps_replica_takes_sparse_tables_in_its_sync_and_forwarded) {
  CHECK(setenv("DROVER_REPL_PIECE", "128", 1) == 0); /* 2 rows of lazy Adam a frame */
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}}, 2, 50, 5000);
  CHECK(unsetenv("DROVER_REPL_PIECE") == 0);
  fake *f = &c.f;
  reg *p = nf_cluster_reg(&c, ROLE_PS, 0), *r = nf_cluster_reg(&c, ROLE_PS, 1);
  optim_cfg adam;
  optim_cfg_default(&adam, OPTIM_ADAM);
  int64_t shape[1] = {2};
  tensor *v0 = nf_filled(1, shape, 0.5f, 0.25f), *g = nf_filled(1, shape, 0.125f, -0.25f);
  peer *coord = nf_cluster_dial(&c, ROLE_PS, 0), *a = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 0);
  /* ps:0 alone, sync with 2 gradients a step: step 1 applied (4 rows
   * created, with slots and counts), then half of step 2 summed */
  nf_var_init_mode(f, coord, 0, 0, true, 2, 100, &adam, v0, 1);
  sparse_init(f, coord);
  const uint64_t s1[] = {1, 5, 9}, s2[] = {5, 17}, s3[] = {17, 20}, s4[] = {1, 999};
  float init[NIDS * DIM];
  pull_rows(f, a, 9, init); /* none held yet: the initial rows */
  CHECK(push(f, a, 0, s1, 3, 0.5f, 1, g, 10));
  CHECK(push(f, a, 0, s2, 2, -0.25f, 2, g, 11));
  CHECK(push(f, a, 1, s2, 2, 0.75f, 3, g, 12));

  send_role(r->ctl, WIRE_PS_REPLICA, 9, NULL);
  CHECK(!role_ok(f, r->ctl, NULL, 0));
  send_role(p->ctl, WIRE_PS_PRIMARY, 9, r);
  char msg[256];
  CHECK(role_ok(f, r->ctl, msg, sizeof msg));
  CHECK_STR_CONTAINS(msg, "sparse tables");

  /* step 2's second half through the primary (forwarded) */
  CHECK(push(f, a, 1, s3, 2, 0.375f, 4, g, 13));
  float on_p[NIDS * DIM], on_r[NIDS * DIM];
  pull_rows(f, a, 15, on_p);
  send_role(r->ctl, WIRE_PS_ALONE, 0, NULL);
  send_role(p->ctl, WIRE_PS_ALONE, 0, NULL);
  peer *b = nf_cluster_dial_as(&c, ROLE_PS, 1, ROLE_WORKER, 1);
  pull_rows(f, b, 20, on_r);
  CHECK(memcmp(on_p, on_r, sizeof on_p) == 0);

  /* apart: ps:0 gets a push it took already sent again (its PUSH_ID seq
   * 4, as a worker resends after a failover, here on the current
   * version): answered, neither its rows nor its gradient taken; then
   * the same step 3 on both, after which rows, slots and counts agree */
  CHECK(push(f, a, 2, s3, 2, 0.375f, 4, g, 16));
  CHECK(push(f, a, 2, s4, 2, 0.5f, 5, g, 17));
  CHECK(push(f, a, 2, s1, 3, -0.5f, 6, g, 18));
  CHECK(push(f, b, 2, s4, 2, 0.5f, 5, g, 21));
  CHECK(push(f, b, 2, s1, 3, -0.5f, 6, g, 22));
  pull_rows(f, a, 19, on_p);
  pull_rows(f, b, 23, on_r);
  CHECK(memcmp(on_p, on_r, sizeof on_p) == 0);
  for (int k = 0; k < NIDS * DIM; k++) CHECK(on_p[k] != init[k]); /* every row moved */
  tensor_free(v0), tensor_free(g);
  nf_cluster_down(&c);
}

TEST(ps_replica_takes_a_tables_plateau_factor_in_its_sync) {
  nf_cluster c;
  nf_cluster_up(&c, (nf_node[]){{ROLE_PS, 0}, {ROLE_PS, 1}}, 2, 50, 5000);
  fake *f = &c.f;
  reg *p = nf_cluster_reg(&c, ROLE_PS, 0), *r = nf_cluster_reg(&c, ROLE_PS, 1);
  optim_cfg sgd;
  optim_cfg_default(&sgd, OPTIM_SGD);
  sgd.lr = 0.5f;
  sgd.sched = (optim_sched){.kind = OSCHED_PLATEAU, .factor = 0.5f, .patience = 1};
  int64_t shape[1] = {2};
  tensor *v0 = nf_filled(1, shape, 0.5f, 0.25f), *g = nf_filled(1, shape, 0.125f, -0.25f);
  peer *coord = nf_cluster_dial(&c, ROLE_PS, 0), *a = nf_cluster_dial_as(&c, ROLE_PS, 0, ROLE_WORKER, 0);
  /* async: a push, then the plateau's cut (LR_SCALE 0.25), then ps:1
   * paired: the factor reaches it in REPL_TABLE alone */
  nf_var_init(f, coord, 0, 0, &sgd, v0, 1);
  sparse_init_with(f, coord, false, &sgd);
  const uint64_t s1[] = {1, 5, 9};
  CHECK(push(f, a, 0, s1, 3, 0.5f, 1, g, 10));
  wire_wr w;
  wire_wr_init(&w);
  wire_put_lr_scale(&w, &(wire_msg_lr_scale){0.25, 0});
  nf_send_wr(coord, &w, WIRE_LR_SCALE, 0);
  send_role(r->ctl, WIRE_PS_REPLICA, 4, NULL);
  CHECK(!role_ok(f, r->ctl, NULL, 0));
  send_role(p->ctl, WIRE_PS_PRIMARY, 4, r);
  CHECK(role_ok(f, r->ctl, NULL, 0));
  send_role(r->ctl, WIRE_PS_ALONE, 0, NULL);
  /* promoted: a push steps the rows by lr * 0.25 * g */
  peer *b = nf_cluster_dial_as(&c, ROLE_PS, 1, ROLE_WORKER, 1);
  float before[NIDS * DIM], after[NIDS * DIM];
  pull_rows(f, b, 20, before);
  CHECK(push(f, b, 1, s1, 3, 0.5f, 2, g, 21));
  pull_rows(f, b, 22, after);
  for (int i = 0; i < 3; i++) /* g_ids[0..2] are s1's ids, in order */
    for (int j = 0; j < DIM; j++)
      CHECK_NEAR(before[i * DIM + j] - after[i * DIM + j],
                 0.5 * 0.25 * (0.5 + 0.01 * (i * DIM + j)), 1e-6);
  tensor_free(v0), tensor_free(g);
  nf_cluster_down(&c);
}
