/* test_manifest.c - a checkpoint's manifest: sizes and SHA-256 of its
 * files, committed atomically, and a verification that names a truncated,
 * a bit-flipped or a missing file; and the checkpoints built on it. */
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "harness.h"
#include "manifest.h"

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

TEST(manifest_hash_known_value) {
  put("abc", "abc");
  char hex[65];
  uint64_t size;
  CHECK(manifest_hash_file("abc", hex, &size) == 0);
  CHECK(size == 3);
  CHECK(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
}

TEST(manifest_commit_read_verify) {
  CHECK(mkdir("c", 0755) == 0);
  put("c/a", "hello");
  put("c/b", "world!");
  const char *files[] = {"a", "b", NULL}, *meta[] = {"step", "12", "eval_accuracy", "0.5", NULL};
  CHECK(manifest_commit("c", files, meta) == 0);
  manifest m;
  CHECK(manifest_read("c", &m) == 0);
  CHECK(m.nfiles == 2 && m.files[1].size == 6);
  CHECK(strcmp(manifest_meta(&m, "step"), "12") == 0);
  CHECK(manifest_meta(&m, "nope") == NULL);
  CHECK(manifest_verify("c", &m) == 0);
  put("c/b", "world"); /* truncated */
  CHECK(manifest_verify("c", &m) < 0);
  CHECK(strstr(drv_errmsg(), "c/b") && strstr(drv_errmsg(), "truncated"));
  put("c/b", "worle!"); /* one bit */
  CHECK(manifest_verify("c", &m) < 0);
  CHECK(strstr(drv_errmsg(), "c/b") && strstr(drv_errmsg(), "sha256"));
  unlink("c/a");
  CHECK(manifest_verify("c", &m) < 0 && strstr(drv_errmsg(), "c/a"));
  manifest_free(&m);
  CHECK(access("c/manifest.json.tmp", F_OK) != 0);
}

TEST(manifest_missing_and_malformed) {
  CHECK(mkdir("d", 0755) == 0);
  manifest m;
  CHECK(manifest_read("d", &m) < 0);
  manifest_free(&m);
  put("d/manifest.json", "{\"format\": \"drover-manifest-1\", \"files\": [{\"name\": \"x\"}], \"meta\": {}}");
  CHECK(manifest_read("d", &m) < 0 && strstr(drv_errmsg(), "file entry 0"));
  manifest_free(&m);
  put("d/manifest.json", "{\"format\": \"other\"}");
  CHECK(manifest_read("d", &m) < 0 && strstr(drv_errmsg(), "not a drover manifest"));
  manifest_free(&m);
}

TEST(manifest_commit_missing_file_writes_nothing) {
  CHECK(mkdir("e", 0755) == 0);
  const char *files[] = {"absent", NULL};
  CHECK(manifest_commit("e", files, NULL) < 0);
  CHECK(strstr(drv_errmsg(), "e/absent"));
  CHECK(access("e/manifest.json", F_OK) != 0);
}

/* ckpt_list, ckpt_newest and ckpt_prune on hand-made step directories. */
static void step(int n, const char *acc, bool commit) {
  char dir[64], f[96];
  snprintf(dir, sizeof dir, "k/step-%d", n);
  CHECK(mkdir(dir, 0755) == 0);
  snprintf(f, sizeof f, "%s/x", dir);
  put(f, "data");
  const char *files[] = {"x", NULL}, *meta[] = {"eval_accuracy", acc, NULL};
  if (commit) CHECK(manifest_commit(dir, files, meta) == 0);
}

TEST(ckpt_keep_and_keep_best) {
  CHECK(mkdir("k", 0755) == 0);
  step(5, "0.2", true);
  step(10, "0.9", true);
  step(15, "0.5", true);
  step(20, "0.4", true);
  step(25, "0.1", true);
  step(30, "0.3", false); /* no manifest: not a checkpoint */
  ckpt_entry *all;
  CHECK(ckpt_list("k", &all) == 5 && all[0].step == 5 && all[4].step == 25);
  free(all);
  CHECK(ckpt_prune("k", 2, "eval_accuracy", true) == 3); /* 5, 15 and the uncommitted 30 */
  CHECK(ckpt_list("k", &all) == 3 && all[0].step == 10 && all[1].step == 20 && all[2].step == 25);
  free(all);
  CHECK(ckpt_prune("k", 2, NULL, true) == 1);
  CHECK(ckpt_list("k", &all) == 2 && all[0].step == 20);
  free(all);
  put("k/step-25/x", "dat"); /* truncated: the newest intact one is 20 */
  ckpt_entry e;
  CHECK(ckpt_newest("k", &e, NULL, NULL) == 1 && e.step == 20);
}
