/* dash_draw.c - the dashboard's drawing primitives (see dash_draw.h). */
#include "ui/dash_draw.h"

#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <wchar.h>

int dash__put(int y, int x, int w, unsigned long attr, const char *s) {
  if (w <= 0 || !s) return 0;
  /* Cut at w columns, counting a multi-byte character as its width. */
  mbstate_t st;
  memset(&st, 0, sizeof st);
  int cols = 0;
  size_t bytes = 0, len = strlen(s);
  while (bytes < len) {
    wchar_t wc;
    size_t k = mbrtowc(&wc, s + bytes, len - bytes, &st);
    int cw = 1;
    if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
      k = 1;
      memset(&st, 0, sizeof st);
    } else {
      cw = wcwidth(wc);
      if (cw < 0) cw = 1;
    }
    if (cols + cw > w) break;
    cols += cw;
    bytes += k;
  }
  attrset((int)attr);
  mvaddnstr(y, x, s, (int)bytes);
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
