/* l_opts.h - the fields of option tables (drover.experiment { ... },
 * drover.cluster { ... }, data.csv(path, { ... }), optim.SGD { ... }):
 * their names, and the one rule for their numbers.
 *
 * An integer is a Lua integer or a float with an exact integer value (2.0);
 * a real is a finite number. Neither is ever a string ("3"). Each lies
 * within a lower bound (lopts_low) and an upper one, and a value outside
 * raises an error naming the field and the value:
 *   experiment: train.batch must be a positive integer (got 2.5)
 *   experiment: checkpoint.keep = 4294967297 is too large (at most 2147483647)
 *   experiment: checkpoint.every_seconds must be a finite number (got nan)
 *
 * `what` names the table: "cluster" (its field k is "cluster: k") or, for a
 * table inside one, "ROOT: PATH" ("experiment: train": its field k is
 * "experiment: train.k"). Every function raises a Lua error (never returns)
 * on a bad value.
 */
#ifndef DROVER_L_OPTS_H
#define DROVER_L_OPTS_H

#include <lua.h>
#include <math.h> /* HUGE_VAL: a real without an upper bound */

typedef enum lopts_low {
  LOPTS_ANY,    /* any integer, any finite real */
  LOPTS_NONNEG, /* >= 0 */
  LOPTS_POS,    /* > 0 (an integer: >= 1) */
} lopts_low;

/* Counts (steps, epochs, rows) stop at 2^40: a trillion steps is no run,
 * and products of such counts stay far from overflowing. */
#define LOPTS_COUNT_MAX ((lua_Integer)1 << 40)

/* The value at idx under the rule, the field being `key` of `what`. */
lua_Integer lopts_to_int(lua_State *L, int idx, lopts_low low, lua_Integer max, const char *what,
                         const char *key);
lua_Number lopts_to_real(lua_State *L, int idx, lopts_low low, lua_Number max, const char *what,
                         const char *key);

/* Field `key` of the table at idx (which may be nil or none: def), under
 * the rule. */
lua_Integer lopts_int(lua_State *L, int idx, const char *key, lua_Integer def, lopts_low low,
                      lua_Integer max, const char *what);
lua_Number lopts_real(lua_State *L, int idx, const char *key, lua_Number def, lopts_low low,
                      lua_Number max, const char *what);
/* A boolean field (def when absent): "WHAT: k must be true or false (got 1)". */
int lopts_bool(lua_State *L, int idx, const char *key, int def, const char *what);

/* Raises "WHAT: unknown option 'k' (valid: a, b, c)" for any key of the
 * table at idx not in the NULL-terminated `keys`. A nil/none idx is fine. */
void lopts_check_keys(lua_State *L, int idx, const char *what, const char *const *keys);
/* The same for a description's fields: "ROOT: unknown field 'PATH.k'
 * (valid: ...)" (an experiment's are fields, as its documentation says). */
void lopts_check_fields(lua_State *L, int idx, const char *what, const char *const *keys);

/* Pushes the value at idx as messages show it: a string quoted, a number
 * as Lua prints it, a drover value by its type ("drover.Dataset"), nil as
 * "nothing", anything else by its Lua type. */
const char *lopts_show(lua_State *L, int idx);

#endif
