/* auth.c - the run's secret (generated, saved 0600, loaded with a
 * permission check) and the HMAC-SHA-256 challenge/response of auth.h,
 * on libsodium.
 *
 * The secret file holds 64 lowercase hex characters and a newline. Loading
 * is strict on purpose: a secret that others can read is no secret, and a
 * file that is not exactly what we write is more likely the wrong file than
 * a secret in another spelling.
 */
#include "proto/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/util.h"

#define HEX_LEN (2 * AUTH_KEY_SIZE)

int auth_init(void) {
  /* 0 on the first call, 1 on later ones, -1 on failure. */
  if (sodium_init() < 0)
    return err_set(DRV_EUNSUPPORTED, "libsodium failed to initialise");
  return 0;
}

int auth_secret_generate(auth_secret *s) {
  int rc = auth_init();
  if (rc < 0) return rc;
  randombytes_buf(s->key, sizeof s->key);
  return 0;
}

/* ======================================================================
 * The secret file
 * ==================================================================== */

int auth_secret_save(const auth_secret *s, const char *path) {
  return auth_secret_write(s, path, true);
}

int auth_secret_write(const auth_secret *s, const char *path, bool sync) {
  char hex[HEX_LEN + 2]; /* digits, newline, NUL */
  sodium_bin2hex(hex, HEX_LEN + 1, s->key, sizeof s->key);
  hex[HEX_LEN] = '\n';
  hex[HEX_LEN + 1] = '\0';
  int rc = auth_file_write("secret file", path, hex, HEX_LEN + 1, sync);
  sodium_memzero(hex, sizeof hex);
  return rc;
}

int auth_file_write(const char *what, const char *path, const char *data, size_t len, bool sync) {
  /* O_EXCL: never follow a planted symlink, never overwrite another run's
   * keys. */
  int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = errno;
    if (e == EEXIST)
      return err_set(DRV_EIO, "%s '%s' already exists; refusing to overwrite it", what, path);
    return err_set(DRV_EIO, "cannot create %s '%s': %s", what, path, strerror(e));
  }
  /* The umask can only remove bits, but make the mode exact and check it
   * before the key is written, whatever the umask was. */
  struct stat st;
  const char *verb = NULL;
  if (fchmod(fd, 0600) < 0)
    verb = "chmod";
  else if (fstat(fd, &st) < 0)
    verb = "stat";
  else if ((st.st_mode & 0777) != 0600) {
    errno = EPERM;
    verb = "set mode 0600 on";
  } else if (util_write_all(fd, data, len) < 0)
    verb = "write";
  else if (sync && fsync(fd) < 0)
    verb = "sync";
  int e = errno;
  if (close(fd) < 0 && !verb) {
    e = errno;
    verb = "close";
  }
  if (verb) {
    unlink(path); /* a partial key must not be mistaken for one */
    return err_set(DRV_EIO, "cannot %s %s '%s': %s", verb, what, path, strerror(e));
  }
  return 0;
}

/* Reads at most n bytes; returns the count or -1. */
static ssize_t read_some(int fd, char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = read(fd, buf + got, n - got);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -1;
    if (k == 0) break;
    got += (size_t)k;
  }
  return (ssize_t)got;
}

int auth_file_check(const char *what, const char *path, const struct stat *st) {
  if (!S_ISREG(st->st_mode))
    return err_set(DRV_EINVAL, "%s '%s' is not a regular file", what, path);
  unsigned mode = st->st_mode & 07777;
  if (mode & 0044)
    return err_set(DRV_EINVAL, "%s '%s' is readable by others (mode %04o); chmod 600 it", what,
                   path, mode);
  if (mode & 0077)
    return err_set(DRV_EINVAL, "%s '%s' is open to group or others (mode %04o); chmod 600 it",
                   what, path, mode);
  return 0;
}

/* 64 lowercase hex digits and an optional final newline; `more` when the
 * file went on past the n bytes read. */
static int parse_hex(const char *path, const char *buf, size_t n, bool more, auth_secret *s) {
  size_t digits = n && buf[n - 1] == '\n' ? n - 1 : n;
  for (size_t i = 0; i < digits && i < HEX_LEN; i++) {
    char c = buf[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return err_set(DRV_EPARSE,
                     "secret file '%s' is malformed: byte %zu is not a lowercase hex digit "
                     "(0x%02x)",
                     path, i, (unsigned char)c);
  }
  if (digits != HEX_LEN)
    return err_set(DRV_EPARSE,
                   "secret file '%s' is malformed: %zu%s characters where %d lowercase hex "
                   "digits and a newline were expected",
                   path, digits, more ? " or more" : "", HEX_LEN);
  if (sodium_hex2bin(s->key, sizeof s->key, buf, HEX_LEN, NULL, NULL, NULL) != 0)
    return err_set(DRV_EPARSE, "secret file '%s' is malformed", path);
  return 0;
}

int auth_secret_load(const char *path, auth_secret *s) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return err_set(DRV_EIO, "cannot open secret file '%s': %s", path, strerror(errno));
  struct stat st;
  int rc;
  if (fstat(fd, &st) < 0) {
    rc = err_set(DRV_EIO, "cannot stat secret file '%s': %s", path, strerror(errno));
    close(fd);
    return rc;
  }
  if ((rc = auth_file_check("secret file", path, &st)) < 0) {
    close(fd);
    return rc;
  }
  /* Room for a well-formed file and two bytes more: enough to describe a
   * near miss exactly (an extra newline, a CRLF) and to see a long one. */
  char buf[HEX_LEN + 3];
  ssize_t n = read_some(fd, buf, sizeof buf);
  int e = errno;
  close(fd);
  if (n < 0) return err_set(DRV_EIO, "cannot read secret file '%s': %s", path, strerror(e));
  rc = parse_hex(path, buf, (size_t)n, (size_t)n == sizeof buf, s);
  sodium_memzero(buf, sizeof buf);
  return rc;
}

/* ======================================================================
 * Challenge/response
 * ==================================================================== */

void auth_nonce(uint8_t out[AUTH_NONCE_SIZE]) {
  (void)auth_init(); /* randombytes works regardless; init picks the best source */
  randombytes_buf(out, AUTH_NONCE_SIZE);
}

/* H(key, label || a || b). The two labels keep a client MAC from ever
 * being replayed as a server MAC, even with the nonces swapped. */
static void mac3(const auth_secret *s, const char *label, const uint8_t a[AUTH_NONCE_SIZE],
                 const uint8_t b[AUTH_NONCE_SIZE], uint8_t mac[AUTH_MAC_SIZE]) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, s->key, sizeof s->key);
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label));
  crypto_auth_hmacsha256_update(&st, a, AUTH_NONCE_SIZE);
  crypto_auth_hmacsha256_update(&st, b, AUTH_NONCE_SIZE);
  crypto_auth_hmacsha256_final(&st, mac);
  sodium_memzero(&st, sizeof st);
}

void auth_client_mac(const auth_secret *s, const uint8_t ns[AUTH_NONCE_SIZE],
                     const uint8_t nc[AUTH_NONCE_SIZE], uint8_t mac[AUTH_MAC_SIZE]) {
  mac3(s, "drover client", ns, nc, mac);
}

void auth_server_mac(const auth_secret *s, const uint8_t nc[AUTH_NONCE_SIZE],
                     const uint8_t ns[AUTH_NONCE_SIZE], uint8_t mac[AUTH_MAC_SIZE]) {
  mac3(s, "drover server", nc, ns, mac);
}

bool auth_mac_equal(const uint8_t a[AUTH_MAC_SIZE], const uint8_t b[AUTH_MAC_SIZE]) {
  return sodium_memcmp(a, b, AUTH_MAC_SIZE) == 0;
}

/* ======================================================================
 * Capabilities
 * ==================================================================== */

const char *auth_cap_name(int cap) {
  switch (cap) {
  case AUTH_CAP_NODE: return "node";
  case AUTH_CAP_CONTROL: return "control";
  case AUTH_CAP_VIEW: return "view";
  default: return "none";
  }
}

void auth_feed_key(const auth_secret *control, auth_secret *out) {
  static const char label[] = "drover feed";
  crypto_auth_hmacsha256(out->key, (const unsigned char *)label, sizeof label - 1, control->key);
}

/* HMAC(secret, label || id): every derived key is one, each label its own
 * domain so a key of one kind is never valid as another. */
static void derive(const auth_secret *secret, const char *label, const uint8_t *id, size_t n,
                   auth_secret *out) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, secret->key, sizeof secret->key);
  crypto_auth_hmacsha256_update(&st, (const unsigned char *)label, strlen(label));
  crypto_auth_hmacsha256_update(&st, id, n);
  crypto_auth_hmacsha256_final(&st, out->key);
  sodium_memzero(&st, sizeof st);
}

void auth_node_key(const auth_secret *secret, int role, uint32_t index, auth_secret *out) {
  uint8_t id[5] = {(uint8_t)role, (uint8_t)index, (uint8_t)(index >> 8), (uint8_t)(index >> 16),
                   (uint8_t)(index >> 24)};
  derive(secret, "drover node", id, sizeof id, out);
}

void auth_ps_root(const auth_secret *secret, uint32_t ps, auth_secret *out) {
  uint8_t id[4] = {(uint8_t)ps, (uint8_t)(ps >> 8), (uint8_t)(ps >> 16), (uint8_t)(ps >> 24)};
  derive(secret, "drover ps root", id, sizeof id, out);
}
