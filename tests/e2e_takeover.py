"""A second writer started by mistake on an empty directory with a live writer's
bucket: it refuses to rebuild (exit status 6, naming the segment, its txn and
--takeover) and creates nothing, and the live writer keeps answering writes. With
--takeover it rebuilds and the older writer is fenced (exit 3) at its next seal. A
writer restarted on its own data directory right after a SIGKILL is no second writer
and starts; once the chain has not moved for longer than the window (10 s), an empty
directory rebuilds without --takeover."""
import os
import re
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, run_suite

WRITER_LIVE_EXIT = 6
FENCED_EXIT = 3
WINDOW_S = 10


def put(port, doc_id, n, durability="bucket"):
    st, _, body = Http(port).json("PUT", "/c/t/docs/%s?durability=%s" % (doc_id, durability), {"n": n})
    check(st in (200, 201), "put %s: %d %r" % (doc_id, st, body))
    return body["txn"]


def last_segment(bdir):
    names = sorted(n for n in os.listdir(os.path.join(bdir, "segments")) if n.isdigit())
    return int(names[-1])


def run(tmp):
    bdir = os.path.join(tmp, "bucket")
    url = "file://" + bdir
    a = HttpServer(os.path.join(tmp, "a"), ["--bucket", url, "--seal-interval-ms", "100"])
    a.start()
    put(a.http_port, "first", 0)

    # A keeps writing while B is started by mistake on an empty directory.
    stop = threading.Event()
    errors = []

    def writer():
        i = 0
        while not stop.is_set():
            try:
                put(a.http_port, "w%d" % i, i, "local")
            except Exception as e:  # noqa
                errors.append(e)
                return
            i += 1
            time.sleep(0.02)
    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.5)
    b_dir = os.path.join(tmp, "b")
    b = HttpServer(b_dir, ["--bucket", url])
    check(b.start(expect_ok=False) is False, "B must not start as a second writer")
    code = b.kill()
    log = b.tail()
    check(code == WRITER_LIVE_EXIT, "B's exit status %r, want %d: %s" % (code, WRITER_LIVE_EXIT, log))
    m = re.search(r"the bucket's chain was extended ([0-9.]+) s ago by another writer \(segment (\d+), txn (\d+)\)", log)
    check(m and float(m.group(1)) < WINDOW_S and "start with --takeover" in log, "B says why: %s" % log)
    check(int(m.group(2)) <= last_segment(bdir), "the segment named exists: %s" % m.group(0))
    check(not os.path.exists(b_dir), "B created nothing: %r" % (os.listdir(b_dir) if os.path.exists(b_dir) else None))
    time.sleep(0.3)
    stop.set()
    t.join()
    check(not errors, "A's writes during B's attempt: %r" % errors)
    check(a.proc.poll() is None, "A still runs")
    last_a = put(a.http_port, "after-b", 1)
    print("ok   B on an empty directory refused (exit %d, %s); A kept writing (txn %d)"
          % (code, m.group(0), last_a))

    # With --takeover B rebuilds, and A is fenced at its next seal.
    b = HttpServer(b_dir, ["--bucket", url, "--takeover", "--seal-interval-ms", "100"])
    b.start(timeout=60)
    check("rebuilt from the bucket" in b.tail(4000), "B rebuilt: %s" % b.tail())
    st, _, d = Http(b.http_port).json("GET", "/c/t/docs/after-b")
    check(st == 200 and d["n"] == 1, "B holds A's last bucket write: %d %r" % (st, d))
    put(b.http_port, "by-b", 2)
    try:
        Http(a.http_port, timeout=5).json("PUT", "/c/t/docs/late-a?durability=bucket", {"n": 3})
    except OSError:
        pass   # A may close the connection as it stops
    a.proc.wait(timeout=20)
    code = a.kill()
    check(code == FENCED_EXIT, "A's exit status %r, want %d: %s" % (code, FENCED_EXIT, a.tail()))
    print("ok   B with --takeover rebuilt; A was fenced (exit %d)" % code)

    # The same writer restarted on its own directory right away is no second writer.
    check(b.kill() is not None, "B killed")
    logged = os.path.getsize(b.log_path)
    b.start()
    with open(b.log_path, "rb") as f:
        f.seek(logged)
        restart_log = f.read().decode(errors="replace")
    check("rebuil" not in restart_log, "no rebuild on its own directory: %s" % restart_log)
    put(b.http_port, "by-b-again", 4)
    print("ok   B restarted on its own data directory within the window: starts and writes")

    # A fresh directory once the chain has been still longer than the window.
    b.stop()
    shutil.rmtree(b_dir)
    t0 = time.time()
    c = HttpServer(os.path.join(tmp, "c"), ["--bucket", url])
    while time.time() - t0 < WINDOW_S + 0.5:
        time.sleep(0.2)
    c.start(timeout=60)
    check("rebuilt from the bucket" in c.tail(4000), "C rebuilt: %s" % c.tail())
    for doc_id, n in [("by-b", 2), ("by-b-again", 4), ("after-b", 1)]:
        st, _, d = Http(c.http_port).json("GET", "/c/t/docs/" + doc_id)
        check(st == 200 and d["n"] == n, "%s on C: %d %r" % (doc_id, st, d))
    check(c.stop() == 0, "C stops cleanly")
    print("ok   after %d s without a new segment an empty directory rebuilds without --takeover" % WINDOW_S)
    return 0


if __name__ == "__main__":
    run_suite("takeover-", run, [])
