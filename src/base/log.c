/* log.c - one-line log records with a UTC millisecond timestamp, the
 * writer's name and a level letter:
 *   2026-11-21T10:53:06.123Z worker:1 W connection to ps:0 lost
 * Each record is formatted whole and written with one fprintf and one
 * fflush, so records from several processes sharing a file (a node's
 * stdout and stderr both go to its log) never interleave mid-line.
 */
#include "base/log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static FILE *log_out;     /* NULL: stderr */
static char log_who[64] = "drover";
static int log_level = LOG_INFO;
static log_sink_fn log_sink;
static void *log_sink_ud;
static int log_in_sink; /* a record logged by the sink is not handed back */

void log_set_sink(log_sink_fn fn, void *ud) {
  log_sink = fn;
  log_sink_ud = ud;
}

/* The record once more, whole, for the sink. */
static void to_sink(const char *ts, char letter, const char *text) {
  char stack[1200], *rec = stack;
  int n = snprintf(stack, sizeof stack, "%s %s %c %s\n", ts, log_who, letter, text);
  if (n < 0) return;
  if ((size_t)n >= sizeof stack) {
    if (!(rec = malloc((size_t)n + 1))) return;
    snprintf(rec, (size_t)n + 1, "%s %s %c %s\n", ts, log_who, letter, text);
  }
  log_in_sink = 1;
  log_sink(log_sink_ud, rec, (size_t)n);
  log_in_sink = 0;
  if (rec != stack) free(rec);
}

void log_setup(FILE *out, const char *who, int level) {
  log_out = out;
  snprintf(log_who, sizeof log_who, "%s", who && *who ? who : "drover");
  log_level = level;
}

void log_timestamp(char *buf, size_t n) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  size_t k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + k, n - k, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* A record stays one line: trailing newlines go, inner ones become spaces. */
static void one_line(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = '\0';
  for (char *p = s; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
}

void log_msg(int level, const char *fmt, ...) {
  if (level < log_level) return;
  static const char letters[] = "DIWE";
  char letter = level >= LOG_DEBUG && level <= LOG_ERROR ? letters[level] : '?';
  char stack[1024], *text = stack;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(stack, sizeof stack, fmt, ap);
  va_end(ap);
  if (n < 0) {
    snprintf(stack, sizeof stack, "(unformattable log message: %s)", fmt);
  } else if ((size_t)n >= sizeof stack) {
    char *big = malloc((size_t)n + 1);
    if (big) { /* else keep the truncated text: better than nothing */
      va_start(ap, fmt);
      vsnprintf(big, (size_t)n + 1, fmt, ap);
      va_end(ap);
      text = big;
    }
  }
  one_line(text);
  char ts[40];
  log_timestamp(ts, sizeof ts);
  FILE *out = log_out ? log_out : stderr;
  fprintf(out, "%s %s %c %s\n", ts, log_who, letter, text);
  fflush(out);
  if (log_sink && !log_in_sink) to_sink(ts, letter, text);
  if (text != stack) free(text);
}
