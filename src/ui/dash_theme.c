/* dash_theme.c - theme files (parse, look up, list) and their colour pairs
 * on a curses screen; see dash_theme.h for the file format.
 */
#include "ui/dash_theme.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curses.h>

#include "base/embed.h"
#include "base/err.h"

static const char *const role_names[DASH_NROLES] = {
#define XX(e, name, what) name,
    DASH_ROLE_MAP(XX)
#undef XX
};

const char *dash_role_name(int role) {
  return role >= 0 && role < DASH_NROLES ? role_names[role] : "?";
}

/* ============================== parsing ================================== */

static const char *const color_names[8] = {"black", "red",     "green", "yellow",
                                           "blue",  "magenta", "cyan",  "white"};

/* One colour word into *c; false when it is not one. */
static bool parse_color(const char *w, dash_color *c) {
  if (strcmp(w, "default") == 0 || strcmp(w, "-") == 0) {
    *c = (dash_color){DASH_COLOR_DEFAULT, 0, 0};
    return true;
  }
  if (w[0] == '#') {
    if (strlen(w) != 7) return false;
    for (int i = 1; i < 7; i++)
      if (!isxdigit((unsigned char)w[i])) return false;
    *c = (dash_color){DASH_COLOR_RGB, 0, (uint32_t)strtoul(w + 1, NULL, 16)};
    return true;
  }
  if (isdigit((unsigned char)w[0])) {
    char *end;
    long v = strtol(w, &end, 10);
    if (*end || v < 0 || v > 255) return false;
    *c = (dash_color){DASH_COLOR_INDEX, (int)v, 0};
    return true;
  }
  int bright = strncmp(w, "bright-", 7) == 0 ? 8 : 0;
  for (int i = 0; i < 8; i++)
    if (strcmp(w + (bright ? 7 : 0), color_names[i]) == 0) {
      *c = (dash_color){DASH_COLOR_INDEX, i + bright, 0};
      return true;
    }
  return false;
}

static unsigned parse_attr(const char *w) {
  static const struct {
    const char *name;
    unsigned bit;
  } attrs[] = {{"bold", DASH_ATTR_BOLD},           {"dim", DASH_ATTR_DIM},
               {"reverse", DASH_ATTR_REVERSE},     {"underline", DASH_ATTR_UNDERLINE},
               {"italic", DASH_ATTR_ITALIC}};
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++)
    if (strcmp(w, attrs[i].name) == 0) return attrs[i].bit;
  return 0;
}

/* "role = words..." (a copy the caller may cut up) into t. */
static int parse_line(char *s, const char *file, int lineno, dash_theme *t) {
  char *eq = strchr(s, '=');
  if (!eq) return err_set(DRV_EPARSE, "%s:%d: expected 'role = colour', got '%s'", file, lineno, s);
  *eq = '\0';
  char *role = strtok(s, " \t");
  if (!role || strtok(NULL, " \t"))
    return err_set(DRV_EPARSE, "%s:%d: expected one role name before '='", file, lineno);
  int r = 0;
  while (r < DASH_NROLES && strcmp(role_names[r], role) != 0) r++;
  if (r == DASH_NROLES) return err_set(DRV_EPARSE, "%s:%d: unknown role '%s'", file, lineno, role);
  dash_color fg = {DASH_COLOR_UNSET, 0, 0}, bg = fg;
  unsigned attrs = 0;
  int nwords = 0;
  for (char *w = strtok(eq + 1, " \t"); w; w = strtok(NULL, " \t"), nwords++) {
    unsigned a = parse_attr(w);
    if (a) {
      attrs |= a;
    } else if (strcmp(w, "on") == 0) {
      char *b = strtok(NULL, " \t");
      if (!b || !parse_color(b, &bg))
        return err_set(DRV_EPARSE, "%s:%d: 'on' needs a background colour, got '%s'", file,
                       lineno, b ? b : "");
    } else if (fg.kind == DASH_COLOR_UNSET && bg.kind == DASH_COLOR_UNSET && parse_color(w, &fg)) {
      /* the foreground */
    } else {
      return err_set(DRV_EPARSE, "%s:%d: unknown colour or attribute '%s'", file, lineno, w);
    }
  }
  if (nwords == 0) return err_set(DRV_EPARSE, "%s:%d: role '%s' has no value", file, lineno, role);
  t->fg[r] = fg;
  t->bg[r] = bg;
  t->attrs[r] = attrs;
  return 0;
}

int dash_theme_parse(const char *name, const char *text, const char *file, dash_theme *out) {
  dash_theme t;
  memset(&t, 0, sizeof t);
  snprintf(t.name, sizeof t.name, "%s", name);
  int lineno = 0;
  for (const char *p = text; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    lineno++;
    char line[512];
    if (len >= sizeof line) return err_set(DRV_EPARSE, "%s:%d: line too long", file, lineno);
    memcpy(line, p, len);
    line[len] = '\0';
    p += len + (nl ? 1 : 0);
    /* '#' starts a comment where a colour cannot be: at the start of a
     * line, or after a blank when not followed by a hex digit. */
    for (char *h = strchr(line, '#'); h; h = strchr(h + 1, '#'))
      if (h == line || (isspace((unsigned char)h[-1]) && !isxdigit((unsigned char)h[1]))) {
        *h = '\0';
        break;
      }
    char *s = line;
    while (isspace((unsigned char)*s)) s++;
    if (!*s) continue;
    int rc = parse_line(s, file, lineno, &t);
    if (rc < 0) return rc;
  }
  /* Unset roles follow text; text and background follow each other. */
  if (t.fg[DASH_ROLE_TEXT].kind == DASH_COLOR_UNSET) t.fg[DASH_ROLE_TEXT] = t.fg[DASH_ROLE_BACKGROUND];
  if (t.bg[DASH_ROLE_TEXT].kind == DASH_COLOR_UNSET) t.bg[DASH_ROLE_TEXT] = t.bg[DASH_ROLE_BACKGROUND];
  for (int r = 0; r < DASH_NROLES; r++) {
    if (t.fg[r].kind == DASH_COLOR_UNSET) t.fg[r] = t.fg[DASH_ROLE_TEXT];
    if (t.bg[r].kind == DASH_COLOR_UNSET) t.bg[r] = t.bg[DASH_ROLE_TEXT];
    if (t.fg[r].kind == DASH_COLOR_UNSET) t.fg[r].kind = DASH_COLOR_DEFAULT;
    if (t.bg[r].kind == DASH_COLOR_UNSET) t.bg[r].kind = DASH_COLOR_DEFAULT;
  }
  *out = t;
  return 0;
}

/* ============================== lookup =================================== */

/* The user's theme directory into buf; false when there is no home. */
static bool user_dir(char *buf, size_t n) {
  const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
  if (xdg && *xdg) snprintf(buf, n, "%s/drover/themes", xdg);
  else if (home && *home) snprintf(buf, n, "%s/.config/drover/themes", home);
  else return false;
  return true;
}

/* A whole file (up to 1 MiB) into a malloc'd NUL-terminated string;
 * NULL with errno set. */
static char *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 20, len = 0;
  char *buf = malloc(cap);
  if (buf) len = fread(buf, 1, cap - 1, f);
  int err = !buf ? ENOMEM : ferror(f) ? EIO : len == cap - 1 ? EFBIG : 0;
  fclose(f);
  if (err) {
    free(buf);
    errno = err;
    return NULL;
  }
  buf[len] = '\0';
  return buf;
}

static bool valid_name(const char *name) {
  if (!*name || strlen(name) >= 48) return false;
  for (const char *p = name; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') return false;
  return name[0] != '.';
}

int dash_theme_load(const char *name, dash_theme *out) {
  if (!valid_name(name)) return err_set(DRV_EINVAL, "'%s' is not a theme name", name);
  char dir[4096], path[4200];
  if (user_dir(dir, sizeof dir)) {
    snprintf(path, sizeof path, "%s/%s.theme", dir, name);
    char *text = read_all(path);
    if (text) {
      int rc = dash_theme_parse(name, text, path, out);
      free(text);
      return rc;
    }
    if (errno != ENOENT) return err_set(DRV_EIO, "cannot read '%s': %s", path, strerror(errno));
  }
  snprintf(path, sizeof path, "themes/%s.theme", name);
  const embed_file *f = embed_find(path);
  if (f) return dash_theme_parse(name, f->data, path, out);
  char have[512] = "";
  char names[32][64];
  int n = dash_theme_names(names, 32);
  for (int i = 0; i < n; i++) {
    size_t l = strlen(have);
    snprintf(have + l, sizeof have - l, "%s%s", i ? ", " : "", names[i]);
  }
  return err_set(DRV_EINVAL, "no theme '%s' (have: %s)", name, have);
}

void dash_theme_fallback(dash_theme *out) {
  const embed_file *f = embed_find("themes/default.theme");
  if (!f || dash_theme_parse("default", f->data, "themes/default.theme", out) < 0)
    dash_theme_parse("default", "", "(none)", out); /* every role the terminal's colours */
}

static int add_name(char (*names)[64], int n, int max, const char *name) {
  if (n >= max || !valid_name(name)) return n;
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0) return n;
  snprintf(names[n], 64, "%s", name);
  return n + 1;
}

static int cmp_names(const void *a, const void *b) {
  const char *x = a, *y = b;
  if (strcmp(x, "default") == 0) return -1;
  if (strcmp(y, "default") == 0) return 1;
  return strcmp(x, y);
}

int dash_theme_names(char (*names)[64], int max) {
  int n = 0;
  for (const embed_file *f = embed_files; f->path; f++) {
    const char *p = f->path;
    size_t l = strlen(p);
    if (strncmp(p, "themes/", 7) != 0 || l < 13 || strcmp(p + l - 6, ".theme") != 0) continue;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(l - 13), p + 7);
    n = add_name(names, n, max, name);
  }
  char dir[4096];
  DIR *d = user_dir(dir, sizeof dir) ? opendir(dir) : NULL;
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t l = strlen(e->d_name);
    if (l <= 6 || strcmp(e->d_name + l - 6, ".theme") != 0) continue;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(l - 6), e->d_name);
    n = add_name(names, n, max, name);
  }
  if (d) closedir(d);
  qsort(names, (size_t)n, sizeof names[0], cmp_names);
  return n;
}

/* ============================== colours ================================== */

uint32_t dash_color_xterm(int i) {
  static const uint32_t base[16] = {0x000000, 0xcd0000, 0x00cd00, 0xcdcd00, 0x0000ee, 0xcd00cd,
                                    0x00cdcd, 0xe5e5e5, 0x7f7f7f, 0xff0000, 0x00ff00, 0xffff00,
                                    0x5c5cff, 0xff00ff, 0x00ffff, 0xffffff};
  if (i < 16) return base[i < 0 ? 0 : i];
  if (i < 232) {
    static const int level[6] = {0, 95, 135, 175, 215, 255};
    int c = i - 16;
    return (uint32_t)(level[c / 36] << 16 | level[(c / 6) % 6] << 8 | level[c % 6]);
  }
  int g = 8 + 10 * (i > 255 ? 23 : i - 232);
  return (uint32_t)(g << 16 | g << 8 | g);
}

int dash_color_nearest(uint32_t rgb, int ncolors) {
  if (ncolors > 256) ncolors = 256;
  int r = (int)(rgb >> 16 & 255), g = (int)(rgb >> 8 & 255), b = (int)(rgb & 255);
  int best = 0;
  long bestd = -1;
  for (int i = 0; i < ncolors; i++) {
    uint32_t c = dash_color_xterm(i);
    long dr = r - (long)(c >> 16 & 255), dg = g - (long)(c >> 8 & 255), db = b - (long)(c & 255);
    /* Weighted like the eye: green counts most, blue least. */
    long d = 3 * dr * dr + 4 * dg * dg + 2 * db * db;
    if (bestd < 0 || d < bestd) {
      bestd = d;
      best = i;
    }
  }
  return best;
}

/* Palette slots redefined for #rrggbb colours (can_change_color): from 255
 * down, so that the common low numbers keep their meaning. */
typedef struct slots {
  uint32_t rgb[32];
  int n;
} slots;

/* The curses colour number for c on this terminal. */
static int resolve(const dash_color *c, slots *sl) {
  if (c->kind != DASH_COLOR_INDEX && c->kind != DASH_COLOR_RGB) return -1;
  if (c->kind == DASH_COLOR_INDEX) {
    if (c->index < COLORS) return c->index;
    return dash_color_nearest(dash_color_xterm(c->index), COLORS >= 16 ? 16 : 8);
  }
  if (COLORS >= 0x1000000) return (int)c->rgb; /* direct colour: the number is the RGB */
  if (COLORS >= 256 && can_change_color()) {
    for (int i = 0; i < sl->n; i++)
      if (sl->rgb[i] == c->rgb) return 255 - i;
    if (sl->n < 32) {
      int slot = 255 - sl->n;
      sl->rgb[sl->n++] = c->rgb;
      /* curses wants 0..1000 per channel */
      init_extended_color(slot, (int)((c->rgb >> 16 & 255) * 1000 / 255),
                          (int)((c->rgb >> 8 & 255) * 1000 / 255), (int)((c->rgb & 255) * 1000 / 255));
      return slot;
    }
  }
  return dash_color_nearest(c->rgb, COLORS >= 256 ? 256 : COLORS >= 16 ? 16 : 8);
}

static attr_t curses_attrs(unsigned a) {
  attr_t r = 0;
  if (a & DASH_ATTR_BOLD) r |= A_BOLD;
  if (a & DASH_ATTR_DIM) r |= A_DIM;
  if (a & DASH_ATTR_REVERSE) r |= A_REVERSE;
  if (a & DASH_ATTR_UNDERLINE) r |= A_UNDERLINE;
  if (a & DASH_ATTR_ITALIC) r |= A_ITALIC;
  return r;
}

void dash_theme_apply(const dash_theme *t, bool color, dash_palette *p) {
  /* Without colour these roles would vanish into the text. */
  static const unsigned mono[DASH_NROLES] = {
      [DASH_ROLE_DIM] = DASH_ATTR_DIM,          [DASH_ROLE_HEADER] = DASH_ATTR_REVERSE,
      [DASH_ROLE_TITLE] = DASH_ATTR_BOLD,       [DASH_ROLE_FOCUS] = DASH_ATTR_BOLD,
      [DASH_ROLE_SELECTED] = DASH_ATTR_REVERSE, [DASH_ROLE_BAD] = DASH_ATTR_BOLD,
      [DASH_ROLE_WARN] = DASH_ATTR_UNDERLINE,   [DASH_ROLE_CHART_RAW] = DASH_ATTR_DIM,
      [DASH_ROLE_CHART_SMOOTH] = DASH_ATTR_BOLD, [DASH_ROLE_STATUS] = DASH_ATTR_REVERSE,
      [DASH_ROLE_PROMPT] = DASH_ATTR_BOLD};
  p->color = color;
  slots sl = {.n = 0};
  for (int r = 0; r < DASH_NROLES; r++) {
    if (!color) {
      p->attr[r] = curses_attrs(t->attrs[r] | mono[r]);
      continue;
    }
    int fg = resolve(&t->fg[r], &sl), bg = resolve(&t->bg[r], &sl);
    init_extended_pair(r + 1, fg, bg);
    p->attr[r] = COLOR_PAIR(r + 1) | curses_attrs(t->attrs[r]);
  }
}
