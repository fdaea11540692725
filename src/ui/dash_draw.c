/* dash_draw.c - the dashboard's drawing primitives (see dash_draw.h). */
#include "ui/dash_draw.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

/* Columns of the character at s (of at most n bytes) into *cw; its bytes.
 * An invalid sequence is one byte of one column. */
static size_t char_width(const char *s, size_t n, mbstate_t *st, int *cw) {
  wchar_t wc;
  size_t k = mbrtowc(&wc, s, n, st);
  *cw = 1;
  if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
    memset(st, 0, sizeof *st);
    return 1;
  }
  *cw = wcwidth(wc);
  if (*cw < 0) *cw = 1;
  return k;
}

/* A control character would move the cursor (a newline clears the rest of
 * the row and goes on below, over a box's border; a tab jumps past w): it
 * is drawn as blanks instead, a tab up to the next multiple of 8 columns.
 * Returns the columns, at most w. */
static int put_control(unsigned char c, int cols, int w) {
  int to = c == '\t' ? (cols / 8 + 1) * 8 : cols + 1;
  if (to > w) to = w;
  for (int i = cols; i < to; i++) addch(' ');
  return to;
}

int dash__put(int y, int x, int w, unsigned long attr, const char *s) {
  if (w <= 0 || !s) return 0;
  attrset((int)attr);
  move(y, x);
  /* Cut at w columns, counting a multi-byte character as its width. */
  mbstate_t st;
  memset(&st, 0, sizeof st);
  int cols = 0;
  size_t bytes = 0, run = 0, len = strlen(s);
  while (bytes < len && cols < w) {
    unsigned char c = (unsigned char)s[bytes];
    if (c < 0x20 || c == 0x7f) {
      addnstr(s + run, (int)(bytes - run));
      cols = put_control(c, cols, w);
      run = ++bytes;
      continue;
    }
    int cw;
    size_t k = char_width(s + bytes, len - bytes, &st, &cw);
    if (cols + cw > w) break;
    cols += cw;
    bytes += k;
  }
  addnstr(s + run, (int)(bytes - run));
  return cols;
}

/* Formats into a stack buffer and puts it. */
int dash__putf(int y, int x, int w, unsigned long attr, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return dash__put(y, x, w, attr, buf);
}

void dash__box(int y, int x, int h, int w, unsigned long attr, const char *title,
               unsigned long tattr) {
  if (h < 2 || w < 2) return;
  attrset((int)attr);
  mvhline(y, x + 1, ACS_HLINE, w - 2);
  mvhline(y + h - 1, x + 1, ACS_HLINE, w - 2);
  mvvline(y + 1, x, ACS_VLINE, h - 2);
  mvvline(y + 1, x + w - 1, ACS_VLINE, h - 2);
  mvaddch(y, x, ACS_ULCORNER);
  mvaddch(y, x + w - 1, ACS_URCORNER);
  mvaddch(y + h - 1, x, ACS_LLCORNER);
  mvaddch(y + h - 1, x + w - 1, ACS_LRCORNER);
  if (title && *title && w > 6) dash__putf(y, x + 2, w - 4, tattr, " %s ", title);
}

void dash__fmt_dur(double s, char *out, size_t n) {
  if (!(s >= 0) || !isfinite(s)) {
    snprintf(out, n, "-");
    return;
  }
  long t = (long)s;
  if (t >= 3600) snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else snprintf(out, n, "%ld:%02ld", t / 60, t % 60);
}

void dash__fmt_bytes(uint64_t b, char *out, size_t n) {
  if (b == 0) snprintf(out, n, "-");
  else if (b >= (1ull << 30)) snprintf(out, n, "%.1fG", (double)b / (1ull << 30));
  else if (b >= (1ull << 20)) snprintf(out, n, "%.0fM", (double)b / (1ull << 20));
  else snprintf(out, n, "%.0fK", (double)b / 1024);
}
