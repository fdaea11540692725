/* http.c - the libcurl set-up WebHDFS and the YARN launcher share. */
#include "base/http.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int global_rc;
static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1; }

int http_easy(CURL **out, const char *who, const char *url, int negotiate, char *errbuf) {
  *out = NULL;
  pthread_once(&once, global_init);
  if (global_rc) return err_set(DRV_EIO, "%s: libcurl could not be initialised", who);
  CURL *c = curl_easy_init();
  if (!c) return err_set(DRV_ENOMEM, "%s: out of memory (curl)", who);
  errbuf[0] = '\0';
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  if (negotiate) {
    /* A 401 Negotiate is answered from the ticket cache; the empty
     * credentials only switch libcurl's authentication on (no Basic). */
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_NEGOTIATE);
    curl_easy_setopt(c, CURLOPT_USERPWD, ":");
  }
  *out = c;
  return 0;
}

size_t http_body_add(http_body *b, size_t max, const char *d, size_t k) {
  if (b->n > max || k > max - b->n) {
    b->over = 1;
    return 0;
  }
  size_t need = b->n + k + 1;
  if (need > b->cap) {
    size_t cap = need > SIZE_MAX / 2 ? need : need * 2;
    char *q = realloc(b->p, cap);
    if (!q) return 0;
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, d, k);
  b->n += k;
  b->p[b->n] = '\0';
  return k;
}

const char *http_reason(CURLcode e, int over, const char *errbuf) {
  if (over) return "the answer is too large";
  return errbuf[0] ? errbuf : curl_easy_strerror(e);
}
