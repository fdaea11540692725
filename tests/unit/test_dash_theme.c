/* test_dash_theme.c - theme files: a good file (names, numbers, #rrggbb,
 * attributes, backgrounds, roles left to the text role), malformed lines
 * named by file and line, every shipped theme parses, user themes in
 * $XDG_CONFIG_HOME override and extend, nearest-colour mapping. */
#include <stdlib.h>
#include <sys/stat.h>

#include "ui/dash_theme.h"
#include "harness.h"

TEST(dash_theme_parses_a_good_file) {
  const char *text =
      "# a comment line\n"
      "background = #101010 on #202020\n"
      "\n"
      "text       = white   # trailing comment\n"
      "header     = black on cyan bold\n"
      "selected   = 231 on 24 reverse underline\n"
      "bad        = bright-red bold\n"
      "dim        = default dim\n";
  dash_theme t;
  CHECK_OK(dash_theme_parse("mine", text, "mine.theme", &t));
  CHECK(strcmp(t.name, "mine") == 0);
  CHECK(t.fg[DASH_ROLE_BACKGROUND].kind == DASH_COLOR_RGB && t.fg[DASH_ROLE_BACKGROUND].rgb == 0x101010);
  CHECK(t.bg[DASH_ROLE_BACKGROUND].rgb == 0x202020);
  CHECK(t.fg[DASH_ROLE_TEXT].kind == DASH_COLOR_INDEX && t.fg[DASH_ROLE_TEXT].index == 7);
  CHECK(t.bg[DASH_ROLE_TEXT].kind == DASH_COLOR_RGB && t.bg[DASH_ROLE_TEXT].rgb == 0x202020);
  CHECK(t.fg[DASH_ROLE_HEADER].index == 0 && t.bg[DASH_ROLE_HEADER].index == 6);
  CHECK(t.attrs[DASH_ROLE_HEADER] == DASH_ATTR_BOLD);
  CHECK(t.fg[DASH_ROLE_SELECTED].index == 231 && t.bg[DASH_ROLE_SELECTED].index == 24);
  CHECK(t.attrs[DASH_ROLE_SELECTED] == (DASH_ATTR_REVERSE | DASH_ATTR_UNDERLINE));
  CHECK(t.fg[DASH_ROLE_BAD].index == 9);
  CHECK(t.fg[DASH_ROLE_DIM].kind == DASH_COLOR_DEFAULT && t.attrs[DASH_ROLE_DIM] == DASH_ATTR_DIM);
  /* a role not set takes the text role's colours */
  CHECK(t.fg[DASH_ROLE_CHART_RAW].index == 7 && t.bg[DASH_ROLE_CHART_RAW].rgb == 0x202020);
  CHECK(t.attrs[DASH_ROLE_CHART_RAW] == 0);
  CHECK(strcmp(dash_role_name(DASH_ROLE_CHART_SMOOTH), "chart_smooth") == 0);
}

TEST(dash_theme_errors_name_the_file_and_line) {
  dash_theme t;
  CHECK_ERR(dash_theme_parse("x", "text = white\n\nok = purple\n", "x.theme", &t), DRV_EPARSE,
            "x.theme:3: unknown colour or attribute 'purple'");
  CHECK_ERR(dash_theme_parse("x", "# c\nsparkle = red\n", "x.theme", &t), DRV_EPARSE,
            "x.theme:2: unknown role 'sparkle'");
  CHECK_ERR(dash_theme_parse("x", "text red\n", "y.theme", &t), DRV_EPARSE, "y.theme:1: expected 'role = colour'");
  CHECK_ERR(dash_theme_parse("x", "text = 256\n", "x.theme", &t), DRV_EPARSE, "x.theme:1:");
  CHECK_ERR(dash_theme_parse("x", "text = #12345\n", "x.theme", &t), DRV_EPARSE, "'#12345'");
  CHECK_ERR(dash_theme_parse("x", "text = red on\n", "x.theme", &t), DRV_EPARSE, "'on' needs a background");
  CHECK_ERR(dash_theme_parse("x", "text =\n", "x.theme", &t), DRV_EPARSE, "has no value");
  CHECK_ERR(dash_theme_parse("x", "text = red blue\n", "x.theme", &t), DRV_EPARSE, "'blue'");
}

TEST(dash_theme_every_shipped_theme_loads) {
  setenv("XDG_CONFIG_HOME", "/nonexistent-drover-test", 1);
  char names[32][64];
  int n = dash_theme_names(names, 32);
  CHECK(n >= 3);
  CHECK(strcmp(names[0], "default") == 0);
  bool light = false, mono = false;
  for (int i = 0; i < n; i++) {
    dash_theme t;
    CHECK_OK(dash_theme_load(names[i], &t));
    light |= strcmp(names[i], "light") == 0;
    mono |= strcmp(names[i], "mono") == 0;
  }
  CHECK(light && mono);
  dash_theme t;
  CHECK_ERR(dash_theme_load("nosuch", &t), DRV_EINVAL, "no theme 'nosuch' (have: default, ");
  CHECK_ERR(dash_theme_load("../etc/passwd", &t), DRV_EINVAL, "not a theme name");
  /* mono has no colours, only attributes */
  CHECK_OK(dash_theme_load("mono", &t));
  for (int r = 0; r < DASH_NROLES; r++)
    CHECK(t.fg[r].kind == DASH_COLOR_DEFAULT && t.bg[r].kind == DASH_COLOR_DEFAULT);
  CHECK(t.attrs[DASH_ROLE_SELECTED] & DASH_ATTR_REVERSE);
  dash_theme_fallback(&t);
  CHECK(strcmp(t.name, "default") == 0);
}

TEST(dash_theme_user_files_override_and_extend) {
  char cwd[1024];
  CHECK(getcwd(cwd, sizeof cwd));
  setenv("XDG_CONFIG_HOME", cwd, 1);
  CHECK(mkdir("drover", 0700) == 0 && mkdir("drover/themes", 0700) == 0);
  harness_write_str("drover/themes/default.theme", "text = red\n");
  harness_write_str("drover/themes/zebra.theme", "text = black on white\n");
  harness_write_str("drover/themes/broken.theme", "text = red\nbad = = \n");
  dash_theme t;
  CHECK_OK(dash_theme_load("default", &t));
  CHECK(t.fg[DASH_ROLE_TEXT].index == 1);
  CHECK_OK(dash_theme_load("zebra", &t));
  CHECK(t.bg[DASH_ROLE_TEXT].index == 7);
  char names[32][64];
  int n = dash_theme_names(names, 32);
  bool zebra = false, light = false;
  for (int i = 0; i < n; i++) {
    zebra |= strcmp(names[i], "zebra") == 0;
    light |= strcmp(names[i], "light") == 0;
    for (int j = 0; j < i; j++) CHECK(strcmp(names[i], names[j]) != 0); /* each once */
  }
  CHECK(zebra && light);
  CHECK_ERR(dash_theme_load("broken", &t), DRV_EPARSE, "drover/themes/broken.theme:2:");
}

TEST(dash_theme_nearest_colours) {
  CHECK(dash_color_xterm(196) == 0xff0000);
  CHECK(dash_color_xterm(67) == 0x5f87af);
  CHECK(dash_color_xterm(232) == 0x080808);
  CHECK_INT_EQ(dash_color_nearest(0x5f87af, 256), 67);
  CHECK_INT_EQ(dash_color_nearest(0x000000, 256), 0);
  CHECK_INT_EQ(dash_color_nearest(0xee0000, 8), 1);
  CHECK_INT_EQ(dash_color_nearest(0xfafafa, 8), 7);
  CHECK_INT_EQ(dash_color_nearest(0x1c1c1c, 8), 0);
  CHECK_INT_EQ(dash_color_nearest(0x00ff00, 16), 10);
}
