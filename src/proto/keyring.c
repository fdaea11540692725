/* keyring.c - a node's key file (keyring.h): written whole by the
 * coordinator, read strictly by the node.
 */
#include "proto/keyring.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"

#define HEX_LEN (2 * AUTH_KEY_SIZE)
/* The longest line: "ps 4294967295 " and the digits and a newline. */
#define LINE_MAX_LEN (3 + 10 + 1 + HEX_LEN + 1)
#define FILE_MAX_LEN ((size_t)(KEYRING_MAX_PS + 2) * LINE_MAX_LEN)

static const char WHAT[] = "key file";

/* ============================== reading =================================== */

typedef struct cursor {
  const char *path;
  const char *p, *end; /* the line being read ... the file's end */
  size_t line;         /* 1-based */
} cursor;

static int bad(const cursor *c, const char *why) {
  return err_set(DRV_EPARSE, "%s '%s' line %zu: %s", WHAT, c->path, c->line, why);
}

/* 64 lowercase hex digits and the newline that ends the line. */
static int read_hex(cursor *c, auth_secret *out) {
  if ((size_t)(c->end - c->p) < HEX_LEN + 1) return bad(c, "the key is not 64 lowercase hex digits and a newline");
  for (size_t i = 0; i < HEX_LEN; i++) {
    char ch = c->p[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f')))
      return bad(c, "the key is not 64 lowercase hex digits and a newline");
  }
  if (c->p[HEX_LEN] != '\n') return bad(c, "the key is not 64 lowercase hex digits and a newline");
  if (sodium_hex2bin(out->key, sizeof out->key, c->p, HEX_LEN, NULL, NULL, NULL) != 0)
    return bad(c, "the key is not hex");
  c->p += HEX_LEN + 1;
  return 0;
}

/* A ps index: decimal digits, no leading zero, under 2^32, then a space. */
static int read_index(cursor *c, uint32_t *out) {
  uint64_t v = 0;
  const char *s = c->p;
  while (s < c->end && *s >= '0' && *s <= '9' && s - c->p <= 10) v = v * 10 + (uint64_t)(*s++ - '0');
  size_t n = (size_t)(s - c->p);
  if (n == 0 || n > 10 || (n > 1 && c->p[0] == '0') || v > UINT32_MAX || s == c->end || *s != ' ')
    return bad(c, "`ps` wants a ps index (decimal, no leading zero) and one space before the key");
  *out = (uint32_t)v;
  c->p = s + 1;
  return 0;
}

static int add_ps(keyring *k, uint32_t ps, const auth_secret *key) {
  if (k->nps >= KEYRING_MAX_PS)
    return err_set(DRV_ERANGE, "more than %u ps keys", KEYRING_MAX_PS);
  keyring_ps *n = realloc(k->ps, (k->nps + 1) * sizeof *n);
  if (!n) return err_set(DRV_ENOMEM, "out of memory for ps keys");
  k->ps = n;
  k->ps[k->nps++] = (keyring_ps){ps, *key};
  return 0;
}

/* One line: its word, then what that word takes. */
static int read_line(cursor *c, keyring *k, bool *have_coord) {
  static const char coord[] = "coord ", root[] = "root ", ps[] = "ps ";
  size_t left = (size_t)(c->end - c->p);
  if (left >= sizeof coord - 1 && memcmp(c->p, coord, sizeof coord - 1) == 0) {
    if (*have_coord) return bad(c, "a second `coord` key");
    c->p += sizeof coord - 1;
    *have_coord = true;
    return read_hex(c, &k->coord);
  }
  if (left >= sizeof root - 1 && memcmp(c->p, root, sizeof root - 1) == 0) {
    if (k->has_root) return bad(c, "a second `root` key");
    c->p += sizeof root - 1;
    k->has_root = true;
    return read_hex(c, &k->root);
  }
  if (left >= sizeof ps - 1 && memcmp(c->p, ps, sizeof ps - 1) == 0) {
    uint32_t i = 0;
    auth_secret key;
    c->p += sizeof ps - 1;
    int rc = read_index(c, &i);
    if (rc == 0) rc = read_hex(c, &key);
    if (rc == 0 && (rc = add_ps(k, i, &key)) < 0) rc = bad(c, err_msg());
    sodium_memzero(&key, sizeof key);
    return rc;
  }
  return bad(c, "not `coord <hex>`, `root <hex>` or `ps <index> <hex>`");
}

static int cmp_ps(const void *a, const void *b) {
  uint32_t x = ((const keyring_ps *)a)->ps, y = ((const keyring_ps *)b)->ps;
  return x < y ? -1 : x > y;
}

static int parse(const char *path, const char *buf, size_t n, keyring *k) {
  cursor c = {path, buf, buf + n, 0};
  bool have_coord = false;
  int rc = 0;
  while (rc == 0 && c.p < c.end) {
    c.line++;
    rc = read_line(&c, k, &have_coord);
  }
  if (rc < 0) return rc;
  if (!have_coord)
    return err_set(DRV_EPARSE, "%s '%s' has no `coord` key (is it a node's key file?)", WHAT, path);
  if (k->nps > 1) qsort(k->ps, k->nps, sizeof *k->ps, cmp_ps);
  for (size_t i = 1; i < k->nps; i++)
    if (k->ps[i - 1].ps == k->ps[i].ps)
      return err_set(DRV_EPARSE, "%s '%s' has two keys for ps %u", WHAT, path,
                     (unsigned)k->ps[i].ps);
  return 0;
}

/* The file's bytes (malloc'd, *n of them) once its mode is checked. */
static int slurp(const char *path, char **out, size_t *n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err_set(DRV_EIO, "cannot open %s '%s': %s", WHAT, path, strerror(errno));
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) < 0)
    rc = err_set(DRV_EIO, "cannot stat %s '%s': %s", WHAT, path, strerror(errno));
  else if ((rc = auth_file_check(WHAT, path, &st)) < 0)
    ;
  else if ((uint64_t)st.st_size > FILE_MAX_LEN)
    rc = err_set(DRV_EPARSE, "%s '%s' is %lld bytes, more than any key file (%zu)", WHAT, path,
                 (long long)st.st_size, FILE_MAX_LEN);
  char *buf = rc == 0 ? malloc((size_t)st.st_size + 1) : NULL;
  if (rc == 0 && !buf) rc = err_set(DRV_ENOMEM, "out of memory reading '%s'", path);
  size_t got = 0;
  while (rc == 0 && got < (size_t)st.st_size) {
    ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) rc = err_set(DRV_EIO, "cannot read %s '%s': %s", WHAT, path, strerror(errno));
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (rc < 0) {
    if (buf) sodium_memzero(buf, got);
    free(buf);
    return rc;
  }
  *out = buf;
  *n = got; /* a file that shrank meanwhile is read as it is now */
  return 0;
}

int keyring_load(const char *path, keyring *k) {
  memset(k, 0, sizeof *k);
  int rc = auth_init();
  char *buf = NULL;
  size_t n = 0;
  if (rc == 0) rc = slurp(path, &buf, &n);
  if (rc < 0) return rc;
  rc = parse(path, buf, n, k);
  sodium_memzero(buf, n);
  free(buf);
  if (rc < 0) keyring_free(k);
  return rc;
}

int keyring_from_env(keyring *k) {
  memset(k, 0, sizeof *k);
  const char *path = getenv("DROVER_SECRET_FILE");
  if (!path || !*path)
    return err_set(DRV_EINVAL,
                   "DROVER_SECRET_FILE is not set: a node needs the path of its key file "
                   "(the launcher sets it)");
  return keyring_load(path, k);
}

/* ============================== writing =================================== */

static size_t put_line(char *at, const char *word, const uint32_t *ps, const auth_secret *key) {
  int n = ps ? sprintf(at, "%s %u ", word, (unsigned)*ps) : sprintf(at, "%s ", word);
  sodium_bin2hex(at + n, HEX_LEN + 1, key->key, sizeof key->key);
  at[n + HEX_LEN] = '\n';
  return (size_t)n + HEX_LEN + 1;
}

int keyring_write(const keyring *k, const char *path, bool sync) {
  if (k->nps > KEYRING_MAX_PS)
    return err_set(DRV_ERANGE, "%s '%s': %zu ps keys, more than %u", WHAT, path, k->nps,
                   KEYRING_MAX_PS);
  size_t cap = (k->nps + 2) * LINE_MAX_LEN + 1; /* bounded by KEYRING_MAX_PS: no overflow */
  char *buf = malloc(cap);
  if (!buf) return err_set(DRV_ENOMEM, "out of memory for %s '%s'", WHAT, path);
  size_t n = put_line(buf, "coord", NULL, &k->coord);
  if (k->has_root) n += put_line(buf + n, "root", NULL, &k->root);
  for (size_t i = 0; i < k->nps; i++) n += put_line(buf + n, "ps", &k->ps[i].ps, &k->ps[i].key);
  int rc = auth_file_write(WHAT, path, buf, n, sync);
  sodium_memzero(buf, cap);
  free(buf);
  return rc;
}

/* ============================== using ===================================== */

const auth_secret *keyring_ps_key(const keyring *k, uint32_t ps) {
  size_t lo = 0, hi = k->nps; /* sorted by keyring_load */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (k->ps[mid].ps == ps) return &k->ps[mid].key;
    if (k->ps[mid].ps < ps) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

void keyring_free(keyring *k) {
  if (k->ps) sodium_memzero(k->ps, k->nps * sizeof *k->ps);
  free(k->ps);
  sodium_memzero(k, sizeof *k);
}
