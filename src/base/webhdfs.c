/* webhdfs.c - WebHDFS operations over libcurl's easy interface: one handle
 * per call, so calls from several threads never share one; the NameNode's
 * JSON read with jansson. */
#include "base/webhdfs.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/http.h"
#include "base/webhdfs_int.h"

#define BODY_MAX (64u << 20) /* a JSON answer: a listing of ~200k entries */
#define META_TIMEOUT_S 60
#define CONNECT_TIMEOUT_S 10
#define STALL_TIMEOUT_S 30

/* ============================== one request ============================= */

typedef struct req {
  const char *op;   /* "OPEN", named in errors */
  const char *what; /* the caller's URL, named in errors */
  const char *method;
  char http[WEBHDFS_URL_MAX + 1024];
  int data;   /* the bytes of a file move: no overall time bound */
  int upload; /* a PUT with a body (maybe empty) */
  int follow; /* follow redirects (OPEN's to a DataNode) */
  const char *buf; /* the body from a buffer... */
  size_t len, off;
  webhdfs_read_fn rd; /* ...or from rd, `size` bytes (-1 unknown) */
  void *rd_ud;
  int64_t size;
  webhdfs_write_fn wr; /* a 200's body goes to wr; any other into resp */
  void *wr_ud;
  /* results */
  CURL *c;
  long status;
  char location[WEBHDFS_URL_MAX];
  http_body resp;
  int cb_rc; /* the error a callback stopped the transfer with */
  uint64_t sent;
} req;

static long env_seconds(const char *name, long dflt) {
  const char *v = getenv(name);
  char *e;
  long s = v && *v ? strtol(v, &e, 10) : 0;
  return v && *v && !*e && s > 0 && s <= 86400 ? s : dflt;
}

static size_t on_body(char *d, size_t sz, size_t nm, void *ud) {
  req *r = ud;
  size_t k;
  if (__builtin_mul_overflow(sz, nm, &k)) return 0;
  long code = 0;
  curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, &code);
  if (r->wr && code == 200) {
    int rc = r->wr(r->wr_ud, d, k);
    if (rc < 0) {
      r->cb_rc = rc;
      return 0;
    }
    return k;
  }
  return http_body_add(&r->resp, BODY_MAX, d, k);
}

static size_t on_up(char *d, size_t sz, size_t nm, void *ud) {
  req *r = ud;
  size_t cap;
  if (__builtin_mul_overflow(sz, nm, &cap)) return CURL_READFUNC_ABORT;
  if (!r->rd) {
    size_t k = r->len - r->off < cap ? r->len - r->off : cap;
    memcpy(d, r->buf + r->off, k);
    r->off += k;
    return k;
  }
  long long got = r->rd(r->rd_ud, d, cap);
  if (got < 0 || (size_t)got > cap) {
    r->cb_rc = got < 0 ? (int)got : err_set(DRV_EINVAL, "webhdfs: a read callback overran");
    return CURL_READFUNC_ABORT;
  }
  r->sent += (uint64_t)got;
  if (r->size >= 0 && (r->sent > (uint64_t)r->size || (got == 0 && r->sent < (uint64_t)r->size))) {
    r->cb_rc = err_set(DRV_EIO, "webhdfs CREATE %s: %llu bytes to write, the reader gave %s",
                       r->what, (unsigned long long)r->size, got ? "more" : "fewer");
    return CURL_READFUNC_ABORT;
  }
  return (size_t)got;
}

/* Rewinds a buffer's body (SPNEGO may send it twice); a stream cannot. */
static int on_seek(void *ud, curl_off_t off, int origin) {
  req *r = ud;
  if (r->rd || origin != SEEK_SET || off < 0 || (uint64_t)off > r->len) return CURL_SEEKFUNC_CANTSEEK;
  r->off = (size_t)off;
  return CURL_SEEKFUNC_OK;
}

/* "http://host:port" of an http URL, for messages. */
static void server_of(const char *http, char *out, size_t cap) {
  const char *a = strstr(http, "://");
  const char *e = a ? strchr(a + 3, '/') : NULL;
  int n = e ? (int)(e - http) : (int)strlen(http);
  snprintf(out, cap, "%.*s", n, http);
}

static void set_options(req *r, CURL *c, struct curl_slist *h) {
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, env_seconds("DROVER_WEBHDFS_CONNECT_TIMEOUT", CONNECT_TIMEOUT_S));
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, env_seconds("DROVER_WEBHDFS_STALL_TIMEOUT", STALL_TIMEOUT_S));
  if (!r->data) curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)META_TIMEOUT_S);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, (long)r->follow);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 4L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
  if (r->upload) {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_up);
    curl_easy_setopt(c, CURLOPT_READDATA, r);
    curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
    curl_easy_setopt(c, CURLOPT_SEEKDATA, r);
    curl_off_t n = r->rd ? (curl_off_t)r->size : (curl_off_t)r->len;
    if (n >= 0) curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, n);
  } else if (strcmp(r->method, "GET") != 0) {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
  }
}

/* Makes the request: 0 with r->status, r->resp (and r->location when not
 * following), or an error naming the server that could not be reached. */
static int perform(req *r) {
  CURL *c;
  char errbuf[CURL_ERROR_SIZE];
  int rc = http_easy(&c, "webhdfs", r->http, 1, errbuf); /* Kerberos: SPNEGO when asked */
  if (rc < 0) return rc;
  r->c = c;
  struct curl_slist *h = curl_slist_append(NULL, "Expect:"); /* no 100-continue wait */
  if (r->upload && h) h = curl_slist_append(h, "Content-Type: application/octet-stream");
  set_options(r, c, h);
  CURLcode e = h ? curl_easy_perform(c) : CURLE_OUT_OF_MEMORY;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
  char *loc = NULL;
  if (!r->follow && curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &loc) == CURLE_OK && loc)
    snprintf(r->location, sizeof r->location, "%s", loc);
  if (e != CURLE_OK && r->cb_rc < 0) {
    rc = r->cb_rc;
  } else if (e != CURLE_OK) {
    char server[512], *eff = NULL;
    curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff);
    server_of(eff ? eff : r->http, server, sizeof server);
    int dn = r->data && (r->upload || r->status == 307 || strcmp(eff ? eff : "", r->http) != 0);
    rc = err_set(e == CURLE_OPERATION_TIMEDOUT ? DRV_ETIMEDOUT : DRV_EIO,
                 "webhdfs %s %s: %s at %s: %s", r->op, r->what,
                 dn ? "the DataNode" : "the NameNode", server,
                 http_reason(e, r->resp.over, errbuf));
  }
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  r->c = NULL;
  return rc;
}

static void req_free(req *r) {
  free(r->resp.p);
  r->resp.p = NULL;
}

/* ============================== errors ================================== */

/* The exception decides (HDFS answers FileAlreadyExistsException with
 * 403 too); the status only when there is none. */
static int code_of(const char *exception, long status) {
  if (strstr(exception, "FileNotFoundException")) return DRV_ENOENT;
  if (strstr(exception, "AccessControlException") || strstr(exception, "SecurityException"))
    return DRV_EPERM;
  return !*exception && (status == 401 || status == 403) ? DRV_EPERM : DRV_EIO;
}

/* 0 when the status is `expect`; else the error: the RemoteException's
 * exception and message, or the start of whatever else came. */
static int check(req *r, long expect) {
  if (r->status == expect) return 0;
  json_t *j = r->resp.p ? json_loadb(r->resp.p, r->resp.n, 0, NULL) : NULL;
  json_t *re = json_object_get(j, "RemoteException");
  const char *exc = json_string_value(json_object_get(re, "exception"));
  const char *msg = json_string_value(json_object_get(re, "message"));
  char text[512];
  if (exc || msg) { /* the message's first line: some carry a Java stack trace */
    int n = msg ? (int)strcspn(msg, "\n") : 0;
    snprintf(text, sizeof text, "%s: %.*s", exc ? exc : "RemoteException", n, msg ? msg : "");
  } else {
    int n = 0;
    for (size_t i = 0; r->resp.p && i < r->resp.n && n < 200; i++)
      text[n++] = r->resp.p[i] >= ' ' && r->resp.p[i] < 127 ? r->resp.p[i] : ' ';
    text[n] = '\0';
    if (!n) snprintf(text, sizeof text, "an empty answer");
  }
  const char *hint = r->status == 401 ? " (the cluster asks for Kerberos: `kinit` first)" : "";
  int rc = err_set(code_of(exc ? exc : "", r->status), "webhdfs %s %s: HTTP %ld: %s%s", r->op,
                   r->what, r->status, text, hint);
  json_decref(j);
  return rc;
}

/* ============================== NameNode calls ========================== */

/* r->http for OP on the path of `u` (or `path_override`), plus `extra`
 * ("&recursive=true"). */
static int nn_url(req *r, const webhdfs__url *u, const char *extra) {
  char path[WEBHDFS_URL_MAX * 3], user[256], euser[768];
  int rc = webhdfs__encode(u->path, 1, path, sizeof path);
  if (rc == 0) rc = webhdfs_user(user, sizeof user);
  if (rc == 0) rc = webhdfs__encode(user, 0, euser, sizeof euser);
  if (rc < 0) return rc;
  int n = snprintf(r->http, sizeof r->http, "http://%s:%d/webhdfs/v1%s?op=%s&user.name=%s%s",
                   u->host, u->port, path, r->op, euser, extra ? extra : "");
  if (n < 0 || (size_t)n >= sizeof r->http) return err_set(DRV_ERANGE, "webhdfs: '%s' is too long", r->what);
  return 0;
}

/* METHOD op=OP on `url` expecting 200 and JSON: *out (the caller
 * decrefs). */
static int nn_json(const char *url, const char *method, const char *op, const char *extra,
                   json_t **out) {
  webhdfs__url u;
  req r = {.op = op, .what = url, .method = method};
  *out = NULL;
  int rc = webhdfs__parse(url, &u);
  if (rc == 0) rc = nn_url(&r, &u, extra);
  if (rc == 0) rc = perform(&r);
  if (rc == 0) rc = check(&r, 200);
  if (rc == 0) {
    json_error_t je;
    *out = json_loadb(r.resp.p ? r.resp.p : "", r.resp.n, 0, &je);
    if (!*out) rc = err_set(DRV_EPROTO, "webhdfs %s %s: the answer is not JSON: %s", op, url, je.text);
  }
  req_free(&r);
  return rc;
}

/* The {"boolean": b} answer of METHOD op=OP: 1 true, 0 false, or an error. */
static int nn_bool(const char *url, const char *method, const char *op, const char *extra) {
  json_t *j;
  int rc = nn_json(url, method, op, extra, &j);
  if (rc < 0) return rc;
  json_t *b = json_object_get(j, "boolean");
  rc = json_is_boolean(b) ? json_is_true(b)
                          : err_set(DRV_EPROTO, "webhdfs %s %s: no \"boolean\" in the answer", op, url);
  json_decref(j);
  return rc;
}

static uint64_t jnum(json_t *o, const char *k) {
  json_int_t v = json_integer_value(json_object_get(o, k));
  return v > 0 ? (uint64_t)v : 0;
}

static void fill_stat(json_t *fs, webhdfs_info *st) {
  memset(st, 0, sizeof *st);
  const char *type = json_string_value(json_object_get(fs, "type"));
  st->is_dir = type && strcmp(type, "DIRECTORY") == 0;
  st->size = jnum(fs, "length");
  st->mtime_ms = (int64_t)jnum(fs, "modificationTime");
  const char *perm = json_string_value(json_object_get(fs, "permission"));
  st->perm = perm ? (unsigned)strtoul(perm, NULL, 8) & 07777 : 0;
  const char *owner = json_string_value(json_object_get(fs, "owner"));
  const char *group = json_string_value(json_object_get(fs, "group"));
  snprintf(st->owner, sizeof st->owner, "%s", owner ? owner : "");
  snprintf(st->group, sizeof st->group, "%s", group ? group : "");
}

int webhdfs_stat(const char *url, webhdfs_info *st) {
  json_t *j;
  int rc = nn_json(url, "GET", "GETFILESTATUS", NULL, &j);
  if (rc < 0) return rc;
  json_t *fs = json_object_get(j, "FileStatus");
  if (json_is_object(fs)) fill_stat(fs, st);
  else rc = err_set(DRV_EPROTO, "webhdfs GETFILESTATUS %s: no FileStatus in the answer", url);
  json_decref(j);
  return rc;
}

void webhdfs_list_free(webhdfs_entry *e, size_t n) {
  for (size_t i = 0; e && i < n; i++) free(e[i].name);
  free(e);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const webhdfs_entry *)a)->name, ((const webhdfs_entry *)b)->name);
}

/* The entries of a LISTSTATUS answer; a file's own entry has an empty
 * pathSuffix and is named by the URL's last component. */
static int entries(const char *url, json_t *arr, webhdfs_entry **out, size_t *n) {
  size_t k = json_array_size(arr);
  webhdfs_entry *e = calloc(k ? k : 1, sizeof *e);
  if (!e) return err_set(DRV_ENOMEM, "webhdfs LISTSTATUS %s: out of memory", url);
  const char *last = strrchr(url, '/');
  for (size_t i = 0; i < k; i++) {
    json_t *fs = json_array_get(arr, i);
    const char *name = json_string_value(json_object_get(fs, "pathSuffix"));
    webhdfs_info st;
    fill_stat(fs, &st);
    e[i].name = strdup(name && *name ? name : last ? last + 1 : url);
    e[i].size = st.size;
    e[i].is_dir = st.is_dir;
    e[i].mtime_ms = st.mtime_ms;
    if (!e[i].name) {
      webhdfs_list_free(e, i);
      return err_set(DRV_ENOMEM, "webhdfs LISTSTATUS %s: out of memory", url);
    }
  }
  qsort(e, k, sizeof *e, by_name);
  *out = e;
  *n = k;
  return 0;
}

int webhdfs_list(const char *url, webhdfs_entry **out, size_t *n) {
  json_t *j;
  *out = NULL;
  *n = 0;
  int rc = nn_json(url, "GET", "LISTSTATUS", NULL, &j);
  if (rc < 0) return rc;
  json_t *arr = json_object_get(json_object_get(j, "FileStatuses"), "FileStatus");
  rc = json_is_array(arr) ? entries(url, arr, out, n)
                          : err_set(DRV_EPROTO, "webhdfs LISTSTATUS %s: no FileStatuses in the answer", url);
  json_decref(j);
  return rc;
}

static void perm_param(unsigned perm, char *out, size_t cap) {
  if (perm) snprintf(out, cap, "&permission=%o", perm & 07777);
  else out[0] = '\0';
}

int webhdfs_mkdirs(const char *url, unsigned perm) {
  char extra[32];
  perm_param(perm, extra, sizeof extra);
  int rc = nn_bool(url, "PUT", "MKDIRS", extra);
  if (rc == 0) rc = err_set(DRV_EIO, "webhdfs MKDIRS %s: the NameNode refused it", url);
  return rc < 0 ? rc : 0;
}

int webhdfs_delete(const char *url, int recursive) {
  return nn_bool(url, "DELETE", "DELETE", recursive ? "&recursive=true" : "&recursive=false");
}

/* Why a rename answered false: the source missing, the destination there. */
static int rename_refused(const char *from, const char *to, const char *to_url) {
  webhdfs_info st;
  int rc = webhdfs_stat(from, &st);
  if (rc == DRV_ENOENT)
    return err_set(DRV_ENOENT, "webhdfs RENAME %s: the source does not exist", from);
  if (webhdfs_stat(to_url, &st) == 0)
    return err_set(DRV_EIO, "webhdfs RENAME %s to %s: the destination exists (HDFS does not "
                   "replace it)", from, to);
  return err_set(DRV_EIO, "webhdfs RENAME %s to %s: the NameNode refused it (does the "
                 "destination's directory exist?)", from, to);
}

int webhdfs_rename(const char *from, const char *to) {
  webhdfs__url f, t;
  int rc = webhdfs__parse(from, &f);
  if (rc < 0) return rc;
  char to_url[WEBHDFS_URL_MAX];
  if (webhdfs_is_url(to)) {
    rc = webhdfs__parse(to, &t);
    if (rc < 0) return rc;
    if (strcmp(t.host, f.host) != 0 || t.port != f.port)
      return err_set(DRV_EINVAL, "webhdfs RENAME %s to %s: not on the same NameNode", from, to);
  } else if (!to || to[0] != '/') {
    return err_set(DRV_EINVAL, "webhdfs RENAME %s: the destination '%s' is not absolute", from,
                   to ? to : "(null)");
  } else {
    snprintf(t.path, sizeof t.path, "%s", to);
  }
  int n = snprintf(to_url, sizeof to_url, "webhdfs://%s:%d%s", f.host, f.port, t.path);
  char dest[WEBHDFS_URL_MAX * 3], extra[WEBHDFS_URL_MAX * 3 + 16];
  if (n < 0 || (size_t)n >= sizeof to_url || webhdfs__encode(t.path, 1, dest, sizeof dest) < 0)
    return err_set(DRV_ERANGE, "webhdfs RENAME %s: the destination is too long", from);
  snprintf(extra, sizeof extra, "&destination=%s", dest);
  rc = nn_bool(from, "PUT", "RENAME", extra);
  return rc == 0 ? rename_refused(from, to, to_url) : rc < 0 ? rc : 0;
}

/* ============================== data ==================================== */

/* CREATE's two steps: the NameNode's 307 to a DataNode, then the bytes
 * there (201). `body` holds the buffer or the reader. */
static int create(const char *url, req *body, int overwrite, unsigned perm) {
  webhdfs__url u;
  char extra[64];
  snprintf(extra, sizeof extra, "&overwrite=%s", overwrite ? "true" : "false");
  perm_param(perm, extra + strlen(extra), sizeof extra - strlen(extra));
  req r = {.op = "CREATE", .what = url, .method = "PUT", .upload = 1, .buf = ""};
  int rc = webhdfs__parse(url, &u);
  if (rc == 0) rc = nn_url(&r, &u, extra);
  if (rc == 0) rc = perform(&r);
  if (rc == 0) rc = check(&r, 307);
  if (rc == 0 && !r.location[0])
    rc = err_set(DRV_EPROTO, "webhdfs CREATE %s: the NameNode's redirect has no Location", url);
  if (rc == 0) {
    body->op = "CREATE";
    body->what = url;
    body->method = "PUT";
    body->upload = body->data = 1;
    snprintf(body->http, sizeof body->http, "%s", r.location);
    rc = perform(body);
    if (rc == 0) rc = check(body, 201);
  }
  req_free(&r);
  req_free(body);
  return rc;
}

int webhdfs_create(const char *url, const void *data, size_t len, int overwrite, unsigned perm) {
  req b = {.buf = data ? data : "", .len = data ? len : 0};
  return create(url, &b, overwrite, perm);
}

int webhdfs_create_stream(const char *url, int64_t size, webhdfs_read_fn rd, void *ud,
                          int overwrite, unsigned perm) {
  if (!rd) return err_set(DRV_EINVAL, "webhdfs CREATE %s: no reader", url);
  req b = {.rd = rd, .rd_ud = ud, .size = size < 0 ? -1 : size};
  return create(url, &b, overwrite, perm);
}

int webhdfs_open(const char *url, uint64_t offset, uint64_t length, webhdfs_write_fn wr, void *ud) {
  webhdfs__url u;
  char extra[96];
  int k = snprintf(extra, sizeof extra, "&offset=%llu", (unsigned long long)offset);
  if (length != WEBHDFS_TO_END)
    snprintf(extra + k, sizeof extra - (size_t)k, "&length=%llu", (unsigned long long)length);
  req r = {.op = "OPEN", .what = url, .method = "GET", .follow = 1, .data = 1, .wr = wr, .wr_ud = ud};
  int rc = wr ? webhdfs__parse(url, &u) : err_set(DRV_EINVAL, "webhdfs OPEN %s: no writer", url);
  if (rc == 0 && length == 0) return 0;
  if (rc == 0) rc = nn_url(&r, &u, extra);
  if (rc == 0) rc = perform(&r);
  if (rc == 0) rc = check(&r, 200);
  req_free(&r);
  return rc;
}

typedef struct sink {
  http_body b;
  size_t max;
  const char *url;
} sink;

static int to_memory(void *ud, const char *buf, size_t n) {
  sink *s = ud;
  if (http_body_add(&s->b, s->max, buf, n) == n) return 0;
  if (s->b.over) return err_set(DRV_ERANGE, "webhdfs OPEN %s: the file is over %zu bytes", s->url, s->max);
  return err_set(DRV_ENOMEM, "webhdfs OPEN %s: out of memory", s->url);
}

int webhdfs_read_all(const char *url, char **data, size_t *len, size_t max) {
  sink s = {.max = max < SIZE_MAX - 1 ? max : SIZE_MAX - 2, .url = url};
  *data = NULL;
  *len = 0;
  int rc = webhdfs_open(url, 0, WEBHDFS_TO_END, to_memory, &s);
  if (rc == 0 && !s.b.p && !(s.b.p = malloc(1))) rc = err_set(DRV_ENOMEM, "out of memory");
  if (rc < 0) {
    free(s.b.p);
    return rc;
  }
  s.b.p[s.b.n] = '\0';
  *data = s.b.p;
  *len = s.b.n;
  return 0;
}
