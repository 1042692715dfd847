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
int cli_export_main(int argc, char **argv);   /* cli_export.c: 0 exported, 1 refused, 2 error */
int cli_import_main(int argc, char **argv);   /* cli_import.c: 0 imported, 1 a line or request failed, 2 error */
/* 1-64 bytes of A-Z a-z 0-9 _ . -, not starting with _ (cli_export.c): a name that
   goes into a URL's path as it is. */
int cli_collection_name_ok(const char *s);

#endif
