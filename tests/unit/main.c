/* main.c - unit test runner: every registered case in its own process.
 * Usage: unit_tests [SUBSTRING...]  (run only cases whose name matches)
 *        unit_tests --wire-vectors ...  (the shared wire vectors:
 *                                        wire_vectors.h) */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "wire_vectors.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
/* _exit skips LeakSanitizer's exit-time check: run it by hand so that a
 * case that leaks fails. */
#define LEAK_CHECK() __lsan_do_leak_check()
#else
#define LEAK_CHECK() ((void)0)
#endif

#define MAX_CASES 1024
/* A case's bound: under ASan the slowest (a Lua stack overflow on a
 * worker, test_worker_call.c) took over 120 s on a loaded machine. */
#if defined(__SANITIZE_ADDRESS__)
#define CASE_TIMEOUT 300
#else
#define CASE_TIMEOUT 120
#endif

static struct {
  const char *name;
  harness_fn fn;
} cases[MAX_CASES];
static int ncases;
static char tmpdir[256];
static char srcdir[4096];

void harness_register(const char *name, harness_fn fn) {
  if (ncases == MAX_CASES) {
    fprintf(stderr, "harness: too many cases\n");
    abort();
  }
  cases[ncases].name = name;
  cases[ncases].fn = fn;
  ncases++;
}

void harness_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "  %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  _exit(1);
}

const char *harness_write(const char *name, const void *content, size_t len) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(content, 1, len, f) != len || fclose(f) != 0)
    harness_fail(__FILE__, __LINE__, "cannot write %s", path);
  return path;
}

const char *harness_write_str(const char *name, const char *content) {
  return harness_write(name, content, strlen(content));
}

const char *harness_src(const char *relpath) {
  static char path[8192];
  snprintf(path, sizeof path, "%s/%s", srcdir, relpath);
  return path;
}

static int matches(const char *name, int argc, char **argv) {
  if (argc < 2) return 1;
  for (int i = 1; i < argc; i++)
    if (strstr(name, argv[i])) return 1;
  return 0;
}

static void rmtree(const char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "harness: could not remove %s\n", dir);
}

static int run_case(int i) {
  snprintf(tmpdir, sizeof tmpdir, "%s/drover-unit-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    return 1;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(tmpdir) != 0) _exit(3);
    alarm(CASE_TIMEOUT);
    cases[i].fn();
    fflush(NULL);
    LEAK_CHECK();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  rmtree(tmpdir);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    printf("PASS %s\n", cases[i].name);
    return 0;
  }
  if (WIFSIGNALED(status))
    printf("FAIL %s: killed by signal %d%s\n", cases[i].name, WTERMSIG(status),
           WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
  else
    printf("FAIL %s\n", cases[i].name);
  return 1;
}

int main(int argc, char **argv) {
  int failed = 0, ran = 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc > 1 && strcmp(argv[1], "--wire-vectors") == 0)
    return wire_vectors_main(argc - 2, argv + 2);
  /* Run from the source tree (tests/run.sh does) so harness_src() works. */
  if (!getcwd(srcdir, sizeof srcdir)) return 2;
  for (int i = 0; i < ncases; i++) {
    if (!matches(cases[i].name, argc, argv)) continue;
    failed += run_case(i);
    ran++;
  }
  fflush(stdout);
  fprintf(stderr, "unit: %d cases, %d failed\n", ran, failed);
  return failed ? 1 : 0;
}
