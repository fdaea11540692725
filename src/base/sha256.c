/* sha256.c - SHA-256 through OpenSSL's EVP interface (see sha256.h). */
#include "base/sha256.h"

#include <openssl/evp.h>
#include <stdio.h>

#include "base/err.h"

int sha256_init(sha256_ctx *h) {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(md);
    h->md = NULL;
    return err_set(DRV_ENOMEM, "cannot start a SHA-256 hash");
  }
  h->md = md;
  return 0;
}

void sha256_update(sha256_ctx *h, const void *buf, size_t len) {
  if (h->md && len) EVP_DigestUpdate(h->md, buf, len);
}

void sha256_hex(sha256_ctx *h, char hex[65]) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  hex[0] = '\0';
  if (h->md && EVP_DigestFinal_ex(h->md, out, &n) == 1 && n == 32)
    for (unsigned i = 0; i < n; i++) snprintf(hex + 2 * i, 3, "%02x", out[i]);
  sha256_drop(h);
}

void sha256_drop(sha256_ctx *h) {
  EVP_MD_CTX_free(h->md);
  h->md = NULL;
}
