/*
 * cli.h: the hanudb command's subcommands. main.c dispatches on argv[1];
 * each subcommand gets argv shifted so that argv[0] is its own name, and
 * returns the process exit status.
 */
#ifndef HANU_CLI_H
#define HANU_CLI_H

int cli_serve_main(int argc, char **argv);    /* cli_serve.c */
int cli_compact_main(int argc, char **argv);  /* cli_compact.c */
int cli_kv_main(int argc, char **argv);       /* cli_kv.c: 0 ok, 1 not found, 2 error */
int cli_dump_main(int argc, char **argv);     /* cli_dump.c: 0 ok, 1 no such database, 2 error */
int cli_audit_main(int argc, char **argv);    /* cli_audit.c: 0 whole chain, 1 a problem, 2 error */
int cli_restore_main(int argc, char **argv);  /* cli_restore.c: 0 restored, 1 broken chain, 2 error */

#endif
