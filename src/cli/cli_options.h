/*
 * cli_options.h: a small table-driven parser for --long options that can also
 * come from HANUDB_* environment variables (flags win over the environment).
 */
#ifndef HANU_CLI_OPTIONS_H
#define HANU_CLI_OPTIONS_H

#include <stdint.h>

enum cli_opt_type { CLI_STR, CLI_U64, CLI_SIZE, CLI_DOUBLE, CLI_FLAG, CLI_STR_TWICE };

/* The target of a CLI_STR_TWICE option, which may be given once or twice (--bucket A
   --bucket B); flags replace what the environment gave. */
typedef struct cli_str_twice {
    const char *v[2];
    int n;
    int from_env;
} cli_str_twice;

typedef struct cli_opt {
    const char *name;       /* "data" for --data and HANUDB_DATA */
    int type;
    void *target;           /* const char **, uint64_t *, double *, int *, cli_str_twice * */
    const char *help;
} cli_opt;

/* Applies environment then argv (argv[0] is the subcommand). Returns 0, 1 for
   --help (usage printed), or 2 after printing the error. */
int cli_parse(const char *cmd, const char *summary, cli_opt *opts, int argc, char **argv);

/* A duration as milliseconds: digits and a unit, ms, s, m, h or d (90m, 24h, 7d;
   digits alone are seconds). 0 on success, -1 otherwise. */
int cli_parse_duration_ms(const char *s, uint64_t *ms);

#endif
