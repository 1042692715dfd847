"""A follower that falls behind the bucket's retention (issue 26, item 4). The
follower is frozen (SIGSTOP) while the leader writes and snapshots until retention
has removed the segment it needs next; resumed (SIGCONT), it does not stay silent:
the log says "behind retention", `_status` shows `behind_retention:true`,
`poll_ok:false` and its real lag in txns, /metrics `hanudb_follower_behind_retention 1`,
and after its grace period it exits with status 7. Started again on the same data
directory (what a supervisor does), it discards that directory, re-boots from the
newest snapshot and then answers exactly as the leader. A standby behind retention
never promotes: it stops at once, and a promotion checks the chain's end itself."""
import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, run_suite

BEHIND_EXIT = 7
POLL_MS = 100


def status(port):
    st, _, body = Http(port).json("GET", "/_status")
    check(st == 200, "status %d" % st)
    return body


def segments(bdir):
    return sorted(int(n) for n in os.listdir(os.path.join(bdir, "segments")) if n.isdigit())


def write(port, prefix, n):
    h = Http(port)
    txn = 0
    for i in range(n):
        st, _, b = h.json("PUT", "/c/items/docs/%s%d?durability=bucket" % (prefix, i), {"n": i, "p": prefix})
        check(st in (200, 201), "write %s%d: %d %r" % (prefix, i, st, b))
        txn = b["txn"]
    return txn


def listing(port):
    st, _, b = Http(port).json("GET", "/c/items/docs?limit=1000")
    check(st == 200, "listing %d" % st)
    return b


def wait_txn(port, txn, bound=20):
    t0 = time.time()
    while time.time() - t0 < bound:
        if status(port)["txn"] >= txn:
            return
        time.sleep(0.05)
    raise AssertionError("at txn %d, want %d" % (status(port)["txn"], txn))


def run(tmp):
    bdir = os.path.join(tmp, "bucket")
    url = "file://" + bdir
    leader = HttpServer(os.path.join(tmp, "leader"), ["--bucket", url, "--seal-interval-ms", "50",
                                                      "--snapshot-segments", "0", "--retain", "0"])
    leader.start()
    txn = write(leader.http_port, "a", 5)
    fdir = os.path.join(tmp, "follower")
    follower = HttpServer(fdir, ["--bucket", url, "--follow", "--poll-ms", str(POLL_MS)])
    follower.start()
    wait_txn(follower.http_port, txn)
    fs = status(follower.http_port)["follower"]
    check(fs["behind_retention"] is False and fs["poll_ok"] is True, "a follower in step: %r" % fs)
    needed = fs["segment"] + 1

    # Frozen while the leader writes and snapshots: retention removes what it needs.
    follower.proc.send_signal(signal.SIGSTOP)
    for r in range(3):
        txn = write(leader.http_port, "r%d-" % r, 5)
        st, _, snap = Http(leader.http_port).json("POST", "/_admin/snapshot")
        check(st == 200, "snapshot %d: %d %r" % (r, st, snap))
    txn = write(leader.http_port, "last", 3)
    segs = segments(bdir)
    check(segs[0] > needed, "retention removed segment %d: the chain starts at %d" % (needed, segs[0]))
    time.sleep(0.5)   # a pause the follower notices: longer than two poll intervals and 250 ms
    follower.proc.send_signal(signal.SIGCONT)

    # It says so (log, _status, metrics) during its grace period, then exits 7.
    seen = None
    t0 = time.time()
    while time.time() - t0 < 10 and follower.proc.poll() is None:
        try:
            fs = status(follower.http_port)["follower"]
        except OSError:
            break
        if fs["behind_retention"]:
            seen = fs
            st, _, m = Http(follower.http_port).call("GET", "/metrics")
            metrics = m.decode()
            break
        time.sleep(0.05)
    check(seen is not None, "the follower never said it is behind retention: %r\n%s" % (fs, follower.tail()))
    check(seen["poll_ok"] is False and "behind retention" in seen["poll_error"], "_status: %r" % seen)
    check(seen["lag_txns"] == txn - seen["txn"] and seen["lag_txns"] > 0,
          "real lag: %r (leader at txn %d)" % (seen, txn))
    check("hanudb_follower_behind_retention 1" in metrics and "hanudb_follower_lag_txns %d" % seen["lag_txns"]
          in metrics, "metrics: %s" % [l for l in metrics.splitlines() if "follower" in l])
    follower.proc.wait(timeout=20)
    code = follower.kill()
    log = follower.tail(6000)
    check(code == BEHIND_EXIT, "exit status %r, want %d: %s" % (code, BEHIND_EXIT, log))
    check("ERROR follower: behind retention: applied up to segment %d" % (needed - 1) in log and
          "re-boots from the newest snapshot" in log, "the log says why: %s" % log)
    print("ok   frozen past retention (needed segment %d, the chain starts at %d): behind_retention, poll_ok false, "
          "lag %d txns, metric, exit %d" % (needed, segs[0], seen["lag_txns"], code))

    # Started again on the same directory: discards it and re-boots from the snapshot.
    logged = os.path.getsize(follower.log_path)
    follower.start(timeout=60)
    with open(follower.log_path, "rb") as f:
        f.seek(logged)
        boot = f.read().decode(errors="replace")
    check("is behind the bucket's retention" in boot and "rebuild: snapshot manifests/" in boot,
          "re-boot logged: %s" % boot)
    check(not os.path.exists(fdir + ".discarded"), "the stale directory is gone")
    wait_txn(follower.http_port, txn)
    fs = status(follower.http_port)["follower"]
    check(fs["behind_retention"] is False and fs["poll_ok"] is True and fs["txn"] == txn, "after re-boot: %r" % fs)
    check(listing(follower.http_port) == listing(leader.http_port), "the re-booted follower answers as the leader")
    print("ok   restarted: re-booted from the newest snapshot, at the leader's txn %d with the same documents" % txn)
    check(follower.stop() == 0, "follower stops cleanly")
    check(leader.stop() == 0, "leader stops cleanly")
    return 0


TTL_S = 2


def lease_node(tmp, name, url):
    srv = HttpServer(os.path.join(tmp, name), [])
    srv.extra += ["--bucket", url, "--lease", "--lease-ttl", str(TTL_S), "--poll-ms", str(POLL_MS),
                  "--seal-interval-ms", "50", "--snapshot-segments", "0", "--retain", "0",
                  "--advertise", "http://127.0.0.1:%d" % srv.http_port]
    return srv


def wait_role(srv, role, bound=20):
    t0 = time.time()
    while time.time() - t0 < bound:
        if status(srv.http_port)["role"] == role:
            return
        time.sleep(0.05)
    raise AssertionError("not %s after %d s: %r" % (role, bound, status(srv.http_port).get("lease")))


def standby_does_not_promote(tmp):
    """A standby frozen past retention whose leader then dies does not become the writer
    on its stale data: it exits 7 at once (before the lease expires: a promotion would
    refuse too, follower_finish checks the chain's end) and writes no segment; started again it re-boots from the snapshot and takes over
    with every write the old leader answered at `bucket`."""
    bdir = os.path.join(tmp, "lbucket")
    url = "file://" + bdir
    a, b = lease_node(tmp, "la", url), lease_node(tmp, "lb", url)
    a.start()
    wait_role(a, "leader")
    b.start()
    txn = write(a.http_port, "a", 3)
    wait_txn(b.http_port, txn)
    b.proc.send_signal(signal.SIGSTOP)
    for r in range(3):
        write(a.http_port, "r%d-" % r, 4)
        st, _, snap = Http(a.http_port).json("POST", "/_admin/snapshot")
        check(st == 200, "snapshot on the lease leader %d: %d %r" % (r, st, snap))
    txn = write(a.http_port, "last", 2)
    want = listing(a.http_port)
    a.kill()
    segs = segments(bdir)
    time.sleep(0.5)
    b.proc.send_signal(signal.SIGCONT)
    b.proc.wait(timeout=30)
    code = b.kill()
    check(code == BEHIND_EXIT, "standby's exit status %r, want %d: %s" % (code, BEHIND_EXIT, b.tail(3000)))
    check("accepting writes as the leader" not in b.tail(1 << 20), "the stale standby never led: %s" % b.tail())
    check(segments(bdir) == segs, "the stale standby wrote no segment")
    b.start(timeout=60)
    wait_role(b, "leader", bound=30)
    got = listing(b.http_port)
    check(got == want, "the re-booted standby leads with every write of the old leader: %r, want %r"
          % (str(got)[:300], str(want)[:300]))
    check(b.stop() == 0, "clean stop")
    print("ok   a standby frozen past retention does not promote on stale data (exit %d); restarted it re-boots "
          "from the snapshot and takes over with all %d documents" % (code, len(want["docs"])))


def promotion_refused(tmp):
    """The promotion itself checks the chain's end: a standby whose follower has not
    polled since retention removed its next segment (--poll-ms 60000) takes the expired
    lease, and its promotion refuses (exit 7) instead of continuing the chain from stale
    data; nothing is sealed."""
    bdir = os.path.join(tmp, "pbucket")
    url = "file://" + bdir
    a = lease_node(tmp, "pa", url)
    a.start()
    wait_role(a, "leader")
    write(a.http_port, "a", 3)
    b = lease_node(tmp, "pb", url)
    b.extra[b.extra.index("--poll-ms") + 1] = "60000"
    b.start()
    for r in range(3):
        write(a.http_port, "r%d-" % r, 4)
        st, _, snap = Http(a.http_port).json("POST", "/_admin/snapshot")
        check(st == 200, "snapshot %d: %d %r" % (r, st, snap))
    a.kill()
    segs = segments(bdir)
    b.proc.wait(timeout=30)
    code = b.kill()
    log = b.tail(1 << 20)
    check(code == BEHIND_EXIT, "exit status %r, want %d: %s" % (code, BEHIND_EXIT, log))
    check("promotion: cannot finish applying the chain: behind retention" in log and
          "accepting writes as the leader" not in log, "the promotion refused: %s" % log)
    check(segments(bdir) == segs, "nothing sealed by the refused promotion")
    with open(os.path.join(bdir, "lease")) as f:
        lease = json.load(f)
    check(lease["expires_ms"] == 0 and lease["term"] == 2, "the lease it took is handed back: %r" % lease)
    print("ok   a promotion on a standby behind retention refuses (exit %d), nothing sealed, lease released" % code)


if __name__ == "__main__":
    run_suite("behind-", run, [(standby_does_not_promote, "standby behind retention"),
                               (promotion_refused, "promotion behind retention refused")])
