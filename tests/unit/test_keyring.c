/* test_keyring.c - a node's key file (keyring.h): written 0600 and read
 * back, every malformed line refused naming the file and the line, a file
 * open to others refused; and the ps root's construction (auth_ps_root).
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "proto/keyring.h"
#include "proto/wire.h"

#define HEX64 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define HEX64B "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"

static int file_mode(const char *path) {
  struct stat st;
  CHECK(stat(path, &st) == 0);
  return (int)(st.st_mode & 0777);
}

/* Writes content to a fresh 0600 file and loads it. */
static int load(const char *name, const char *content, keyring *k) {
  const char *p = harness_write_str(name, content);
  CHECK(chmod(p, 0600) == 0);
  return keyring_load(name, k);
}

TEST(keyring_round_trip) {
  CHECK_OK(auth_init());
  keyring k = {.ps = calloc(3, sizeof(keyring_ps))}, r;
  CHECK(k.ps != NULL);
  CHECK_OK(auth_secret_generate(&k.coord));
  k.has_root = true;
  CHECK_OK(auth_secret_generate(&k.root));
  uint32_t idx[3] = {7, 0, 4000000000u}; /* written in this order, read back sorted */
  for (int i = 0; i < 3; i++) {
    k.ps[i].ps = idx[i];
    CHECK_OK(auth_secret_generate(&k.ps[i].key));
  }
  k.nps = 3;
  mode_t old = umask(0);
  CHECK_OK(keyring_write(&k, "node.key", false));
  umask(old);
  CHECK_INT_EQ(file_mode("node.key"), 0600);
  CHECK_ERR(keyring_write(&k, "node.key", false), DRV_EIO,
            "key file 'node.key' already exists; refusing to overwrite it");
  CHECK_OK(keyring_load("node.key", &r));
  CHECK(memcmp(r.coord.key, k.coord.key, AUTH_KEY_SIZE) == 0);
  CHECK(r.has_root && memcmp(r.root.key, k.root.key, AUTH_KEY_SIZE) == 0);
  CHECK_INT_EQ((int)r.nps, 3);
  for (int i = 0; i < 3; i++) {
    const auth_secret *got = keyring_ps_key(&r, idx[i]);
    CHECK(got && memcmp(got->key, k.ps[i].key.key, AUTH_KEY_SIZE) == 0);
  }
  CHECK(keyring_ps_key(&r, 1) == NULL);
  CHECK(keyring_ps_key(&r, 8) == NULL);
  keyring_free(&k);
  keyring_free(&r);
  CHECK(r.nps == 0 && r.ps == NULL);
}

TEST(keyring_reads_the_documented_format) {
  keyring k;
  CHECK_OK(load("w.key", "coord " HEX64 "\nps 1 " HEX64B "\nps 0 " HEX64 "\n", &k));
  CHECK(!k.has_root);
  CHECK_INT_EQ(k.coord.key[1], 0x11);
  CHECK_INT_EQ(keyring_ps_key(&k, 1)->key[0], 0xff);
  CHECK_INT_EQ(keyring_ps_key(&k, 0)->key[0], 0x00);
  keyring_free(&k);
  CHECK_OK(load("p.key", "root " HEX64B "\ncoord " HEX64 "\n", &k)); /* any order */
  CHECK(k.has_root && k.root.key[31] == 0x00 && k.root.key[0] == 0xff);
  CHECK_INT_EQ((int)k.nps, 0);
  keyring_free(&k);
}

TEST(keyring_refuses_malformed_lines) {
  keyring k;
  static const struct {
    const char *content, *want;
  } bad[] = {
      {"", "has no `coord` key"},
      {"ps 0 " HEX64 "\n", "has no `coord` key"},
      {HEX64 "\n", "line 1: not `coord <hex>`"},                   /* a bare secret file */
      {"coord " HEX64, "line 1: the key is not 64 lowercase hex"},  /* no newline */
      {"coord " HEX64 "\n\n", "line 2: not `coord"},               /* a blank line */
      {"coord " HEX64 "\r\n", "line 1: the key is not 64"},        /* CRLF */
      {"coord  " HEX64 "\n", "line 1: the key is not 64"},         /* two spaces */
      {"Coord " HEX64 "\n", "line 1: not `coord"},
      {"coord 00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff\n",
       "line 1: the key is not 64 lowercase hex digits"},
      {"coord abcd\n", "line 1: the key is not 64"},
      {"coord " HEX64 "00\n", "line 1: the key is not 64"},
      {"coord " HEX64 "\ncoord " HEX64 "\n", "line 2: a second `coord` key"},
      {"coord " HEX64 "\nroot " HEX64 "\nroot " HEX64 "\n", "line 3: a second `root` key"},
      {"coord " HEX64 "\nps " HEX64 "\n", "line 2: `ps` wants a ps index"},
      {"coord " HEX64 "\nps 01 " HEX64 "\n", "line 2: `ps` wants a ps index"},
      {"coord " HEX64 "\nps -1 " HEX64 "\n", "line 2: `ps` wants a ps index"},
      {"coord " HEX64 "\nps 4294967296 " HEX64 "\n", "line 2: `ps` wants a ps index"},
      {"coord " HEX64 "\nps 99999999999 " HEX64 "\n", "line 2: `ps` wants a ps index"},
      {"coord " HEX64 "\nps 3 " HEX64 "\nps 3 " HEX64B "\n", "has two keys for ps 3"},
      {"coord " HEX64 "\n# a comment\n", "line 2: not `coord"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK_ERR(load("bad.key", bad[i].content, &k), DRV_EPARSE, bad[i].want);
    CHECK_STR_CONTAINS(err_msg(), "key file 'bad.key'");
    CHECK(k.ps == NULL && k.nps == 0); /* nothing left to free on failure */
    remove("bad.key");
  }
}

TEST(keyring_refuses_files_open_to_others) {
  keyring k;
  const char *p = harness_write_str("open.key", "coord " HEX64 "\n");
  char path[512];
  snprintf(path, sizeof path, "%s", p);
  CHECK(chmod(path, 0644) == 0);
  CHECK_ERR(keyring_load(path, &k), DRV_EINVAL,
            "is readable by others (mode 0644); chmod 600 it");
  CHECK_STR_CONTAINS(err_msg(), "key file");
  CHECK(chmod(path, 0620) == 0);
  CHECK_ERR(keyring_load(path, &k), DRV_EINVAL, "open to group or others (mode 0620)");
  CHECK(chmod(path, 0400) == 0);
  CHECK_OK(keyring_load(path, &k));
  keyring_free(&k);
  CHECK_ERR(keyring_load("missing.key", &k), DRV_EIO, "cannot open key file 'missing.key'");
  unsetenv("DROVER_SECRET_FILE");
  CHECK_ERR(keyring_from_env(&k), DRV_EINVAL, "DROVER_SECRET_FILE is not set");
  setenv("DROVER_SECRET_FILE", path, 1);
  CHECK_OK(keyring_from_env(&k));
  keyring_free(&k);
  unsetenv("DROVER_SECRET_FILE");
}

/* R_i = HMAC(secret, "drover ps root" || le32(i)), and a node's key at ps
 * i is derived from R_i: never the key derived from the secret. */
TEST(auth_ps_root_follows_the_documented_construction) {
  CHECK_OK(auth_init());
  auth_secret s, r0, r1, want;
  for (int i = 0; i < AUTH_KEY_SIZE; i++) s.key[i] = (uint8_t)(3 * i + 1);
  unsigned char msg[14 + 4] = "drover ps root";
  msg[14] = 1, msg[15] = 0, msg[16] = 0, msg[17] = 0;
  crypto_auth_hmacsha256(want.key, msg, sizeof msg, s.key);
  auth_ps_root(&s, 1, &r1);
  CHECK(memcmp(r1.key, want.key, AUTH_KEY_SIZE) == 0);
  auth_ps_root(&s, 0, &r0);
  CHECK(memcmp(r0.key, r1.key, AUTH_KEY_SIZE) != 0);
  auth_secret a, b, c;
  auth_node_key(&r0, ROLE_WORKER, 0, &a);
  auth_node_key(&r1, ROLE_WORKER, 0, &b);
  auth_node_key(&s, ROLE_WORKER, 0, &c);
  CHECK(memcmp(a.key, b.key, AUTH_KEY_SIZE) != 0);
  CHECK(memcmp(a.key, c.key, AUTH_KEY_SIZE) != 0);
}
