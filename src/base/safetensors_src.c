/* safetensors_src.c - a safetensors file's bytes produced on demand
 * (safetensors.h: safetensors_src_*): the 8-byte length, the header, then
 * each tensor's floats straight from the caller's memory, hashed as they
 * are handed out, so a multi-GB shard streams to HDFS without a copy. */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/manifest.h"
#include "base/safetensors.h"

struct safetensors_src {
  const safetensors_entry **order;
  size_t n;
  char *head; /* the length and the header */
  size_t hlen;
  size_t part; /* 0: head, 1 + i: tensor i */
  size_t at;   /* bytes of that part handed out */
  manifest_digest d;
};

static size_t part_len(const safetensors_src *s, const uint8_t **p) {
  if (s->part == 0) {
    *p = (const uint8_t *)s->head;
    return s->hlen;
  }
  const safetensors_entry *e = s->order[s->part - 1];
  size_t count = 1;
  for (int k = 0; k < e->ndim; k++) count *= (size_t)e->shape[k];
  *p = e->i64 ? (const uint8_t *)e->i64 : (const uint8_t *)e->data;
  return count * (e->i64 ? sizeof *e->i64 : sizeof *e->data);
}

int safetensors_src_open(const char *name, const safetensors_entry *t, size_t n,
                         const char *const *meta, safetensors_src **out, uint64_t *size) {
  *out = NULL;
  uint32_t probe = 1;
  if (*(uint8_t *)&probe != 1) return err_set(DRV_EINVAL, "%s: streaming needs a little-endian host", name);
  safetensors_src *s = calloc(1, sizeof *s);
  if (!s) return err_set(DRV_ENOMEM, "out of memory");
  char *header = NULL;
  size_t hlen = 0;
  int rc = safetensors_layout(name, t, n, meta, &s->order, &header, &hlen);
  if (rc == 0 && !(s->head = malloc(8 + hlen))) rc = err_set(DRV_ENOMEM, "out of memory");
  if (rc == 0) {
    for (int i = 0; i < 8; i++) s->head[i] = (char)((uint64_t)hlen >> (8 * i));
    memcpy(s->head + 8, header, hlen);
    s->hlen = 8 + hlen, s->n = n;
  }
  free(header);
  uint64_t total = s->hlen;
  const uint8_t *p;
  for (s->part = 1; rc == 0 && s->part <= n; s->part++) total += part_len(s, &p);
  s->part = 0;
  if (rc == 0) rc = manifest_digest_begin(&s->d, total);
  if (rc < 0) {
    free(s->order), free(s->head), free(s);
    return rc;
  }
  *size = total;
  *out = s;
  return 0;
}

long long safetensors_src_read(void *src, char *buf, size_t cap) {
  safetensors_src *s = src;
  size_t got = 0;
  while (got < cap && s->part <= s->n) {
    const uint8_t *p;
    size_t len = part_len(s, &p), k = len - s->at < cap - got ? len - s->at : cap - got;
    memcpy(buf + got, p + s->at, k);
    got += k, s->at += k;
    if (s->at == len) s->part++, s->at = 0;
  }
  int rc = got ? manifest_digest_update(&s->d, buf, got) : 0;
  return rc < 0 ? rc : (long long)got;
}

int safetensors_src_close(safetensors_src *s, char *digest) {
  if (!s) return 0;
  int rc = 0;
  if (digest) rc = manifest_digest_end(&s->d, digest);
  else manifest_digest_drop(&s->d); /* given up: no digest wanted */
  free(s->order), free(s->head), free(s);
  return rc;
}
