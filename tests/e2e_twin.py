"""The twin-bucket drill (docs/BUCKET.md, "Twin buckets"), with real processes.

`serve --bucket file://A --bucket file://B`: documents and keys written, some at
durability `bucket`, overwrites and deletes, a snapshot in between; SIGKILL; the
folder of one bucket AND the data directory deleted entirely; serve started again
with both buckets rebuilds from the other one. Then:
- every bucket-acknowledged document and key is byte-identical, and the whole
  state (`hanudb dump`) equals every write made (the last one was at `bucket`,
  so the bucket holds all of them);
- the deleted folder holds every object the other one held before the start, byte
  for byte (re-mirrored), and after a clean stop both folders are identical;
- `hanudb audit` passes on each folder alone and on both as twins.
Run twice: first folder A deleted (the rebuild reads the second side), then B.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http
from e2e_export import audit, files_under  # noqa: the same listing and audit as the export test


def dumped(data):
    r = subprocess.run([BIN, "dump", "--data", data], capture_output=True, timeout=120)
    check(r.returncode == 0, "dump %s: %d %s" % (data, r.returncode, r.stderr))
    state = {}
    for line in r.stdout.decode().splitlines():
        o = json.loads(line)
        if "collection" in o:
            state[("doc", o["collection"], o["_id"])] = json.dumps(o["doc"], separators=(",", ":")).encode()
        else:
            state[("key", o["db"], o["key"])] = o["value"].encode()
    return state


class Writes:
    """Documents and keys through both faces; the expected state and what `bucket` acknowledged."""

    def __init__(self, srv, seed):
        self.h, self.c = Http(srv.http_port), Conn(srv.port)
        self.rng = random.Random(seed)
        self.state = {}          # what dump must show
        self.acked = set()       # entries last or once written by a write answered at `bucket`
        self.max_txn = 0

    def doc(self, doc_id, level):
        body = json.dumps({"_id": doc_id, "n": self.rng.randrange(10 ** 6), "s": "t" * self.rng.randrange(60)},
                          separators=(",", ":")).encode()
        st, _, ans = self.h.call("PUT", "/c/twin/docs/%s?durability=%s" % (doc_id, level), body)
        check(st in (200, 201), "put %s: %d %r" % (doc_id, st, ans))
        self.max_txn = max(self.max_txn, json.loads(ans)["txn"])
        self.state[("doc", "twin", doc_id)] = body
        if level == "bucket":
            self.acked.add(("doc", "twin", doc_id))

    def doc_delete(self, doc_id):
        st, _, ans = self.h.call("DELETE", "/c/twin/docs/%s" % doc_id)
        check(st in (200, 404), "delete %s: %d %r" % (doc_id, st, ans))
        self.state.pop(("doc", "twin", doc_id), None)
        self.acked.discard(("doc", "twin", doc_id))

    def key(self, key, level):
        value = ("v%d-" % self.rng.randrange(10 ** 6)) * self.rng.randrange(1, 8)
        st, p = self.c.set(key, value, flags=level)
        check(st == OK, "set %s: %d" % (key, st))
        self.max_txn = max(self.max_txn, token_of(p))
        self.state[("key", "default", key)] = value.encode()
        if level == BUCKET:
            self.acked.add(("key", "default", key))

    def key_delete(self, key):
        st, _ = self.c.delete(key)
        check(st in (OK, KEY_NOT_FOUND), "delete %s: %d" % (key, st))
        self.state.pop(("key", "default", key), None)
        self.acked.discard(("key", "default", key))

    def batch(self, n):
        for _ in range(n):
            r = self.rng.random()
            bucket = self.rng.random() < 0.2
            if r < 0.4:
                self.doc("d%d" % self.rng.randrange(50), "bucket" if bucket else "local")
            elif r < 0.5:
                self.doc_delete("d%d" % self.rng.randrange(50))
            elif r < 0.9:
                self.key("k%d" % self.rng.randrange(50), BUCKET if bucket else LOCAL)
            else:
                self.key_delete("k%d" % self.rng.randrange(50))


def drill(tmp, lost):
    """lost: 0 deletes the first bucket's folder, 1 the second's."""
    folders = [os.path.join(tmp, "side-a-%d" % lost), os.path.join(tmp, "side-b-%d" % lost)]
    data = os.path.join(tmp, "data-%d" % lost)
    args = ["--bucket", "file://" + folders[0], "--bucket", "file://" + folders[1], "--seal-interval-ms", "50"]
    srv = HttpServer(data, args)
    srv.start()
    try:
        w = Writes(srv, seed=11 + lost)
        w.batch(250)
        st, _, snap = w.h.json("POST", "/_admin/snapshot")
        check(st == 200 and snap["files_uploaded"] > 0, "snapshot on twins: %d %r" % (st, snap))
        w.batch(250)
        w.doc("last", "bucket")            # the bucket now holds every write above
    finally:
        srv.kill()                         # SIGKILL
    kept = files_under(folders[1 - lost])
    check(any(k.startswith("segments/") for k in kept) and any(k.startswith("manifests/") for k in kept),
          "the kept folder holds segments and a manifest: %d objects" % len(kept))
    shutil.rmtree(folders[lost])
    shutil.rmtree(data)

    srv = HttpServer(data, args + ["--takeover"])   # at once after the kill: the old writer is gone
    srv.start(timeout=60)
    try:
        log = srv.tail(1 << 22)
        check("rebuilding before serving" in log, "rebuilt: %s" % log)
        check("rebuild: snapshot manifests/" in log, "the rebuild used the snapshot: %s" % log)
        h = Http(srv.http_port)
        c = Conn(srv.port)
        # A key acknowledged at `bucket` and overwritten later at `local` must show the
        # later value: the final write at `bucket` covers everything before it.
        for (kind, space, name) in sorted(w.acked):
            body = w.state[(kind, space, name)]
            if kind == "doc":
                st, _, got = h.call("GET", "/c/%s/docs/%s" % (space, name))
                check(st == 200 and got == body, "bucket-acknowledged %s after the rebuild: %d %r, want %r"
                      % (name, st, got, body))
            else:
                st, _, got = c.get(name)
                check(st == KEY_VALUE_TOKEN and got == body, "bucket-acknowledged key %s: %d %r, want %r"
                      % (name, st, got, body))
        st, _, ans = h.json("PUT", "/c/twin/docs/after?durability=bucket", {"_id": "after"})
        check(st == 201 and ans["txn"] >= w.max_txn + (1 << 32), "a write after the rebuild: %d %r" % (st, ans))
        check(srv.stop() == 0, "clean stop")
    finally:
        srv.kill()
    log = srv.tail(1 << 22)
    copied = "copied %d to the first and %d to the second" % ((len(kept), 0) if lost == 0 else (0, len(kept)))
    check(copied in log, "the re-mirror log says '%s': %s" % (copied, log))
    got = dumped(data)
    got.pop(("doc", "twin", "after"), None)
    check(got == w.state, "dump after the rebuild equals every write: %d entries, want %d; differ %r" % (
        len(got), len(w.state), sorted(set(got.items()) ^ set(w.state.items()))[:3]))
    again = files_under(folders[lost])
    missing = [k for k, v in kept.items() if again.get(k) != v]
    check(not missing, "re-mirrored byte for byte: %d objects differ or are missing, first %s"
          % (len(missing), missing[:1]))
    other = files_under(folders[1 - lost])
    check(again == other and len(again) > len(kept), "both folders identical after the restart: %d and %d"
          % (len(again), len(other)))
    for dirs in ([folders[0]], [folders[1]], folders):
        code, out = audit(*dirs)
        check(code == 0, "audit %s: %d %s" % (dirs, code, out))
    print("ok   twin drill, %s folder and the data dir deleted: rebuilt from the other (%d entries, %d at bucket), "
          "%d objects re-mirrored, audit of each and both" % ("first" if lost == 0 else "second", len(w.state),
                                                              len(w.acked), len(kept)))


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-twin-")
    try:
        drill(tmp, 0)
        drill(tmp, 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
