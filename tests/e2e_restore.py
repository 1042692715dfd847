"""Point-in-time restore (docs/BUCKET.md, "Restore"), with real processes.

A server writes a known history of documents and keys (puts, overwrites, deletes,
batches; every answer's txn recorded) into its bucket, in two phases with a time T
between them. Then `hanudb restore`:
- --txn N, for txns across the history (inside segments too): `hanudb dump` of the
  restored directory equals the state the test computes from every write <= N,
  exactly (documents byte for byte);
- --at T, as epoch ms and as RFC 3339 (UTC and with an offset): the state at the end
  of the first phase;
- the restored directory serves (`serve --no-bucket`);
- the bucket is unchanged (names, sizes, times) by every restore;
- refusals: a non-empty --to (2), --txn past the chain's end (1), --at with --txn
  (2), a malformed --at (2).
"""
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http


class History:
    """Writes through both faces and remembers (txn, changes) for each answer."""

    def __init__(self, srv):
        self.h = Http(srv.http_port)
        self.c = Conn(srv.port)
        self.log = []          # (txn, [(kind, id, bytes or None)])
        self.rng = random.Random(7)

    def doc_put(self, doc_id, level="local"):
        body = json.dumps({"_id": doc_id, "n": self.rng.randrange(10 ** 6), "s": "x" * self.rng.randrange(40)},
                          separators=(",", ":")).encode()
        st, _, ans = self.h.call("PUT", "/c/c/docs/%s?durability=%s" % (doc_id, level), body)
        check(st in (200, 201), "put: %d %r" % (st, ans))
        self.log.append((json.loads(ans)["txn"], [("doc", doc_id, body)]))

    def doc_delete(self, doc_id):
        st, _, ans = self.h.call("DELETE", "/c/c/docs/%s" % doc_id)
        if st == 404:
            return
        check(st == 200, "delete: %d %r" % (st, ans))
        self.log.append((json.loads(ans)["txn"], [("doc", doc_id, None)]))

    def doc_batch(self, ids):
        ops, changes = [], []
        for i in ids:
            doc = {"_id": i, "batch": True, "n": self.rng.randrange(100)}
            ops.append({"op": "put", "id": i, "doc": doc})
            changes.append(("doc", i, json.dumps(doc, separators=(",", ":")).encode()))
        st, _, ans = self.h.json("POST", "/c/c/_batch", {"ops": ops})
        check(st == 200, "batch: %d %r" % (st, ans))
        self.log.append((ans["txn"], changes))

    def key_set(self, key, level=LOCAL):
        value = ("v%d-" % self.rng.randrange(10 ** 6)) * self.rng.randrange(1, 5)
        st, p = self.c.set(key, value, flags=level)
        check(st == OK, "set: %d" % st)
        self.log.append((token_of(p), [("key", key, value.encode())]))

    def key_delete(self, key):
        st, p = self.c.delete(key)
        if st == OK:
            self.log.append((token_of(p), [("key", key, None)]))

    def random_ops(self, n):
        for _ in range(n):
            r = self.rng.random()
            if r < 0.35:
                self.doc_put("d%d" % self.rng.randrange(40))
            elif r < 0.45:
                self.doc_delete("d%d" % self.rng.randrange(40))
            elif r < 0.5:
                self.doc_batch(["d%d" % self.rng.randrange(40) for _ in range(3)])
            elif r < 0.85:
                self.key_set("k%d" % self.rng.randrange(30))
            else:
                self.key_delete("k%d" % self.rng.randrange(30))

    def state_at(self, txn):
        state = {}
        for t, changes in sorted(self.log, key=lambda e: e[0]):
            if t > txn:
                continue
            for kind, i, v in changes:
                if v is None:
                    state.pop((kind, i), None)
                else:
                    state[(kind, i)] = v
        return state


def run(args, **kw):
    return subprocess.run([BIN] + args, capture_output=True, timeout=120, **kw)


def dumped(dirname):
    r = run(["dump", "--data", dirname])
    check(r.returncode == 0, "dump %s: %d %s" % (dirname, r.returncode, r.stderr))
    state = {}
    for line in r.stdout.decode().splitlines():
        o = json.loads(line)
        if "collection" in o:
            check(o["collection"] == "c", "collection %r" % o)
            state[("doc", o["_id"])] = json.dumps(o["doc"], separators=(",", ":")).encode()
        else:
            check(o["db"] == "default", "db %r" % o)
            state[("key", o["key"])] = o["value"].encode()
    return state


def bucket_files(bdir):
    out = {}
    for root, _, files in os.walk(bdir):
        for f in files:
            p = os.path.join(root, f)
            st = os.stat(p)
            out[os.path.relpath(p, bdir)] = (st.st_size, st.st_mtime_ns)
    return out


class Overwriter(threading.Thread):
    """Overwrites and deletes a few keys and documents with large values on its own
    connections while a snapshot runs, so that log files fill, rotate and compact
    during it; its answers go into the shared history."""

    def __init__(self, srv, hist, seed):
        super().__init__(daemon=True)
        self.h, self.c, self.hist = Http(srv.http_port), Conn(srv.port), hist
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                i = self.rng.randrange(12)
                if self.rng.random() < 0.5:
                    value = "%d:" % self.rng.randrange(10 ** 6) + "o" * self.rng.randrange(300, 900)
                    st, p = self.c.set("ow%d" % i, value)
                    check(st == OK, "overwrite: %d" % st)
                    self.hist.log.append((token_of(p), [("key", "ow%d" % i, value.encode())]))
                elif self.rng.random() < 0.8:
                    body = json.dumps({"_id": "ow%d" % i, "pad": "p" * self.rng.randrange(300, 900),
                                       "n": self.rng.randrange(10 ** 6)}, separators=(",", ":")).encode()
                    st, _, ans = self.h.call("PUT", "/c/c/docs/ow%d" % i, body)
                    check(st in (200, 201), "overwrite doc: %d %r" % (st, ans))
                    self.hist.log.append((json.loads(ans)["txn"], [("doc", "ow%d" % i, body)]))
                else:
                    st, p = self.c.delete("ow%d" % i)
                    check(st in (OK, KEY_NOT_FOUND), "delete: %d" % st)
                    if st == OK:
                        self.hist.log.append((token_of(p), [("key", "ow%d" % i, None)]))
        except Exception as e:
            self.error = e


def snapshots_and_compaction(tmp):
    """--txn N is exact around every manifest while compaction runs: small log files
    (64K) overwritten and deleted into, background compaction at a 0.1 dead fraction,
    an offline `hanudb compact` between two runs, writes going on during each
    snapshot. Restores at N just below, at and just above each kept manifest's txn,
    and at random txns after the oldest kept one, each equal to the history's state."""
    bdir = os.path.join(tmp, "cbucket")
    url = "file://" + bdir
    data = os.path.join(tmp, "cdata")
    args = ["--bucket", url, "--seal-interval-ms", "30", "--file-size", "64K", "--compact-ratio", "0.1"]
    hist = None
    compactions = 0
    for run_ in range(2):
        srv = HttpServer(data, args)
        srv.start()
        if hist is None:
            hist = History(srv)
        else:
            hist.h, hist.c = Http(srv.http_port), Conn(srv.port)
        for batch in range(3):
            hist.random_ops(150)
            w = Overwriter(srv, hist, seed=run_ * 10 + batch)
            w.start()
            time.sleep(0.2)
            st, _, snap = Http(srv.http_port, timeout=120).json("POST", "/_admin/snapshot")
            w.stop.set()
            w.join()
            check(w.error is None, "overwriter: %r" % w.error)
            check(st == 200, "snapshot: %d %r" % (st, snap))
        hist.doc_put("run-%d-last" % run_, level="bucket")
        st, _, status = Http(srv.http_port).json("GET", "/_status")
        compactions += status["compactions"]
        check(srv.stop() == 0, "clean stop")
        if run_ == 0:   # compaction of everything sealed, merges included, between the runs
            r = run(["compact", "--data", data])
            check(r.returncode == 0, "hanudb compact: %s" % r.stderr)
    check(compactions > 0, "background compaction ran during the writes: %d" % compactions)
    txns = sorted(t for t, _ in hist.log)
    check(len(set(txns)) == len(txns), "txns never repeat")
    kept = sorted(int(m) for m in os.listdir(os.path.join(bdir, "manifests")))
    check(len(kept) == 6, "retention (--retain 24h by default) keeps all 6 manifests: %r" % kept)
    check(os.path.exists(os.path.join(bdir, "segments", "%020d" % 1)), "and the chain from segment 1")
    rng = random.Random(5)
    picks = set()
    for m in kept:
        picks.update([m, m + 1, max(t for t in txns if t < m)])
    picks.update(rng.sample([t for t in txns if t >= kept[0]], 5))
    picks.add(txns[-1])
    for n in sorted(picks):
        d = os.path.join(tmp, "c-txn-%d" % n)
        r = run(["restore", "--bucket", url, "--to", d, "--txn", str(n), "--quiet"])
        check(r.returncode == 0, "restore --txn %d: %d %s" % (n, r.returncode, r.stderr))
        got, want = dumped(d), hist.state_at(n)
        check(got == want, "state at txn %d (manifests %r): %d entries, want %d; differ: %r" % (
            n, kept, len(got), len(want), sorted(set(got.items()) ^ set(want.items()))[:4]))
    print("ok   restore --txn at %d points around 6 manifests, with %d background compactions and an offline one"
          % (len(picks), compactions))


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-restore-")
    try:
        snapshots_and_compaction(tmp)
        bdir = os.path.join(tmp, "bucket")
        url = "file://" + bdir
        srv = HttpServer(os.path.join(tmp, "data"), ["--bucket", url, "--seal-interval-ms", "30"])
        srv.start()
        hist = History(srv)
        hist.random_ops(120)
        hist.doc_put("phase-a-last", level="bucket")   # phase A is in the bucket
        time.sleep(0.1)
        t_ms = int(time.time() * 1000)
        time.sleep(0.1)
        hist.random_ops(120)
        hist.doc_put("phase-b-last", level="bucket")
        check(srv.stop() == 0, "clean stop")
        before = bucket_files(bdir)
        txns = [t for t, _ in hist.log]
        check(txns == sorted(txns) and len(set(txns)) == len(txns), "answers in txn order")
        phase_a_end = [t for t, ch in hist.log if ch[0][1] == "phase-a-last"][0]

        # --txn N: exactly the writes up to N.
        rng = random.Random(3)
        picks = sorted(set([txns[0], txns[-1], phase_a_end] + rng.sample(txns, 6)))
        for n in picks:
            d = os.path.join(tmp, "txn-%d" % n)
            r = run(["restore", "--bucket", url, "--to", d, "--txn", str(n), "--quiet"])
            check(r.returncode == 0, "restore --txn %d: %d %s" % (n, r.returncode, r.stderr))
            check(b"up to txn %d" % n in r.stdout, "restore --txn %d says where it stopped: %s" % (n, r.stdout))
            got, want = dumped(d), hist.state_at(n)
            check(got == want, "state at txn %d: %d entries, want %d; differ: %r" % (
                n, len(got), len(want), sorted(set(got.items()) ^ set(want.items()))[:4]))

        # --at T: the segments sealed at or before T hold phase A and nothing after.
        want = hist.state_at(phase_a_end)
        utc = datetime.datetime.fromtimestamp(t_ms / 1000, datetime.timezone.utc)
        east = utc.astimezone(datetime.timezone(datetime.timedelta(hours=2)))
        forms = [str(t_ms), utc.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t_ms % 1000),
                 east.strftime("%Y-%m-%dT%H:%M:%S.") + "%03d+02:00" % (t_ms % 1000)]
        for i, at in enumerate(forms):
            d = os.path.join(tmp, "at-%d" % i)
            r = run(["restore", "--bucket", url, "--to", d, "--at", at, "--quiet"])
            check(r.returncode == 0, "restore --at %s: %d %s" % (at, r.returncode, r.stderr))
            got = dumped(d)
            check(got == want, "state at %s: %d entries, want %d" % (at, len(got), len(want)))

        # The restored directory serves on its own.
        last = os.path.join(tmp, "txn-%d" % txns[-1])
        own = HttpServer(last, ["--no-bucket"])
        own.start()
        st, _, body = Http(own.http_port).call("GET", "/c/c/docs/phase-b-last")
        check(st == 200 and body == hist.state_at(txns[-1])[("doc", "phase-b-last")], "serves: %d %r" % (st, body))
        check(own.stop() == 0, "clean stop")
        check(not os.path.exists(last + ".bucket"), "--no-bucket made no bucket")

        # Refusals.
        r = run(["restore", "--bucket", url, "--to", last, "--txn", "1"])
        check(r.returncode == 2 and b"not empty" in r.stderr, "non-empty --to: %d %s" % (r.returncode, r.stderr))
        r = run(["restore", "--bucket", url, "--to", os.path.join(tmp, "past"), "--txn", str(txns[-1] + 5)])
        check(r.returncode == 1 and b"ends at txn %d" % txns[-1] in r.stderr,
              "--txn past the end: %d %s" % (r.returncode, r.stderr))
        check(not os.path.exists(os.path.join(tmp, "past")), "a failed restore leaves no --to behind")
        r = run(["restore", "--bucket", url, "--to", os.path.join(tmp, "new1", "new2", "past"), "--txn", str(txns[-1] + 5)])
        check(r.returncode == 1 and not os.path.exists(os.path.join(tmp, "new1")),
              "a failed restore removes the parents it created: %d %s" % (r.returncode, r.stderr))
        r = run(["restore", "--bucket", url, "--to", os.path.join(tmp, "both"), "--txn", "3", "--at", str(t_ms)])
        check(r.returncode == 2, "--at with --txn: %d" % r.returncode)
        r = run(["restore", "--bucket", url, "--to", os.path.join(tmp, "bad"), "--at", "yesterday"])
        check(r.returncode == 2 and b"RFC 3339" in r.stderr, "bad --at: %d %s" % (r.returncode, r.stderr))
        check(bucket_files(bdir) == before, "restore wrote nothing to the bucket")
        print("ok   restore --txn at %d points, --at in 3 forms, serve of a restored dir, refusals, bucket untouched"
              % len(picks))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
