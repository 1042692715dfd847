/*
 * cli_options.c: option and environment parsing for the hanudb subcommands.
 */
#include "cli/cli_options.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_value(cli_opt *o, const char *v, const char *from)
{
    char *end = NULL;
    errno = 0;
    switch (o->type) {
    case CLI_STR: *(const char **)o->target = v; return 0;
    case CLI_STR_TWICE: {
        cli_str_twice *t = o->target;
        int env = from[0] != '-';
        if (t->from_env && !env) t->n = 0, t->from_env = 0;   /* flags win over the environment */
        if (t->n == 2) {
            fprintf(stderr, "hanudb: %s given more than twice\n", from);
            return 2;
        }
        t->v[t->n++] = v;
        t->from_env = env;
        return 0;
    }
    case CLI_FLAG: *(int *)o->target = !(v && (!strcmp(v, "0") || !strcmp(v, "false"))); return 0;
    case CLI_DOUBLE:
        *(double *)o->target = strtod(v, &end);
        if (errno || end == v || *end) break;
        return 0;
    case CLI_U64:
    case CLI_SIZE: {
        if (!isdigit((unsigned char)v[0])) break;
        unsigned long long n = strtoull(v, &end, 10);
        if (errno) break;
        unsigned long long mul = 1;
        if (o->type == CLI_SIZE && *end) {
            switch (toupper((unsigned char)*end)) {
            case 'K': mul = 1ull << 10; break;
            case 'M': mul = 1ull << 20; break;
            case 'G': mul = 1ull << 30; break;
            default: mul = 0;
            }
            end++;
            if (*end == 'B' || *end == 'b') end++;
            if (!mul) break;
        }
        if (*end) break;
        *(uint64_t *)o->target = n * mul;
        return 0;
    }
    }
    fprintf(stderr, "hanudb: invalid value \"%s\" for %s\n", v, from);
    return 2;
}

int cli_parse_duration_ms(const char *s, uint64_t *ms)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(s, &end, 10);
    uint64_t mul;
    if (errno || n > (1ull << 40)) return -1;
    if (!strcmp(end, "ms")) mul = 1;
    else if (!*end || !strcmp(end, "s")) mul = 1000;
    else if (!strcmp(end, "m")) mul = 60000;
    else if (!strcmp(end, "h")) mul = 3600000;
    else if (!strcmp(end, "d")) mul = 86400000;
    else return -1;
    *ms = (uint64_t)n * mul;
    return 0;
}

static void print_usage(const char *cmd, const char *summary, const cli_opt *opts)
{
    printf("usage: hanudb %s [options]\n%s\n\noptions (environment variable in brackets):\n", cmd, summary);
    for (const cli_opt *o = opts; o->name; o++) {
        char env[64], flag[64];
        snprintf(flag, sizeof flag, "--%s%s", o->name, o->type == CLI_FLAG ? "" : " V");
        snprintf(env, sizeof env, "HANUDB_");
        size_t n = strlen(env);
        for (const char *p = o->name; *p && n < sizeof env - 1; p++) env[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        env[n] = '\0';
        printf("  %-26s %s [%s]\n", flag, o->help, env);
    }
}

int cli_parse(const char *cmd, const char *summary, cli_opt *opts, int argc, char **argv)
{
    for (cli_opt *o = opts; o->name; o++) {
        char env[64] = "HANUDB_";
        size_t n = strlen(env);
        for (const char *p = o->name; *p && n < sizeof env - 1; p++) env[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        env[n] = '\0';
        const char *v = getenv(env);
        if (v && *v && parse_value(o, v, env)) return 2;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { print_usage(cmd, summary, opts); return 1; }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "hanudb %s: unexpected argument \"%s\" (see --help)\n", cmd, a);
            return 2;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        cli_opt *o = opts;
        while (o->name && !(strlen(o->name) == nl && !strncmp(o->name, name, nl))) o++;
        if (!o->name) {
            fprintf(stderr, "hanudb %s: unknown option \"%s\" (see --help)\n", cmd, a);
            return 2;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v && o->type != CLI_FLAG) {
            if (i + 1 >= argc) { fprintf(stderr, "hanudb %s: %s needs a value\n", cmd, a); return 2; }
            v = argv[++i];
        }
        if (parse_value(o, v ? v : "1", a)) return 2;
    }
    return 0;
}
