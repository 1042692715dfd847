#!/usr/bin/env python3
"""e2e_ttl.py: per-key TTL in the store (docs/PROTOCOL.md SetTtl and Ttl, docs/FORMATS.md
op 6) with real processes.

- the binary protocol: SetTtl answers a token; Ttl answers the token, the absolute
  expiry and the ms left; a plain Set clears the expiry; ttl 0, a ttl over 100 years
  and a short payload are InvalidRequest; a lapsed key is KeyNotFound to Get and Ttl
  at once, counted by Info until the sweep deletes it (then keys_expired counts it);
- `hanudb kv set --ttl` and `hanudb kv ttl`, and their usage errors;
- kill -9: a key keeps its exact expiry across the restart; a key that lapsed while
  the server was down, with older plain puts of it in the log, stays gone after the
  restart, after the sweep's delete and another kill -9, and after an offline
  compaction (`hanudb compact`, hint files) and a restart, which keep the other
  expiries exact too;
- a rebuild from the bucket (data directory wiped, bucket-durable writes) holds the
  same expiries and hides the same lapsed key;
- a collection (the documents API's) takes no TTL: SetTtl answers InvalidRequest and a
  RESP SET EX there the Redis-style error; nothing is written.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hanukv import *  # noqa: E402,F401,F403
import hanuresp  # noqa: E402
from hanuhttp import HttpServer, Http  # noqa: E402

HOUR = 3600 * 1000


def info(c):
    st, p = c.call(OPS["INFO"], db_field("default"))
    check(st == OK, "info: %d %r" % (st, p))
    return json.loads(p)


def wait_until(cond, what, timeout=5.0):
    deadline = time.time() + timeout
    while not cond():
        check(time.time() < deadline, what)
        time.sleep(0.05)


def protocol(port):
    c = Conn(port)
    before = int(time.time() * 1000)
    st, p = c.set_ttl("a", "1", HOUR)
    check(st == OK and len(p) == 8, "SetTtl: %d %r" % (st, p))
    token = struct.unpack("<Q", p)[0]
    st, tok, expire, left = c.ttl("a")
    after = int(time.time() * 1000)
    check(st == OK and tok == token, "Ttl: %r" % ((st, tok),))
    check(before + HOUR <= expire <= after + HOUR, "expiry %d in [%d, %d]" % (expire, before + HOUR, after + HOUR))
    check(0 < left <= HOUR, "ms left %d" % left)
    check(c.get("a")[2] == b"1", "the value")
    st, p = c.set("a", "2")
    st, tok, expire, left = c.ttl("a")
    check(st == OK and expire == 0 and left == 0, "a plain Set clears the expiry: %r" % ((expire, left),))
    check(c.ttl("nokey")[0] == KEY_NOT_FOUND, "Ttl of nothing")
    check(c.ttl("a", db="nodb")[0] == DB_NOT_FOUND, "Ttl in no database")
    for bad, why in ((0, b"ttl must be"), (3153600000001, b"ttl must be")):
        st, p = c.set_ttl("b", "x", bad)
        check(st == INVALID_REQUEST and p.startswith(why), "ttl %d: %d %r" % (bad, st, p))
    st, p = c.call(OPS["SET_TTL"], db_field("default") + bytes_field("b") + b"\x01\x02")
    check(st == INVALID_REQUEST and p == b"missing ttl", "short payload: %d %r" % (st, p))
    check(c.get("b")[0] == KEY_NOT_FOUND, "nothing written by refused SetTtls")
    keys = info(c)["keys"]
    check(c.set_ttl("lapse", "x", 200)[0] == OK, "SetTtl 200 ms")
    check(info(c)["expiring"] == 1, "Info counts the key with an expiry")
    time.sleep(0.25)
    check(c.get("lapse")[0] == KEY_NOT_FOUND and c.ttl("lapse")[0] == KEY_NOT_FOUND, "lapsed: absent at once")
    wait_until(lambda: info(c)["keys"] == keys, "the sweep never deleted the lapsed key")
    check(info(c)["expiring"] == 0, "nothing expiring left")
    st, p = c.call(OPS["STATS"])
    check(json.loads(p)["keys_expired"] == 1, "keys_expired: %r" % p)
    c.close()


def cli(port):
    kv = [BIN, "kv", "--addr", "127.0.0.1:%d" % port]

    def run(*args):
        r = subprocess.run(kv + list(args), capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout, r.stderr
    code, out, _ = run("set", "--ttl", "90s", "c", "v")
    check(code == 0 and out.strip().isdigit(), "kv set --ttl: %d %r" % (code, out))
    code, out, _ = run("ttl", "c")
    check(code == 0 and 89000 < int(out) <= 90000, "kv ttl: %d %r" % (code, out))
    code, out, _ = run("set", "c", "w")
    code, out, _ = run("ttl", "c")
    check(code == 0 and out == "none\n", "kv ttl without expiry: %r" % out)
    code, out, err = run("ttl", "nokey")
    check(code == 1 and "key not found" in err, "kv ttl of nothing: %d %r" % (code, err))
    for bad in ("0s", "10x", "-5", "101000000000s", ""):
        code, out, err = run("set", "--ttl", bad, "c", "v")
        check(code == 2 and "--ttl wants a duration" in err, "--ttl %r: %d %r" % (bad, code, err))
    code, out, err = run("get", "--ttl", "5s", "c")
    check(code == 2 and "--ttl applies to set only" in err, "--ttl on get: %r" % err)


def restarts(tmp):
    data = os.path.join(tmp, "restart")
    srv = Server(data, ["--no-bucket", "--file-size", "1M"])
    srv.start()
    c = Conn(srv.port)
    for i in range(3):
        check(c.set("gone", "plain-%d" % i)[0] == OK, "older plain puts")
    check(c.set_ttl("gone", "soon", 300)[0] == OK, "a key that lapses while the server is down")
    check(c.set_ttl("kept", "v", HOUR)[0] == OK, "a key with an hour to live")
    kept = c.ttl("kept")[2]
    # enough records to seal a file or two, so that compaction has work
    big = "z" * 1000
    for i in range(2500):
        c.send(frame(OPS["SET"], db_field("default") + bytes_field("fill%d" % (i % 600)) + bytes_field(big), NONE))
    for i in range(2500):
        check(c.read_response()[0] == OK, "fill")
    c.close()
    srv.kill()
    time.sleep(0.35)
    srv.start()
    c = Conn(srv.port)
    check(c.ttl("kept")[2] == kept, "the exact expiry after kill -9")
    check(c.get("gone")[0] == KEY_NOT_FOUND, "the lapsed key stays gone after the restart")
    wait_until(lambda: json.loads(c.call(OPS["STATS"])[1])["keys_expired"] == 1, "the sweep deletes it")
    c.close()
    srv.kill()
    srv.start()
    c = Conn(srv.port)
    check(c.get("gone")[0] == KEY_NOT_FOUND, "gone after the sweep's delete and another kill -9")
    c.close()
    srv.stop()
    r = subprocess.run([BIN, "compact", "--data", data, "--file-size", "1M"], capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, "hanudb compact: %s %s" % (r.stdout, r.stderr))
    hints = [f for f in os.listdir(os.path.join(data, "log")) if f.endswith(".hint")]
    check(hints, "compaction wrote hint files")
    srv.start()
    c = Conn(srv.port)
    check(c.ttl("kept")[2] == kept, "the exact expiry after compaction and hints")
    check(c.get("gone")[0] == KEY_NOT_FOUND, "gone after compaction")
    check(c.get("fill7")[2] == big.encode(), "other keys intact")
    c.close()
    srv.stop()


def rebuild(tmp):
    data = os.path.join(tmp, "rebuild")
    srv = Server(data, ["--seal-interval-ms", "50"])
    srv.start()
    c = Conn(srv.port)
    check(c.set_ttl("kept", "v", HOUR, flags=BUCKET)[0] == OK, "bucket-durable SetTtl")
    check(c.set("plain", "p", flags=BUCKET)[0] == OK, "bucket-durable Set")
    check(c.set_ttl("lapsing", "l", 300, flags=BUCKET)[0] == OK, "a key that lapses")
    kept = c.ttl("kept")[2]
    c.close()
    srv.kill()
    shutil.rmtree(data)
    time.sleep(0.3)
    srv.extra.append("--takeover")
    srv.start(timeout=60)
    check("rebuilt from the bucket" in srv.tail(4000), "rebuilt: %s" % srv.tail(1000))
    c = Conn(srv.port)
    check(c.ttl("kept")[2] == kept, "the rebuilt expiry is the writer's")
    check(c.ttl("plain")[2] == 0, "no expiry stays none")
    check(c.get("lapsing")[0] == KEY_NOT_FOUND, "the lapsed key is hidden after the rebuild")
    c.close()
    srv.stop()


def collections(tmp):
    rport = free_port()
    srv = HttpServer(os.path.join(tmp, "col"), ["--no-bucket", "--resp-addr", "127.0.0.1:%d" % rport])
    srv.start()
    try:
        code, _, body = Http(srv.http_port).json("PUT", "/c/people/docs/ann", {"age": 31})
        check(code in (200, 201), "a collection: %d %r" % (code, body))
        c = Conn(srv.port)
        st, p = c.set_ttl("bob", '{"age":40}', HOUR, db="people")
        check(st == INVALID_REQUEST and p == b"a TTL is for key-value databases; this one is a collection",
              "SetTtl into a collection: %d %r" % (st, p))
        check(c.get("bob", db="people")[0] == KEY_NOT_FOUND, "nothing written")
        c.close()
        r = hanuresp.Conn(rport)
        check(r.call("SELECT", "people") == b"+OK\r\n", "SELECT a collection by name")
        got = r.call("SET", "bob", '{"age":40}', "EX", "100")
        check(got == b'-ERR per-key TTL is for key-value databases: "people" is a collection\r\n', "RESP: %r" % got)
        check(r.call("EXISTS", "bob") == b":0\r\n", "nothing written over RESP")
        r.close()
    finally:
        srv.stop()


def main():
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="hanudb-e2e-ttl-") as tmp:
        srv = Server(os.path.join(tmp, "d"), ["--no-bucket"])
        srv.start()
        try:
            protocol(srv.port)
            cli(srv.port)
        finally:
            srv.stop()
        restarts(tmp)
        rebuild(tmp)
        collections(tmp)
    print("e2e_ttl: ok in %.1f s" % (time.time() - t0))


if __name__ == "__main__":
    main()
