/* test_auth.c - the handshake MACs (against a one-shot HMAC of the
 * documented message), nonces, and the secret file: created 0600 whatever
 * the umask, never overwritten, loaded back, refused when open to others
 * or malformed. */
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/auth.h"
#include "harness.h"

static void make_nonce(uint8_t *n, uint8_t seed) {
  for (int i = 0; i < AUTH_NONCE_SIZE; i++) n[i] = (uint8_t)(seed + 13 * i);
}

TEST(auth_macs_verify_only_with_the_same_secret) {
  CHECK_OK(auth_init());
  auth_secret server, client, other;
  CHECK_OK(auth_secret_generate(&server));
  client = server; /* the node loaded the same file */
  CHECK_OK(auth_secret_generate(&other));
  CHECK(memcmp(server.key, other.key, AUTH_KEY_SIZE) != 0);
  uint8_t ns[AUTH_NONCE_SIZE], nc[AUTH_NONCE_SIZE];
  auth_nonce(ns);
  auth_nonce(nc);
  uint8_t sent[AUTH_MAC_SIZE], want[AUTH_MAC_SIZE], bad[AUTH_MAC_SIZE];
  /* Client proves itself; the server recomputes. */
  auth_client_mac(&client, ns, nc, sent);
  auth_client_mac(&server, ns, nc, want);
  CHECK(auth_mac_equal(sent, want));
  auth_client_mac(&other, ns, nc, bad);
  CHECK(!auth_mac_equal(bad, want));
  auth_client_mac(&client, nc, ns, bad); /* nonces swapped */
  CHECK(!auth_mac_equal(bad, want));
  /* Server proves itself; the client recomputes. */
  auth_server_mac(&server, nc, ns, sent);
  auth_server_mac(&client, nc, ns, want);
  CHECK(auth_mac_equal(sent, want));
  auth_server_mac(&other, nc, ns, bad);
  CHECK(!auth_mac_equal(bad, want));
  auth_server_mac(&server, ns, nc, bad);
  CHECK(!auth_mac_equal(bad, want));
  /* A client MAC is never a valid server MAC, even with nonces swapped. */
  auth_client_mac(&client, nc, ns, bad);
  CHECK(!auth_mac_equal(bad, want));
}

TEST(auth_macs_follow_the_documented_construction) {
  auth_secret s;
  for (int i = 0; i < AUTH_KEY_SIZE; i++) s.key[i] = (uint8_t)(200 - i);
  uint8_t ns[AUTH_NONCE_SIZE], nc[AUTH_NONCE_SIZE];
  make_nonce(ns, 1);
  make_nonce(nc, 2);
  /* H(key, "drover client" || ns || nc), computed in one shot. */
  uint8_t msg[13 + 2 * AUTH_NONCE_SIZE], want[AUTH_MAC_SIZE], got[AUTH_MAC_SIZE];
  memcpy(msg, "drover client", 13);
  memcpy(msg + 13, ns, AUTH_NONCE_SIZE);
  memcpy(msg + 13 + AUTH_NONCE_SIZE, nc, AUTH_NONCE_SIZE);
  crypto_auth_hmacsha256(want, msg, sizeof msg, s.key);
  auth_client_mac(&s, ns, nc, got);
  CHECK(memcmp(got, want, AUTH_MAC_SIZE) == 0);
  memcpy(msg, "drover server", 13);
  memcpy(msg + 13, nc, AUTH_NONCE_SIZE);
  memcpy(msg + 13 + AUTH_NONCE_SIZE, ns, AUTH_NONCE_SIZE);
  crypto_auth_hmacsha256(want, msg, sizeof msg, s.key);
  auth_server_mac(&s, nc, ns, got);
  CHECK(memcmp(got, want, AUTH_MAC_SIZE) == 0);
  /* auth_mac_equal sees a difference in the last byte too. */
  got[AUTH_MAC_SIZE - 1] ^= 1;
  CHECK(!auth_mac_equal(got, want));
}

TEST(auth_nonces_differ) {
  uint8_t a[AUTH_NONCE_SIZE], b[AUTH_NONCE_SIZE], zero[AUTH_NONCE_SIZE] = {0};
  auth_nonce(a);
  auth_nonce(b);
  CHECK(memcmp(a, b, AUTH_NONCE_SIZE) != 0);
  CHECK(memcmp(a, zero, AUTH_NONCE_SIZE) != 0);
}

static unsigned file_mode(const char *path) {
  struct stat st;
  CHECK(stat(path, &st) == 0);
  return st.st_mode & 07777;
}

TEST(auth_secret_save_creates_0600_and_never_overwrites) {
  auth_secret s, t;
  CHECK_OK(auth_secret_generate(&s));
  CHECK_OK(auth_secret_save(&s, "secret"));
  CHECK_INT_EQ(file_mode("secret"), 0600);
  /* The content: 64 lowercase hex digits and a newline. */
  FILE *f = fopen("secret", "r");
  char buf[128] = {0};
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  CHECK_INT_EQ(n, 65);
  CHECK(buf[64] == '\n');
  CHECK_INT_EQ(strspn(buf, "0123456789abcdef"), 64);
  CHECK_OK(auth_secret_generate(&t));
  CHECK_ERR(auth_secret_save(&t, "secret"), DRV_EIO,
            "secret file 'secret' already exists; refusing to overwrite it");
  CHECK_OK(auth_secret_load("secret", &t));
  CHECK(memcmp(s.key, t.key, AUTH_KEY_SIZE) == 0); /* the first one survived */
  /* The mode is exact whatever the umask would have made of it. */
  mode_t old = umask(0277); /* would give 0400 */
  CHECK_OK(auth_secret_save(&s, "secret-umask-0277"));
  umask(0);                 /* would give 0600 anyway, never more */
  CHECK_OK(auth_secret_save(&s, "secret-umask-0"));
  umask(old);
  CHECK_INT_EQ(file_mode("secret-umask-0277"), 0600);
  CHECK_INT_EQ(file_mode("secret-umask-0"), 0600);
  CHECK_ERR(auth_secret_save(&s, "no/such/dir/secret"), DRV_EIO,
            "cannot create secret file 'no/such/dir/secret'");
}

TEST(auth_secret_load_round_trip) {
  auth_secret s, t;
  for (int i = 0; i < AUTH_KEY_SIZE; i++) s.key[i] = (uint8_t)(i * 37 + 5);
  CHECK_OK(auth_secret_save(&s, "secret"));
  memset(&t, 0, sizeof t);
  CHECK_OK(auth_secret_load("secret", &t));
  CHECK(memcmp(s.key, t.key, AUTH_KEY_SIZE) == 0);
  /* A file written by hand without the final newline is fine too. */
  const char *p = harness_write_str("handmade",
                                    "000102030405060708090a0b0c0d0e0f"
                                    "f0e0d0c0b0a090807060504030201000");
  CHECK(chmod(p, 0600) == 0);
  CHECK_OK(auth_secret_load(p, &t));
  CHECK_INT_EQ(t.key[0], 0x00);
  CHECK_INT_EQ(t.key[15], 0x0f);
  CHECK_INT_EQ(t.key[16], 0xf0);
  CHECK_INT_EQ(t.key[31], 0x00);
}

#define HEX64 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

TEST(auth_secret_load_refuses_files_open_to_others) {
  auth_secret s;
  const char *p = harness_write_str("secret", HEX64 "\n");
  char path[512];
  snprintf(path, sizeof path, "%s", p);
  CHECK(chmod(path, 0644) == 0);
  CHECK_ERR(auth_secret_load(path, &s), DRV_EINVAL,
            "is readable by others (mode 0644); chmod 600 it");
  CHECK_STR_CONTAINS(err_msg(), path);
  CHECK(chmod(path, 0640) == 0);
  CHECK_ERR(auth_secret_load(path, &s), DRV_EINVAL, "readable by others (mode 0640)");
  CHECK(chmod(path, 0620) == 0);
  CHECK_ERR(auth_secret_load(path, &s), DRV_EINVAL, "open to group or others (mode 0620)");
  CHECK(chmod(path, 0400) == 0);
  CHECK_OK(auth_secret_load(path, &s));
  CHECK_INT_EQ(s.key[1], 0x11);
}

/* Writes content to a fresh 0600 file and loads it. */
static int load_content(const char *name, const char *content, auth_secret *s) {
  const char *p = harness_write_str(name, content);
  CHECK(chmod(p, 0600) == 0);
  return auth_secret_load(name, s);
}

TEST(auth_secret_load_refuses_malformed_content) {
  auth_secret s;
  CHECK_ERR(load_content("short", "abcd\n", &s), DRV_EPARSE,
            "secret file 'short' is malformed: 4 characters where 64 lowercase hex digits");
  CHECK_ERR(load_content("empty", "", &s), DRV_EPARSE, "'empty' is malformed: 0 characters");
  CHECK_ERR(load_content("upper",
                         "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff\n", &s),
            DRV_EPARSE, "'upper' is malformed: byte 20 is not a lowercase hex digit (0x41)");
  CHECK_ERR(load_content("long", HEX64 "000\n", &s), DRV_EPARSE, "67 or more characters");
  CHECK_ERR(load_content("twolines", HEX64 "\n\n", &s), DRV_EPARSE, "malformed: 65 characters");
  CHECK_ERR(load_content("crlf", HEX64 "\r\n", &s), DRV_EPARSE, "malformed: 65 characters");
  CHECK_ERR(load_content("spaces", " " HEX64, &s), DRV_EPARSE,
            "byte 0 is not a lowercase hex digit");
  CHECK_ERR(auth_secret_load("missing", &s), DRV_EIO, "cannot open secret file 'missing'");
}

