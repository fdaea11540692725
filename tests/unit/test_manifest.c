/* test_manifest.c - a checkpoint's manifest: sizes and SHA-256 of its
 * files, committed atomically, and a verification that names a truncated,
 * a bit-flipped or a missing file; and the checkpoints built on it. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/ckpt.h"
#include "harness.h"
#include "base/manifest.h"
#include "base/safetensors.h"

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
  CHECK(strstr(err_msg(), "c/b") && strstr(err_msg(), "truncated"));
  put("c/b", "worle!"); /* one bit */
  CHECK(manifest_verify("c", &m) < 0);
  CHECK(strstr(err_msg(), "c/b") && strstr(err_msg(), "sha256"));
  unlink("c/a");
  CHECK(manifest_verify("c", &m) < 0 && strstr(err_msg(), "c/a"));
  manifest_free(&m);
  CHECK(access("c/manifest.json.tmp", F_OK) != 0);
}

TEST(manifest_missing_and_malformed) {
  CHECK(mkdir("d", 0755) == 0);
  manifest m;
  CHECK(manifest_read("d", &m) < 0);
  manifest_free(&m);
  put("d/manifest.json", "{\"format\": \"drover-manifest-1\", \"files\": [{\"name\": \"x\"}], \"meta\": {}}");
  CHECK(manifest_read("d", &m) < 0 && strstr(err_msg(), "file entry 0"));
  manifest_free(&m);
  put("d/manifest.json", "{\"format\": \"other\"}");
  CHECK(manifest_read("d", &m) < 0 && strstr(err_msg(), "not a drover manifest"));
  manifest_free(&m);
}

TEST(manifest_commit_missing_file_writes_nothing) {
  CHECK(mkdir("e", 0755) == 0);
  const char *files[] = {"absent", NULL};
  CHECK(manifest_commit("e", files, NULL) < 0);
  CHECK(strstr(err_msg(), "e/absent"));
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

/* A file over 32 MiB written by the hashing writer: chunk hashes (computed
 * in parallel as it was written) that match the file's bytes chunk by
 * chunk; the manifest keeps them, verifies them, and names the chunk a
 * flipped bit is in, or a truncation. */
TEST(manifest_chunk_hashes_of_a_big_file) {
  CHECK(mkdir("big", 0755) == 0);
  int64_t shape[1] = {(int64_t)(80u << 20) / 4}; /* 80 MiB: 3 chunks of 32 MiB */
  float *data = malloc((size_t)shape[0] * 4);
  CHECK(data != NULL);
  for (int64_t i = 0; i < shape[0]; i++) data[i] = (float)(i % 1000) * 0.5f;
  safetensors_entry e = {"w", 1, shape, data, NULL};
  char digest[MANIFEST_DIGEST_MAX];
  uint64_t size = 0;
  CHECK_OK(safetensors_write_hashed("big/t.safetensors", &e, 1, NULL, digest, &size,
                                    NULL));
  CHECK(strncmp(digest, MANIFEST_CHUNKED "33554432:", strlen(MANIFEST_CHUNKED) + 9) == 0);
  CHECK(strlen(strchr(digest + strlen(MANIFEST_CHUNKED), ':') + 1) == 3 * 64);
  /* chunk 1, hashed from the file */
  FILE *f = fopen("big/t.safetensors", "rb");
  CHECK(f && fseek(f, 32L << 20, SEEK_SET) == 0);
  unsigned char *buf = malloc(32u << 20);
  CHECK(buf && fread(buf, 1, 32u << 20, f) == 32u << 20);
  fclose(f);
  FILE *c1 = fopen("big/chunk1", "wb");
  CHECK(c1 && fwrite(buf, 1, 32u << 20, c1) == 32u << 20 && fclose(c1) == 0);
  free(buf);
  char hex[65];
  uint64_t n1;
  CHECK_OK(manifest_hash_file("big/chunk1", hex, &n1));
  unlink("big/chunk1");
  CHECK(memcmp(strchr(digest + strlen(MANIFEST_CHUNKED), ':') + 1 + 64, hex, 64) == 0);

  const char *files[] = {"t.safetensors", NULL}, *hexes[] = {digest};
  uint64_t sizes[] = {size};
  CHECK_OK(manifest_commit_hashed("big", files, sizes, hexes, NULL));
  manifest m;
  CHECK_OK(manifest_read("big", &m));
  CHECK(m.files[0].chunk == 32u << 20 && m.files[0].chunks && m.files[0].sha256[0] == '\0');
  CHECK_OK(manifest_verify("big", &m));
  /* one bit flipped in the third chunk */
  int fd = open("big/t.safetensors", O_RDWR);
  unsigned char b;
  CHECK(fd >= 0 && pread(fd, &b, 1, (70L << 20)) == 1);
  b ^= 1;
  CHECK(pwrite(fd, &b, 1, (70L << 20)) == 1);
  CHECK(manifest_verify("big", &m) < 0);
  CHECK(strstr(err_msg(), "t.safetensors") && strstr(err_msg(), "sha256 of chunk 2"));
  b ^= 1;
  CHECK(pwrite(fd, &b, 1, (70L << 20)) == 1);
  CHECK_OK(manifest_verify("big", &m));
  CHECK(ftruncate(fd, (64L << 20) + 5) == 0);
  close(fd);
  CHECK(manifest_verify("big", &m) < 0 && strstr(err_msg(), "truncated"));
  manifest_free(&m);
  free(data);
}
