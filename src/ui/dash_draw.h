/* dash_draw.h - the dashboard's drawing primitives on stdscr (htop's
 * CRT.c): cut-to-width text, boxes with a title, durations and byte
 * counts. A leaf: it knows curses and nothing of the dashboard's view
 * state, so the frame (dash_view.c) and the panels (dash_panels.c) both
 * build on it. Attributes are curses attr_t values (a dash_palette's).
 */
#ifndef DROVER_DASH_DRAW_H
#define DROVER_DASH_DRAW_H

#include <stddef.h>
#include <stdint.h>

/* s at (y, x), cut to w columns (a multi-byte character counts its
 * width; a control character is blanks, a tab to the next multiple of 8);
 * returns the columns written. NULL or w <= 0 writes nothing. */
int dash__put(int y, int x, int w, unsigned long attr, const char *s);
/* dash__put of a printf format (at most 511 bytes). */
int dash__putf(int y, int x, int w, unsigned long attr, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A h x w box with a title in its top border (none below 2 x 2). */
void dash__box(int y, int x, int h, int w, unsigned long attr, const char *title,
               unsigned long tattr);
void dash__fmt_dur(double secs, char *out, size_t n);   /* "1:02:03", "2:03", "-" */
void dash__fmt_bytes(uint64_t b, char *out, size_t n);  /* "512M", "1.2G", "-" */

#endif
