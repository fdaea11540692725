/* auth.h - the run's secret and the challenge/response every connection
 * starts with (libsodium: HMAC-SHA-256, random nonces, constant-time
 * comparison).
 *
 * Handshake, after TCP connect (conn.c drives it):
 *   server -> HELLO   { ns }                         ns: 32 random bytes
 *   client -> AUTH    { nc, mac_c = H(key, "drover client" || ns || nc) }
 *   server -> AUTH_OK { mac_s = H(key, "drover server" || nc || ns) }
 * The server drops a client whose mac_c is wrong; the client drops a server
 * whose mac_s is wrong, so each side proves it holds the key and neither
 * reveals it. Fresh nonces on both sides prevent replays.
 *
 * The secret lives in the run directory as 64 hex characters in a file of
 * mode 0600 that only the coordinator reads. A node gets a key file of its
 * own (keyring.h), named by DROVER_SECRET_FILE (a path) - never on a
 * command line.
 *
 * Capabilities. AUTH also says who the client is: a node (role and index,
 * the coordinator being the pseudo-role AUTH_ROLE_COORD on its ps links)
 * or a client (`drover attach`). A node proves the key of that identity
 * at the server it dials, derived from a root the server holds:
 *   at the coordinator  auth_node_key(secret, role, index)
 *   at ps i             auth_node_key(R_i, role, index), R_i =
 *                       auth_ps_root(secret, i), ps i's own root
 * Only the coordinator holds `secret`; ps i holds R_i, from which it
 * checks its clients and which no other server accepts. A node's key file
 * holds only the keys it proves: its key at the coordinator and one per
 * ps it dials (a worker at every ps; a ps with replicas, as itself, at
 * every other ps; the
 * coordinator derives its own, auth_node_key(R_i, AUTH_ROLE_COORD, 0)).
 * So a worker can pose as no other node, and a ps as no other node and as
 * the coordinator to nobody but itself. A client proves the run's control
 * key or its view key (two more random keys in files of their own); the
 * server tries both and so learns what the client may do. Each key is
 * bound to its identity by being a different key: a MAC made with one
 * fails under any other.
 */
#ifndef DROVER_AUTH_H
#define DROVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUTH_KEY_SIZE 32
#define AUTH_NONCE_SIZE 32
#define AUTH_MAC_SIZE 32

typedef struct auth_secret {
  uint8_t key[AUTH_KEY_SIZE];
} auth_secret;

/* What AUTH claims (`who`) and what the server then knows (a conn's cap). */
enum { AUTH_WHO_NODE = 0, AUTH_WHO_CLIENT = 1 };
typedef enum auth_cap {
  AUTH_CAP_NONE = 0,    /* not authenticated (yet) */
  AUTH_CAP_NODE = 1,    /* a node, or the coordinator on a ps link: role, index */
  AUTH_CAP_CONTROL = 2, /* an attach client with the control key */
  AUTH_CAP_VIEW = 3,    /* an attach client with the view key: read-only */
} auth_cap;
/* The coordinator's role in AUTH when it dials a ps (after the node roles). */
#define AUTH_ROLE_COORD 4
const char *auth_cap_name(int cap); /* "node", "control", "view", "none" */

/* The key node (role, index) proves: HMAC(secret, "drover node" || role ||
 * index). */
void auth_node_key(const auth_secret *secret, int role, uint32_t index, auth_secret *out);
/* The feed key: HMAC-SHA-256(control, "drover feed"). A worker listening
 * for direct feeders (wire_msgs.h, "Direct feeding") is given it; a feeder
 * derives it from the control key it holds. It lets its holder feed
 * batches to workers, nothing else. */
void auth_feed_key(const auth_secret *control, auth_secret *out);

/* Ps i's root: HMAC(secret, "drover ps root" || i). Ps i checks its
 * clients' keys with it (auth_node_key(root, role, index)). */
void auth_ps_root(const auth_secret *secret, uint32_t ps, auth_secret *out);

/* Initialises libsodium (idempotent, thread-safe). 0 or DRV_EUNSUPPORTED. */
int auth_init(void);
/* A new random secret. */
int auth_secret_generate(auth_secret *s);
/* Writes the secret as hex to a new file created with mode 0600 (fails if
 * the file exists). Errors name the path. */
int auth_secret_save(const auth_secret *s, const char *path);
/* The same, with the fsync only when `sync`: a node's key, which the
 * coordinator derives again whenever it needs it, need not wait for the
 * disk (1,000 nodes' fsyncs took seconds of the reservation). */
int auth_secret_write(const auth_secret *s, const char *path, bool sync);
/* Reads a secret file; refuses one that group or others may read
 * ("secret file 'x' is readable by others (mode 0644); chmod 600 it"). */
int auth_secret_load(const char *path, auth_secret *s);

/* For any file of keys (keyring.c too); `what` names it in errors ("key
 * file"). Creates path (never an existing one) with mode exactly 0600 and
 * writes data, fsynced when `sync`; a partial file is removed. */
int auth_file_write(const char *what, const char *path, const char *data, size_t len, bool sync);
/* A regular file that neither group nor others may read or write. */
struct stat;
int auth_file_check(const char *what, const char *path, const struct stat *st);

void auth_nonce(uint8_t out[AUTH_NONCE_SIZE]);
/* mac_c and mac_s of the handshake above. */
void auth_client_mac(const auth_secret *s, const uint8_t ns[AUTH_NONCE_SIZE],
                     const uint8_t nc[AUTH_NONCE_SIZE], uint8_t mac[AUTH_MAC_SIZE]);
void auth_server_mac(const auth_secret *s, const uint8_t nc[AUTH_NONCE_SIZE],
                     const uint8_t ns[AUTH_NONCE_SIZE], uint8_t mac[AUTH_MAC_SIZE]);
/* Constant-time equality of two MACs. */
bool auth_mac_equal(const uint8_t a[AUTH_MAC_SIZE], const uint8_t b[AUTH_MAC_SIZE]);

#endif
