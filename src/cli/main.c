/*
 * main.c: the hanudb command: dispatches to its subcommands (cli.h).
 */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "hanudb_version.h"

static void usage(FILE *f)
{
    fprintf(f,
        "hanudb %s: a document, key-value and facts database\n\n"
        "usage: hanudb COMMAND [options]\n\n"
        "commands:\n"
        "  serve     run the server: key-value protocol and documents over HTTP (hanudb serve --help)\n"
        "  compact   compact the data files of a stopped server (hanudb compact --data DIR)\n"
        "  kv        key-value command-line client (hanudb kv --help)\n"
        "  dump      every live document and key as JSON lines: of a stopped server (hanudb dump --data DIR),\n"
        "            of a running one through its bucket (hanudb dump --bucket URL)\n"
        "  audit     check every segment of a bucket's chain (hanudb audit --bucket URL)\n"
        "  restore   a bucket's chain into a fresh directory, up to a txn or a time\n"
        "            (hanudb restore --bucket URL --to DIR [--at TIME | --txn N])\n"
        "  export    a collection of a running server into its bucket as zstd JSON lines\n"
        "            (hanudb export --url http://HOST:PORT --collection NAME), or as NDJSON to\n"
        "            standard output (... --to -)\n"
        "  import    an NDJSON file into a collection of a running server\n"
        "            (hanudb import --url http://HOST:PORT --collection NAME FILE|-)\n"
        "  version   print the version\n"
        "  help      this text\n\n"
        "Every option can also be set by an environment variable HANUDB_<OPTION>,\n"
        "e.g. --kv-addr by HANUDB_KV_ADDR. Documentation: docs/ and README.md.\n",
        HANUDB_VERSION);
}

int main(int argc, char **argv)
{
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "serve")) return cli_serve_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "compact")) return cli_compact_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "kv")) return cli_kv_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "dump")) return cli_dump_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "audit")) return cli_audit_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "restore")) return cli_restore_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "export")) return cli_export_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "import")) return cli_import_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("hanudb %s\n", HANUDB_VERSION); return 0; }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
    fprintf(stderr, "hanudb: unknown command \"%s\"\n\n", cmd);
    usage(stderr);
    return 2;
}
