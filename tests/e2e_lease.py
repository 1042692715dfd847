"""`serve --lease`: automatic failover between real processes on one file bucket.
Two nodes started at once: exactly one takes the lease and writes, the other is a
standby that answers writes with 421 and the leader's advertised URL. SIGKILL the
leader: a standby takes the lease, promotes itself and serves writes, and every
write the old leader answered at durability `bucket` is there; then the same again
with the new leader (two take-overs in a row). The twice-promoted leader snapshots
(POST /_admin/snapshot): its manifest is in the bucket and `hanudb restore` from it
gives exactly its documents and keys. A leader cut off from its bucket
(the folder moved away) stops and exits with status 5. A leader frozen (SIGSTOP)
past its lease is replaced, and when it resumes it writes nothing more to the chain:
it exits (4, or 3 if its sealer's put collided) and the chain stays linear."""
import http.client
import json
import os
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, error_code

TTL_S = 2
BOUND_S = 20          # generous bound for a take-over (TTL + 2 s expected)
LEASE_LOST_EXIT = 5
FENCED_EXIT = 3


def status(srv):
    st, _, body = Http(srv.http_port, timeout=5).json("GET", "/_status")
    check(st == 200, "status %d" % st)
    return body


def lease_node(tmp, name, url, seal_interval_ms=100):
    srv = HttpServer(os.path.join(tmp, name), [])
    srv.extra += ["--bucket", url, "--lease", "--lease-ttl", str(TTL_S), "--poll-ms", "100",
                  "--seal-interval-ms", str(seal_interval_ms), "--advertise", "http://127.0.0.1:%d" % srv.http_port]
    srv.name = name
    return srv


def leaders(nodes):
    return [n for n in nodes if n.proc and n.proc.poll() is None and status(n)["role"] == "leader"]


def wait_one_leader(nodes):
    t0 = time.time()
    while time.time() - t0 < BOUND_S:
        ls = leaders(nodes)
        if len(ls) == 1:
            return ls[0], time.time() - t0
        check(len(ls) < 2, "two leaders: %r" % [n.name for n in ls])
        time.sleep(0.05)
    raise AssertionError("no leader after %d s" % BOUND_S)


def write_acked(leader, prefix, n, acked):
    """Writes at durability bucket (both faces); records what was answered."""
    h = Http(leader.http_port)
    c = Conn(leader.port)
    for i in range(n):
        st, _, b = h.json("PUT", "/c/docs/docs/%s%d?durability=bucket" % (prefix, i), {"i": i, "p": prefix})
        check(st == 201, "bucket write on %s: %d %r" % (leader.name, st, b))
        acked["doc:%s%d" % (prefix, i)] = {"_id": "%s%d" % (prefix, i), "i": i, "p": prefix}
        st, p = c.set("%s%d" % (prefix, i), "v%d" % i, flags=BUCKET)
        check(st == OK, "kv bucket write on %s: %d %r" % (leader.name, st, p))
        acked["kv:%s%d" % (prefix, i)] = b"v%d" % i


def check_acked(node, acked):
    h = Http(node.http_port)
    c = Conn(node.port)
    for k, v in acked.items():
        kind, key = k.split(":", 1)
        if kind == "doc":
            st, _, d = h.json("GET", "/c/docs/docs/" + key)
            check(st == 200 and d == v, "acknowledged %s on %s: %d %r" % (key, node.name, st, d))
        else:
            st, _, p = c.get(key)
            check(st == KEY_VALUE_TOKEN and p == v, "acknowledged kv %s on %s: %d %r" % (key, node.name, st, p))


def segment_headers(bucket_dir):
    seg_dir = os.path.join(bucket_dir, "segments")
    out = []
    for name in sorted(os.listdir(seg_dir)):
        with open(os.path.join(seg_dir, name), "rb") as f:
            h = f.read(96)
        seq, first, last, _ = struct.unpack_from("<QQQI", h, 8)
        out.append((seq, first, last))
    return out


def check_linear(bucket_dir):
    segs = segment_headers(bucket_dir)
    check([s[0] for s in segs] == list(range(1, len(segs) + 1)), "sequences 1..n: %r" % segs)
    for a, b in zip(segs, segs[1:]):
        check(b[1] > a[2], "txns increase along the chain: %r %r" % (a, b))
    r = subprocess.run([BIN, "audit", "--bucket", "file://" + bucket_dir], capture_output=True, text=True)
    check(r.returncode == 0, "audit: %s %s" % (r.stdout, r.stderr))


def exit_code_within(node, seconds):
    try:
        return node.proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        raise AssertionError("%s still running after %d s" % (node.name, seconds))


def started_at_once_and_failover(tmp):
    bdir = os.path.join(tmp, "b1")
    url = "file://" + bdir
    nodes = [lease_node(tmp, n, url) for n in ("a", "b", "c")]
    for n in nodes[:2]:   # two at once: exactly one writer
        n.start()
    leader, _ = wait_one_leader(nodes[:2])
    time.sleep(TTL_S / 2)  # through renewals (every TTL / 3): still one
    leader2, _ = wait_one_leader(nodes[:2])
    check(leader2 is leader, "the leader changed without a failure")
    standby = [n for n in nodes[:2] if n is not leader][0]
    sst = status(standby)
    check(sst["role"] == "standby" and sst["lease"]["leader"] == "http://127.0.0.1:%d" % leader.http_port,
          "standby status %r" % sst.get("lease"))
    st, _, b = Http(standby.http_port).json("PUT", "/c/docs/docs/x", {"n": 1})
    check(st == 421 and error_code(b) == "not_leader" and b["error"]["leader"] == "http://127.0.0.1:%d"
          % leader.http_port, "write to the standby: %d %r" % (st, b))
    st, p = Conn(standby.port).set("x", "y")
    check(st == INVALID_REQUEST and p.startswith(b"not_leader: ") and
          p.endswith(b"http://127.0.0.1:%d" % leader.http_port), "kv write to the standby: %d %r" % (st, p))
    st, _, b = Http(standby.http_port).json("POST", "/_admin/snapshot")
    check(st == 421 and error_code(b) == "not_leader", "snapshot asked of the standby: %d %r" % (st, b))
    print("ok   two nodes started at once: exactly one writer; the standby answers 421 with its URL")

    nodes[2].start()
    acked = {}
    write_acked(leader, "one", 20, acked)
    alive = [n for n in nodes if n is not leader]
    for round_ in range(2):
        t0 = time.time()
        leader.kill()
        new, _ = wait_one_leader(alive)
        took = time.time() - t0
        check_acked(new, acked)
        write_acked(new, "r%d-" % round_, 10, acked)
        print("ok   take-over %d after SIGKILL: %s leads after %.2f s (TTL %d s), every bucket-acknowledged "
              "write is there, writes work" % (round_ + 1, new.name, took, TTL_S))
        alive = [n for n in alive if n is not new]
        leader = new
    st = status(leader)
    check(st["lease"]["term"] == 3 and st["txn"] > 2 * (1 << 32), "term 3, two numbering jumps: %r %d"
          % (st["lease"], st["txn"]))
    check_linear(bdir)   # before the snapshot's retention removes the chain's start
    snapshot_on_promoted(tmp, leader, bdir, acked)
    check(leader.stop() == 0, "clean stop of the promoted leader")
    segs = segment_headers(bdir)
    check([s[0] for s in segs] == list(range(segs[0][0], segs[0][0] + len(segs))), "sequences: %r" % segs)
    r = subprocess.run([BIN, "audit", "--bucket", url], capture_output=True, text=True)
    check(r.returncode == 0, "audit after the promoted leader's snapshot: %s %s" % (r.stdout, r.stderr))


def snapshot_on_promoted(tmp, leader, bdir, acked):
    """A promoted leader runs the snapshotter: POST /_admin/snapshot puts a manifest, and
    a restore from it is the leader's state."""
    st, _, snap = Http(leader.http_port, timeout=120).json("POST", "/_admin/snapshot")
    check(st == 200 and snap["files_uploaded"] > 0, "snapshot on the promoted leader: %d %r" % (st, snap))
    check(snap["manifest"] in ["manifests/" + m for m in os.listdir(os.path.join(bdir, "manifests"))],
          "the manifest %s is in the bucket" % snap["manifest"])
    check(snap["txn"] == status(leader)["txn"], "the manifest's txn %d is the leader's last" % snap["txn"])
    sn = status(leader)["bucket"].get("snapshot", {})
    check(sn.get("snapshots") == 1 and sn.get("last_txn") == snap["txn"], "_status counts it: %r" % sn)
    restored = os.path.join(tmp, "from-promoted")
    r = subprocess.run([BIN, "restore", "--bucket", "file://" + bdir, "--to", restored, "--txn", str(snap["txn"])],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and "rebuild: snapshot " + snap["manifest"] in r.stderr,
          "restore from the promoted leader's manifest: %d %s" % (r.returncode, r.stderr[-1500:]))
    r = subprocess.run([BIN, "dump", "--data", restored], capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "dump: %s" % r.stderr)
    got = {}
    for line in r.stdout.splitlines():
        o = json.loads(line)
        if "collection" in o:
            got["doc:" + o["_id"]] = dict(o["doc"], _id=o["_id"])
        else:
            got["kv:" + o["key"]] = o["value"].encode()
    want = {k: (dict(v, _id=v["_id"]) if k.startswith("doc:") else v) for k, v in acked.items()}
    check(got == want, "restored state equals the promoted leader's: %d entries, want %d; differ %r" % (
        len(got), len(want), sorted(set(got) ^ set(want))[:4]))
    print("ok   the promoted leader snapshots (%s, txn %d); restore --txn from it gives its %d documents and keys"
          % (snap["manifest"], snap["txn"], len(got)))


def cut_off_leader_exits(tmp):
    bdir = os.path.join(tmp, "b2")
    node = lease_node(tmp, "cut", "file://" + bdir)
    node.start()
    wait_one_leader([node])
    acked = {}
    write_acked(node, "c", 3, acked)
    os.rename(bdir, bdir + ".away")   # the bucket is gone for this node
    code = exit_code_within(node, BOUND_S)
    check(code == LEASE_LOST_EXIT, "exit status %r, want %d: %s" % (code, LEASE_LOST_EXIT, node.tail(600)))
    check("lost the lease" in node.tail(2000), "log says why: %s" % node.tail(600))
    node.kill()
    print("ok   a leader cut off from its bucket fences itself and exits %d" % LEASE_LOST_EXIT)


def frozen_leader_cannot_extend_chain(tmp):
    bdir = os.path.join(tmp, "b3")
    url = "file://" + bdir
    a, b = lease_node(tmp, "fa", url), lease_node(tmp, "fb", url)
    a.start()
    wait_one_leader([a])
    b.start()
    acked = {}
    write_acked(a, "f", 3, acked)
    a.proc.send_signal(signal.SIGSTOP)
    new, _ = wait_one_leader([b])
    check_acked(new, acked)
    write_acked(new, "after", 3, acked)
    # A write sent to the frozen leader waits in its socket; when it resumes it
    # must refuse it (its lease is past), not write it.
    old = Http(a.http_port)
    old.c.request("PUT", "/c/docs/docs/stale", body=b'{"n":1}', headers={"Content-Type": "application/json"})
    a.proc.send_signal(signal.SIGCONT)
    try:
        r = old.c.getresponse()
        stale_status, stale_body = r.status, r.read()
    except (OSError, http.client.HTTPException):
        stale_status, stale_body = None, b""
    check(stale_status in (421, None), "stale write on the resumed leader: %r %r" % (stale_status, stale_body))
    code = exit_code_within(a, BOUND_S)
    check(code in (LEASE_LOST_EXIT, FENCED_EXIT), "resumed old leader exit status %r: %s" % (code, a.tail(600)))
    a.kill()
    st, _, _ = Http(new.http_port).json("GET", "/c/docs/docs/stale")
    check(st == 404, "the stale write is nowhere: %d" % st)
    write_acked(new, "later", 3, acked)
    check_acked(new, acked)
    # A clean stop seals what is pending, then hands the lease on (written as expired).
    check(new.stop() == 0, "clean stop of the leader")
    with open(os.path.join(bdir, "lease")) as f:
        released = json.load(f)
    check(released["expires_ms"] == 0 and released["term"] == 2, "released lease: %r" % released)
    check_linear(bdir)
    print("ok   a frozen leader replaced while stopped answers %r to a write when it resumes, exits %d; "
          "the chain stays linear" % (stale_status, code))


def resumed_at_the_takeover_instant(tmp):
    """A frozen leader with a sealed-but-unput segment, resumed the moment the
    standby takes the lease: it must put nothing (its lease is past), exit 5, and
    leave the standby leading (it put its pending segment, the standby's promotion
    or first put collided with it, and the group was left without a leader)."""
    bdir = os.path.join(tmp, "b4")
    url = "file://" + bdir
    a, b = lease_node(tmp, "ra", url, seal_interval_ms=1500), lease_node(tmp, "rb", url)
    a.start()
    wait_one_leader([a])
    b.start()
    acked = {}
    write_acked(a, "r", 2, acked)              # in the bucket
    h = Http(a.http_port)
    for i in range(5):                         # `local`: in A's log, waiting for A's next seal
        st, _, body = h.json("PUT", "/c/docs/docs/pending%d" % i, {"i": i})
        check(st == 201, "local write: %d %r" % (st, body))
    segs_before = segment_headers(bdir)
    a.proc.send_signal(signal.SIGSTOP)
    deadline = time.time() + BOUND_S
    while "took the lease" not in b.tail(4000):
        check(time.time() < deadline, "b did not take the lease: %s" % b.tail(600))
        time.sleep(0.005)
    a.proc.send_signal(signal.SIGCONT)
    code = exit_code_within(a, BOUND_S)
    check(code == LEASE_LOST_EXIT, "resumed old leader exit status %r, want %d: %s" % (code, LEASE_LOST_EXIT,
                                                                                       a.tail(800)))
    a.kill()
    time.sleep(0.3)
    check(b.proc.poll() is None, "the standby that took over is running (exit %r): %s" % (b.proc.poll(), b.tail(800)))
    new, _ = wait_one_leader([b])
    check(segment_headers(bdir)[:len(segs_before)] == segs_before, "the chain before the freeze is intact")
    check_acked(new, acked)
    write_acked(new, "after", 3, acked)        # its puts do not collide: it leads for real
    time.sleep(0.5)
    check(new.proc.poll() is None, "the new leader is still running: %s" % new.tail(800))
    check_acked(new, acked)
    check(new.stop() == 0, "clean stop of the new leader")
    check_linear(bdir)
    print("ok   a frozen leader resumed as the standby takes over puts nothing, exits %d; the standby "
          "leads" % LEASE_LOST_EXIT)


def txns_never_repeat_after_an_unsealed_leadership(tmp):
    """A leader whose writes never reached the chain (killed before its first seal)
    handed out txns the next leader must not hand out again: numbering from the
    chain's end alone gave the next leader the very same range (found by
    e2e_lease_faults: 249 txns acknowledged twice). Ranges are claimed in the
    bucket (numbering/), so the third leader numbers above the second's claim."""
    bdir = os.path.join(tmp, "b5")
    url = "file://" + bdir
    a = lease_node(tmp, "ta", url)
    b = lease_node(tmp, "tb", url, seal_interval_ms=60000)   # never seals in this test
    c = lease_node(tmp, "tc", url)
    a.start()
    wait_one_leader([a])
    acked = {}
    write_acked(a, "t", 2, acked)
    b.start()
    a.kill()
    wait_one_leader([b])
    c.start()
    h = Http(b.http_port)
    b_txns = []
    for i in range(5):   # `local`: on b's disk only, never in the chain
        st, _, body = h.json("PUT", "/c/docs/docs/unsealed%d" % i, {"i": i})
        check(st == 201, "local write on b: %d %r" % (st, body))
        b_txns.append(body["txn"])
    b.kill()
    new, _ = wait_one_leader([c])
    h = Http(new.http_port)
    c_txns = []
    for i in range(5):
        st, _, body = h.json("PUT", "/c/docs/docs/after%d" % i, {"i": i})
        check(st == 201, "write on c: %d %r" % (st, body))
        c_txns.append(body["txn"])
    check(min(c_txns) > max(b_txns), "txns repeat: b answered %r, c answered %r" % (b_txns, c_txns))
    claims = sorted(os.listdir(os.path.join(bdir, "numbering")))
    check(len(claims) == 2 and int(claims[1]) == int(claims[0]) + (1 << 32), "claims %r" % claims)
    check(status(new)["lease"]["term"] == 3, "term 3: %r" % status(new)["lease"])
    check(new.stop() == 0, "clean stop")
    check_linear(bdir)
    print("ok   a leader that never sealed: the next one numbers above its claimed range (%d > %d)"
          % (min(c_txns), max(b_txns)))


if __name__ == "__main__":
    from hanuhttp import run_suite
    run_suite("lease-", lambda tmp: 0, [
        (started_at_once_and_failover, "failover"),
        (cut_off_leader_exits, "cut off"),
        (frozen_leader_cannot_extend_chain, "frozen"),
        (resumed_at_the_takeover_instant, "resumed at the takeover"),
        (txns_never_repeat_after_an_unsealed_leadership, "txns never repeat"),
    ])
