/* dash_theme.h - dashboard colour themes: files mapping colour roles to
 * colours and attributes, parsed here and applied to curses colour pairs.
 *
 * A theme file has one setting per line; '#' starts a comment:
 *
 *     role = FG [on BG] [bold] [dim] [reverse] [underline] [italic]
 *
 * where a colour is "default" (the terminal's own), one of the eight names
 * black red green yellow blue magenta cyan white (with "bright-" for the
 * next eight), a palette number 0-255, or #rrggbb. A #rrggbb colour is used
 * as it is on a direct-colour terminal, redefines a palette slot where the
 * terminal allows it (can_change_color, 256 colours), and is otherwise
 * mapped to the nearest colour the terminal has; so is a number past the
 * terminal's count. Roles not set take the text role's colours.
 *
 * Themes are looked up by name: $XDG_CONFIG_HOME/drover/themes/NAME.theme
 * (~/.config/...) first, then the files of themes/ embedded in the binary.
 */
#ifndef DROVER_DASH_THEME_H
#define DROVER_DASH_THEME_H

#include <stdbool.h>
#include <stdint.h>

/* Every role: enum name, the word in a theme file, what it colours. */
#define DASH_ROLE_MAP(XX)                                           \
  XX(BACKGROUND, "background", "the whole screen")                  \
  XX(TEXT, "text", "ordinary text")                                 \
  XX(DIM, "dim", "secondary text: units, hints, ages")              \
  XX(HEADER, "header", "the top line")                              \
  XX(TITLE, "title", "panel titles")                                \
  XX(BORDER, "border", "panel borders")                             \
  XX(FOCUS, "focus", "the border and title of the focused panel")   \
  XX(SELECTED, "selected", "the selected row")                      \
  XX(OK, "ok", "ready, replica, done; good news")                   \
  XX(BUSY, "busy", "busy nodes")                                    \
  XX(WARN, "warn", "starting, restarting; retries")                 \
  XX(BAD, "bad", "lost, failed; errors")                            \
  XX(CHART_RAW, "chart_raw", "raw values of a chart")               \
  XX(CHART_SMOOTH, "chart_smooth", "the smoothed line of a chart")  \
  XX(AXIS, "axis", "chart axes and labels")                         \
  XX(STATUS, "status", "the bottom line")                           \
  XX(PROMPT, "prompt", "the filter / command / confirmation line")

typedef enum dash_role {
#define XX(e, name, what) DASH_ROLE_##e,
  DASH_ROLE_MAP(XX)
#undef XX
  DASH_NROLES
} dash_role;

/* Role name ("chart_raw"), or "?". */
const char *dash_role_name(int role);

enum { DASH_COLOR_UNSET, DASH_COLOR_DEFAULT, DASH_COLOR_INDEX, DASH_COLOR_RGB };

typedef struct dash_color {
  int kind;      /* DASH_COLOR_* */
  int index;     /* 0-255 for INDEX */
  uint32_t rgb;  /* 0xrrggbb for RGB */
} dash_color;

enum {
  DASH_ATTR_BOLD = 1,
  DASH_ATTR_DIM = 2,
  DASH_ATTR_REVERSE = 4,
  DASH_ATTR_UNDERLINE = 8,
  DASH_ATTR_ITALIC = 16
};

typedef struct dash_theme {
  char name[64];
  dash_color fg[DASH_NROLES], bg[DASH_NROLES];
  unsigned attrs[DASH_NROLES]; /* DASH_ATTR_* */
} dash_theme;

/* Parses a theme's text (NUL-terminated) into *out, named `name`. `file`
 * names the source in errors: DRV_EPARSE "FILE:LINE: unknown role 'x'"
 * (or colour, or word). Unset roles take the text role's colours. */
int dash_theme_parse(const char *name, const char *text, const char *file, dash_theme *out);

/* The theme `name`: the user's file if there is one, else the embedded
 * one. DRV_EINVAL when there is neither ("no theme 'x' (have: ...)"), a
 * parse error as above, DRV_EIO when the user's file cannot be read. */
int dash_theme_load(const char *name, dash_theme *out);

/* The embedded default theme (cannot fail: the build embeds it). */
void dash_theme_fallback(dash_theme *out);

/* Up to max theme names, the user's and the embedded ones, sorted, each
 * once, "default" first. Returns the count. */
int dash_theme_names(char (*names)[64], int max);

/* The palette index (0..ncolors-1, ncolors 8, 16 or 256) nearest to rgb,
 * with xterm's palette as the reference. */
int dash_color_nearest(uint32_t rgb, int ncolors);
/* xterm's RGB for palette index i (0-255). */
uint32_t dash_color_xterm(int i);

/* What dash_theme_apply produced: a curses attribute per role (colour
 * pair and attributes). */
typedef struct dash_palette {
  unsigned long attr[DASH_NROLES]; /* attr_t */
  bool color;                      /* colours in use (else attributes only) */
} dash_palette;

/* Sets up curses colour pairs for t on the current screen (after
 * start_color when `color`), or attributes only when !color (NO_COLOR,
 * monochrome terminal): then roles that need to stand out without colour
 * (selected, header, bad, the smoothed line...) get bold/reverse/dim. */
void dash_theme_apply(const dash_theme *t, bool color, dash_palette *p);

#endif
