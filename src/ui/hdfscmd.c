/* hdfscmd.c - `drover hdfs VERB ...`: one handler per verb in a table, the
 * bytes streamed between local files and WebHDFS (never held whole). */
#include "ui/hdfscmd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/err.h"
#include "base/webhdfs.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2

typedef struct ctx {
  const char *verb;
  FILE *out, *err;
} ctx;

static int failed(ctx *c) {
  fprintf(c->err, "drover hdfs %s: %s\n", c->verb, err_msg());
  return EXIT_FAIL;
}

__attribute__((format(printf, 2, 3))) static int usage(ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(c->err, "drover hdfs %s: ", c->verb);
  vfprintf(c->err, fmt, ap);
  fputs("\n\n", c->err);
  va_end(ap);
  return EXIT_USAGE;
}

static void when(int64_t ms, char *out, size_t cap) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  if (!gmtime_r(&t, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm)) snprintf(out, cap, "-");
}

/* The URL's last path component (for put/get into a directory). */
static const char *base_name(const char *p) {
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/') n--;
  const char *s = p + n;
  while (s > p && s[-1] != '/') s--;
  return s;
}

/* DIR + "/" + NAME into out. */
static int join(const char *dir, const char *name, char *out, size_t cap) {
  size_t n = strlen(dir);
  int k = snprintf(out, cap, "%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
  return k < 0 || (size_t)k >= cap ? err_set(DRV_ERANGE, "'%s/%s' is too long", dir, name) : 0;
}

/* ============================== metadata verbs ========================== */

static int do_ls(ctx *c, int argc, char **argv) {
  int st = 0;
  for (int i = 0; i < argc; i++) {
    webhdfs_entry *e;
    size_t n;
    if (webhdfs_list(argv[i], &e, &n) < 0) {
      st = failed(c);
      continue;
    }
    if (argc > 1) fprintf(c->out, "%s%s:\n", i ? "\n" : "", argv[i]);
    for (size_t k = 0; k < n; k++) {
      char t[32];
      when(e[k].mtime_ms, t, sizeof t);
      fprintf(c->out, "%c %12llu %s %s%s\n", e[k].is_dir ? 'd' : '-', (unsigned long long)e[k].size,
              t, e[k].name, e[k].is_dir ? "/" : "");
    }
    webhdfs_list_free(e, n);
  }
  return st;
}

static int do_stat(ctx *c, int argc, char **argv) {
  int st = 0;
  for (int i = 0; i < argc; i++) {
    webhdfs_info s;
    if (webhdfs_stat(argv[i], &s) < 0) {
      st = failed(c);
      continue;
    }
    char t[32];
    when(s.mtime_ms, t, sizeof t);
    fprintf(c->out, "%s\n  type: %s\n  size: %llu\n  modified: %s\n  owner: %s\n  group: %s\n"
            "  permission: %04o\n", argv[i], s.is_dir ? "directory" : "file",
            (unsigned long long)s.size, t, s.owner, s.group, s.perm);
  }
  return st;
}

static int do_mkdir(ctx *c, int argc, char **argv) {
  int st = 0;
  for (int i = 0; i < argc; i++)
    if (webhdfs_mkdirs(argv[i], 0) < 0) st = failed(c);
  return st;
}

static int do_rm(ctx *c, int argc, char **argv) {
  int recursive = argc > 0 && strcmp(argv[0], "-r") == 0, st = 0;
  if (recursive && --argc == 0) return usage(c, "which URL?");
  for (int i = recursive; i < argc + recursive; i++) {
    int rc = webhdfs_delete(argv[i], recursive);
    if (rc == 0) err_set(DRV_ENOENT, "%s: no such file or directory", argv[i]);
    if (rc <= 0) st = failed(c);
  }
  return st;
}

static int do_mv(ctx *c, int argc, char **argv) {
  if (argc != 2) return usage(c, "mv takes a source and a destination");
  return webhdfs_rename(argv[0], argv[1]) < 0 ? failed(c) : 0;
}

/* ============================== data verbs ============================== */

static int to_file(void *ud, const char *buf, size_t n) {
  FILE *f = ud;
  if (fwrite(buf, 1, n, f) != n) return err_set(DRV_EIO, "cannot write: %s", strerror(errno));
  return 0;
}

static long long from_file(void *ud, char *buf, size_t cap) {
  FILE *f = ud;
  size_t n = fread(buf, 1, cap, f);
  if (n == 0 && ferror(f)) return err_set(DRV_EIO, "cannot read: %s", strerror(errno));
  return (long long)n;
}

/* A count option's value ("-o 100"). */
static int count_arg(const char *s, uint64_t *v) {
  char *e;
  errno = 0;
  unsigned long long x = s && *s != '-' ? strtoull(s, &e, 10) : 0;
  if (!s || *s == '-' || !*s || *e || errno) return -1;
  *v = x;
  return 0;
}

static int do_cat(ctx *c, int argc, char **argv) {
  uint64_t off = 0, len = WEBHDFS_TO_END;
  int i = 0, st = 0;
  for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
    if (!strcmp(argv[i], "--offset") || !strcmp(argv[i], "-o")) {
      if (count_arg(argv[i + 1], &off) < 0) return usage(c, "bad offset '%s'", argv[i + 1]);
    } else if (!strcmp(argv[i], "--length") || !strcmp(argv[i], "-n")) {
      if (count_arg(argv[i + 1], &len) < 0) return usage(c, "bad length '%s'", argv[i + 1]);
    } else {
      return usage(c, "unknown option '%s'", argv[i]);
    }
  }
  if (i == argc) return usage(c, "which URL?");
  for (; i < argc; i++)
    if (webhdfs_open(argv[i], off, len, to_file, c->out) < 0) st = failed(c);
  if (fflush(c->out) != 0) st = failed(c);
  return st;
}

/* put's destination: URL, or URL/NAME when URL is a directory. */
static int put_target(const char *local, const char *url, char *out, size_t cap) {
  webhdfs_info s;
  int rc = webhdfs_stat(url, &s);
  if (rc < 0 && rc != DRV_ENOENT) return rc;
  if (rc == 0 && s.is_dir) {
    if (!strcmp(local, "-")) return err_set(DRV_EINVAL, "%s is a directory", url);
    return join(url, base_name(local), out, cap);
  }
  return snprintf(out, cap, "%s", url) >= (int)cap ? err_set(DRV_ERANGE, "'%s' is too long", url) : 0;
}

static int do_put(ctx *c, int argc, char **argv) {
  int force = argc > 0 && strcmp(argv[0], "-f") == 0;
  if (argc - force != 2) return usage(c, "put takes [-f] LOCAL URL");
  const char *local = argv[force], *url = argv[force + 1];
  char target[WEBHDFS_URL_MAX];
  if (put_target(local, url, target, sizeof target) < 0) return failed(c);
  FILE *f = strcmp(local, "-") ? fopen(local, "rbe") : stdin;
  if (!f) {
    err_set(DRV_EIO, "cannot read '%s': %s", local, strerror(errno));
    return failed(c);
  }
  struct stat sb;
  int64_t size = f != stdin && fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) ? sb.st_size : -1;
  int rc = webhdfs_create_stream(target, size, from_file, f, force, 0);
  if (f != stdin) fclose(f);
  return rc < 0 ? failed(c) : 0;
}

/* get: the bytes into LOCAL.part, renamed to LOCAL once all came, so a
 * failure leaves no partial file under the name. */
static int do_get(ctx *c, int argc, char **argv) {
  if (argc != 2) return usage(c, "get takes URL LOCAL");
  const char *url = argv[0];
  char local[4096], part[4200];
  struct stat sb;
  if (!strcmp(argv[1], "-")) return webhdfs_open(url, 0, WEBHDFS_TO_END, to_file, c->out) < 0 ? failed(c) : 0;
  if (stat(argv[1], &sb) == 0 && S_ISDIR(sb.st_mode)) {
    if (join(argv[1], base_name(url), local, sizeof local) < 0) return failed(c);
  } else if (snprintf(local, sizeof local, "%s", argv[1]) >= (int)sizeof local) {
    return usage(c, "'%s' is too long", argv[1]);
  }
  snprintf(part, sizeof part, "%s.part", local);
  FILE *f = fopen(part, "wbe");
  if (!f) {
    err_set(DRV_EIO, "cannot write '%s': %s", part, strerror(errno));
    return failed(c);
  }
  int rc = webhdfs_open(url, 0, WEBHDFS_TO_END, to_file, f);
  if (fclose(f) != 0 && rc == 0) rc = err_set(DRV_EIO, "cannot write '%s': %s", part, strerror(errno));
  if (rc == 0 && rename(part, local) != 0)
    rc = err_set(DRV_EIO, "cannot rename '%s' to '%s': %s", part, local, strerror(errno));
  if (rc < 0) unlink(part);
  return rc < 0 ? failed(c) : 0;
}

/* ============================== dispatch ================================ */

/* The verbs: name, handler (argv after the verb), the least URLs taken. */
static const struct verb {
  const char *name;
  int (*run)(ctx *c, int argc, char **argv);
  int min_args;
} verbs[] = {
    {"ls", do_ls, 1},     {"stat", do_stat, 1}, {"cat", do_cat, 1}, {"put", do_put, 2},
    {"get", do_get, 2},   {"rm", do_rm, 1},     {"mkdir", do_mkdir, 1}, {"mv", do_mv, 2},
};

int hdfscmd_main(int argc, char **argv, FILE *out, FILE *err) {
  ctx c = {.verb = argc > 0 ? argv[0] : "", .out = out, .err = err};
  if (argc < 1) {
    fputs("drover hdfs: which command? (ls cat put get rm mkdir mv stat)\n\n", err);
    return EXIT_USAGE;
  }
  for (size_t i = 0; i < sizeof verbs / sizeof *verbs; i++) {
    if (strcmp(verbs[i].name, argv[0]) != 0) continue;
    if (argc - 1 < verbs[i].min_args) return usage(&c, "too few arguments");
    return verbs[i].run(&c, argc - 1, argv + 1);
  }
  fprintf(err, "drover hdfs: unknown command '%s' (ls cat put get rm mkdir mv stat)\n\n", argv[0]);
  return EXIT_USAGE;
}
