/* repl_in.c - a REPL's lines from a pipe, FIFO or file, read while the
 * libuv loop turns (repl_in.h).
 *
 * How a line is read without ever blocking the loop: with the fd made
 * non-blocking for the moment, getc() takes what stdio has buffered and
 * what the fd holds, up to a '\n'; an EAGAIN means "nothing more yet", so
 * the fd goes back to blocking mode and the loop turns (with a uv_poll on
 * the fd) until it is readable. stdio keeps whatever it read past the '\n'
 * in its own buffer, where the next call, or a chunk's io.read(), finds it.
 * The fd is non-blocking only inside drain(): a chunk, a child process or
 * the parent shell never sees it so.
 */
#include "luabind/repl_in.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

enum { GOT_LINE, GOT_EOF, GOT_NOTHING, GOT_ERROR };

/* Also on an error or a hang-up: the read that follows tells which. */
static void on_readable(uv_poll_t *h, int status, int events) {
  (void)status;
  (void)events;
  replin *in = h->data;
  in->readable = true;
}

void replin_open(replin *in, FILE *f, uv_loop_t *loop, void (*between)(void *ud), void *ud) {
  memset(in, 0, sizeof *in);
  in->f = f;
  in->loop = loop;
  in->between = between;
  in->ud = ud;
  int fd = fileno(f);
  in->flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
  if (in->flags < 0) return;
  /* Fails for a regular file (epoll refuses it): read plainly, then. */
  in->polling = uv_poll_init(loop, &in->poll, fd) == 0;
  fcntl(fd, F_SETFL, in->flags); /* libuv made it non-blocking */
  in->poll.data = in;
}

static void set_nonblocking(replin *in, bool on) {
  if (in->polling) fcntl(fileno(in->f), F_SETFL, on ? in->flags | O_NONBLOCK : in->flags);
}

static int add_char(replin *in, int c) {
  if (util_grow(&in->line, &in->cap, in->len + 2, 1, 256) < 0) return -1;
  in->line[in->len++] = (char)c;
  in->line[in->len] = '\0';
  return 0;
}

/* Adds to the line what can be read without blocking, up to a '\n'. */
static int drain(replin *in) {
  set_nonblocking(in, true);
  int c;
  errno = 0;
  while ((c = getc(in->f)) != EOF && c != '\n')
    if (add_char(in, c) < 0) break;
  int err = errno;
  set_nonblocking(in, false);
  if (c == '\n') return GOT_LINE;
  if (c != EOF) return GOT_ERROR; /* out of memory */
  if (feof(in->f) || !ferror(in->f)) return GOT_EOF;
  if (err == EINTR || (in->polling && (err == EAGAIN || err == EWOULDBLOCK))) {
    clearerr(in->f); /* stdio's buffer was empty: nothing was lost */
    return GOT_NOTHING;
  }
  return GOT_ERROR;
}

/* Turns the loop until the fd is readable, `between` after each turn. The
 * poll is on only during the turn: Lua that `between` runs may pump the
 * loop, whose turns a readable fd would otherwise end at once (a spin). */
static void wait_readable(replin *in) {
  in->readable = false;
  while (!in->readable) {
    uv_poll_start(&in->poll, UV_READABLE | UV_DISCONNECT, on_readable);
    uv_run(in->loop, UV_RUN_ONCE);
    uv_poll_stop(&in->poll);
    if (in->between) in->between(in->ud);
  }
}

int replin_next(replin *in, const char **line, size_t *len) {
  in->len = 0;
  if (in->line) in->line[0] = '\0';
  for (;;) {
    int got = drain(in);
    if (got == GOT_LINE || (got == GOT_EOF && in->len > 0)) break;
    if (got != GOT_NOTHING) return 0;
    wait_readable(in);
  }
  *line = in->line ? in->line : "";
  *len = in->len;
  return 1;
}

static void on_closed(uv_handle_t *h) {
  replin *in = h->data;
  in->closing = false;
}

void replin_close(replin *in) {
  if (in->polling) {
    in->closing = true;
    uv_close((uv_handle_t *)&in->poll, on_closed);
    /* Only a closing handle is waited for: the turn never blocks. */
    while (in->closing) uv_run(in->loop, UV_RUN_ONCE);
    in->polling = false;
  }
  free(in->line);
  in->line = NULL;
  in->len = in->cap = 0;
}
