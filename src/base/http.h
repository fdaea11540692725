/* http.h - what drover's libcurl users share (WebHDFS, the YARN launcher):
 * libcurl initialised once, an easy handle set up alike, a bounded answer
 * body, and the text of a failed transfer. Not a public API. */
#ifndef DROVER_BASE_HTTP_H
#define DROVER_BASE_HTTP_H

#include <curl/curl.h>
#include <stddef.h>

/* A response body gathered in memory: p is NUL-terminated once anything
 * came (NULL before), the caller frees it; over is set when more than the
 * caller's maximum arrived. Zero-initialise. */
typedef struct http_body {
  char *p;
  size_t n, cap;
  int over;
} http_body;

/* A new easy handle for `url` into *out (the caller cleans it up), with
 * libcurl initialised first (once per process, thread-safe). Set: no
 * signals (the handle may be used off the main thread), errors written to
 * `errbuf` (CURL_ERROR_SIZE bytes, living as long as the handle), and,
 * when `negotiate`, SPNEGO from the user's Kerberos ticket cache. Returns
 * 0, or DRV_EIO / DRV_ENOMEM with a message starting "`who`: ". */
int http_easy(CURL **out, const char *who, const char *url, int negotiate, char *errbuf);

/* Appends k bytes to b, at most `max` in all: returns k, or 0 (what stops
 * libcurl's transfer) when out of memory or, with b->over set, past max
 * (which is below SIZE_MAX - 1). */
size_t http_body_add(http_body *b, size_t max, const char *d, size_t k);

/* Why a transfer failed, for a message: "the answer is too large" when
 * `over`, else curl's error buffer, else the text of `e`. Static text or
 * errbuf itself. */
const char *http_reason(CURLcode e, int over, const char *errbuf);

#endif
