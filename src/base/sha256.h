/* sha256.h - SHA-256 for checkpoint files (manifests, the ps's writes).
 *
 * OpenSSL's libcrypto, which uses the CPU's SHA instructions where there
 * are some: several times libsodium's portable code, and a checkpoint's
 * commit hashes every byte of it. Base layer.
 */
#ifndef DROVER_SHA256_H
#define DROVER_SHA256_H

#include <stddef.h>

typedef struct sha256_ctx {
  void *md; /* EVP_MD_CTX, owned until sha256_hex */
} sha256_ctx;

/* Starts a hash. 0, or DRV_ENOMEM with a message. */
int sha256_init(sha256_ctx *h);
void sha256_update(sha256_ctx *h, const void *buf, size_t len);
/* Finishes: the digest as lower-case hex into hex[65], and frees h. */
void sha256_hex(sha256_ctx *h, char hex[65]);
/* Frees a hash not finished. */
void sha256_drop(sha256_ctx *h);

#endif
