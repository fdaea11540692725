/* launch_yarn_http.c - libcurl's easy interface, one request at a time. */
#include "launch/launch_yarn_http.h"

#include <curl/curl.h>
#include <stdint.h>
#include <sys/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/http.h"

#define YHTTP_MAX (4u << 20)

static size_t on_data(char *d, size_t sz, size_t nm, void *ud) {
  if (nm && sz > SIZE_MAX / nm) return 0;
  return http_body_add(ud, YHTTP_MAX, d, sz * nm);
}

static size_t on_read(char *d, size_t sz, size_t nm, void *ud) {
  if (nm && sz > SIZE_MAX / nm) return CURL_READFUNC_ABORT;
  return fread(d, 1, sz * nm, (FILE *)ud);
}

/* Notes a 401's "WWW-Authenticate: Negotiate" (a Kerberos RM's). */
static size_t on_header(char *d, size_t sz, size_t nm, void *ud) {
  size_t k = sz * nm;
  static const char want[] = "www-authenticate: negotiate";
  if (k >= sizeof want - 1 && strncasecmp(d, want, sizeof want - 1) == 0) *(int *)ud = 1;
  return k;
}

/* The body from r->body_file: its size, then read by on_read. */
static int stream_body(CURL *c, const launch_yarn_http_req *r, FILE **f) {
  *f = fopen(r->body_file, "rbe");
  if (!*f) return err_set(DRV_EIO, "cannot read '%s'", r->body_file);
  if (fseeko(*f, 0, SEEK_END) != 0) return err_set(DRV_EIO, "cannot read '%s'", r->body_file);
  off_t size = ftello(*f);
  if (size < 0 || fseeko(*f, 0, SEEK_SET) != 0)
    return err_set(DRV_EIO, "cannot read '%s'", r->body_file);
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
  curl_easy_setopt(c, CURLOPT_READDATA, *f);
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
  return 0;
}

int launch_yarn_http_request(const launch_yarn_http_req *r, long *status, char **resp) {
  *resp = NULL;
  *status = 0;
  CURL *c;
  char errbuf[CURL_ERROR_SIZE];
  int rc = http_easy(&c, "yarn", r->url, r->negotiate, errbuf);
  if (rc < 0) return rc;
  struct curl_slist *h = NULL;
  char tok[160];
  if (r->content_type) {
    char ct[96];
    snprintf(ct, sizeof ct, "Content-Type: %s", r->content_type);
    h = curl_slist_append(h, ct);
  }
  if (r->token) {
    snprintf(tok, sizeof tok, "X-Drover-Token: %s", r->token);
    h = curl_slist_append(h, tok);
  }
  if (r->header) h = curl_slist_append(h, r->header);
  h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
  http_body b = {0};
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, r->timeout_ms);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  int asks = 0;
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &asks);
  FILE *f = NULL;
  if (r->body_file) {
    rc = stream_body(c, r, &f);
  } else if (r->body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body));
  }
  CURLcode e = rc < 0 ? CURLE_OK : curl_easy_perform(c);
  if (rc < 0) {
    free(b.p);
  } else if (e != CURLE_OK) {
    rc = err_set(DRV_EIO, "%s %s: %s", r->method, r->url, http_reason(e, b.over, errbuf));
    free(b.p);
  } else {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    *resp = b.p ? b.p : strdup("");
    if (!*resp) rc = err_set(DRV_ENOMEM, "out of memory");
  }
  if (r->asks_negotiate) *r->asks_negotiate = asks;
  if (f) fclose(f);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  return rc;
}
