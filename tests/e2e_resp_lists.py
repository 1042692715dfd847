#!/usr/bin/env python3
"""e2e_resp_lists.py: Redis lists kept in chunks (docs/RESP.md, docs/FORMATS.md).

- long lists against a real redis-server: thousands of elements, random LPUSH/RPUSH of
  up to hundreds of elements, LPOP/RPOP with counts, LRANGE, LINDEX, LSET, LREM, LTRIM
  across chunk borders, inside MULTI too, RENAME; every reply the same bytes, and each
  list whole at the end;
- a list far past --max-value (4 MB of elements) is held, and a push onto it writes a
  chunk and the head, not the list;
- no chunk is left behind: an emptied list's chunks go in its own record; DEL, UNLINK,
  SET over a list, RENAME over one, MULTI/EXEC with a DEL, an expired list, a write of
  the binary protocol over one and FLUSHDB leave chunks that the reclaim pass deletes
  (the binary protocol's STATS counts chunk and owner records), while renamed lists
  stay whole; after a restart too;
- a list of the old format (one value, written through the store by test_kvlist)
  reads, keeps its expiry, and becomes chunks on its next write;
- hanudb dump prints lists with their elements (base64 when one is not UTF-8) and
  expire_ms for keys with an expiry.
"""
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hanukv  # noqa: E402
import hanuresp  # noqa: E402
from hanukv import check  # noqa: E402

SEED = int(os.environ.get("SEED", "29"))
FAR_S = 4102444800
TEST_KVLIST = os.path.join(os.path.dirname(hanukv.BIN), "tests", "test_kvlist")


def differential(port_h, port_r):
    h, r = hanuresp.Conn(port_h), hanuresp.Conn(port_r)
    rnd = random.Random(SEED)
    compared = 0

    def both(*cmd):
        nonlocal compared
        a, b = h.call(*cmd), r.call(*cmd)
        check(a == b, "%r:\n hanudb: %r\n redis:  %r" % (cmd[:6], a[:300], b[:300]))
        compared += 1
        return a

    keys = ["L1", "L2", "L3"]
    for k in keys:
        both("RPUSH", k, *["%s-%d" % (k, i) for i in range(1500)])
        both("LPUSH", k, *["dup"] * 3 + ["%s+%d" % (k, i) for i in range(700)])
    for step in range(2500):
        k = rnd.choice(keys)
        n = int(h.call("LLEN", k)[1:-2])
        i, j = rnd.randint(-n - 3, n + 3), rnd.randint(-n - 3, n + 3)
        x = rnd.random()
        if x < 0.12:
            both("LRANGE", k, i, j)
        elif x < 0.24:
            both("LINDEX", k, i)
        elif x < 0.34:
            both("LSET", k, i, "set%d" % step if rnd.random() < 0.9 else "y" * 9000)
        elif x < 0.40:
            both("LREM", k, rnd.randint(-3, 3), rnd.choice(["dup", "set%d" % (step - 3), "%s-%d" % (k, rnd.randint(0, 1500))]))
        elif x < 0.44:
            both("LTRIM", k, rnd.randint(0, 300), rnd.randint(-300, -1))
        elif x < 0.52:
            both(rnd.choice(["LPOP", "RPOP"]), k, rnd.randint(0, 600))
        elif x < 0.56:
            both(rnd.choice(["LPOP", "RPOP"]), k)
        elif x < 0.70:
            both("LPUSH", k, *["l%d-%d" % (step, e) for e in range(rnd.randint(1, 300))] + ["dup"])
        elif x < 0.84:
            both("RPUSH", k, *["r%d-%d" % (step, e) for e in range(rnd.randint(1, 300))])
        elif x < 0.88:
            both("RPUSHX", rnd.choice(keys + ["nolist"]), "px")
        elif x < 0.94:   # a transaction of list commands: one record, the same answers
            cmds = [["RPUSH", k, "m%d" % step], ["LPOP", k, "2"], ["LSET", k, "0", "ms"], ["LTRIM", k, "0", "-2"],
                    ["LRANGE", k, "-3", "-1"], ["RPUSH", k] + ["mm"] * 300, ["LREM", k, "-200", "mm"]]
            both("MULTI")
            for c in rnd.sample(cmds, rnd.randint(2, len(cmds))):
                both(*c)
            both("EXEC")
        elif x < 0.97:
            both("RENAME", k, rnd.choice(keys))
        else:
            both("LLEN", k)
        if step % 200 == 0:
            for kk in keys:
                both("LRANGE", kk, 0, -1)
    for k in keys + ["nolist"]:
        both("LRANGE", k, 0, -1)
        both("DEL", k)
    h.close()
    r.close()
    return compared


def kv_stats(kv_port):
    kv = hanukv.Conn(kv_port)
    st, payload = kv.call(hanukv.OPS["STATS"])
    kv.close()
    check(st == hanukv.OK, "STATS")
    return json.loads(payload)


def wait_records(kv_port, chunks, owners, what):
    deadline = time.time() + 15
    while True:
        s = kv_stats(kv_port)
        if (s["list_chunks"], s["list_owners"]) == (chunks, owners):
            return s
        check(time.time() < deadline, "%s: %d chunks and %d owners, want %d and %d" % (
            what, s["list_chunks"], s["list_owners"], chunks, owners))
        time.sleep(0.1)


def elems(prefix, n):
    return ["%s%d" % (prefix, i) for i in range(n)]


def lrange_all(c, key):
    reply = c.call("LRANGE", key, 0, -1)
    parts = reply.split(b"\r\n")
    return [p.decode() for p in parts[2::2][:int(parts[0][1:])]]


def big_list(c, kv_port):
    """4 MB of elements under a 1 MiB --max-value; one push writes about a chunk."""
    for i in range(40):
        check(c.call("RPUSH", "big", *["%04d" % (i * 100 + j) + "x" * 996 for j in range(100)]) == b":%d\r\n" % (
            (i + 1) * 100), "push %d" % i)
    check(c.call("LLEN", "big") == b":4000\r\n", "4000 elements")
    check(c.call("LINDEX", "big", "3999") == b"$1000\r\n3999" + b"x" * 996 + b"\r\n", "the last")
    before = kv_stats(kv_port)["log_bytes_written"]
    check(c.call("RPUSH", "big", "tail") == b":4001\r\n", "one more")
    grew = kv_stats(kv_port)["log_bytes_written"] - before
    check(grew < 16384, "a push onto a 4 MB list wrote %d bytes of log" % grew)
    check(c.call("LPOP", "big", "4001").startswith(b"*4001\r\n$1000\r\n0000"), "popped whole: deleted")
    check(c.call("EXISTS", "big") == b":0\r\n", "an emptied list is gone")


def no_orphans(tmp):
    data = os.path.join(tmp, "orphans")
    srv, port = hanuresp.resp_server(data, ["--no-bucket", "--resp-allow-flushdb"])
    kv_port = srv.port
    try:
        c = hanuresp.Conn(port)
        big_list(c, kv_port)
        check(c.call("RPUSH", "keep", *elems("k", 600)) == b":600\r\n", "keep")
        base = wait_records(kv_port, 3, 1, "a list of 600: 3 chunks and its owner")
        # an emptied list's chunks and owner go in its own record
        c.call("RPUSH", "e", *elems("e", 700))
        check(c.call("LTRIM", "e", "1", "0") == b"+OK\r\n" and c.call("EXISTS", "e") == b":0\r\n", "emptied")
        s = kv_stats(kv_port)
        check((s["list_chunks"], s["list_owners"]) == (3, 1), "emptied: no record left: %r" % s)
        check(s["list_records_reclaimed"] == base["list_records_reclaimed"], "nothing for the reclaim pass")
        # every other way a list goes leaves its chunks to the reclaim pass
        for k in ("d", "u", "s", "dst", "m", "t", "b", "src", "nx"):
            c.call("RPUSH", k, *elems(k, 300))
        c.call("RPUSH", "bin", "\xff".encode("latin-1"), "ok")
        check(c.call("DEL", "d") == b":1\r\n" and c.call("UNLINK", "u") == b":1\r\n", "del, unlink")
        check(c.call("SET", "s", "plain") == b"+OK\r\n", "set over a list")
        check(c.call("RENAME", "src", "dst") == b"+OK\r\n", "rename over a list")
        check(c.call("RENAMENX", "nx", "nx2") == b":1\r\n", "renamenx")
        check(c.call("MULTI") == b"+OK\r\n" and c.call("RPUSH", "m", "more") == b"+QUEUED\r\n" and
              c.call("DEL", "m") == b"+QUEUED\r\n" and c.call("EXEC") == b"*2\r\n:301\r\n:1\r\n", "multi")
        check(c.call("PEXPIRE", "t", "150") == b":1\r\n", "expire")
        kv = hanukv.Conn(kv_port)
        check(kv.set("b", "plain")[0] == hanukv.OK, "the binary protocol over a list")
        kv.close()
        c.call("SELECT", "3")
        c.call("RPUSH", "f1", *elems("f", 300))
        c.call("RPUSH", "f2", "x")
        check(c.call("FLUSHDB") == b"+OK\r\n", "flushdb")
        c.call("SELECT", "0")
        c.call("SET", "ttl", "v", "EXAT", str(FAR_S))
        # left: keep (3 chunks), dst and nx2 (2 each), bin (1); four owners
        s = wait_records(kv_port, 3 + 2 + 2 + 1, 4, "the reclaim pass")
        check(s["list_records_reclaimed"] > base["list_records_reclaimed"], "the pass deleted them")
        check(lrange_all(c, "keep") == elems("k", 600), "keep whole")
        check(lrange_all(c, "dst") == elems("src", 300), "renamed whole")
        check(lrange_all(c, "nx2") == elems("nx", 300), "renamed (nx) whole")
        check(c.call("TYPE", "t") == b"+none\r\n", "expired")
        c.close()
        srv.stop()
        srv.start()
        c = hanuresp.Conn(port)
        check(lrange_all(c, "keep") == elems("k", 600) and lrange_all(c, "dst") == elems("src", 300),
              "whole after a restart")
        check(c.call("RPUSH", "keep", "after") == b":601\r\n", "a push after the restart")
        wait_records(kv_port, 3 + 2 + 2 + 1, 4, "after a restart")
        c.close()
    finally:
        srv.stop()
    # hanudb dump: lists with their elements, base64 when one is not UTF-8, expiries
    r = subprocess.run([hanukv.BIN, "dump", "--data", data], capture_output=True, timeout=60)
    check(r.returncode == 0, "dump: %s" % r.stderr)
    lines = {l.get("key"): l for l in map(json.loads, r.stdout.decode().splitlines()) if l.get("db") == "default"}
    check(lines["keep"] == {"db": "default", "key": "keep", "type": "list", "elements": elems("k", 600) + ["after"]},
          "dump of a list: %r" % str(lines.get("keep"))[:200])
    check(lines["bin"] == {"db": "default", "key": "bin", "type": "list",
                           "elements_base64": [base64.b64encode(b"\xff").decode(), base64.b64encode(b"ok").decode()]},
          "dump of a list with an element that is not UTF-8: %r" % lines.get("bin"))
    check(lines["ttl"] == {"db": "default", "key": "ttl", "value": "v", "expire_ms": FAR_S * 1000},
          "dump of a key with an expiry: %r" % lines.get("ttl"))
    check(lines["s"] == {"db": "default", "key": "s", "value": "plain"}, "a string without one: %r" % lines.get("s"))


def old_format(tmp):
    data = os.path.join(tmp, "old")
    os.makedirs(data)
    r = subprocess.run([TEST_KVLIST, "write-old", data], capture_output=True, timeout=60)
    check(r.returncode == 0, "test_kvlist write-old: %s" % r.stderr)
    srv, port = hanuresp.resp_server(data, ["--no-bucket"])
    try:
        c = hanuresp.Conn(port)
        check(c.call("TYPE", "old") == b"+list\r\n" and c.call("LLEN", "old") == b":300\r\n", "an old list reads")
        check(lrange_all(c, "old") == elems("old", 300), "its elements")
        check(c.call("LINDEX", "old", "-1") == b"$6\r\nold299\r\n", "LINDEX")
        check(c.call("EXPIRETIME", "old") == b":%d\r\n" % FAR_S, "its expiry")
        check(kv_stats(srv.port)["list_chunks"] == 0, "no chunks yet")
        check(c.call("RPUSH", "old", "new") == b":301\r\n", "the next write")
        check(lrange_all(c, "old") == elems("old", 300) + ["new"], "converted whole")
        check(c.call("EXPIRETIME", "old") == b":%d\r\n" % FAR_S, "the expiry kept")
        s = kv_stats(srv.port)
        check((s["list_chunks"], s["list_owners"]) == (2, 1), "in chunks now: %r" % s)
        c.close()
    finally:
        srv.stop()


def main():
    check(hanuresp.have_redis(), "redis-server and redis-tools are needed (scripts/install-deps.sh)")
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="hanudb-e2e-lists-") as tmp:
        redis = hanuresp.Redis()
        srv, port = hanuresp.resp_server(os.path.join(tmp, "d"), ["--no-bucket"])
        try:
            n = differential(port, redis.port)
            print("differential: %d replies identical (seed %d)" % (n, SEED))
        finally:
            srv.stop()
            redis.stop()
        no_orphans(tmp)
        old_format(tmp)
    print("e2e_resp_lists: ok in %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
