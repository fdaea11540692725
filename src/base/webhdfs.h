/* webhdfs.h - a small blocking client for Hadoop's WebHDFS REST API
 * (libcurl): HDFS without a JVM, libhdfs or CLASSPATH.
 *
 * URLs:
 *   webhdfs://HOST:PORT/PATH   PORT is the NameNode's HTTP port (9870 on
 *                              Hadoop 3); needs no configuration.
 *   hdfs://HOST[:PORT]/PATH    PORT is the RPC port (fs.defaultFS's); the
 *                              HTTP address is $HADOOP_CONF_DIR/hdfs-site.xml's
 *                              dfs.namenode.http-address (a 0.0.0.0 host
 *                              there is taken as HOST), else HOST:9870.
 *   hdfs:///PATH               the NameNode of core-site.xml's fs.defaultFS.
 * The configuration directory is $HADOOP_CONF_DIR, else
 * $HADOOP_HOME/etc/hadoop, else /etc/hadoop/conf (base/hadoopconf.h).
 * PATH is absolute; it is percent-encoded on the wire. A coordinator
 * resolves a URL once (webhdfs_resolve) and hands nodes the webhdfs:// form,
 * which they use without any Hadoop configuration.
 *
 * Identity: simple authentication's `user.name=` is $HADOOP_USER_NAME, else
 * the local user. A NameNode that answers 401 with `WWW-Authenticate:
 * Negotiate` (Kerberos) is answered with SPNEGO from the user's ticket cache
 * (libcurl's GSS-API; `kinit` first).
 *
 * Every call is synchronous: connecting is bounded by 10 s
 * ($DROVER_WEBHDFS_CONNECT_TIMEOUT), a transfer that moves nothing for 30 s
 * ($DROVER_WEBHDFS_STALL_TIMEOUT) fails, and a metadata call (everything
 * but the data of create and open) takes at most 60 s. Calls are safe from
 * any thread (each uses its own curl handle; no signals are used).
 *
 * Errors: a negative DRV_E* code, and err_msg() names the URL, the HTTP
 * status and the RemoteException's exception and message as the NameNode
 * sent them ("webhdfs://127.0.0.1:9870/x: HTTP 404: FileNotFoundException:
 * File does not exist: /x"). Codes: DRV_ENOENT (FileNotFoundException),
 * DRV_EPERM (AccessControlException, SecurityException, HTTP 401/403),
 * DRV_ETIMEDOUT (a bound above ran out), DRV_EINVAL (a malformed URL, or an
 * hdfs:// URL whose NameNode cannot be found: the message says what to
 * set), DRV_EIO (anything else: unreachable, refused, other exceptions).
 *
 * Base layer: uses libcurl and jansson; includes only err.h of drover's.
 */
#ifndef DROVER_WEBHDFS_H
#define DROVER_WEBHDFS_H

#include <stddef.h>
#include <stdint.h>

/* Room for any URL this module makes or accepts. */
#define WEBHDFS_URL_MAX 4096

/* 1 when `path` starts with "hdfs://" or "webhdfs://", else 0 (NULL too). */
int webhdfs_is_url(const char *path);

/* The webhdfs://HOST:HTTPPORT/PATH form of `url` (either scheme) into
 * `out` (`cap` bytes, NUL-terminated). Reads $HADOOP_CONF_DIR for hdfs://
 * only. 0, or DRV_EINVAL (not a URL, malformed, no NameNode found: the
 * message says to set HADOOP_CONF_DIR or use webhdfs://), DRV_ERANGE (does
 * not fit in cap). `out` may not alias `url`. */
int webhdfs_resolve(const char *url, char *out, size_t cap);

/* The user name WebHDFS requests carry ($HADOOP_USER_NAME, else the local
 * user's) into out; 0, or DRV_EINVAL when there is none. */
int webhdfs_user(char *out, size_t cap);

/* ------------------------------ metadata -------------------------------- */

typedef struct webhdfs_info {
  uint64_t size;    /* bytes (0 for a directory) */
  int is_dir;       /* 1 directory, 0 file (a symlink counts as a file) */
  int64_t mtime_ms; /* modification time, ms since the epoch (UTC) */
  unsigned perm;    /* permission bits, e.g. 0644 */
  char owner[64];
  char group[64];
} webhdfs_info;

/* GETFILESTATUS of `url` into *st. 0, DRV_ENOENT when it does not exist,
 * or another error. */
int webhdfs_stat(const char *url, webhdfs_info *st);

typedef struct webhdfs_entry {
  char *name;       /* the last component, owned by the array */
  uint64_t size;
  int is_dir;
  int64_t mtime_ms;
} webhdfs_entry;

/* LISTSTATUS of the directory `url`: *out (malloc'ed, *n entries, sorted
 * by name) which the caller frees with webhdfs_list_free. Of a file: that
 * one file. 0 or an error (*out NULL, *n 0). */
int webhdfs_list(const char *url, webhdfs_entry **out, size_t *n);
void webhdfs_list_free(webhdfs_entry *e, size_t n);

/* MKDIRS of `url` and its missing parents (like mkdir -p; an existing
 * directory is fine). `perm` 0: the NameNode's default (0755 less its
 * umask), else those bits. 0 or an error. */
int webhdfs_mkdirs(const char *url, unsigned perm);

/* RENAME of `from` to `to` (a URL on the same NameNode, or an absolute
 * path). Atomic within the namespace: the commit of a file written under a
 * temporary name. HDFS semantics: an existing file at `to` is NOT replaced
 * (an error here: DRV_EIO "the destination exists"); an existing directory
 * at `to` receives `from` inside it (as mv(1) does). A missing source is
 * DRV_ENOENT. WebHDFS answers a refused rename with {"boolean":false},
 * which this maps to those errors. 0 when the rename took. */
int webhdfs_rename(const char *from, const char *to);

/* DELETE of `url` (a directory with its contents when `recursive`; a
 * non-empty directory without it is an error). 1 when something was
 * deleted, 0 when nothing was there, or an error. */
int webhdfs_delete(const char *url, int recursive);

/* ------------------------------ writing --------------------------------- */

/* CREATE of the file `url` in two steps: the NameNode answers with a
 * DataNode's address, and the bytes go there. The file is durable and
 * visible at its full length once this returns 0 (HDFS has no fsync: write
 * under a temporary name and webhdfs_rename to commit). `overwrite` 0: an
 * existing file is an error (FileAlreadyExistsException, DRV_EIO); 1: it is
 * replaced. `perm` as for webhdfs_mkdirs. Missing parents are created.
 * `data` (len bytes) stays the caller's. */
int webhdfs_create(const char *url, const void *data, size_t len, int overwrite, unsigned perm);

/* Fills buf (up to cap bytes) with the next bytes of the upload: returns
 * how many (> 0), 0 at the end, or a negative DRV_E* code (with err_set's
 * message) to abandon it. */
typedef long long (*webhdfs_read_fn)(void *ud, char *buf, size_t cap);

/* webhdfs_create with the bytes from `rd` as they come, never held whole
 * (a multi-GB shard). `size` is the total when known (sent as the length;
 * fewer or more bytes from rd are an error), or -1 (sent chunked). A
 * negative code from rd is returned as is; the file may then exist with
 * part of the data (write under a temporary name). */
int webhdfs_create_stream(const char *url, int64_t size, webhdfs_read_fn rd, void *ud,
                          int overwrite, unsigned perm);

/* ------------------------------ reading --------------------------------- */

/* Takes the next `n` bytes of the file (in order): 0, or a negative DRV_E*
 * code (with err_set's message) to stop the transfer. */
typedef int (*webhdfs_write_fn)(void *ud, const char *buf, size_t n);

/* Length for "to the end of the file". */
#define WEBHDFS_TO_END UINT64_MAX

/* OPEN of the file `url` from byte `offset`, `length` bytes at most (fewer
 * at the end of the file; WEBHDFS_TO_END for all), streamed to `wr` (the
 * NameNode's redirect to a DataNode is followed). An offset past the end is
 * an error. A negative code from wr is returned as is. 0 or an error. */
int webhdfs_open(const char *url, uint64_t offset, uint64_t length, webhdfs_write_fn wr,
                 void *ud);

/* The whole file into *data (malloc'ed, *len bytes, plus a NUL not
 * counted; the caller frees). A file over `max` bytes is DRV_ERANGE. */
int webhdfs_read_all(const char *url, char **data, size_t *len, size_t max);

#endif
