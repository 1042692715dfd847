/*
 * kv_client.c: the key-value client library (libhanudb-client,
 * hanudb_client.h) against a running `hanudb serve`. Sets, gets, a
 * compare-and-set that loses, a database of its own, an atomic batch and a
 * pipeline of gets.
 *
 *   cc kv_client.c $(pkg-config --cflags --libs hanudb-client) -o kv_client
 *   ./kv_client 127.0.0.1:8787
 *   HANUDB_TOKEN=... ./kv_client    (a server started with --tokens)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hanudb_client.h>

#define S(str) str, strlen(str)

static int fail(hkv_conn *c, const char *what, int rc)
{
    fprintf(stderr, "kv_client: %s: %s (%s)\n", what, hkv_status_str(rc), c ? hkv_errmsg(c) : "");
    hkv_close(c);
    return 1;
}

int main(int argc, char **argv)
{
    const char *addr = argc > 1 ? argv[1] : "127.0.0.1:8787";
    printf("client %s (headers %s)\n", hanudb_client_version(), HANUDB_VERSION);

    char err[256];
    hkv_conn *c;
    int rc = hkv_connect(addr, NULL, &c, err, sizeof err);
    if (rc) { fprintf(stderr, "kv_client: %s\n", err); return 1; }
    if ((rc = hkv_ping(c))) return fail(c, "ping", rc);
    /* A server with --tokens answers Unauthorized to everything but Ping until Auth. */
    const char *secret = getenv("HANUDB_TOKEN");
    if (secret && *secret && (rc = hkv_auth(c, secret))) return fail(c, "auth", rc);

    uint64_t token;
    if ((rc = hkv_set(c, NULL, S("greeting"), S("hello"), HKV_DUR_LOCAL, &token)))
        return fail(c, "set", rc);
    hkv_buf value = {0};
    if ((rc = hkv_get(c, NULL, S("greeting"), &value, NULL))) return fail(c, "get", rc);
    printf("get greeting: %.*s\n", (int)value.len, (const char *)value.data);

    /* a compare-and-set with a stale token loses and learns the current one */
    uint64_t current = token + 1000;
    rc = hkv_compare_set(c, NULL, S("greeting"), token + 1000, S("bye"), HKV_DUR_LOCAL, &current);
    printf("compare-set with a stale token: %s, current token is the set's: %s\n",
           hkv_status_str(rc), current == token ? "yes" : "no");

    rc = hkv_create(c, "example", HKV_DUR_LOCAL, NULL);
    if (rc && rc != HKV_DB_ALREADY_EXISTS) return fail(c, "create", rc);
    hkv_batch_item items[3] = {
        { HKV_BATCH_SET, S("a"), S("1") },
        { HKV_BATCH_SET, S("b"), S("2") },
        { HKV_BATCH_DELETE, S("c"), NULL, 0 },
    };
    if ((rc = hkv_write_batch(c, "example", items, 3, HKV_DUR_LOCAL, NULL)))
        return fail(c, "batch", rc);

    /* three gets in one round trip */
    const char *keys[3] = { "a", "b", "c" };
    for (int i = 0; i < 3; i++) {
        hkv_request req = { .op = HKV_OP_GET, .db = "example", .key = keys[i], .key_len = 1 };
        if ((rc = hkv_pipe_add(c, &req))) return fail(c, "pipe_add", rc);
    }
    for (int i = 0; i < 3; i++) {
        hkv_response r;
        rc = hkv_pipe_recv(c, &r);
        if (rc == HKV_OK) printf("example/%s: %.*s\n", keys[i], (int)r.data_len, (const char *)r.data);
        else if (rc == HKV_KEY_NOT_FOUND) printf("example/%s: %s\n", keys[i], hkv_status_str(rc));
        else return fail(c, "pipe_recv", rc);
    }
    hkv_buf_free(&value);
    hkv_close(c);
    return 0;
}
