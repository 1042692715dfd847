"""`hanudb dump --data DIR`: every live document and key of a stopped server,
exactly, as JSON lines (collections with their stored bytes, key-value
databases with text or base64 keys and values, and expire_ms for a key with an
expiry: Redis lists are in e2e_resp_lists.py); refused while a server holds
the directory, naming `dump --bucket` with the server's default bucket; that
dump of the running server (a read snapshot from its bucket) equals the one of
the stopped directory and leaves no scratch directory; --db limits it to one
database; one summary line on stderr."""
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http


def dump(data, *extra):
    r = subprocess.run([BIN, "dump", "--data", data] + list(extra), capture_output=True, timeout=60)
    lines = [json.loads(l) for l in r.stdout.decode().splitlines()]
    return r.returncode, lines, r.stderr.decode()


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-dump-")
    data = os.path.join(tmp, "data")
    srv = HttpServer(data)
    try:
        srv.start()
        c = Conn(srv.port)
        check(c.call(OPS["CREATE"], db_field("bin"))[0] == OK, "create bin")
        check(c.set("text", "hello", db="bin")[0] == OK, "set text")
        check(c.set(b"\xff\x00k", b"\x01\x02\xff", db="bin")[0] == OK, "set binary")
        check(c.set("gone", "x", db="bin")[0] == OK and c.delete("gone", db="bin")[0] == OK, "set, delete")
        t0 = int(time.time() * 1000)
        check(c.set_ttl("ttl", "soon", 10 ** 9, db="bin")[0] == OK, "set with a TTL")
        h = Http(srv.http_port)
        docs = {"alice": '{"_id":"alice","name":"Alice","tags":["a","b"]}', "bob": '{"n":1}'}
        for i, d in docs.items():
            st, _, _ = h.call("PUT", "/c/users/docs/" + i, d)
            check(st in (200, 201), "put %s: %d" % (i, st))
        check(h.call("DELETE", "/c/users/docs/bob?durability=bucket")[0] == 200, "delete bob")   # all sealed
        code, _, err = dump(data)
        hint = "hanudb dump --bucket file://%s.bucket" % os.path.realpath(data)
        check(code == 2 and hint in err, "refused while the server runs, naming the way: %d %s" % (code, err))
        scratch = os.path.join(tmp, "scratch")
        os.mkdir(scratch)
        r = subprocess.run([BIN, "dump", "--bucket", "file://" + data + ".bucket", "--scratch", scratch],
                           capture_output=True, timeout=60)
        live = [json.loads(l) for l in r.stdout.decode().splitlines()]
        check(r.returncode == 0 and os.listdir(scratch) == [], "dump --bucket of a running server: %d %s %r" % (
            r.returncode, r.stderr, os.listdir(scratch)))
        check(r.stderr.decode().count("\n") == 1 and "records from" in r.stderr.decode(), "one line: %r" % r.stderr)
        check(srv.stop() == 0, "clean stop")

        code, lines, err = dump(data)
        check(code == 0, "dump: %d %s" % (code, err))
        users = [l for l in lines if l.get("collection") == "users"]
        check(len(users) == 1 and users[0]["_id"] == "alice", "one live document: %r" % users)
        st_alice = json.loads(docs["alice"])
        check(users[0]["doc"] == st_alice, "the stored document: %r" % users[0])
        kv = sorted((l for l in lines if l.get("db") == "bin"), key=lambda l: json.dumps(l, sort_keys=True))
        ttl = [l for l in kv if l.get("key") == "ttl"]
        check(len(ttl) == 1 and t0 + 10 ** 9 <= ttl[0].get("expire_ms", 0) <= int(time.time() * 1000) + 10 ** 9,
              "the key's expiry: %r" % ttl)
        kv = [l for l in kv if l.get("key") != "ttl"]
        want = sorted([{"db": "bin", "key": "text", "value": "hello"},
                       {"db": "bin", "key_base64": base64.b64encode(b"\xff\x00k").decode(),
                        "value_base64": base64.b64encode(b"\x01\x02\xff").decode()}],
                      key=lambda l: json.dumps(l, sort_keys=True))
        check(kv == want, "key-value lines: %r" % kv)
        check("%d records" % len(lines) in err and err.count("\n") == 1, "count on stderr: %s" % err)
        key = lambda l: json.dumps(l, sort_keys=True)
        check(sorted(live, key=key) == sorted(lines, key=key), "dump --bucket while running = dump --data after: %r"
              % live)
        code, only, _ = dump(data, "--db", "users")
        check(code == 0 and only == users, "--db users: %r" % only)
        code, _, err = dump(data, "--db", "nope")
        check(code == 1 and "nope" in err, "unknown --db: %d %s" % (code, err))
        print("ok   dump: %d lines, exact" % len(lines))
    finally:
        srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
