"""Retention by time and the oldest restorable point (docs/BUCKET.md, "Retention";
issue 26 item 8), with real processes.

The old failure: retention kept the newest three manifests, and snapshots came every
64 segments, so under small writes `restore --txn 50` failed after a minute with
"segment 1 is missing" and left files in --to. Here, with a snapshot every second:
- default retention (--retain 24h): after several snapshots every manifest and the
  chain from segment 1 are still there, and restores to the first txns and to a time
  just after the start equal the state the test computes from its answers;
- --retain 1s: restores older than the oldest kept manifest fail with exit 1 and
  "txn N is older than the oldest restorable point: txn T at TIME", for --txn and
  --at; --to is not created, or left existing and empty when it was; a retry at the
  point named succeeds into the same --to, and so does one of the whole chain;
- a restore that fails during the replay (a segment deleted) leaves --to empty too.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import check, BIN  # noqa
from hanuhttp import HttpServer, Http


def run(args):
    return subprocess.run([BIN] + args, capture_output=True, timeout=120)


class Writer(threading.Thread):
    """Small document puts, one after the other, remembering (txn, id, bytes, time)."""

    def __init__(self, port, tag):
        super().__init__(daemon=True)
        self.h = Http(port)
        self.tag = tag
        self.log = []
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            i = 0
            while not self.stop.is_set():
                body = json.dumps({"_id": "%s-%d" % (self.tag, i % 40), "i": i}, separators=(",", ":")).encode()
                st, _, ans = self.h.call("PUT", "/c/c/docs/%s-%d" % (self.tag, i % 40), body)
                if st not in (200, 201):
                    raise AssertionError("put: %d %r" % (st, ans))
                self.log.append((json.loads(ans)["txn"], "%s-%d" % (self.tag, i % 40), body, time.time()))
                i += 1
                time.sleep(0.005)
        except Exception as e:  # noqa
            self.error = e

    def state_at(self, txn):
        state = {}
        for t, doc_id, body, _ in self.log:
            if t <= txn:
                state[doc_id] = body
        return state


def dumped(d):
    r = run(["dump", "--data", d])
    check(r.returncode == 0, "dump %s: %d %s" % (d, r.returncode, r.stderr))
    out = {}
    for line in r.stdout.decode().splitlines():
        o = json.loads(line)
        out[o["_id"]] = json.dumps(o["doc"], separators=(",", ":")).encode()
    return out


def write_for(tmp, name, seconds, extra):
    bdir = os.path.join(tmp, name + ".bucket")
    srv = HttpServer(os.path.join(tmp, name), ["--bucket", "file://" + bdir, "--seal-interval-ms", "50",
                                               "--snapshot-interval", "1s"] + extra)
    srv.start()
    w = Writer(srv.http_port, name)
    start = time.time()
    w.start()
    time.sleep(seconds)
    w.stop.set()
    w.join()
    check(w.error is None, "writer: %r" % w.error)
    st, _, status = Http(srv.http_port).json("GET", "/_status")
    check(st == 200, "status")
    check(srv.stop() == 0, "clean stop")
    log = srv.tail()
    check("retention failed" not in log and "snapshot failed" not in log, "no failed snapshot: %s" % log[-2000:])
    return bdir, w, start, status["bucket"]["snapshot"]


def empty(d):
    return os.path.isdir(d) and os.listdir(d) == []


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-retain-")
    try:
        # Default retention: the start of the history stays restorable.
        bdir, w, start, snap = write_for(tmp, "keep", 6, [])
        mans = sorted(os.listdir(os.path.join(bdir, "manifests")))
        check(len(mans) >= 4, "a snapshot about every second: %r" % mans)
        check(snap["snapshots"] >= 4 and snap["retain_ms"] == 86400000 and snap["interval_ms"] == 1000,
              "status: %r" % snap)
        check(os.path.exists(os.path.join(bdir, "segments", "%020d" % 1)), "segment 1 kept")
        check(snap["oldest_txn"] == int(mans[0]), "status names the oldest manifest: %r %r" % (snap, mans))
        first = w.log[4][0]
        d = os.path.join(tmp, "keep-txn")
        r = run(["restore", "--bucket", "file://" + bdir, "--to", d, "--txn", str(first), "--quiet"])
        check(r.returncode == 0, "restore --txn %d: %d %s" % (first, r.returncode, r.stderr))
        check(dumped(d) == w.state_at(first), "state at txn %d" % first)
        at_ms = int((start + 0.3) * 1000)
        d = os.path.join(tmp, "keep-at")
        r = run(["restore", "--bucket", "file://" + bdir, "--to", d, "--at", str(at_ms), "--quiet"])
        check(r.returncode == 0, "restore --at START+0.3s: %d %s" % (r.returncode, r.stderr))
        got = dumped(d)
        # The segments sealed by then: the state after some write answered before that time.
        check(len(got) > 0 and any(got == w.state_at(t) for t, _, _, when in w.log if when * 1000 <= at_ms),
              "state at START+0.3s: %d documents" % len(got))
        print("ok   --retain 24h: %d manifests, segment 1 kept, restore --txn %d and --at START+0.3s" % (len(mans), first))

        # --retain 1s: older points are refused by name, --to stays as it was.
        bdir, w, start, snap = write_for(tmp, "short", 5, ["--retain", "1s"])
        url = "file://" + bdir
        mans = sorted(os.listdir(os.path.join(bdir, "manifests")))
        check(1 <= len(mans) <= 3, "old manifests deleted: %r" % mans)
        check(not os.path.exists(os.path.join(bdir, "segments", "%020d" % 1)), "segment 1 deleted")
        oldest = int(mans[0])
        early = w.log[2][0]
        missing = os.path.join(tmp, "never")
        r = run(["restore", "--bucket", url, "--to", missing, "--txn", str(early)])
        err = r.stderr.decode()
        m = re.search(r"txn %d is older than the oldest restorable point: txn (\d+) at (\S+Z) " % early, err)
        check(r.returncode == 1 and m and int(m.group(1)) == oldest, "too old --txn: %d %s" % (r.returncode, err))
        check("segment 1 is missing" not in err, "not reported as damage: %s" % err)
        check(not os.path.exists(missing), "--to not created")
        pre = os.path.join(tmp, "pre")
        os.mkdir(pre)
        r = run(["restore", "--bucket", url, "--to", pre, "--at", str(int((start + 0.2) * 1000))])
        err = r.stderr.decode()
        check(r.returncode == 1 and "is older than the oldest restorable point: txn %d at %s" % (oldest, m.group(2))
              in err, "too old --at: %d %s" % (r.returncode, err))
        check(empty(pre), "--to that existed empty is left empty")
        # A retry at the point named, then the whole chain, into the same --to.
        r = run(["restore", "--bucket", url, "--to", pre, "--txn", str(oldest), "--quiet"])
        check(r.returncode == 0, "retry --txn %d: %d %s" % (oldest, r.returncode, r.stderr))
        check(dumped(pre) == w.state_at(oldest), "state at the oldest point")
        r = run(["restore", "--bucket", url, "--to", pre + "-at", "--at", m.group(2), "--quiet"])
        check(r.returncode == 0, "--at the time named: %d %s" % (r.returncode, r.stderr))
        whole = os.path.join(tmp, "whole")
        r = run(["restore", "--bucket", url, "--to", whole, "--quiet"])
        check(r.returncode == 0 and dumped(whole) == w.state_at(w.log[-1][0]), "whole chain: %s" % r.stderr)
        print("ok   --retain 1s: %d manifests left; --txn %d and --at START+0.2s refused naming txn %d at %s; "
              "--to untouched; retries pass" % (len(mans), early, oldest, m.group(2)))

        # A failure during the replay also leaves --to as it was.
        broken = os.path.join(tmp, "broken.bucket")
        shutil.copytree(bdir, broken)
        segs = sorted(os.listdir(os.path.join(broken, "segments")))
        check(len(segs) >= 3, "segments: %r" % segs)
        # Only the oldest manifest left: the replay from it crosses the hole.
        for name in sorted(os.listdir(os.path.join(broken, "manifests")))[1:]:
            os.unlink(os.path.join(broken, "manifests", name))
        os.unlink(os.path.join(broken, "segments", segs[len(segs) // 2]))
        for to, pre_made in ((os.path.join(tmp, "b1"), False), (os.path.join(tmp, "b2"), True)):
            if pre_made:
                os.mkdir(to)
            r = run(["restore", "--bucket", "file://" + broken, "--to", to])
            check(r.returncode == 1 and b"missing" in r.stderr, "broken chain: %d %s" % (r.returncode, r.stderr))
            check(empty(to) if pre_made else not os.path.exists(to), "--to as it was: %r" % (
                os.listdir(to) if os.path.exists(to) else None))
            check(not os.path.exists(to + ".fetching"), "no staging left")
        print("ok   a restore that fails in the replay leaves --to as it was")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
