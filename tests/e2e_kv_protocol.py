"""Protocol test: every op and every error response of the key-value protocol
against a real server, pipelined and malformed input, limits, and the
`hanudb kv` command-line client's output and exit codes."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa

D = db_field("default")


def t_ping_stats_close(c, srv):
    check(c.call(OPS["PING"]) == (PONG, b""), "ping")
    st, p = c.call(OPS["STATS"])
    check(st == OK and "keys" in json.loads(p), "stats json: %r" % p)
    c2 = Conn(srv.port)
    check(c2.call(OPS["CLOSE"]) == (OK, b""), "close answers ok")
    check(c2.sock.recv(10) == b"", "close closes the connection")
    c2.close()


def t_databases(c, srv):
    st, p = c.call(OPS["CREATE"], db_field("users"))
    check(st == OK and len(p) == 8, "create: %r" % ((st, p),))
    check(c.call(OPS["CREATE"], db_field("users"))[0] == DB_ALREADY_EXISTS, "create twice")
    st, p = c.call(OPS["CREATE"], db_field("no spaces"))
    check(st == INVALID_REQUEST and b"names" in p, "create invalid name: %r" % p)
    st, p = c.call(OPS["INFO"], db_field("users"))
    info = json.loads(p)
    check(st == OK and info["name"] == "users" and info["keys"] == 0, "info %r" % p)
    check(c.call(OPS["INFO"], db_field("nope"))[0] == DB_NOT_FOUND, "info unknown")
    check(c.set("k", "v", db="users")[0] == OK, "set in users")
    check(c.get("k", db="users")[2] == b"v", "get in users")
    check(c.get("k")[0] == KEY_NOT_FOUND, "databases are separate")
    check(c.call(OPS["DROP"], db_field("users"))[0] == OK, "drop")
    check(c.call(OPS["DROP"], db_field("users"))[0] == DB_NOT_FOUND, "drop twice")
    check(c.call(OPS["DROP"], db_field("default"))[0] == INVALID_REQUEST, "drop default")
    check(c.get("k", db="users")[0] == DB_NOT_FOUND, "get in dropped db")
    check(c.set("k", "v", db="users")[0] == DB_NOT_FOUND, "set in dropped db")
    check(c.call(OPS["CREATE"], db_field("users"))[0] == OK, "re-create")
    check(c.get("k", db="users")[0] == KEY_NOT_FOUND, "re-created db is empty")


def t_keys_and_tokens(c, srv):
    check(c.get("a")[0] == KEY_NOT_FOUND, "get missing")
    st, p = c.set("a", b"\x00bin\xffary\x00")
    check(st == OK and len(p) == 8, "set")
    t1 = token_of(p)
    st, tok, val = c.get("a")
    check((st, tok, val) == (KEY_VALUE_TOKEN, t1, b"\x00bin\xffary\x00"), "get exact bytes and token")
    pl = lambda k, v: D + bytes_field(k) + bytes_field(v)
    check(c.call(OPS["SET_IF_EXISTS"], pl("zz", "1"))[0] == KEY_NOT_FOUND, "set-if-exists on missing")
    st, p = c.call(OPS["SET_IF_EXISTS"], pl("a", "2"))
    check(st == OK and token_of(p) == t1 + 1, "set-if-exists on existing; txn +1")
    t2 = token_of(p)
    check(c.call(OPS["SET_IF_NOT_EXISTS"], pl("a", "3"))[0] == KEY_ALREADY_EXISTS, "set-if-not-exists existing")
    check(c.call(OPS["SET_IF_NOT_EXISTS"], pl("b", "3"))[0] == OK, "set-if-not-exists new")
    cs = lambda k, t, v: D + bytes_field(k) + struct.pack("<Q", t) + bytes_field(v)
    st, p = c.call(OPS["COMPARE_SET"], cs("a", t1, "4"))
    check(st == KEY_TOKEN_MISMATCH and token_of(p) == t2, "compare-set stale token gives current")
    check(c.call(OPS["COMPARE_SET"], cs("nope", 1, "4"))[0] == KEY_NOT_FOUND, "compare-set missing")
    st, p = c.call(OPS["COMPARE_SET"], cs("a", t2, "5"))
    check(st == OK, "compare-set right token")
    t3 = token_of(p)
    check(c.get("a")[1:] == (t3, b"5"), "value after compare-set")
    cd = lambda k, t: D + bytes_field(k) + struct.pack("<Q", t)
    check(c.call(OPS["COMPARE_DELETE"], cd("a", t2))[0] == KEY_TOKEN_MISMATCH, "compare-delete stale")
    check(c.call(OPS["COMPARE_DELETE"], cd("a", t3))[0] == OK, "compare-delete right")
    check(c.call(OPS["COMPARE_DELETE"], cd("a", t3))[0] == KEY_NOT_FOUND, "compare-delete missing")
    check(c.delete("b")[0] == OK, "delete existing")
    check(c.delete("b")[0] == KEY_NOT_FOUND, "delete missing")
    check(c.set("e", "")[0] == OK and c.get("e")[2] == b"", "empty value")


def t_batch(c, srv):
    c.set("gone", "x")
    st, p = c.batch([("set", "b1", "1"), ("set", "b2", "2"), ("del", "gone"), ("set", "b1", "last")])
    check(st == OK, "batch")
    t = token_of(p)
    check(c.get("b1")[1:] == (t, b"last"), "batch: last item for a key wins, one token")
    check(c.get("b2")[1] == t, "batch items share the token")
    check(c.get("gone")[0] == KEY_NOT_FOUND, "batch delete")
    check(c.call(OPS["WRITE_BATCH"], D + struct.pack("<I", 0))[0] == INVALID_REQUEST, "empty batch")
    check(c.call(OPS["WRITE_BATCH"], D + struct.pack("<I", 10001))[0] == PAYLOAD_TOO_LARGE, "batch > 10000")
    check(c.call(OPS["WRITE_BATCH"], D + struct.pack("<I", 1) + b"\x07" + bytes_field("k"))[0] == INVALID_REQUEST,
          "batch bad kind")
    check(c.call(OPS["WRITE_BATCH"], D + struct.pack("<I", 2) + b"\x01" + bytes_field("k"))[0] == INVALID_REQUEST,
          "batch count beyond items")
    check(c.get("b1")[2] == b"last", "refused batches changed nothing")


def t_durability_flags(c, srv):
    check(c.set("d", "none", flags=NONE)[0] == OK, "durability none")
    # The default bucket (DATA.bucket) takes it; --no-bucket refuses it (e2e_bucket.py).
    st, p = c.set("d-bucket", "bucket", flags=BUCKET)
    check(st == OK, "bucket durability: %d %r" % (st, p))
    check(c.set("d", "x", flags=3)[0] == INVALID_REQUEST, "reserved durability")
    check(c.set("d", "x", flags=0x80)[0] == INVALID_REQUEST, "unknown flag bits")
    check(c.get("d")[2] == b"none", "refused writes changed nothing")


def t_malformed_keeps_connection(c, srv):
    st, p = c.call(0x7F)
    check(st == INVALID_REQUEST and b"unknown op" in p, "unknown op")
    check(c.call(OPS["GET"], D + bytes_field("a") + b"junk")[0] == INVALID_REQUEST, "trailing bytes")
    check(c.call(OPS["GET"], D + struct.pack("<I", 100) + b"ab")[0] == INVALID_REQUEST, "key past payload")
    check(c.call(OPS["GET"], b"\x00")[0] == INVALID_REQUEST, "empty db name")
    check(c.call(OPS["GET"], b"\x05ab")[0] == INVALID_REQUEST, "db name past payload")
    check(c.call(OPS["SET"], D + bytes_field("") + bytes_field("v"))[0] == INVALID_REQUEST, "empty key")
    check(c.call(OPS["PING"]) == (PONG, b""), "connection still usable")


def t_limits(c, srv):
    st, p = c.set("k" * 1025, "v")
    check(st == PAYLOAD_TOO_LARGE, "key over 1024 bytes: %d" % st)
    check(c.set("k" * 1024, "v")[0] == OK, "key of exactly 1024 bytes")
    st, p = c.set("big", b"v" * 4097)
    check(st == PAYLOAD_TOO_LARGE and b"value" in p, "value over --max-value 4K: %r" % p)
    check(c.set("big", b"v" * 4096)[0] == OK, "value of exactly the limit")
    # a frame over --max-frame (64K): refused, its payload skipped, the connection goes on
    big = 70000
    c.send(struct.pack("<BBI", OPS["SET"], 0, big) + b"z" * big + frame(OPS["PING"]))
    st, p = c.read_response()
    check(st == PAYLOAD_TOO_LARGE and b"frame limit" in p, "oversized frame: %r" % p)
    check(c.read_response() == (PONG, b""), "ping after the skipped frame")


def t_pipelining_in_order(c, srv):
    n = 2000
    reqs = []
    for i in range(n):
        if i % 3 == 0:
            reqs.append(frame(OPS["SET"], D + bytes_field("p%d" % i) + bytes_field("v%d" % i)))
        elif i % 3 == 1:
            reqs.append(frame(OPS["GET"], D + bytes_field("p%d" % (i - 1))))
        else:
            reqs.append(frame(OPS["PING"]))
    c.send(b"".join(reqs))
    last = 0
    for i in range(n):
        st, p = c.read_response()
        if i % 3 == 0:
            check(st == OK and token_of(p) > last, "pipelined set %d" % i)
            last = token_of(p)
        elif i % 3 == 1:
            check(st == KEY_VALUE_TOKEN and p[8:] == b"v%d" % (i - 1) and token_of(p) == last,
                  "pipelined get %d sees the write before it" % i)
        else:
            check(st == PONG, "pipelined ping %d" % i)


def t_pipeline_past_high_water(c, srv):
    """3000 Gets of a 4 KB value (this server's --max-value) sent at once: the answers pass the 8 MiB high water, reading
    pauses, and the frames read before the pause must run once the client reads (no new
    bytes arrive to wake the connection: the old code stalled here)."""
    big = b"b" * 4000
    check(c.set("big", big)[0] == OK, "set 4 KB")
    get = frame(OPS["GET"], db_field("default") + bytes_field("big"))
    c.send(get * 3000 + frame(OPS["PING"]))
    for i in range(3000):
        st, p = c.read_response()
        check(st == KEY_VALUE_TOKEN and p[8:] == big, "get %d of the pipeline" % i)
    check(c.read_response() == (PONG, b""), "the pipeline's last answer")


def t_split_frames(c, srv):
    data = frame(OPS["SET"], D + bytes_field("split") + bytes_field("value"))
    for b in data:
        c.send(bytes([b]))
        time.sleep(0.001)
    st, p = c.read_response()
    check(st == OK, "a frame sent a byte at a time")
    check(c.get("split")[2] == b"value", "and it was applied")


def t_garbage_does_not_hurt(c, srv):
    import random
    rng = random.Random(7)
    for _ in range(50):
        g = Conn(srv.port)
        g.send(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))))
        g.close()
    check(c.call(OPS["PING"]) == (PONG, b""), "server alive after garbage")
    check(c.get("split")[2] == b"value", "data intact after garbage")


def run_cli(srv, *args, stdin=None):
    p = subprocess.run([BIN, "kv", "--addr", "127.0.0.1:%d" % srv.port] + list(args),
                       input=stdin, capture_output=True, timeout=20)
    return p.returncode, p.stdout, p.stderr


def t_cli(c, srv):
    check(run_cli(srv, "ping")[0] == 0, "cli ping")
    rc, out, _ = run_cli(srv, "set", "cli-key", "cli-value")
    check(rc == 0 and out.strip().isdigit(), "cli set prints the token: %r" % out)
    rc, out, _ = run_cli(srv, "get", "cli-key")
    check(rc == 0 and out == b"cli-value\n", "cli get: %r" % out)
    rc, out, err = run_cli(srv, "get", "no-such-key")
    check(rc == 1 and out == b"", "cli get missing exits 1")
    check(run_cli(srv, "--db", "nodb", "get", "x")[0] == 1, "cli unknown db exits 1")
    rc, out, err = run_cli(srv, "frobnicate")
    check(rc == 2 and err, "cli unknown command exits 2 with a message")
    rc, out, _ = run_cli(srv, "batch", stdin=b"set b-1 one\nset b-2 two\ndel cli-key\n")
    check(rc == 0, "cli batch")
    check(c.get("b-2")[2] == b"two" and c.get("cli-key")[0] == KEY_NOT_FOUND, "cli batch applied")
    p = subprocess.run([BIN, "kv", "--addr", "127.0.0.1:1", "ping"], capture_output=True, timeout=20)
    check(p.returncode == 2 and p.stderr, "cli unreachable server exits 2")


def main():
    data = tempfile.mkdtemp(prefix="hanudb-proto-")
    srv = Server(data, ["--max-value", "4K", "--max-frame", "64K"])
    failures = 0
    try:
        srv.start()
        c = Conn(srv.port)
        tests = [t_ping_stats_close, t_databases, t_keys_and_tokens, t_batch, t_durability_flags,
                 t_malformed_keeps_connection, t_limits, t_pipelining_in_order, t_pipeline_past_high_water, t_split_frames,
                 t_garbage_does_not_hurt, t_cli]
        for t in tests:
            try:
                t(c, srv)
                print("ok   %s" % t.__name__)
            except Exception as e:  # noqa
                failures += 1
                print("FAIL %s: %s" % (t.__name__, e))
                c = Conn(srv.port)
        code = srv.stop()
        check(code == 0, "server exits 0 on SIGTERM, got %r" % code)
        # everything above survives a restart
        srv.start()
        c = Conn(srv.port)
        check(c.get("b-2")[2] == b"two", "data after restart")
        check(c.call(OPS["INFO"], db_field("users"))[0] == OK, "database after restart")
        srv.stop()
    finally:
        srv.kill()
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(data + ".bucket", ignore_errors=True)   # serve's default bucket, beside DATA
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
