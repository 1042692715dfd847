#!/usr/bin/env python3
"""e2e_resp.py: the Redis face (docs/RESP.md) against a real redis-server.

- differential: the same few hundred random command sequences (strings, MULTI/EXEC,
  errors, SELECT, RESP3 after HELLO 3, pipelined batches) go to redis-server and to
  hanudb serve --resp-addr through raw sockets; every reply must be the same bytes,
  except the commands listed in NOT_COMPARED (with the reason);
- per-key TTL in the mix: SET's EX/PX/EXAT/PXAT/KEEPTTL, GETEX, (P)EXPIRE(AT) with
  NX/XX/GT/LT, PERSIST, TTL, PTTL, (P)EXPIRETIME, with every error. Relative times are
  long (100 s and more) so nothing lapses during a sequence; times in the past only
  where redis-server deletes the key at once (EXPIRE with a time <= now, EXPIREAT 1,
  GETEX EXAT 1), never SET ... PXAT 1, whose key redis-server keeps (DBSIZE counts it)
  until its active expiry, a timing neither side shares. TTL, PTTL and the
  EXPIRETIMEs of relative times are compared with a tolerance (TIME_TOLERANCE): the
  two servers read their clocks some milliseconds apart; -1 and -2 compare exactly;
- what HanuDB answers differently on purpose: FLUSHDB refused, AUTH with
  --tokens and scopes, HANU.CAS tokens shared with the binary protocol, CLIENT
  DURABILITY, hostile framing closes with redis-server's error;
- lists in the mix: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP (with counts), LLEN, LRANGE,
  LINDEX, LSET, LREM, LTRIM on the same keys as the strings, so every string command
  meets a list key and every list command a string key (-WRONGTYPE), and TYPE, RENAME,
  EXPIRE, SCAN TYPE, DEL, EXISTS, MGET see both; at the end each list compares whole;
- redis-benchmark -t set,get,incr,mset,lpush,rpush,lpop,rpop,lrange runs to the end,
  every test's line present.
"""
import os
import json
import random
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hanukv  # noqa: E402
import hanuresp  # noqa: E402
from hanukv import check  # noqa: E402

SEED = int(os.environ.get("SEED", "29"))
SEQUENCES = int(os.environ.get("SEQUENCES", "300"))
KEYS = ["k%d" % i for i in range(6)] + ["{user}:1", "a b"]
VALUES = ["", "0", "1", "10", "-3", "abc", "3.5", "9223372036854775807", "-9223372036854775808", "1e3",
          " 1", "01", "hello world", "x" * 40]
# Commands whose answers legitimately differ, never compared byte for byte:
NOT_COMPARED = {
    "HELLO": "names the server (hanudb) and the connection id",
    "KEYS": "order of keys differs (compared as sets below)",
}
# Answers that hold a time read from the clock: equal within this many units.
TIME_TOLERANCE = {"TTL": 1, "PTTL": 1000, "EXPIRETIME": 1, "PEXPIRETIME": 1000}
FAR_S = 4102444800                    # 2100-01-01: EXAT and EXPIREAT times that never lapse here


def rand_value(r):
    return r.choice(VALUES) if r.random() < 0.85 else str(r.randint(-1000, 1000))


def rand_command(r):
    k, k2, v = r.choice(KEYS), r.choice(KEYS), rand_value(r)
    n = r.random()
    choices = [
        ["GET", k], ["SET", k, v], ["SET", k, v, "NX"], ["SET", k, v, "XX"], ["SET", k, v, "GET"],
        ["SET", k, v, "NX", "GET"], ["SET", k, v, "XX", "GET"], ["SET", k, v, "NX", "XX"], ["SET", k, v, "BOGUS"],
        ["SETNX", k, v], ["GETSET", k, v], ["GETDEL", k], ["MGET", k, k2, "nokey"], ["MSET", k, v, k2, rand_value(r)],
        ["MSET", k, v, k2], ["MSETNX", k, v, k2, rand_value(r)], ["DEL", k, k2], ["DEL", k, k], ["UNLINK", k],
        ["EXISTS", k, k2, k], ["TYPE", k], ["INCR", k], ["DECR", k], ["INCRBY", k, str(r.randint(-50, 50))],
        ["INCRBY", k, "x"], ["DECRBY", k, str(r.randint(-50, 50))], ["INCRBYFLOAT", k, r.choice(["0.1", "-2.5", "3", "1e2", "abc"])],
        ["APPEND", k, v], ["STRLEN", k], ["GETRANGE", k, str(r.randint(-5, 5)), str(r.randint(-5, 5))],
        ["SETRANGE", k, str(r.randint(0, 12)), r.choice(["", "ab", "xyz"])], ["SETRANGE", k, "-1", "a"],
        ["RENAME", k, k2], ["RENAMENX", k, k2], ["DBSIZE"], ["ECHO", v], ["PING"], ["PING", v],
        ["TTL", k], ["PTTL", k], ["GET"], ["SET", k], ["INCR", k, k2], ["NOSUCHCMD", k, v], ["nosuch"],
        ["EXISTS"], ["KEYS", r.choice(["*", "k*", "k[0-2]", "?", "*:*"])], ["GETRANGE", k, "a", "1"],
    ] + ttl_commands(r, k, v) + list_commands(r, k, k2, v)
    if n < 0.04:
        return ["SELECT", str(r.choice([0, 1, 2, 15, 16, -1]))]
    return r.choice(choices)


def rand_ttl_option(r):
    return r.choice([["EX", str(r.randint(100, 100000))], ["PX", str(r.randint(100000, 10 ** 8))],
                     ["EXAT", str(FAR_S + r.randint(0, 10 ** 6))], ["PXAT", str(FAR_S * 1000 + r.randint(0, 10 ** 9))]])


def ttl_commands(r, k, v):
    """TTL commands for the mix: each is drawn as often as a string command."""
    opt, opt2 = rand_ttl_option(r), rand_ttl_option(r)
    bad = r.choice([["EX", "0"], ["PX", "-5"], ["EX", "abc"], ["EXAT", "-1"], ["EX", "9223372036854775807"],
                    ["PX", "9223372036854775807"], ["EX"], ["EX", "10", "PX", "10"], ["EX", "10", "KEEPTTL"],
                    ["KEEPTTL", "EX", "10"], ["PERSIST"], ["EX", "100", "EX", "200"]])
    return [
        ["SET", k, v] + opt, ["SET", k, v] + opt + ["NX"], ["SET", k, v, "XX"] + opt + ["GET"], ["SET", k, v, "KEEPTTL"],
        ["SET", k, v, "KEEPTTL", "GET"], ["SET", k, v] + bad, ["GETEX", k], ["GETEX", k] + opt2,
        ["GETEX", k, "PERSIST"], ["GETEX", k, "EXAT", "1"], ["GETEX", k] + bad, ["GETEX", k, "NX"],
        ["EXPIRE", k, str(r.randint(100, 10 ** 6))] + r.choice([[], [], ["NX"], ["XX"], ["GT"], ["LT"]]),
        ["EXPIRE", k, str(r.randint(-100, 0))], ["PEXPIRE", k, str(r.randint(10 ** 5, 10 ** 9))],
        ["EXPIREAT", k, str(FAR_S + r.randint(0, 1000))] + r.choice([[], ["GT"], ["LT"], ["XX"]]),
        ["EXPIREAT", k, "1"], ["PEXPIREAT", k, str(FAR_S * 1000 + r.randint(0, 10 ** 6))],
        ["EXPIRE", k, "10", "NX", "XX"], ["EXPIRE", k, "10", "GT", "LT"], ["EXPIRE", k, "10", "BOGUS"],
        ["EXPIRE", k, "x"], ["EXPIRE", k, "9223372036854775807"], ["EXPIREAT", k, "9223372036854775807"],
        ["EXPIRE", k], ["PERSIST", k], ["PERSIST", k, k], ["TTL", k], ["PTTL", k], ["EXPIRETIME", k],
        ["PEXPIRETIME", k],
    ]


def list_commands(r, k, k2, v):
    """List commands for the mix, on the string commands' keys (WRONGTYPE both ways)."""
    i, j = str(r.randint(-6, 6)), str(r.randint(-6, 6))
    elems = [rand_value(r) for _ in range(r.randint(1, 4))]
    return [
        ["LPUSH", k] + elems, ["RPUSH", k] + elems, ["LPUSH", k, v], ["RPUSH", k, v], ["LPUSHX", k, v],
        ["RPUSHX", k] + elems, ["LPOP", k], ["RPOP", k], ["LPOP", k, str(r.randint(0, 4))],
        ["RPOP", k, str(r.randint(0, 4))], ["LPOP", k, "-1"], ["LPOP", k, "x"], ["LPOP", k, "1", "2"],
        ["LLEN", k], ["LRANGE", k, i, j], ["LRANGE", k, "0", "-1"], ["LRANGE", k, "a", "1"], ["LINDEX", k, i],
        ["LINDEX", k, "x"], ["LSET", k, i, v], ["LSET", k, "x", v], ["LREM", k, str(r.randint(-2, 2)), v],
        ["LREM", k, "x", v], ["LTRIM", k, i, j], ["LTRIM", k, "x", "1"], ["LPUSH", k], ["TYPE", k],
        ["RENAME", k, k2], ["SCAN", "0", "TYPE", r.choice(["list", "string"]), "COUNT", "100"], ["MGET", k, k2],
    ]


def same_reply(name, a, b):
    """Byte for byte, but a time within TIME_TOLERANCE of the other (not -1 or -2)."""
    if a == b or name not in TIME_TOLERANCE:
        return a == b
    try:
        x, y = int(a[1:-2]), int(b[1:-2])
    except ValueError:
        return False
    return a[:1] == b[:1] == b":" and x >= 0 and y >= 0 and abs(x - y) <= TIME_TOLERANCE[name]


def rand_sequence(r):
    seq = []
    if r.random() < 0.2:
        seq.append(["HELLO", "3"])
    for _ in range(r.randint(3, 25)):
        x = r.random()
        if x < 0.07:
            body = [rand_command(r) for _ in range(r.randint(0, 5))]
            end = r.choice(["EXEC", "EXEC", "EXEC", "DISCARD"])
            if r.random() < 0.3:
                seq.append(["WATCH", r.choice(KEYS)])
            # no SELECT (refused inside MULTI by HanuDB), KEYS or SCAN (order) nor times (EXEC's
            # array is compared byte for byte) in a transaction
            seq += [["MULTI"]] + [c for c in body if c[0] not in ("SELECT", "KEYS", "SCAN") and
                                  c[0] not in TIME_TOLERANCE] + [[end]]
        elif x < 0.09:
            seq.append(["EXEC"])
        else:
            seq.append(rand_command(r))
    return seq


def sorted_array(reply):
    """A flat array of bulks as a sorted list (KEYS)."""
    if not reply.startswith(b"*"):
        return reply
    parts = reply.split(b"\r\n")
    return sorted(parts[2::2][:int(parts[0][1:])])


def sorted_scan(reply):
    """SCAN's [cursor, keys] with the keys sorted."""
    head, _, rest = reply.partition(b"\r\n*")
    return head, sorted_array(b"*" + rest) if rest else reply


def differential(port_h, port_r):
    r = random.Random(SEED)
    compared = 0
    for i in range(SEQUENCES):
        seq = rand_sequence(r)
        pipelined = r.random() < 0.3
        ch, cr = hanuresp.Conn(port_h), hanuresp.Conn(port_r)
        try:
            if pipelined:
                data = b"".join(hanuresp.encode(*c) for c in seq)
                ch.send(data)
                cr.send(data)
            for cmd in seq:
                if not pipelined:
                    ch.send(hanuresp.encode(*cmd))
                    cr.send(hanuresp.encode(*cmd))
                a, b = ch.reply(), cr.reply()
                name = cmd[0].upper()
                if name == "KEYS":
                    a, b = sorted_array(a), sorted_array(b)
                elif name == "SCAN":   # one call with COUNT 100 covers the keys: cursor 0, any order
                    a, b = sorted_scan(a), sorted_scan(b)
                elif name in NOT_COMPARED:
                    continue
                check(same_reply(name, a, b), "sequence %d (seed %d), %r:\n hanudb: %r\n redis:  %r\n sequence: %r"
                      % (i, SEED, cmd, a, b, seq))
                compared += 1
            # the same keys at the end, in every database used
            for db in (0, 1, 2, 15):
                for c in (ch, cr):
                    c.call("SELECT", db)
                ka, kb = sorted_array(ch.call("KEYS", "*")), sorted_array(cr.call("KEYS", "*"))
                check(ka == kb, "sequence %d: keys of db %d differ: %r vs %r" % (i, db, ka, kb))
                for key in kb:
                    check(ch.call("GET", key) == cr.call("GET", key), "sequence %d: value of %r" % (i, key))
                    check(ch.call("LRANGE", key, 0, -1) == cr.call("LRANGE", key, 0, -1),
                          "sequence %d: list %r" % (i, key))
                    check(same_reply("PTTL", ch.call("PTTL", key), cr.call("PTTL", key)),
                          "sequence %d: expiry of %r" % (i, key))
                for c in (ch, cr):
                    if kb:
                        c.call("DEL", *kb)
        finally:
            ch.close()
            cr.close()
    return compared


# WATCH across two connections: a state of the key, WATCH on one connection, then
# another connection's commands, then MULTI/EXEC: aborted (nil) or run, as Redis says.
WATCH_STATES = {
    "absent": [],
    "string": [["SET", "w", "v"]],
    "string with a TTL": [["SET", "w", "7", "EX", "1000"]],
    "list": [["RPUSH", "w", "a", "b", "c"]],
    "expired": [["SET", "w", "v", "PX", "1"]],
}
WATCH_ACTIONS = [
    [], [["GET", "w"]], [["EXISTS", "w"]], [["SET", "w", "v"]], [["DEL", "w"]], [["DEL", "other"]],
    [["SET", "w", "x"], ["DEL", "w"]], [["RPUSH", "w", "x"], ["RPOP", "w"]], [["SET", "other", "x"]],
    [["SETNX", "w", "v"]], [["SET", "w", "v", "NX"]], [["SET", "w", "v", "XX"]], [["SET", "w", "v", "KEEPTTL"]],
    [["MSETNX", "w", "v"]], [["GETSET", "w", "v"]], [["GETDEL", "w"]], [["GETEX", "w"]], [["GETEX", "w", "PERSIST"]],
    [["APPEND", "w", ""]], [["SETRANGE", "w", "0", ""]], [["SETRANGE", "w", "0", "v"]], [["INCRBY", "w", "0"]],
    [["INCRBYFLOAT", "w", "0"]], [["EXPIRE", "w", "100"]], [["EXPIRE", "w", "100", "NX"]], [["PEXPIRE", "w", "0"]],
    [["PERSIST", "w"]], [["RENAME", "w", "w"]], [["RENAME", "w", "w2"], ["RENAME", "w2", "w"]],
    [["RENAMENX", "w", "w"]], [["LTRIM", "w", "0", "-1"]], [["LTRIM", "w", "5", "10"]], [["LREM", "w", "0", "zz"]],
    [["LREM", "w", "0", "a"]], [["LSET", "w", "0", "a"]], [["LPOP", "w", "0"]], [["RPUSHX", "w", "x"]],
    [["LPUSHX", "w", "x"], ["LPOP", "w"]], [["UNLINK", "w"]], [["TYPE", "w"]], [["TTL", "w"]],
]


def watch_differential(port_h, port_r):
    cases = 0
    for state, setup in WATCH_STATES.items():
        for actions in WATCH_ACTIONS:
            got = []
            for port in (port_h, port_r):
                a, b = hanuresp.Conn(port), hanuresp.Conn(port)
                try:
                    b.call("DEL", "w", "w2", "other")
                    for cmd in setup:
                        b.call(*cmd)
                    if state == "expired":
                        time.sleep(0.01)
                    check(a.call("WATCH", "w") == b"+OK\r\n", "WATCH")
                    replies = [b.call(*cmd) for cmd in actions]
                    a.call("MULTI")
                    a.call("SET", "probe", "1")
                    got.append((a.call("EXEC"), replies))
                    # a lapsed key stays counted until the sweep: overwrite it, then delete
                    b.call("MSET", "w", "x", "w2", "x", "other", "x")
                    b.call("DEL", "w", "w2", "other", "probe")
                finally:
                    a.close()
                    b.close()
            check(got[0][0] == got[1][0], "WATCH, key %s, then %r from another connection: EXEC answered\n"
                  " hanudb: %r\n redis:  %r (replies %r / %r)" % (state, actions, got[0][0], got[1][0], got[0][1], got[1][1]))
            cases += 1
    return cases


def hanudb_only(port, kv_port):
    c = hanuresp.Conn(port)
    # TTL: the expiry is in the record, which the binary protocol sees too; changing
    # it writes the record again (a new token)
    check(c.call("SET", "t", "v", "PXAT", str(FAR_S * 1000 + 7)) == b"+OK\r\n", "SET PXAT")
    kv = hanukv.Conn(kv_port)
    st, payload = kv.call(hanukv.OPS["TTL"], hanukv.db_field("default") + hanukv.bytes_field("t"))
    check(st == hanukv.OK and struct.unpack("<QQQ", payload)[1] == FAR_S * 1000 + 7, "Ttl of the binary protocol")
    t1 = int(c.call("HANU.GET", "t").split(b":")[1].split(b"\r\n")[0])
    check(c.call("PERSIST", "t") == b":1\r\n" and c.call("TTL", "t") == b":-1\r\n", "PERSIST")
    t2 = int(c.call("HANU.GET", "t").split(b":")[1].split(b"\r\n")[0])
    check(t2 > t1, "PERSIST wrote a record: token %d after %d" % (t2, t1))
    # a key that lapses: gone at once for every read, then deleted by the sweep
    check(c.call("SET", "lapse", "v", "PX", "300") == b"+OK\r\n", "SET PX 300")
    size = int(c.call("DBSIZE")[1:-2])
    time.sleep(0.35)
    check(c.call("GET", "lapse") == b"$-1\r\n" and c.call("EXISTS", "lapse") == b":0\r\n", "lapsed")
    check(c.call("TTL", "lapse") == b":-2\r\n", "TTL of a lapsed key")
    deadline = time.time() + 3
    while int(c.call("DBSIZE")[1:-2]) != size - 1:
        check(time.time() < deadline, "the sweep never deleted the lapsed key")
        time.sleep(0.05)
    st, payload = kv.call(hanukv.OPS["STATS"])
    expired = json.loads(payload)["keys_expired"]
    check(expired >= 1, "keys_expired counts it")
    check(b"expired_keys:%d\r\n" % expired in c.call("INFO", "stats"), "INFO stats expired_keys")
    kv.close()
    check(c.call("FLUSHDB").startswith(b"-ERR FLUSHDB is disabled"), "FLUSHDB refused by default")
    # a list through the binary protocol: its head (docs/FORMATS.md: magic, version, id,
    # next chunk number, chunk count, then per chunk its number, count and bytes); the
    # elements are in chunks no other face sees; a string write over it makes it a string
    check(c.call("RPUSH", "l", "a", "bc") == b":2\r\n", "RPUSH")
    kv = hanukv.Conn(kv_port)
    st, _, value = kv.get("l")
    check(st == hanukv.KEY_VALUE_TOKEN and value[:5] == b"\xff\xff\xff\xff\x01" and len(value) == 21 + 12 and
          value[17:] == struct.pack("<IIII", 1, 0, 2, 3), "the binary protocol reads a list's head: %r" % value)
    kv.set("l", "plain")
    kv.close()
    check(c.call("TYPE", "l") == b"+string\r\n" and c.call("GET", "l") == b"$5\r\nplain\r\n", "a string again")
    # a list push is one record, and MULTI with pushes too
    before = hanuresp_info_txn(c)
    check(c.call("LPUSH", "l2", "a", "b", "c") == b":3\r\n", "LPUSH of three")
    check(hanuresp_info_txn(c) == before + 1, "LPUSH wrote one record")
    # an element past --max-value (less a chunk's framing) is refused, the list unchanged
    got = c.call("RPUSH", "l2", "x" * (1048576 - 7))
    check(got.startswith(b"-ERR a list element of 1048569 bytes is past the server's --max-value"), "too big: %r" % got[:100])
    check(c.call("LLEN", "l2") == b":3\r\n", "unchanged")
    # compare-and-set with the binary protocol's tokens, both ways
    check(c.call("SET", "cas", "one") == b"+OK\r\n", "set")
    got = c.call("HANU.GET", "cas")
    check(got.startswith(b"*2\r\n$3\r\none\r\n:"), "HANU.GET %r" % got)
    token = int(got.split(b":")[1].split(b"\r\n")[0])
    kv = hanukv.Conn(kv_port)
    st, kv_token, _ = kv.get("cas")
    check(st == hanukv.KEY_VALUE_TOKEN and kv_token == token, "the binary protocol sees the same token")
    check(c.call("HANU.CAS", "cas", token + 1, "two").startswith(b"-MISMATCH the key's token is %d" % token), "mismatch")
    check(c.call("HANU.CAS", "cas", token, "two") == b"+OK\r\n", "cas")
    check(c.call("HANU.CAS", "cas", token, "three").startswith(b"-MISMATCH"), "the old token no longer works")
    check(c.call("HANU.CAD", "nokey", 1) == b"-NOTFOUND no such key\r\n", "cad of nothing")
    st, _, value = kv.get("cas")
    check(value == b"two", "the binary protocol reads the RESP write: %r" % value)
    kv.close()
    # durability per connection
    check(c.call("CLIENT", "DURABILITY") == b"$5\r\nlocal\r\n", "default durability")
    check(c.call("CLIENT", "DURABILITY", "none") == b"+OK\r\n", "none")
    check(c.call("SET", "d", "1") == b"+OK\r\n", "a write at none")
    check(c.call("CLIENT", "DURABILITY", "bucket").startswith(b"-ERR bucket durability is not available"), "no bucket")
    check(c.call("CLIENT", "DURABILITY", "fast") == b"-ERR CLIENT DURABILITY is none, local or bucket\r\n", "bad level")
    check(c.call("WAIT", "1", "10") == b":0\r\n", "WAIT without a bucket: no copy")
    # SELECT: 0 is default, n is dbN, a name is HanuDB's own
    check(c.call("SELECT", "7") == b"+OK\r\n" and c.call("SET", "s7", "x") == b"+OK\r\n", "select 7")
    check(c.call("SELECT", "db7") == b"+OK\r\n" and c.call("GET", "s7") == b"$1\r\nx\r\n", "db7 is SELECT 7")
    check(c.call("SELECT", "nosuchdb") == b"-ERR value is not an integer or out of range\r\n", "unknown name")
    check(c.call("SELECT", "0") == b"+OK\r\n", "back")
    # a MULTI is one log record: the store's last txn moves by one
    c.call("SET", "m0", "x")
    before = hanuresp_info_txn(c)
    c.call("MULTI")
    for i in range(5):
        c.call("SET", "m%d" % i, i)
    c.call("INCR", "m1")
    check(c.call("EXEC") == b"*6\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n:2\r\n", "exec")
    check(hanuresp_info_txn(c) == before + 1, "EXEC wrote one record")
    c.call("MSET", "x1", "1", "x2", "2", "x3", "3")
    check(hanuresp_info_txn(c) == before + 2, "MSET wrote one record")
    # WATCH sees a write of the binary protocol
    c.call("WATCH", "w")
    kv = hanukv.Conn(kv_port)
    kv.set("w", "other")
    kv.close()
    c.call("MULTI")
    c.call("SET", "w", "mine")
    check(c.call("EXEC") == b"*-1\r\n", "EXEC aborted by a write from the other face")
    check(c.call("GET", "w") == b"$5\r\nother\r\n", "nothing of the aborted EXEC")
    # a pipeline whose answers pass the 8 MiB high water: the commands read before the
    # pause run once the client reads (nothing new arrives to wake the connection)
    big = "b" * 1000000
    check(c.call("SET", "big", big) == b"+OK\r\n", "a 1 MB value")
    c.send(b"".join(hanuresp.encode("GET", "big") for _ in range(40)) + hanuresp.encode("PING"))
    for i in range(40):
        check(c.reply() == b"$1000000\r\n" + big.encode() + b"\r\n", "GET %d of the pipeline" % i)
    check(c.reply() == b"+PONG\r\n", "the pipeline's last answer")
    # FLUSHDB inside EXEC joins the transaction's record (allowed on this server? no: refused)
    c.call("MULTI")
    c.call("SET", "fx", "1")
    c.call("FLUSHDB")
    got = c.call("EXEC")
    check(got.startswith(b"*2\r\n+OK\r\n-ERR FLUSHDB is disabled"), "FLUSHDB in EXEC: %r" % got[:80])
    # hostile framing: redis-server's error, then the connection closes
    c.send(b"*1\r\n$-7\r\n")
    check(c.reply() == b"-ERR Protocol error: invalid bulk length\r\n", "negative bulk")
    c.expect_closed("after a protocol error")
    c.close()


def hanuresp_info_txn(c):
    info = c.call("INFO", "persistence").decode()
    return int(info.split("hanudb_last_txn:")[1].split("\r\n")[0])


def auth(tmp):
    srv, port = hanuresp.resp_server(os.path.join(tmp, "auth"), ["--no-bucket", "--tokens",
                                                                 "rw-token-1 rw *;ro-token-1 ro *;scoped-token-1 rw sessions"])
    try:
        c = hanuresp.Conn(port)
        check(c.call("GET", "a") == b"-NOAUTH Authentication required.\r\n", "NOAUTH")
        check(c.call("GET") == b"-ERR wrong number of arguments for 'get' command\r\n", "arity before auth, as redis")
        check(c.call("AUTH", "nope") == b"-WRONGPASS invalid username-password pair or user is disabled.\r\n", "wrong")
        check(c.call("AUTH", "default", "ro-token-1") == b"+OK\r\n", "AUTH default token")
        check(c.call("GET", "a") == b"$-1\r\n", "read with a read-only token")
        check(c.call("SET", "a", "1") == b"-NOPERM this user has no permissions to run the 'set' command\r\n", "ro")
        check(c.call("AUTH", "rw-token-1") == b"+OK\r\n" and c.call("SET", "a", "1") == b"+OK\r\n", "AUTH token")
        c.close()
        c = hanuresp.Conn(port)
        check(c.call("HELLO", "3", "AUTH", "default", "scoped-token-1").startswith(b"%7\r\n"), "HELLO 3 AUTH")
        check(c.call("GET", "a") == b"-NOPERM the token does not cover the database \"default\"\r\n", "scope")
        # three failed AUTHs close the connection
        for _ in range(3):
            got = c.call("AUTH", "bad")
        check(got.startswith(b"-WRONGPASS"), "third failure answered")
        c.expect_closed("after three failed AUTHs")
        c.close()
        # before AUTH a large frame is refused as redis-server does
        c = hanuresp.Conn(port)
        c.send(b"*20\r\n")
        check(c.reply() == b"-ERR Protocol error: unauthenticated multibulk length\r\n", "unauthenticated size")
        c.close()
    finally:
        srv.stop()


def bucket_and_follower(tmp):
    """Durability bucket and WAIT on a leader; a follower of its bucket answers
    writes with -READONLY and reads what the leader wrote."""
    url = "file://" + os.path.join(tmp, "bucket")
    leader, lport = hanuresp.resp_server(os.path.join(tmp, "leader"), ["--bucket", url, "--seal-interval-ms", "5000"])
    follower = None
    try:
        c = hanuresp.Conn(lport)
        check(c.call("SET", "f", "1") == b"+OK\r\n", "local write")
        check(c.call("WAIT", "1", "0") == b":1\r\n", "WAIT: the bucket holds it (sealed now, not in 5 s)")
        check(c.call("CLIENT", "DURABILITY", "bucket") == b"+OK\r\n", "bucket durability")
        t0 = time.time()
        check(c.call("SET", "f", "2") == b"+OK\r\n", "bucket write")
        check(time.time() - t0 < 4, "a bucket write waits for one put, not the seal interval")
        follower, fport = hanuresp.resp_server(os.path.join(tmp, "follower"),
                                               ["--bucket", url, "--follow", "--poll-ms", "100"])
        f = hanuresp.Conn(fport)
        got = f.call("SET", "f", "3")
        check(got.startswith(b"-READONLY You can't write against a read only replica."), "follower: %r" % got)
        # TTLs reach the follower in the record: the same absolute expiry; a key that
        # lapses is hidden there at once, and the leader's sweep deletes it there too
        check(c.call("SET", "far", "x", "EXAT", str(FAR_S)) == b"+OK\r\n", "EXAT on the leader")
        check(c.call("SET", "soon", "x", "PX", "1500") == b"+OK\r\n", "PX on the leader")
        # a list reaches the follower through the bucket as a list (op 7 in the segment)
        check(c.call("RPUSH", "fl", "a", "b") == b":2\r\n" and c.call("LPOP", "fl") == b"$1\r\na\r\n", "list")
        # a long list: its chunks (records of the system database) come in the same records
        long_list = [str(i) for i in range(2000)]
        check(c.call("RPUSH", "fl2", *long_list) == b":2000\r\n" and c.call("LSET", "fl2", "700", "x") == b"+OK\r\n",
              "a list of 8 chunks")
        check(c.call("SET", "mark", "m") == b"+OK\r\n", "bucket write after them")
        deadline = time.time() + 10
        while f.call("GET", "f") != b"$1\r\n2\r\n" or f.call("GET", "mark") != b"$1\r\nm\r\n":
            check(time.time() < deadline, "the follower never read the leader's write")
            time.sleep(0.1)
        check(f.call("EXPIRETIME", "far") == b":%d\r\n" % FAR_S, "the follower's expiry is the leader's")
        check(f.call("TYPE", "fl") == b"+list\r\n" and f.call("LRANGE", "fl", 0, -1) == b"*1\r\n$1\r\nb\r\n",
              "the follower holds the list: %r" % f.call("LRANGE", "fl", 0, -1))
        check(f.call("RPUSH", "fl", "c").startswith(b"-READONLY"), "a follower refuses a push")
        check(f.call("LRANGE", "fl2", 0, -1) == c.call("LRANGE", "fl2", 0, -1) and
              f.call("LINDEX", "fl2", "700") == b"$1\r\nx\r\n", "the follower holds the long list whole")
        # a rebuild from the bucket (dump --bucket restores the chain's end) holds it whole too
        r = subprocess.run([hanukv.BIN, "dump", "--bucket", url, "--scratch", tmp, "--db", "default"],
                           capture_output=True, timeout=60)
        got = [l for l in map(json.loads, r.stdout.decode().splitlines()) if l.get("key") == "fl2"]
        check(r.returncode == 0 and len(got) == 1 and got[0].get("type") == "list" and
              got[0].get("elements") == long_list[:700] + ["x"] + long_list[701:],
              "the long list rebuilt from the bucket: %r %r" % (r.stderr[-200:], str(got)[:200]))
        check(f.call("PEXPIRETIME", "soon") == c.call("PEXPIRETIME", "soon"), "the same ms on both")
        while f.call("GET", "soon") != b"$-1\r\n":
            check(time.time() < deadline, "the follower still answers a lapsed key")
            time.sleep(0.05)
        deadline = time.time() + 10   # the sweep's delete is sealed within the 5 s interval
        while b"expires=1," not in f.call("INFO", "keyspace"):
            check(time.time() < deadline, "the leader's sweep never reached the follower: %r" % f.call("INFO", "keyspace"))
            time.sleep(0.1)
        check(b"role:slave" in f.call("INFO", "replication"), "INFO replication on a follower")
        f.close()
        c.close()
    finally:
        if follower:
            follower.stop()
        leader.stop()


def benchmark(port):
    # redis-benchmark 7.0 stops at the first error answer: every test must run to its end
    out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set,get,incr,mset,lpush,rpush,lpop,rpop,lrange",
                          "-n", "2000", "-q", "-c", "8"], capture_output=True, text=True, timeout=120)
    check(out.returncode == 0, "redis-benchmark failed: %s %s" % (out.stdout, out.stderr))
    lines = [x.split(":")[0].strip() for x in out.stdout.replace("\r", "\n").split("\n") if "requests per second" in x]
    for t in ("SET", "GET", "INCR", "MSET (10 keys)", "LPUSH", "RPUSH", "LPOP", "RPOP",
              "LPUSH (needed to benchmark LRANGE)", "LRANGE_100 (first 100 elements)",
              "LRANGE_300 (first 300 elements)", "LRANGE_500 (first 500 elements)", "LRANGE_600 (first 600 elements)"):
        check(t in lines, "redis-benchmark ran %s: %r" % (t, out.stdout))
    c = hanuresp.Conn(port)
    check(c.call("GET", "counter:__rand_int__") == b"$4\r\n2000\r\n", "2000 INCRs counted")
    c.close()
    # redis-cli, as the README shows it
    out = subprocess.run(["redis-cli", "-p", str(port), "SET", "greeting", "hello"], capture_output=True, text=True)
    check(out.stdout.strip() == "OK", "redis-cli set: %r" % out.stdout)
    out = subprocess.run(["redis-cli", "-p", str(port), "GET", "greeting"], capture_output=True, text=True)
    check(out.stdout.strip() == "hello", "redis-cli get: %r" % out.stdout)


def parse_scan(reply):
    """SCAN's raw reply: (next cursor, [keys])."""
    lines = reply.split(b"\r\n")
    # *2, $n, cursor, *m, then $len key pairs
    cursor = int(lines[2])
    keys = [lines[i] for i in range(5, len(lines) - 1, 2)]
    return cursor, keys


def scan_while_growing(port):
    """Every key present for a whole SCAN is returned, also when keys already returned
    are deleted and the table grows between calls (the old cursor, a count of keys
    passed, skipped as many keys as were deleted before it)."""
    c = hanuresp.Conn(port)
    c.call("SELECT", "7")
    for i in range(0, 2000, 100):
        c.call("MSET", *[x for j in range(i, i + 100) for x in ("old%d" % j, "v")])
    seen, cursor, steps = set(), 0, 0
    while True:
        cursor, keys = parse_scan(c.call("SCAN", str(cursor), "COUNT", "20"))
        seen.update(keys)
        steps += 1
        if steps == 10:   # the keys returned so far go, and the table doubles twice
            gone = sorted(seen)
            c.call("DEL", *gone)
            for i in range(0, 8000, 100):
                c.call("MSET", *[x for j in range(i, i + 100) for x in ("new%d" % j, "v")])
        if cursor == 0:
            break
        check(steps < 5000, "SCAN never ended")
    missing = [j for j in range(2000) if ("old%d" % j).encode() not in seen and ("old%d" % j).encode() not in gone]
    check(not missing, "SCAN missed %d of the 2000 keys present all along, e.g. %s" % (len(missing), missing[:3]))
    check(steps < 1200, "SCAN took %d steps of COUNT 20 for 10 000 keys" % steps)
    check(c.call("RANDOMKEY").startswith(b"$"), "RANDOMKEY gives a key")
    c.call("SELECT", "0")


def main():
    check(hanuresp.have_redis(), "redis-server and redis-tools are needed (scripts/install-deps.sh)")
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="hanudb-e2e-resp-") as tmp:
        redis = hanuresp.Redis()
        srv, port = hanuresp.resp_server(os.path.join(tmp, "d"), ["--no-bucket"])
        try:
            n = differential(port, redis.port)
            print("differential: %d replies identical over %d sequences (seed %d)" % (n, SEQUENCES, SEED))
            print("watch: %d cases of another connection's commands abort EXEC as in Redis"
                  % watch_differential(port, redis.port))
            hanudb_only(port, srv.port)
            scan_while_growing(port)
            benchmark(port)
        finally:
            srv.stop()
            redis.stop()
        auth(tmp)
        bucket_and_follower(tmp)
    print("e2e_resp: ok in %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
