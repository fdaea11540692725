/* main_int.h - what main.c, main_cmds.c and main_runs.c share: the
 * subcommand table (main_cmds.c, with every command's help text), the
 * handlers it names (main.c; main_runs.c those that act on a run) and the
 * helpers of their option parsing (main.c). Nothing else includes this. */
#ifndef DROVER_MAIN_INT_H
#define DROVER_MAIN_INT_H

#include <stdbool.h>
#include <stddef.h>

#define EXIT_USAGE 2

/* One row per subcommand, Redis style:
 *   name     the word after `drover`
 *   handler  runs it; argv[0] is the command's name, argv[argc] is NULL, the
 *            return value is the exit status. `CMD --help` and `CMD -h` are
 *            answered before the handler is called.
 *   summary  one line for `drover --help`
 *   usage    synopsis and options for `drover CMD --help`
 * A name starting with '_' is hidden from `drover --help` (for tests).
 */
typedef struct command {
  const char *name;
  int (*handler)(int argc, char **argv);
  const char *summary;
  const char *usage;
} command;

/* The subcommands, in `drover --help` order. */
extern const command main_commands[];
extern const size_t main_ncommands;

int cmd_repl(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_help(int argc, char **argv);
int cmd_node(int argc, char **argv);
int cmd_dash_sim(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_scale(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_export_metrics(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_tensorboard(int argc, char **argv);
int cmd_hdfs(int argc, char **argv);

/* The row of the command named name, or NULL. */
const command *find_command(const char *name);
/* Prints "drover: MSG" and the usage (of cmd, or of drover when NULL) to
 * stderr; returns EXIT_USAGE. */
__attribute__((format(printf, 2, 3))) int usage_error(const command *cmd, const char *fmt, ...);
/* A whole non-negative decimal number no larger than max. */
bool parse_count(const char *s, long max, long *out);

#endif
