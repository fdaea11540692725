/* fuzz_files.c - libFuzzer target for the readers of what drover keeps on
 * disk: safetensors files (safetensors_read) and checkpoint manifests
 * (manifest_read, then manifest_verify against the files beside it).
 *
 * The first byte of an input picks the reader (even: safetensors, odd: a
 * manifest); the rest is the file's content. The readers take paths, so
 * the bytes go to a real file first: a memfd read through
 * /proc/self/fd/N for safetensors, manifest.json in a private temporary
 * directory (which also holds a model.safetensors for manifest_verify to
 * hash). Beyond not crashing, a file the reader accepts must be
 * consistent: every tensor's numel is the product of its shape, the
 * metadata is a NULL-ended list of pairs, lookups find what was read.
 *
 * Run it with `make fuzz` (its share of FUZZ_TIME). Compiled with
 * -DFUZZ_FILES_SEEDS instead, this file is a small program that writes the
 * seed corpus into the directory argv[1]: files made by the writers
 * (safetensors_write with metadata, a scalar, an empty tensor; a manifest
 * that manifest_commit wrote), each behind its selector byte.
 * See tests/fuzz/README.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/manifest.h"
#include "base/safetensors.h"

#ifndef FUZZ_FILES_SEEDS

static char dir[64]; /* the private directory, made once */

static void cleanup(void) {
  char p[128];
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/" MANIFEST_NAME, dir);
  unlink(p);
  rmdir(dir);
}

static void setup(void) {
  if (dir[0]) return;
  snprintf(dir, sizeof dir, "/tmp/drover-fuzz-XXXXXX");
  if (!mkdtemp(dir)) abort();
  atexit(cleanup); /* libFuzzer ends with exit() when its time is up */
  char p[128];
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  static const int64_t shape[] = {2};
  static const float v[] = {1, 2};
  safetensors_entry e = {"w", 1, shape, v, NULL};
  if (safetensors_write(p, &e, 1, NULL) != 0) abort();
}

static void check_safetensors(const safetensors_file *f) {
  for (size_t i = 0; i < f->n; i++) {
    const safetensors_tensor *t = &f->tensors[i];
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    if (numel != t->numel || (numel > 0 && !t->data)) abort();
    if (safetensors_find(f, t->name) == NULL) abort();
    volatile float sink = numel > 0 ? t->data[numel - 1] : 0; /* ASan: the whole buffer is there */
    (void)sink;
  }
  for (char **p = f->meta; p && *p; p += 2)
    if (!p[1] || safetensors_meta(f, p[0]) == NULL) abort();
}

static void fuzz_safetensors(const uint8_t *data, size_t n) {
  int fd = memfd_create("fuzz", MFD_CLOEXEC);
  if (fd < 0) abort();
  for (size_t off = 0; off < n;) {
    ssize_t k = write(fd, data + off, n - off);
    if (k <= 0) abort();
    off += (size_t)k;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  safetensors_file f;
  if (safetensors_read(path, &f) == 0) check_safetensors(&f);
  safetensors_free(&f);
  close(fd);
}

static void fuzz_manifest(const uint8_t *data, size_t n) {
  char path[128];
  snprintf(path, sizeof path, "%s/" MANIFEST_NAME, dir);
  FILE *out = fopen(path, "wb");
  if (!out || (n && fwrite(data, 1, n, out) != n) || fclose(out) != 0) abort();
  manifest m;
  if (manifest_read(dir, &m) == 0) {
    if (m.nfiles < 0 || m.nfiles > MANIFEST_MAX_FILES) abort();
    for (int i = 0; i < m.nfiles; i++)
      if (strlen(m.files[i].sha256) > 64 || !memchr(m.files[i].name, 0, sizeof m.files[i].name))
        abort();
    for (char **p = m.meta; p && *p; p += 2)
      if (!p[1] || manifest_meta(&m, p[0]) == NULL) abort();
    manifest_verify(dir, &m); /* names inside dir only: no "../" escapes */
  }
  manifest_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n == 0) return 0;
  setup();
  if (data[0] % 2 == 0) fuzz_safetensors(data + 1, n - 1);
  else fuzz_manifest(data + 1, n - 1);
  return 0;
}

#else /* FUZZ_FILES_SEEDS: write the seed corpus */

/* Copies file `src` into out/<name>, behind the selector byte `sel`. */
static void seed(const char *out, const char *name, uint8_t sel, const char *src) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", out, name);
  FILE *in = fopen(src, "rb"), *o = fopen(path, "wb");
  if (!in || !o) {
    fprintf(stderr, "seeds_files: cannot copy %s to %s\n", src, path);
    exit(1);
  }
  fputc(sel, o);
  char buf[4096];
  size_t k;
  while ((k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, o);
  fclose(in);
  if (fclose(o) != 0) exit(1);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: seeds_files DIR\n");
    return 2;
  }
  char tmp[] = "/tmp/drover-seeds-XXXXXX", p[128];
  if (!mkdtemp(tmp)) return 1;
  static const int64_t s23[] = {2, 3}, s0[] = {0}, s4[] = {4};
  static const float v6[] = {1, -2, 3.5f, 0, 1e-3f, 7}, v4[] = {0.25f, 0.5f, 0.75f, 1};
  static const float one[] = {42};
  safetensors_entry model[] = {{"0.weight", 2, s23, v6, NULL}, {"0.bias", 1, s4, v4, NULL},
                               {"scalar", 0, NULL, one, NULL}, {"empty", 1, s0, NULL, NULL}};
  const char *meta[] = {"format", "pt", "drover.spec", "Sequential(Linear(3,2))", NULL};
  snprintf(p, sizeof p, "%s/model.safetensors", tmp);
  if (safetensors_write(p, model, 4, meta) != 0) return 1;
  seed(argv[1], "model", 0, p);
  snprintf(p, sizeof p, "%s/state.safetensors", tmp);
  if (safetensors_write(p, model, 2, NULL) != 0) return 1;
  seed(argv[1], "plain", 2, p);
  static const char *const files[] = {"model.safetensors", "state.safetensors", NULL};
  const char *mmeta[] = {"step", "120", "eval_accuracy", "0.93", NULL};
  if (manifest_commit(tmp, files, mmeta) != 0) return 1;
  snprintf(p, sizeof p, "%s/" MANIFEST_NAME, tmp);
  seed(argv[1], "manifest", 1, p);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  return system(cmd) == 0 ? 0 : 1;
}

#endif
