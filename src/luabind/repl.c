/* repl.c - the interactive Lua prompt: libedit in callback mode on a libuv
 * loop, chunks evaluated the lua.c way, Ctrl-C through a Lua hook, history,
 * and tab completion of globals, fields and methods.
 *
 * Shape of a session. A uv_poll on stdin hands each key to libedit
 * (rl_callback_read_char). When libedit finishes a line, the line callback
 * only stores it and stops the poll; the driver loop in repl_run() then runs
 * it *between* uv_run(UV_RUN_ONCE) calls, never inside a libuv callback,
 * because Lua code may pump the loop itself (uv_run is not reentrant).
 * Between those turns at the prompt, attach clients' ':' lines run too
 * (they are Lua; nothing else would run them while the user thinks).
 * Without a terminal the same happens while a line is awaited (repl_in.c).
 * While a chunk runs the terminal is in cooked mode, so Ctrl-C raises
 * SIGINT, which repl_pcall() turns into a Lua error at the next
 * instruction plus err_interrupt_request() for C loops. At the prompt the
 * same handler forwards SIGINT to the loop through a uv_async, whose
 * callback abandons the line being typed.
 *
 * libedit's callback mode works for this (checked through tmux: prompt,
 * editing, history keys, completion, Ctrl-C, Ctrl-D) provided that
 * libedit's own signal handling is off (rl_catch_signals = 0; otherwise it
 * re-sends every SIGINT to the whole process group) and that stdin is put
 * back into blocking mode after uv_poll_init (libuv makes it non-blocking,
 * which would leak into io.read() and into the parent shell).
 */
#include "luabind/repl.h"

#include <ctype.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <editline/readline.h>

#include "base/err.h"
#include "luabind/l_drover.h"
#include "luabind/l_util.h"
#include "luabind/repl_complete.h"
#include "luabind/repl_in.h"
#include "base/util.h"

#ifndef DROVER_VERSION
#define DROVER_VERSION "0.1.0"
#endif

#define PROMPT "> "
#define PROMPT_MORE ">> "
#define CHUNKNAME "=stdin"
#define HISTORY_KEEP 1000 /* entries kept in memory and after a rewrite */
#define EOFMARK "<eof>"

/* ============================== growable string ========================= */

typedef struct sbuf {
  char *s;
  size_t len, cap;
} sbuf;

static int sbuf_add(sbuf *b, const char *s, size_t n) {
  if (util_grow(&b->s, &b->cap, b->len + n + 1, 1, 256) < 0)
    return err_set(DRV_ENOMEM, "out of memory reading input");
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
  return 0;
}

/* ============================== interruption ============================ */
/* Signal handlers cannot take arguments, so the state they act on lives in
 * these file-scope variables (written only outside the handler, or with
 * signal-safe operations inside it). */

static lua_State *volatile sig_L;          /* state inside repl_pcall, or NULL */
static volatile sig_atomic_t sig_count;    /* SIGINTs during that call */
static volatile sig_atomic_t sig_second_kills;
static uv_async_t *volatile sig_prompt;    /* the prompt's wake-up, or NULL */

/* Count hook set from the signal handler: raises at the next instruction,
 * the lua.c trick (lua_sethook is safe to call asynchronously). */
static void stop_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  lua_pushliteral(L, "interrupted");
  lua_error(L);
}

/* Always on during repl_pcall, every POLL_COUNT instructions: coroutines
 * copy their creator's hook when created, so this one reaches a loop
 * inside a coroutine too, where the signal handler's hook (set on the
 * main thread only) never runs. */
#define POLL_COUNT 10000
static void poll_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  if (!err_interrupted()) return;
  lua_pushliteral(L, "interrupted");
  lua_error(L);
}

static void on_sigint(int signo) {
  lua_State *L = sig_L;
  if (L != NULL) {
    err_interrupt_request();
    if (sig_count++ > 0 && sig_second_kills) {
      /* The first request went unheeded (C code that never polls): die as
       * SIGINT would have killed us, once the handler returns. */
      signal(signo, SIG_DFL);
      raise(signo);
      return;
    }
    lua_sethook(L, stop_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
  } else if (sig_prompt != NULL) {
    uv_async_send(sig_prompt); /* async-signal-safe by contract */
  } else {
    signal(signo, SIG_DFL);
    raise(signo);
  }
}

static void catch_sigint(struct sigaction *old) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART; /* stdio writes must not fail with EINTR */
  sigaction(SIGINT, &sa, old);
}

void repl_interrupt_line(void) {
  if (sig_L) kill(getpid(), SIGINT); /* on_sigint, as Ctrl-C */
}

int repl_pcall(lua_State *L, int nargs, int nresults, bool second_kills, bool *interrupted) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, drover_lua_traceback);
  lua_insert(L, base);

  /* Save the outer call's state so that nested calls stay correct. */
  lua_State *prev_L = sig_L;
  sig_atomic_t prev_count = sig_count, prev_kills = sig_second_kills;
  struct sigaction old;
  sig_L = NULL;
  sig_count = 0;
  sig_second_kills = second_kills;
  sig_L = L;
  catch_sigint(&old);
  lua_sethook(L, poll_hook, LUA_MASKCOUNT, POLL_COUNT);

  int status = lua_pcall(L, nargs, nresults, base);

  sigaction(SIGINT, &old, NULL);
  sig_L = NULL;
  /* A signal may have landed after the call; an outer call keeps polling. */
  if (prev_L)
    lua_sethook(L, poll_hook, LUA_MASKCOUNT, POLL_COUNT);
  else
    lua_sethook(L, NULL, 0, 0);
  bool got = sig_count > 0;
  err_interrupt_clear();
  sig_count = prev_count;
  sig_second_kills = prev_kills;
  sig_L = prev_L;

  lua_remove(L, base);
  if (interrupted) *interrupted = got;
  return status;
}

int repl_raise_interrupted(lua_State *L, long long step) {
  /* the handler's hook is on the thread repl_pcall runs, maybe not L */
  if (sig_L) lua_sethook(sig_L, poll_hook, LUA_MASKCOUNT, POLL_COUNT);
  return luaL_error(L, "interrupted at step %I", (lua_Integer)step);
}

static bool starts(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A traceback line of the script's own: not C's, not drover's Lua. */
static bool user_frame(const char *line, size_t len) {
  if (len < 2 || line[0] != '\t') return false;
  return !starts(line, "\t[C]:") && !starts(line, "\t[drover]") &&
         !starts(line, "\t(...tail calls...)");
}

void repl_report_interrupted(FILE *f, const char *prefix, const char *msg, bool frames) {
  if (!msg) msg = "";
  size_t first = strcspn(msg, "\n");
  const char *at = strstr(msg, "interrupted at step ");
  if (at && at < msg + first)
    fprintf(f, "%s%.*s\n", prefix, (int)(msg + first - at), at);
  else
    fprintf(f, "%sinterrupted\n", prefix);
  const char *tb = strstr(msg, "\nstack traceback:\n");
  bool said = false;
  for (const char *l = tb ? tb + strlen("\nstack traceback:\n") : NULL; frames && l && *l;) {
    size_t len = strcspn(l, "\n");
    if (user_frame(l, len)) {
      if (!said) fputs("stack traceback:\n", f);
      said = true;
      fprintf(f, "%.*s\n", (int)len, l);
    }
    l += len + (l[len] == '\n');
  }
}

/* ============================== evaluation ============================== */

typedef struct repl {
  lua_State *L;
  uv_loop_t *loop;
  uv_poll_t poll;     /* stdin; started only while the prompt waits */
  uv_async_t sigint;  /* SIGINT that arrived at the prompt */
  uv_signal_t winch;  /* terminal resized */
  char *line;         /* a finished line waiting to run (owned) */
  sbuf chunk;         /* lines of the chunk so far */
  char *history;      /* history file, or NULL for none (owned) */
  char *last_entry;   /* the newest history entry, not repeated (owned) */
  bool interactive, at_prompt, quit, winch_open;
  int open_handles; /* the prompt's handles not yet through their close callback */
  int failures;
} repl;

enum { FEED_MORE, FEED_DONE };

/* A syntax error whose message ends in "<eof>" means "keep typing". */
static bool incomplete(lua_State *L, int status) {
  if (status != LUA_ERRSYNTAX) return false;
  size_t n;
  const char *msg = lua_tolstring(L, -1, &n);
  return n >= sizeof EOFMARK - 1 && strcmp(msg + n - (sizeof EOFMARK - 1), EOFMARK) == 0;
}

/* Compiles the chunk, trying "return <chunk>" first so that expressions
 * print. Leaves the function on the stack and returns LUA_OK; or returns
 * -1 for "incomplete, read more" with nothing pushed; or a syntax error
 * status with the message (of the statement form) pushed. An incomplete
 * return form wins over a failing statement form, so that "1 +" or "{"
 * continue on the next line. */
static int compile(lua_State *L, const sbuf *chunk) {
  lua_pushliteral(L, "return ");
  lua_pushlstring(L, chunk->s, chunk->len);
  lua_concat(L, 2);
  size_t n;
  const char *ret = lua_tolstring(L, -1, &n);
  int st = luaL_loadbuffer(L, ret, n, CHUNKNAME);
  lua_remove(L, -2);
  if (st == LUA_OK) return LUA_OK;
  bool ret_more = incomplete(L, st);
  lua_pop(L, 1);

  st = luaL_loadbuffer(L, chunk->s, chunk->len, CHUNKNAME);
  if (st == LUA_OK) return LUA_OK;
  if (incomplete(L, st) || ret_more) {
    lua_pop(L, 1);
    return -1;
  }
  return st;
}

/* Pretty-prints the values on the stack (called under lua_pcall):
 * require("drover.pretty").format(v) for each value, tostring() when the
 * module or the call fails. Returns one string, values joined by tabs. */
static int format_values(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checkstack(L, 2 * n + 4, "too many results");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "drover.pretty");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK || !lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_pushnil(L);
  } else {
    lua_getfield(L, -1, "format");
    lua_remove(L, -2);
  }
  int fmt = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    if (i > 1) lua_pushliteral(L, "\t");
    if (lua_isfunction(L, fmt)) {
      lua_pushvalue(L, fmt);
      lua_pushvalue(L, i);
      if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_type(L, -1) == LUA_TSTRING) continue;
      lua_pop(L, 1);
    }
    luaL_tolstring(L, i, NULL);
  }
  lua_concat(L, 2 * n - 1);
  return 1;
}

/* Prints and pops the values from `base` to the top of the stack. */
static void print_results(lua_State *L, int base) {
  int n = lua_gettop(L) - base + 1;
  if (n <= 0) return;
  lua_pushcfunction(L, format_values);
  lua_insert(L, base);
  if (lua_pcall(L, n, 1, 0) == LUA_OK) {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    fwrite(s, 1, len, stdout); /* results may hold NUL bytes */
    fputc('\n', stdout);
  } else
    fprintf(stderr, "error printing the result: %s\n", lua_tostring(L, -1));
  lua_pop(L, 1);
  fflush(stdout);
}

/* Runs the compiled chunk on top of the stack and prints what it returns. */
static void run_chunk(repl *r) {
  lua_State *L = r->L;
  int base = lua_gettop(L);
  bool interrupted;
  int st = repl_pcall(L, 0, LUA_MULTRET, false, &interrupted);
  fflush(stdout);
  if (st != LUA_OK) {
    if (interrupted) /* on a line of its own, after the terminal's "^C" */
      repl_report_interrupted(stderr, "\n", lua_tostring(L, -1), false);
    else
      fprintf(stderr, "%s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    r->failures++;
  } else {
    print_results(L, base);
  }
  lcluster_end_stopped(); /* a cluster `drover stop` stopped during the line */
}

static void history_add(repl *r, const char *entry);

/* Adds a line to the chunk; when the chunk is complete (or hopeless),
 * records it in the history, runs it or reports it, and empties it. */
static int feed_line(repl *r, const char *line) {
  lua_State *L = r->L;
  if (r->chunk.len > 0 && sbuf_add(&r->chunk, "\n", 1) < 0) goto oom;
  if (sbuf_add(&r->chunk, line, strlen(line)) < 0) goto oom;
  int st = compile(L, &r->chunk);
  if (st == -1) return FEED_MORE;
  history_add(r, r->chunk.s);
  r->chunk.len = 0;
  if (st == LUA_OK) {
    run_chunk(r);
  } else {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    r->failures++;
  }
  return FEED_DONE;
oom:
  fprintf(stderr, "drover: %s\n", err_msg());
  r->chunk.len = 0;
  r->failures++;
  return FEED_DONE;
}

/* ============================== history ================================= */
/* One entry per line; a multi-line chunk stays one entry, its newlines
 * written as "\n" and backslashes doubled. A private format (rather than
 * libedit's write_history) so that appending one entry is one write and
 * the file reads the same whatever libedit version wrote it. */

static char *history_path(void) {
  const char *env = getenv("DROVER_HISTORY");
  if (env) return env[0] ? strdup(env) : NULL;
  const char *home = getenv("HOME");
  if (!home || !home[0]) return NULL;
  size_t n = strlen(home) + sizeof "/.drover_history";
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/.drover_history", home);
  return p;
}

static void unescape(char *s) {
  char *w = s;
  for (char *p = s; *p; p++) {
    if (*p == '\\' && p[1] == 'n') {
      *w++ = '\n';
      p++;
    } else if (*p == '\\' && p[1] == '\\') {
      *w++ = '\\';
      p++;
    } else {
      *w++ = *p;
    }
  }
  *w = '\0';
}

/* Rewrites the file with its last HISTORY_KEEP entries (through a rename,
 * so a crash leaves either file whole). */
static void history_rewrite(const char *path, char **lines, size_t n) {
  size_t plen = strlen(path) + 8;
  char *tmp = malloc(plen);
  if (!tmp) return;
  snprintf(tmp, plen, "%s.new", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f) {
    for (size_t i = n > HISTORY_KEEP ? n - HISTORY_KEEP : 0; i < n; i++) fprintf(f, "%s\n", lines[i]);
    if (fclose(f) == 0) rename(tmp, path);
  } else if (fd >= 0) {
    close(fd);
  }
  unlink(tmp);
  free(tmp);
}

static void history_load(repl *r) {
  stifle_history(HISTORY_KEEP);
  FILE *f = r->history ? fopen(r->history, "r") : NULL;
  if (!f) return;
  char **lines = NULL, *line = NULL;
  size_t n = 0, cap = 0, lcap = 0;
  ssize_t len;
  while ((len = getline(&line, &lcap, f)) >= 0) {
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len == 0) continue;
    if (util_grow(&lines, &cap, n + 1, sizeof *lines, 256) < 0) break;
    lines[n] = strdup(line);
    if (!lines[n]) break;
    n++;
  }
  free(line);
  fclose(f);
  if (n > 2 * HISTORY_KEEP) history_rewrite(r->history, lines, n);
  for (size_t i = 0; i < n; i++) {
    if (i + HISTORY_KEEP >= n) {
      unescape(lines[i]);
      add_history(lines[i]);
    }
    free(lines[i]);
  }
  free(lines);
}

/* Records a finished chunk in memory and appends it to the file. */
static void history_add(repl *r, const char *entry) {
  if (!r->interactive) return;
  const char *p = entry;
  while (isspace((unsigned char)*p)) p++;
  if (*p == '\0') return;
  if (r->last_entry && strcmp(r->last_entry, entry) == 0) return;
  free(r->last_entry);
  r->last_entry = strdup(entry);
  add_history(entry);
  if (!r->history) return;
  int fd = open(r->history, O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (fd < 0) return; /* an unwritable history is not worth failing over */
  FILE *f = fdopen(fd, "a");
  if (!f) {
    close(fd);
    return;
  }
  for (p = entry; *p; p++) {
    if (*p == '\n') fputs("\\n", f);
    else if (*p == '\\') fputs("\\\\", f);
    else fputc(*p, f);
  }
  fputc('\n', f);
  fclose(f);
}

/* ============================== completion ============================== */

/* libedit's callbacks take no user data: the session they serve. */
static repl *current;

static char **cands;
static size_t ncands, cand_next;

static void free_cands(void) {
  for (size_t i = 0; i < ncands; i++) free(cands[i]);
  free(cands);
  cands = NULL;
  ncands = 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *cand_generator(const char *text, int state) {
  (void)text;
  if (state == 0) cand_next = 0;
  return cand_next < ncands ? strdup(cands[cand_next++]) : NULL;
}

static char **on_complete(const char *text, int start, int end) {
  (void)start;
  (void)end;
  rl_attempted_completion_over = 1; /* never fall back to file names */
  lua_State *L = current->L;
  int top = lua_gettop(L);
  free_cands();
  lua_pushcfunction(L, repl_complete);
  lua_pushstring(L, text);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
    size_t n = (size_t)lua_rawlen(L, -1);
    cands = n ? calloc(n, sizeof *cands) : NULL;
    for (size_t i = 0; cands && i < n; i++) {
      lua_rawgeti(L, -1, (lua_Integer)i + 1);
      char *s = strdup(lua_tostring(L, -1));
      lua_pop(L, 1);
      if (s) cands[ncands++] = s;
    }
    qsort(cands, ncands, sizeof *cands, cmp_str);
  }
  lua_settop(L, top);
  return ncands ? rl_completion_matches(text, cand_generator) : NULL;
}

/* ============================== the prompt ============================== */

static void on_line(char *line);
static void on_stdin(uv_poll_t *h, int status, int events);

static void show_prompt(repl *r) {
  r->at_prompt = true;
  uv_poll_start(&r->poll, UV_READABLE | UV_DISCONNECT, on_stdin);
  rl_callback_handler_install(r->chunk.len ? PROMPT_MORE : PROMPT, on_line);
}

/* libedit finished a line (NULL: Ctrl-D on an empty line). Runs inside
 * rl_callback_read_char, inside the poll callback: only hand it over. */
static void on_line(char *line) {
  repl *r = current;
  r->at_prompt = false;
  uv_poll_stop(&r->poll);
  if (line == NULL)
    r->quit = true;
  else
    r->line = line;
}

static void on_stdin(uv_poll_t *h, int status, int events) {
  repl *r = h->data;
  int avail = 0;
  /* Readable with nothing to read is a hang-up: the terminal is gone. */
  if (status < 0 || (events & UV_DISCONNECT) || ioctl(STDIN_FILENO, FIONREAD, &avail) < 0 ||
      avail <= 0) {
    r->at_prompt = false;
    r->quit = true;
    uv_poll_stop(&r->poll);
    return;
  }
  rl_callback_read_char();
  /* Some libedit versions re-enter raw mode after the line callback; the
   * chunk must run with a cooked terminal so that Ctrl-C is SIGINT. */
  if (!r->at_prompt) rl_callback_handler_remove();
}

/* Ctrl-C at the prompt: drop the line and any unfinished chunk. */
static void on_prompt_sigint(uv_async_t *h) {
  repl *r = h->data;
  if (!r->at_prompt) return;
  rl_callback_handler_remove();
  fputs("^C\n", stdout); /* raw mode: the terminal did not echo it */
  fflush(stdout);
  r->chunk.len = 0;
  rl_callback_handler_install(PROMPT, on_line);
}

static void on_winch(uv_signal_t *h, int signo) {
  (void)signo;
  repl *r = h->data;
  if (r->at_prompt) rl_resize_terminal();
}

static void on_close(uv_handle_t *h) {
  repl *r = h->data;
  r->open_handles--;
}

static void close_handle(repl *r, uv_handle_t *h) {
  r->open_handles++;
  uv_close(h, on_close);
}

/* The handles live in the repl, which lives on its caller's stack: wait
 * for their close callbacks. Only closing handles are waited for, so a
 * turn never blocks; other handles' callbacks may run (a cluster's). */
static void wait_closed(repl *r) {
  while (r->open_handles > 0) uv_run(r->loop, UV_RUN_ONCE);
}

/* Sets up libedit, then the handles. Returns 0, or a negative code with
 * nothing left open. */
static int prompt_open(repl *r) {
  rl_readline_name = "drover"; /* "drover:" lines in ~/.editrc apply */
  rl_catch_signals = 0;
  rl_catch_sigwinch = 0;
  rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,)+-*/%^~#[]";
  rl_attempted_completion_function = on_complete;
  rl_completion_append_character = '\0';
  if (rl_initialize() != 0) return err_set(DRV_EIO, "cannot set up the terminal for editing");

  int flags = fcntl(STDIN_FILENO, F_GETFL);
  int rc = uv_poll_init(r->loop, &r->poll, STDIN_FILENO);
  if (rc < 0) return err_set(DRV_EIO, "cannot watch stdin: %s", uv_strerror(rc));
  if (flags >= 0) fcntl(STDIN_FILENO, F_SETFL, flags); /* libuv made it non-blocking */
  r->poll.data = r;
  r->sigint.data = r;
  r->winch.data = r;
  if ((rc = uv_async_init(r->loop, &r->sigint, on_prompt_sigint)) < 0) {
    close_handle(r, (uv_handle_t *)&r->poll);
    wait_closed(r);
    return err_set(DRV_EIO, "cannot set up Ctrl-C handling: %s", uv_strerror(rc));
  }
  /* Without this only the width libedit saw at start is known. */
  r->winch_open = uv_signal_init(r->loop, &r->winch) == 0;
  if (r->winch_open) uv_signal_start(&r->winch, on_winch, SIGWINCH);
  history_load(r);
  return 0;
}

static void prompt_close(repl *r) {
  rl_callback_handler_remove();
  free_cands();
  close_handle(r, (uv_handle_t *)&r->poll);
  close_handle(r, (uv_handle_t *)&r->sigint);
  if (r->winch_open) close_handle(r, (uv_handle_t *)&r->winch);
  wait_closed(r);
}

/* A cluster `drover stop` stopped while the prompt waits: shut down, said
 * above the prompt, and the line being typed given back. */
static void end_stops_at_prompt(repl *r) {
  bool prompt = r->at_prompt;
  char *typed = prompt && rl_line_buffer ? strdup(rl_line_buffer) : NULL;
  if (prompt) {
    uv_poll_stop(&r->poll);
    rl_callback_handler_remove();
    r->at_prompt = false;
    fputs("\n", stdout);
    fflush(stdout);
  }
  lcluster_end_stopped();
  if (prompt && !r->quit) {
    show_prompt(r);
    if (typed && typed[0]) {
      rl_insert_text(typed);
      fputs("\r", stdout); /* the prompt again, with the line, over the one just shown */
      fflush(stdout);
      rl_forced_update_display(); /* not rl_redisplay: libedit's pushes a ^R key */
    }
  }
  free(typed);
}

static int run_interactive(repl *r) {
  int rc = prompt_open(r);
  if (rc < 0) {
    fprintf(stderr, "drover: %s\n", err_msg());
    return 1;
  }
  printf("drover %s \xe2\x80\x94 %s; help() for help, Ctrl-D to leave\n", DROVER_VERSION,
         LUA_VERSION);
  fflush(stdout);

  struct sigaction old;
  sig_prompt = &r->sigint;
  catch_sigint(&old);
  show_prompt(r);
  while (!r->quit) {
    uv_run(r->loop, UV_RUN_ONCE);
    if (!r->line && !r->quit) ldash_run_commands(r->L); /* attach ':' lines, while idle */
    if (lcluster_stop_pending()) end_stops_at_prompt(r);
    if (r->line) {
      char *line = r->line;
      r->line = NULL;
      feed_line(r, line);
      free(line);
      if (!r->quit) show_prompt(r);
    }
  }
  fputs("\n", stdout);
  fflush(stdout);
  sig_prompt = NULL;
  sigaction(SIGINT, &old, NULL);
  prompt_close(r);
  return 0;
}

/* ============================== without a terminal ====================== */

/* Between loop turns while the next line is awaited: what the prompt does
 * at its own turns (attach clients' ':' lines, a `drover stop`). */
static void between_lines(void *ud) {
  repl *r = ud;
  ldash_run_commands(r->L);
  if (lcluster_stop_pending()) lcluster_end_stopped();
}

static int run_piped(repl *r) {
  replin in;
  replin_open(&in, stdin, r->loop, between_lines, r);
  const char *line;
  size_t n;
  while (replin_next(&in, &line, &n)) feed_line(r, line);
  replin_close(&in);
  if (r->chunk.len > 0) { /* the input ended inside a chunk: say where */
    if (luaL_loadbuffer(r->L, r->chunk.s, r->chunk.len, CHUNKNAME) != LUA_OK)
      fprintf(stderr, "%s\n", lua_tostring(r->L, -1));
    lua_pop(r->L, 1);
    r->failures++;
  }
  return r->failures ? 1 : 0;
}

#define REPL_KEY "drover.repl"

bool repl_hosts(lua_State *L) {
  bool yes = lua_getfield(L, LUA_REGISTRYINDEX, REPL_KEY) == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 1);
  return yes;
}

int repl_run(lua_State *L, uv_loop_t *loop) {
  repl r;
  memset(&r, 0, sizeof r);
  lua_pushboolean(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, REPL_KEY);
  r.L = L;
  r.loop = loop;
  r.interactive = isatty(STDIN_FILENO);
  repl *prev = current;
  current = &r;
  int status;
  if (r.interactive) {
    r.history = history_path();
    status = run_interactive(&r);
  } else {
    status = run_piped(&r);
  }
  current = prev;
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, REPL_KEY);
  free(r.history);
  free(r.last_entry);
  free(r.chunk.s);
  return status;
}
