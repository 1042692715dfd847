"""`serve --bucket`: the sealer runs inside the server. A write at durability
`bucket` (both faces) is answered only once a segment holding its txn is in
the bucket (checked after a SIGKILL right after the answer, from the segment
headers on disk); an idle server sends nothing to the bucket; a second data
directory with writes of its own on the same bucket is fenced (exit status 3);
`hanudb audit` passes the chain and finds a flipped byte, a missing, reordered or
extra segment; with --no-bucket the level is refused; the bucket's root folder moved
away and replaced for a second answers no write at `bucket` until it is back."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, error_code

FENCED_EXIT = 3


def segment_headers(bucket_dir):
    """(sequence, first txn, last txn, records) of every segment object, in key order."""
    seg_dir = os.path.join(bucket_dir, "segments")
    out = []
    for name in sorted(os.listdir(seg_dir)) if os.path.isdir(seg_dir) else []:
        if not name.isdigit():
            continue
        with open(os.path.join(seg_dir, name), "rb") as f:
            h = f.read(96)
        check(h[:4] == b"HSEG" and h[4] == 1, "segment %s: magic and version" % name)
        seq, first, last, count = struct.unpack_from("<QQQI", h, 8)
        check(seq == int(name), "segment %s: sequence %d" % (name, seq))
        out.append((seq, first, last, count))
    return out


def status(h):
    st, _, body = h.json("GET", "/_status")
    check(st == 200, "status %d" % st)
    return body


def bucket_writes_wait_for_the_bucket(tmp):
    bdir = os.path.join(tmp, "bucket")
    url = "file://" + bdir
    srv = HttpServer(os.path.join(tmp, "data"), ["--bucket", url, "--seal-interval-ms", "100"])
    srv.start()
    try:
        c = Conn(srv.port)
        h = Http(srv.http_port)
        answered = []
        for i in range(5):
            st, p = c.set("k%d" % i, "v%d" % i, flags=BUCKET)
            check(st == OK, "kv set at bucket: %d %r" % (st, p))
            answered.append(token_of(p))
            st, _, body = h.json("PUT", "/c/docs/docs/d%d?durability=bucket" % i, {"n": i})
            check(st == 201, "doc put at bucket: %d %r" % (st, body))
            answered.append(body["txn"])
        # Killed right after the last answer: the bucket must already hold it.
        srv.kill()
        segs = segment_headers(bdir)
        check(segs, "segments in the bucket")
        check([s[0] for s in segs] == list(range(1, len(segs) + 1)), "sequences 1..n: %r" % segs)
        for a, b in zip(segs, segs[1:]):
            check(b[1] > a[2], "txns increase along the chain: %r" % segs)
        check(segs[-1][2] >= max(answered), "every bucket answer is in the bucket: last %d, answered %d"
              % (segs[-1][2], max(answered)))
        # A restart continues the chain; an idle server then sends nothing.
        srv.start()
        h = Http(srv.http_port)
        st0 = status(h)
        check(st0["bucket"]["sealed_txn"] == segs[-1][2] and st0["bucket"]["segment"] == len(segs),
              "status after restart: %r" % st0["bucket"])
        check("sealed_txn" in st0["watermarks"], "the sealer's watermark holds the floor: %r" % st0["watermarks"])
        a0 = st0["bucket"]["class_a"]
        time.sleep(1.0)   # ten seal intervals with nothing to seal
        st1 = status(h)
        check(st1["bucket"]["class_a"] == a0 and st1["bucket"]["segments_put"] == 0,
              "idle: no request (%r -> %r)" % (st0["bucket"], st1["bucket"]))
        st, _, body = h.call("GET", "/metrics")
        check(b"hanudb_bucket_sealed_txn %d" % segs[-1][2] in body, "metric hanudb_bucket_sealed_txn")
        check(srv.stop() == 0, "clean stop")
    finally:
        srv.kill()
    return bdir


def second_writer_is_fenced(tmp, bdir):
    # An empty data directory would rebuild from the bucket (e2e_rebuild.py): this one
    # holds its own write, so it is behind the bucket's chain.
    own = Server(os.path.join(tmp, "other"), ["--no-bucket"])
    own.start()
    check(Conn(own.port).set("mine", "1")[0] == OK, "a write of its own")
    check(own.stop() == 0, "clean stop")
    other = Server(os.path.join(tmp, "other"), ["--bucket", "file://" + bdir])
    check(other.start(expect_ok=False) is False, "a data directory behind the bucket does not start")
    code = other.proc.returncode if other.proc else other.kill()
    other.kill()
    check(code == FENCED_EXIT, "exit status %r, want %d: %s" % (code, FENCED_EXIT, other.tail()))
    check("bucket" in other.tail(), "says why: %s" % other.tail())


def audit(bdir):
    r = subprocess.run([BIN, "audit", "--bucket", "file://" + bdir], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def audit_finds_every_damage(tmp, bdir):
    segs = segment_headers(bdir)
    code, out = audit(bdir)
    check(code == 0 and ("chain ok: %d segments" % len(segs)) in out, "whole chain: %d %s" % (code, out))
    check(len(segs) >= 2, "at least two segments to damage: %r" % segs)

    def damaged(name, change):
        d = os.path.join(tmp, name)
        shutil.copytree(bdir, d)
        change(os.path.join(d, "segments"))
        return audit(d)

    def flip(sd):
        p = os.path.join(sd, "%020d" % 2)
        with open(p, "r+b") as f:
            f.seek(os.path.getsize(p) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x40]))
    code, out = damaged("flipped", flip)
    check(code == 1 and "segments/%020d" % 2 in out, "a flipped byte is found: %d %s" % (code, out))
    code, out = damaged("missing", lambda sd: os.remove(os.path.join(sd, "%020d" % 1)))
    check(code == 1 and "segments/%020d" % 2 in out, "a missing segment is found: %d %s" % (code, out))

    def swap(sd):
        a, b = os.path.join(sd, "%020d" % 1), os.path.join(sd, "%020d" % 2)
        os.rename(a, a + "x")
        os.rename(b, a)
        os.rename(a + "x", b)
    code, out = damaged("reordered", swap)
    check(code == 1, "reordered segments are found: %d %s" % (code, out))

    def extra(sd):
        with open(os.path.join(sd, "junk"), "wb") as f:
            f.write(b"x")
    code, out = damaged("extra", extra)
    check(code == 1 and "segments/junk" in out, "an extra object is found: %d %s" % (code, out))
    code, out = subprocess.run([BIN, "audit"], capture_output=True, text=True).returncode, ""
    check(code == 2, "audit without --bucket: usage error")


def refused_without_a_bucket(tmp):
    srv = HttpServer(os.path.join(tmp, "plain"), ["--no-bucket"])
    srv.start()
    try:
        st, p = Conn(srv.port).set("k", "v", flags=BUCKET)
        check(st != OK and b"--bucket" in p, "kv bucket level refused: %d %r" % (st, p))
        st, _, body = Http(srv.http_port).json("PUT", "/c/x/docs/a?durability=bucket", {})
        check(st == 501 and error_code(body) == "not_implemented", "http bucket level refused: %d" % st)
    finally:
        srv.kill()


def seal_mb_cuts_segments(tmp):
    """--seal-mb: the backlog found at an interval's tick is cut into segments of that many
    MB of records (6 MB written at once: at least 3 segments, not one per interval);
    out-of-range values are refused."""
    for bad in ("0", "65", "x"):
        r = subprocess.run([BIN, "serve", "--data", os.path.join(tmp, "never"), "--seal-mb", bad],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and "--seal-mb" in r.stderr, "--seal-mb %s: %d %r" % (bad, r.returncode, r.stderr))
    bdir = os.path.join(tmp, "bucket-mb")
    srv = HttpServer(os.path.join(tmp, "data-mb"), ["--bucket", "file://" + bdir, "--seal-mb", "1",
                                                     "--seal-interval-ms", "500"])
    srv.start()
    try:
        c = Conn(srv.port)
        for i in range(96):   # 6 MB of records (a segment may pass 1 MB by up to 31 records)
            st, p = c.set("big%d" % i, "%06d" % i * 10923)
            check(st == OK, "set: %d %r" % (st, p))
        h = Http(srv.http_port)
        for _ in range(200):
            if status(h)["bucket"]["segment"] >= 3:
                break
            time.sleep(0.05)
        segs = segment_headers(bdir)
        check(len(segs) >= 3 and segs[0][0] == 1, "segments cut by size, not one per interval: %r" % segs)
    finally:
        srv.kill()


def root_moved_away(tmp):
    """The bucket's root folder moved away for about a second while writers write at
    `bucket`, an empty folder put at its path for part of it: no write is answered at
    `bucket` while the path names no folder or another one (the sealer's puts fail and
    are retried), nothing lands in the stranger, and once the folder is back every
    answered write is in the chain and `audit` passes."""
    import threading
    bdir = os.path.join(tmp, "bucket-moved")
    away = bdir + "-away"
    srv = Server(os.path.join(tmp, "data-moved"), ["--bucket", "file://" + bdir, "--seal-interval-ms", "50"])
    srv.start()
    acks = []                       # (time answered, key, token)
    lock = threading.Lock()
    stop = threading.Event()
    failures = []

    def writer(n):
        c = Conn(srv.port, timeout=60)
        i = 0
        while not stop.is_set():
            key = "w%d-%d" % (n, i)
            st, p = c.set(key, "v" + key, flags=BUCKET)
            if st == OK:
                with lock:
                    acks.append((time.time(), key, token_of(p)))
            else:
                failures.append((key, st))
            i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    try:
        for t in threads:
            t.start()
        time.sleep(0.5)
        check(len(acks) > 0, "writes answered at bucket before the move")
        t_moved = time.time()
        os.rename(bdir, away)
        time.sleep(0.4)
        os.mkdir(bdir)                                  # a stranger at the path
        time.sleep(0.6)
        phantom = sorted(os.listdir(bdir))
        os.rmdir(bdir)
        t_back = time.time()
        os.rename(away, bdir)
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        check(not any(t.is_alive() for t in threads), "every writer got its answer after the folder came back")
        check(srv.proc.poll() is None, "the server is still running: %s" % srv.tail())
        check(phantom == [], "nothing written into the folder put at the path: %r" % phantom)
        log = srv.tail(200000)
        lines = [l for l in log.splitlines() if "was moved or replaced" in l]
        check(lines and len(lines) <= 4, "the failed puts are logged, rate limited: %d lines %r" % (len(lines), lines[:2]))
        # A segment whose put passed the check just before the rename is answered a moment
        # after it (its link and the folder's sync); it is in the real folder all the same.
        during = [a for a in acks if t_moved + 0.5 < a[0] < t_back]
        check(not during, "%d writes answered at bucket while the root was away: %r" % (len(during), during[:3]))
        after = [a for a in acks if a[0] >= t_back]
        check(after, "writes answered again once the root is back (%d before)" % len(acks))
        check(srv.stop() == 0, "clean stop")
    finally:
        stop.set()
        srv.kill()
    segs = segment_headers(bdir)
    seqs = [s[0] for s in segs]   # retention may have removed the start (snapshots): no hole after it
    check(seqs == list(range(seqs[0], seqs[0] + len(seqs))), "no hole in the chain: %r" % seqs)
    check(segs[-1][2] >= max(a[2] for a in acks), "every answered write is in the chain")
    code, out = audit(bdir)
    check(code == 0 and "chain ok" in out, "audit after the move: %d %s" % (code, out))
    restored = os.path.join(tmp, "restored-moved")
    r = subprocess.run([BIN, "restore", "--bucket", "file://" + bdir, "--to", restored, "--quiet"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "restore: %s" % r.stderr)
    r = subprocess.run([BIN, "dump", "--data", restored], capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "dump: %s" % r.stderr)
    missing = [a[1] for a in acks if a[1] not in r.stdout]
    check(not missing, "%d answered writes missing from a restore: %r" % (len(missing), missing[:3]))
    print("ok   root moved away %.1f s: %d writes answered at bucket, none while away, all in the chain; "
          "%d failed" % (t_back - t_moved, len(acks), len(failures)))


def fencing_probe_at_start(tmp):
    """A bucket that ignores conditional puts (simulated: --bucket-ignore-conditions) is
    refused at start by a writer and by a lease node, unless --unsafe-no-fencing; a
    follower, which writes nothing, is not probed."""
    bdir = os.path.join(tmp, "bucket-nofence")
    for extra in ([], ["--lease"]):
        srv = Server(os.path.join(tmp, "data-nofence%d" % len(extra)),
                     ["--bucket", "file://" + bdir, "--bucket-ignore-conditions"] + extra)
        check(srv.start(expect_ok=False) is False, "a bucket that cannot fence is refused %r" % extra)
        code = srv.kill()
        check(code == 2, "exit status %r: %s" % (code, srv.tail()))
        check("does not honour put-if-absent" in srv.tail() and "--unsafe-no-fencing" in srv.tail(),
              "says why and how to override: %s" % srv.tail())
    srv = Server(os.path.join(tmp, "data-nofence-unsafe"),
                 ["--bucket", "file://" + bdir, "--bucket-ignore-conditions", "--unsafe-no-fencing"])
    srv.start()
    try:
        st, p = Conn(srv.port).set("k", "v", flags=BUCKET)
        check(st == OK, "with --unsafe-no-fencing a bucket write works: %d %r" % (st, p))
        check(" WARN server: " in srv.tail() and "--unsafe-no-fencing" in srv.tail(), "warned: %s" % srv.tail())
        check(srv.stop() == 0, "clean stop")
    finally:
        srv.kill()
    check(not os.listdir(os.path.join(bdir, "probe")), "the probes cleaned up")
    srv = Server(os.path.join(tmp, "data-nofence-follower"),
                 ["--bucket", "file://" + bdir, "--bucket-ignore-conditions", "--follow"])
    srv.start()
    srv.kill()


def audit_finds_a_rewritten_segment(tmp, bdir, other_bdir):
    """A segment replaced by a well-formed segment of another chain with the same
    sequence (what two writers on a bucket that ignores put-if-absent do): its bytes
    hash to another trailer, so the next segment's previous hash does not verify."""
    for seq in (1, 2):
        d = os.path.join(tmp, "rewritten-%d" % seq)
        shutil.copytree(bdir, d)
        name = "%020d" % seq
        shutil.copyfile(os.path.join(other_bdir, "segments", name), os.path.join(d, "segments", name))
        code, out = audit(d)
        check(code == 1 and "previous hash" in out, "a rewritten segment %d is found: %d %s" % (seq, code, out))
        check(("segments/%020d" % (seq + 1)) in out or ("segments/%s" % name) in out, "named: %s" % out)


def bucket_timeouts_refused_out_of_range(tmp):
    for bad in (["--bucket-request-timeout-ms", "50"], ["--bucket-connect-timeout-ms", "700000"]):
        r = subprocess.run([BIN, "serve", "--data", os.path.join(tmp, "never")] + bad,
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and bad[0] in r.stderr, "%s: %d %r" % (bad, r.returncode, r.stderr))


def default_bucket_beside_relative_data(tmp):
    """--data ../NAME: the default bucket is NAME.bucket beside it, spelled without ".."
    (a file:// URL with ".." is refused)."""
    cwd = os.path.join(tmp, "cwd")
    os.mkdir(cwd)
    port = free_port()
    p = subprocess.Popen([BIN, "serve", "--data", "../rel", "--http-addr", "off", "--kv-addr", "127.0.0.1:%d" % port],
                         cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 15
        while time.time() < deadline and p.poll() is None:
            try:
                Conn(port, timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        check(p.poll() is None, "serve --data ../rel starts: %r" % (p.stderr.read() if p.poll() is not None else ""))
        check(os.path.isdir(os.path.join(tmp, "rel.bucket")), "the default bucket beside ../rel")
    finally:
        p.kill()
        p.wait()


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-bucket-")
    try:
        bdir = bucket_writes_wait_for_the_bucket(tmp)
        second_writer_is_fenced(tmp, bdir)
        audit_finds_every_damage(tmp, bdir)
        refused_without_a_bucket(tmp)
        seal_mb_cuts_segments(tmp)
        audit_finds_a_rewritten_segment(tmp, bdir, os.path.join(tmp, "bucket-mb"))
        root_moved_away(tmp)
        fencing_probe_at_start(tmp)
        bucket_timeouts_refused_out_of_range(tmp)
        default_bucket_beside_relative_data(tmp)
        print("ok   bucket durability, chain on disk, idle, fencing, audit, refusal, --seal-mb")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
