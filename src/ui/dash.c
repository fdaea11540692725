/* dash.c - the dashboard's driver: takes the terminal with ncurses,
 * redraws on a libuv timer, reads keys from a uv_poll, follows SIGWINCH,
 * loads themes, and gives the terminal back on q or dash_close.
 *
 * Frames are erase() + draw + wnoutrefresh + doupdate: ncurses compares
 * the new frame with what the terminal shows and sends only the changed
 * cells, so a steady redraw costs little and never flickers (clear()
 * would repaint everything).
 *
 * The key poll watches a dup() of the input descriptor, so that another
 * uv_poll on the same descriptor (the REPL's, stopped while dash() runs)
 * does not collide with it; libuv makes the descriptor non-blocking, which
 * is undone at once as the REPL does, since the shell shares it.
 */
#include "ui/dash.h"

#include <curses.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ui/dash_int.h"
#include "base/err.h"

#define KEYS_PER_WAKEUP 256 /* a paste cannot stall the loop */

struct dash {
  uv_loop_t *loop;
  uv_timer_t timer;
  uv_poll_t poll;
  uv_signal_t winch;
  int infd;         /* dup of fileno(in), watched by poll */
  int open_handles; /* handles not yet through their close callback */
  SCREEN *scr;
  FILE *in, *out;
  dash_opts opts;
  dash_ui ui;
  bool color;
  bool closed;   /* terminal given back (q or dash_close) */
  bool released; /* dash_close ran: free when the handles are closed */
};

void dash_opts_default(dash_opts *o) {
  memset(o, 0, sizeof *o);
  o->hz = 4;
  o->in = stdin;
  o->out = stdout;
}

bool dash_closed(const dash *d) { return !d || d->closed; }

/* ============================== themes =================================== */

/* Loads ui->themes[ui->theme] and applies it; a theme that fails to load
 * leaves the built-in default and its message on the status line. */
static void apply_theme(dash *d) {
  dash_ui *ui = &d->ui;
  dash_theme t;
  const char *name = ui->nthemes ? ui->themes[ui->theme] : "default";
  if (dash_theme_load(name, &t) < 0) {
    dash_ui_status(ui, 10, "%s; using the built-in default", err_msg());
    dash_theme_fallback(&t);
  } else {
    dash_ui_status(ui, 3, "theme: %s%s", name, d->color ? "" : " (no colours: NO_COLOR or terminal)");
  }
  dash_theme_apply(&t, d->color, &ui->pal);
}

/* Fills the theme list and points ui->theme at `want` (added when it is
 * not a known name, so that its load error is shown). */
static void init_themes(dash *d, const char *want) {
  dash_ui *ui = &d->ui;
  ui->nthemes = dash_theme_names(ui->themes, DASH_MAX_THEMES);
  ui->theme = -1;
  for (int i = 0; i < ui->nthemes; i++)
    if (strcmp(ui->themes[i], want) == 0) ui->theme = i;
  if (ui->theme < 0) {
    if (ui->nthemes == DASH_MAX_THEMES) ui->nthemes--;
    ui->theme = ui->nthemes++;
    snprintf(ui->themes[ui->theme], sizeof ui->themes[0], "%s", want);
  }
}

/* ============================== frames =================================== */

static double now_seconds(void) { return (double)uv_hrtime() / 1e9; }

static void draw(dash *d) {
  if (d->closed) return;
  const runview *m = d->ui.src.get(d->ui.src.ud);
  runview empty;
  if (!m) {
    runview_init(&empty);
    m = &empty;
  }
  d->ui.now = now_seconds();
  dash_view_draw(&d->ui, m, LINES, COLS);
  wnoutrefresh(stdscr);
  doupdate();
}

static void on_timer(uv_timer_t *t) { draw(t->data); }

static void on_close(uv_handle_t *h) {
  dash *d = h->data;
  if (h == (uv_handle_t *)&d->poll) close(d->infd);
  if (--d->open_handles == 0 && d->released) {
    dash_ui_free(&d->ui);
    free(d);
  }
}

/* A handle dash_open got as far as initialising (libuv sets h->loop), not
 * yet closing. */
static void close_handle(uv_handle_t *h) {
  if (h->loop && !uv_is_closing(h)) uv_close(h, on_close);
}

/* Gives the terminal back and closes the handles opened so far; the
 * struct lives on until dash_close and the close callbacks. */
static void teardown(dash *d) {
  if (d->closed) return;
  d->closed = true;
  if (d->scr) {
    endwin();
    delscreen(d->scr);
    d->scr = NULL;
    fflush(d->out);
  }
  close_handle((uv_handle_t *)&d->timer);
  close_handle((uv_handle_t *)&d->poll);
  close_handle((uv_handle_t *)&d->winch);
}

static void quit(dash *d) {
  if (d->closed) return;
  teardown(d);
  if (d->opts.on_quit) d->opts.on_quit(d->opts.ud);
}

/* ============================== input ==================================== */

static void on_key_ready(uv_poll_t *h, int status, int events) {
  dash *d = h->data;
  int avail = 0;
  /* Readable with nothing to read is a hang-up: the terminal is gone
   * (an SSH session closed). Leave as if q was pressed. */
  if (status < 0 || (events & UV_DISCONNECT) || ioctl(d->infd, FIONREAD, &avail) < 0 || avail <= 0) {
    quit(d);
    return;
  }
  const runview *m = d->ui.src.get(d->ui.src.ud);
  runview empty;
  if (!m) {
    runview_init(&empty);
    m = &empty;
  }
  int flags = 0;
  for (int i = 0; i < KEYS_PER_WAKEUP; i++) {
    int key = getch();
    if (key == ERR) break;
    d->ui.now = now_seconds();
    dash_view_rows(&d->ui, m); /* the rows the key acts on */
    flags |= dash_input_key(&d->ui, m, key);
    if (flags & DASH_DO_QUIT) {
      quit(d);
      return;
    }
    if (flags & DASH_DO_THEME) {
      apply_theme(d);
      flags &= ~DASH_DO_THEME;
    }
  }
  if (flags & DASH_DO_REPAINT) clearok(curscr, TRUE);
  if (flags & DASH_DO_REDRAW) draw(d);
}

static void on_winch(uv_signal_t *h, int signo) {
  (void)signo;
  dash *d = h->data;
  if (d->closed) return;
  struct winsize ws;
  if (ioctl(fileno(d->out), TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
    resizeterm(ws.ws_row, ws.ws_col);
  draw(d);
}

/* ============================== open and close =========================== */

/* Once per process: the user's character set (UTF-8 gets Braille). Only
 * LC_CTYPE: LC_NUMERIC would change how Lua and the logs write numbers,
 * LC_COLLATE how Lua compares strings. */
static bool locale_utf8(void) {
  static int done;
  if (!done) {
    setlocale(LC_CTYPE, "");
    done = 1;
  }
  const char *cs = nl_langinfo(CODESET);
  return cs && (strcmp(cs, "UTF-8") == 0 || strcmp(cs, "utf8") == 0);
}

/* The options with their defaults, checked: a source, a terminal on both
 * ends and a terminal type. */
static int resolve_opts(const dash_opts *o, dash_source src, dash_opts *opts) {
  if (o)
    *opts = *o;
  else
    dash_opts_default(opts);
  if (!opts->in) opts->in = stdin;
  if (!opts->out) opts->out = stdout;
  if (!(opts->hz > 0)) opts->hz = 4;
  if (opts->hz > 60) opts->hz = 60;
  if (!src.get) return err_set(DRV_EINVAL, "dashboard source without a get function");
  if (!isatty(fileno(opts->in)) || !isatty(fileno(opts->out)))
    return err_set(DRV_EINVAL, "the dashboard needs a terminal (stdin and stdout are not both one)");
  const char *term = getenv("TERM");
  if (!term || !*term || strcmp(term, "dumb") == 0)
    return err_set(DRV_EUNSUPPORTED, "the dashboard needs a terminal type (TERM is '%s')",
                   term ? term : "");
  return 0;
}

/* SIGWINCH first: ncurses installs its own handler only over the default. */
static int watch_resizes(dash *d) {
  int rc = uv_signal_init(d->loop, &d->winch);
  if (rc < 0) return err_set(DRV_EIO, "cannot watch terminal resizes: %s", uv_strerror(rc));
  d->winch.data = d;
  d->open_handles++;
  rc = uv_signal_start(&d->winch, on_winch, SIGWINCH);
  if (rc < 0) return err_set(DRV_EIO, "cannot watch terminal resizes: %s", uv_strerror(rc));
  return 0;
}

/* ncurses on the terminal: modes, colours, the theme. */
static int take_terminal(dash *d) {
  d->scr = newterm(NULL, d->out, d->in);
  if (!d->scr)
    return err_set(DRV_EUNSUPPORTED, "cannot use terminal type '%s' (no terminfo entry?)",
                   getenv("TERM"));
  set_term(d->scr);
  cbreak();
  noecho();
  nonl();
  intrflush(stdscr, FALSE);
  keypad(stdscr, TRUE);
  nodelay(stdscr, TRUE);
  leaveok(stdscr, TRUE);
  curs_set(0);
  set_escdelay(25);
  const char *nc = getenv("NO_COLOR");
  d->color = has_colors() && !(nc && *nc);
  if (d->color) {
    start_color();
    use_default_colors();
  }
  d->ui.now = now_seconds(); /* status messages last from now */
  const char *want = d->opts.theme ? d->opts.theme : getenv("DROVER_THEME");
  init_themes(d, want && *want ? want : "default");
  apply_theme(d);
  return 0;
}

static int watch_keys(dash *d) {
  int fd = fileno(d->in), fl = fcntl(fd, F_GETFL);
  d->infd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int rc = d->infd < 0 ? UV_EBADF : uv_poll_init(d->loop, &d->poll, d->infd);
  if (fl >= 0) fcntl(fd, F_SETFL, fl);
  if (rc < 0) {
    if (d->infd >= 0) close(d->infd);
    return err_set(DRV_EIO, "cannot watch the terminal's input: %s", uv_strerror(rc));
  }
  d->poll.data = d;
  d->open_handles++;
  uv_poll_start(&d->poll, UV_READABLE | UV_DISCONNECT, on_key_ready);
  return 0;
}

static void start_redraws(dash *d) {
  uv_timer_init(d->loop, &d->timer);
  d->timer.data = d;
  d->open_handles++;
  uint64_t ms = (uint64_t)llround(1000.0 / d->opts.hz);
  uv_timer_start(&d->timer, on_timer, ms, ms ? ms : 1);
}

/* On failure, what was opened is closed as by dash_close: the struct goes
 * with the last close callback, on a later turn of the loop. */
int dash_open(uv_loop_t *loop, const dash_opts *o, dash_source src, dash **out) {
  dash_opts opts;
  int rc = resolve_opts(o, src, &opts);
  if (rc < 0) return rc;
  dash *d = calloc(1, sizeof *d);
  if (!d) return err_set(DRV_ENOMEM, "out of memory for the dashboard");
  d->loop = loop;
  d->opts = opts;
  d->in = opts.in;
  d->out = opts.out;
  dash_ui_init(&d->ui, src);
  d->ui.utf8 = locale_utf8();
  if ((rc = watch_resizes(d)) < 0 || (rc = take_terminal(d)) < 0 || (rc = watch_keys(d)) < 0) {
    dash_close(d); /* the message stays: closing sets none */
    return rc;
  }
  start_redraws(d);
  draw(d);
  *out = d;
  return 0;
}

void dash_close(dash *d) {
  if (!d) return;
  d->released = true;
  teardown(d);
  if (d->open_handles == 0) {
    dash_ui_free(&d->ui);
    free(d);
  }
}
