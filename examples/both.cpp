// both.cpp: one C++ program using both public headers and both libraries:
// facts go into a quad file, and a summary of them into the key-value server.
//
//   g++ both.cpp $(pkg-config --cflags --libs hanuquad hanudb-client) -o both
//   ./both /tmp/f.quad 127.0.0.1:8787
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include <hanudb_client.h>
#include <quad.h>

int main(int argc, char **argv)
{
    if (argc != 3) { std::fprintf(stderr, "usage: both FILE HOST:PORT\n"); return 2; }
    std::printf("quad %s, client %s, headers %s (%d)\n", quad_version(), hanudb_client_version(),
                HANUDB_VERSION, HANUDB_VERSION_NUMBER);

    quad *q = nullptr;
    int rc = quad_open(argv[1], nullptr, &q);
    if (rc) { std::fprintf(stderr, "quad_open: %s %s\n", hanu_status_str(rc), quad_last_error()); return 1; }
    std::vector<quad_fact> facts;
    for (uint64_t i = 0; i < 100; i++) facts.push_back(quad_fact{ { i, i * 2, i * 3, 42 } });
    uint64_t epoch = 0;
    rc = quad_append(q, facts.data(), facts.size(), QUAD_GROUP, nullptr, &epoch);
    quad_stats st{};
    if (!rc) rc = quad_stats_get(q, &st);
    if (rc) { std::fprintf(stderr, "quad: %s\n", hanu_status_str(rc)); quad_close(q); return 1; }
    std::printf("facts: %" PRIu64 " at epoch %" PRIu64 "\n", st.facts, epoch);
    if (quad_close(q)) return 1;

    char err[256];
    hkv_conn *c = nullptr;
    if (hkv_connect(argv[2], nullptr, &c, err, sizeof err)) { std::fprintf(stderr, "%s\n", err); return 1; }
    std::string summary = std::to_string(st.facts) + " facts";
    rc = hkv_set(c, nullptr, "facts", 5, summary.data(), summary.size(), HKV_DUR_LOCAL, nullptr);
    hkv_buf v{};
    if (!rc) rc = hkv_get(c, nullptr, "facts", 5, &v, nullptr);
    if (rc) { std::fprintf(stderr, "kv: %s (%s)\n", hkv_status_str(rc), hkv_errmsg(c)); hkv_close(c); return 1; }
    std::printf("kv facts: %.*s\n", static_cast<int>(v.len), reinterpret_cast<const char *>(v.data));
    rc = hkv_get(c, nullptr, "no such key", 11, &v, nullptr);
    std::printf("missing key: %s; missing fact: %s\n", hkv_status_str(rc), hanu_status_str(HANU_ERR_NOT_FOUND));
    hkv_buf_free(&v);
    hkv_close(c);
    return 0;
}
