/* launch_yarn_http.h - the few HTTP requests the YARN launcher makes (the
 * ResourceManager's REST API, drover's ApplicationMaster), with libcurl.
 * Not a public API.
 *
 * Every request is synchronous and bounded by its timeout: they go to the
 * RM or the AM, answer in milliseconds, and are made at the start, on a
 * node's start or stop, and from a poll timer, never on the training path.
 */
#ifndef DROVER_LAUNCH_YARN_HTTP_H
#define DROVER_LAUNCH_YARN_HTTP_H

typedef struct launch_yarn_http_req {
  const char *method;       /* "GET", "POST", "PUT" */
  const char *url;          /* "http://host:port/ws/v1/cluster/apps" */
  const char *body;         /* NULL: none */
  const char *content_type; /* NULL: none sent */
  const char *token;        /* NULL: no X-Drover-Token header */
  long timeout_ms;
  const char *body_file;    /* NULL, or a file streamed as the body (instead of body) */
  const char *header;       /* NULL, or one more header line ("X-Drover-Name: drover") */
  int negotiate;            /* 1: answer a 401 Negotiate with SPNEGO, from the user's
                             * Kerberos ticket cache (libcurl's GSS-API) */
  int *asks_negotiate;      /* NULL, or set to 1 when a 401 asked for Negotiate */
} launch_yarn_http_req;

/* Makes the request. On a response (any status) returns 0 with *status
 * and *resp (malloc'd, NUL-terminated, the caller frees); otherwise
 * DRV_EIO naming the URL and curl's reason, with *resp NULL. Responses
 * over 4 MiB are an error, and so is a body_file that cannot be read. */
int launch_yarn_http_request(const launch_yarn_http_req *r, long *status, char **resp);

#endif
