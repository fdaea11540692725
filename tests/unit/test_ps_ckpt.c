/* test_ps_ckpt.c - CHECKPOINT and RESTORE on a real ps process: the
 * snapshot written as safetensors (PyTorch names, slots, row0 and update
 * counts in the metadata), a sync snapshot held until its version, a
 * write that fails answered with the reason, and RESTORE bringing values,
 * slots and the version back (and closing the connections that pushed
 * before it). The fake of node_fake.h plays the
 * coordinator and a worker.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "node_fake.h"
#include "base/safetensors.h"
#include "proto/wire_msgs.h"

static bool safe_eq(const char *a, const char *b) { return a && strcmp(a, b) == 0; }

typedef struct one_name {
  const char *name;
} one_name;

static void put_one(wire_wr *w, void *ud, uint32_t i) {
  (void)i;
  wire_put_item_var_name(w, &(wire_item_var_name){0, WIRE_STR(((one_name *)ud)->name)});
}

static void send_checkpoint(peer *pe, uint64_t at, const char *path, uint32_t req) {
  one_name n = {"0.weight"};
  wire_wr w;
  wire_wr_init(&w);
  wire_put_checkpoint(&w, &(wire_msg_checkpoint){at, WIRE_STR(path), {1, .put = put_one, .ud = &n},
                                                 WIRE_CKPT_PATH});
  nf_send_wr(pe, &w, WIRE_CHECKPOINT, req);
}

/* The CHECKPOINT_OK of req: its status, version into *version, message into msg. */
static int32_t read_ckpt_ok(fake *f, peer *pe, uint32_t req, uint64_t *version, char *msg,
                            size_t n) {
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_CHECKPOINT_OK);
  CHECK_INT_EQ(fr->h.req, req);
  wire_msg_checkpoint_ok m;
  CHECK_OK(wire_get_checkpoint_ok(fr->p, fr->h.len, &m));
  *version = m.version;
  wire_str_copy(m.message, msg, n);
  int32_t st = m.status;
  nf_frame_free(fr);
  return st;
}

static tensor *pull_v(fake *f, peer *pe, uint64_t min_version, uint32_t req, uint64_t *version) {
  uint32_t var = 0;
  tensor *out;
  nf_send_pull_v(pe, min_version, &var, 1, req);
  fk_frame *fr = NF_EXPECT(f, pe, WIRE_PULL_REPLY);
  *version = nf_read_pull_reply_v(fr, &var, 1, &out);
  nf_frame_free(fr);
  return out;
}

TEST(ps_checkpoint_writes_holds_fails_and_restores) {
  nf_cluster c;
  nf_cluster_up(&c, &(nf_node){ROLE_PS, 0}, 1, 50, 5000);
  fake *f = &c.f;
  peer *a = nf_cluster_dial(&c, ROLE_PS, 0), *coord = nf_cluster_dial(&c, ROLE_PS, 0);
  optim_cfg adam;
  optim_cfg_default(&adam, OPTIM_ADAM);
  int64_t shape[2] = {2, 3};
  tensor *v0 = nf_filled(2, shape, -1.25f, 0.375f), *g = nf_filled(2, shape, 0.3f, -0.17f);
  nf_var_init_mode(f, coord, 0, 4, true, 1, 10, &adam, v0, 1); /* sync, 1 gradient per update */
  char cwd[512], path[700], msg[1024];
  CHECK(getcwd(cwd, sizeof cwd));
  snprintf(path, sizeof path, "%s/ps-0.safetensors", cwd);
  uint64_t version, step;

  /* Sync, version 2 asked at version 0: held until the second update. */
  send_checkpoint(coord, 2, path, 5);
  nf_send_push1_v(a, 0, 0, g, 10);
  CHECK_INT_EQ(nf_read_push_ok(f, a, 10), 1);
  nf_pump_for(f, 100);
  CHECK(coord->head == NULL);
  nf_send_push1_v(a, 1, 0, g, 11);
  CHECK_INT_EQ(nf_read_push_ok(f, a, 11), 2);
  CHECK_INT_EQ(read_ckpt_ok(f, coord, 5, &version, msg, sizeof msg), 0);
  CHECK_INT_EQ(version, 2);
  tensor *v2 = pull_v(f, a, 0, 12, &step);

  safetensors_file sf;
  CHECK_OK(safetensors_read(path, &sf));
  const safetensors_tensor *t = safetensors_find(&sf, "0.weight");
  CHECK(t && t->numel == 6 && memcmp(t->data, tensor_data(v2), 6 * sizeof(float)) == 0);
  CHECK(safetensors_find(&sf, "optim.0.weight.0") && safetensors_find(&sf, "optim.0.weight.1"));
  CHECK(safe_eq(safetensors_meta(&sf, "0.weight.row0"), "4"));
  CHECK(safe_eq(safetensors_meta(&sf, "0.weight.updates"), "2"));
  CHECK(safe_eq(safetensors_meta(&sf, "version"), "2"));
  safetensors_free(&sf);

  /* A version already past: ERANGE, asked again by the coordinator. */
  send_checkpoint(coord, 1, path, 6);
  CHECK_INT_EQ(read_ckpt_ok(f, coord, 6, &version, msg, sizeof msg), DRV_ERANGE);
  /* A write that fails names the file and the reason; the ps goes on. */
  send_checkpoint(coord, 0, "/nonexistent-dir/ps-0.safetensors", 7);
  CHECK(read_ckpt_ok(f, coord, 7, &version, msg, sizeof msg) < 0);
  CHECK_STR_CONTAINS(msg, "/nonexistent-dir/ps-0.safetensors");

  /* Two more updates, then RESTORE: values and version come back, and a
   * pull from before the rollback (far ahead) is answered at once. */
  for (uint64_t ver = 2; ver <= 3; ver++) {
    nf_send_push1_v(a, ver, 0, g, (uint32_t)(20 + ver));
    nf_read_push_ok(f, a, (uint32_t)(20 + ver));
  }
  one_name n = {"0.weight"};
  wire_wr w;
  wire_wr_init(&w);
  wire_put_restore(&w, &(wire_msg_restore){2, WIRE_STR(path), {1, .put = put_one, .ud = &n},
                                           WIRE_CKPT_PATH});
  nf_send_wr(coord, &w, WIRE_RESTORE, 8);
  fk_frame *fr = NF_EXPECT(f, coord, WIRE_RESTORE_OK);
  wire_msg_restore_ok ro;
  CHECK_OK(wire_get_restore_ok(fr->p, fr->h.len, &ro));
  CHECK_INT_EQ(ro.status, 0);
  nf_frame_free(fr);
  /* The connection that pushed before the rollback is closed: nothing
   * still unread on it can reach the restored values. */
  CHECK(nf_pump(f, nf_peer_closed, a, 5000));
  peer *b = nf_cluster_dial(&c, ROLE_PS, 0);
  tensor *back = pull_v(f, b, 5, 30, &step);
  CHECK_INT_EQ(step, 2);
  CHECK(nf_same_bits(back, v2));
  /* A push computed before the rollback (version 4) is dropped, not an error. */
  bool applied = true;
  nf_send_push1_v(b, 4, 0, g, 31);
  nf_read_push_ok_v(f, b, 31, &applied);
  CHECK(!applied);

  nf_cluster_down(&c);
  tensor_free(back);
  tensor_free(v2);
  tensor_free(v0);
  tensor_free(g);
}
