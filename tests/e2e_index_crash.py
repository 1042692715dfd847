"""The documents index survives SIGKILL (docs/INDEX.md, "Merges" and "The indexer").
A real server commits its index every 20 ms and merges slowly (the test-only
HANUDB_TEST_MERGE_DELAY_MS holds every merge 400 ms after its file is written), while
writer threads put, replace and delete documents over HTTP. It is killed with SIGKILL
at a random moment, right after an index commit (seen in _status), and in the middle
of a merge (its "merge ... started" line logged and its file on disk, no "merged"
line, and the next start removes the file no commit names). After each restart,
_find for a set of filters equals a brute-force evaluation (e2e_query.matches) over
every document fetched by id. Then a byte of a live segment is flipped: the start
says so, rebuilds with progress lines, _status reports rebuilt, and the answers are
still exact. Last, --no-index answers 503 index_off and a bad --merge-policy is refused."""
import os
import random
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import *  # noqa
from e2e_query import matches  # noqa
from hanukv import BIN  # noqa

IDS = 160
COL = "ev"
FILTERS = [
    {}, {"tag": "t1"}, {"n": {"$gte": 20, "$lt": 60}}, {"flag": True}, {"arr": 3},
    {"$or": [{"tag": "t0"}, {"n": {"$lt": 10}}]}, {"obj.x": {"$in": [1, 2]}},
    {"tag": {"$ne": "t2"}, "flag": False}, {"missing": {"$exists": False}, "n": {"$gt": 90}},
    {"$and": [{"arr": {"$gte": 2}}, {"tag": {"$in": ["t3", "t4"]}}]},
]


def make_doc(rnd, i):
    d = {"n": rnd.randrange(100), "tag": "t%d" % rnd.randrange(5), "flag": rnd.random() < 0.5,
         "obj": {"x": rnd.randrange(4)}, "text": "word%d other" % rnd.randrange(9)}
    if rnd.random() < 0.5:
        d["arr"] = [rnd.randrange(5), rnd.randrange(5)]
    return d


class Writers:
    """Threads that put, replace and delete until stopped or the server dies."""

    def __init__(self, port, n=3):
        self.stop = False
        self.acked = 0
        self.threads = [threading.Thread(target=self.run, args=(port, k), daemon=True) for k in range(n)]
        for t in self.threads:
            t.start()

    def run(self, port, k):
        rnd = random.Random(time.time() + k)
        try:
            h = Http(port, timeout=5)
            while not self.stop:
                i = rnd.randrange(IDS)
                if rnd.random() < 0.2:
                    st, _, _ = h.call("DELETE", "/c/%s/docs/d%03d" % (COL, i))
                else:
                    st, _, _ = h.call("PUT", "/c/%s/docs/d%03d" % (COL, i), make_doc(rnd, i))
                if st in (200, 201, 404):
                    self.acked += 1
        except Exception:  # noqa: the server was killed
            pass

    def join(self):
        self.stop = True
        for t in self.threads:
            t.join(timeout=10)


def status(h):
    st, _, b = h.json("GET", "/_status")
    check(st == 200, "status %d" % st)
    return b["index"]


def verify(srv, what):
    """_find equals the brute force over every document fetched by id."""
    h = Http(srv.http_port)
    st, _, b = h.json("PUT", "/c/%s/docs/marker" % COL, {"n": -1, "tag": "marker"})
    check(st in (200, 201), "marker put: %d %r" % (st, b))
    txn = b["txn"]
    docs = {}
    for i in list(range(IDS)) + ["marker"]:
        key = i if isinstance(i, str) else "d%03d" % i
        st, _, d = h.json("GET", "/c/%s/docs/%s" % (COL, key))
        check(st in (200, 404), "get %s: %d" % (key, st))
        if st == 200:
            docs[key] = d
    check(len(docs) > IDS // 3, "%s: documents survived (%d)" % (what, len(docs)))
    for f in FILTERS:
        want = sorted(k for k, d in docs.items() if matches(f, d))
        st, _, b = h.json("POST", "/c/%s/_find" % COL, {"filter": f, "limit": 1000, "min_txn": txn})
        check(st == 200, "%s: find %r: %d %r" % (what, f, st, b))
        got = [x["_id"] for x in b["hits"]]
        check(got == want, "%s: find %r: %d hits, brute force %d (first difference %r)" %
              (what, f, len(got), len(want), sorted(set(got) ^ set(want))[:5]))
        check(b["count"] == len(want), "%s: count %r" % (what, f))
    h.close()


def log_text(srv):
    with open(srv.log_path, "rb") as f:
        return f.read().decode(errors="replace")


def index_files(data):
    return set(os.listdir(os.path.join(data, "index")))


def run_main(tmp):
    data = os.path.join(tmp, "d")
    os.environ["HANUDB_TEST_MERGE_DELAY_MS"] = "400"
    srv = HttpServer(data, ["--index-commit-ms", "20"])
    rnd = random.Random(int(os.environ.get("SEED", time.time())))
    failures = 0
    kinds = ["random", "after-commit", "mid-merge", "random", "mid-merge"]
    for rnum, kind in enumerate(kinds):
        try:
            srv.start()
            h = Http(srv.http_port)
            w = Writers(srv.http_port)
            time.sleep(0.3)
            if kind == "random":
                if rnum == 0:   # first let merges install, so later starts load merged segments
                    deadline = time.time() + 15
                    while time.time() < deadline and len(re.findall(r"merged \d+ segment", log_text(srv))) < 2:
                        time.sleep(0.05)
                time.sleep(rnd.uniform(0.05, 0.8))
            elif kind == "after-commit":
                c0 = status(h)["commits"]
                while status(h)["commits"] == c0:
                    pass
            else:
                # Wait for a merge whose file is written but not installed.
                deadline = time.time() + 10
                target = None
                while time.time() < deadline and target is None:
                    log = log_text(srv)
                    started = re.findall(r"into (seg-\d+) started", log)
                    done = set(re.findall(r"into (seg-\d+):", log))
                    for s in started:
                        if s not in done and s + ".hix" in index_files(data):
                            target = s
                    time.sleep(0.01)
                check(target is not None, "a merge was under way")
            srv.kill()
            w.join()
            if kind == "mid-merge":
                log = log_text(srv)
                check(target + ".hix" in index_files(data), "the killed merge's file is there")
                check(not re.search(r"into %s:" % target, log), "the kill landed before the merge was installed")
            size = len(log_text(srv))
            srv.start()
            after = log_text(srv)[size:]
            if kind == "mid-merge":
                check(target + ".hix" not in index_files(data), "the unfinished merge's file is removed")
                check("no commit names" in after, "the start says it removed leftovers")
            verify(srv, "%s kill %d" % (kind, rnum))
            st = status(Http(srv.http_port))
            check(not st["rebuilt"] and not st["failed"], "the index was trusted: %r" % st)
            srv.kill()
            print("ok   %s kill (%d writes acknowledged)" % (kind, w.acked))
        except Exception as e:  # noqa
            failures += 1
            print("FAIL %s kill: %s" % (kind, e))
            srv.kill()
    # The merges happened and were installed across the runs.
    log = log_text(srv)
    merged = len(re.findall(r"merged \d+ segment", log))
    if merged < 2:
        failures += 1
        print("FAIL merges: only %d installed; log: %s" % (merged, log[-3000:]))
    else:
        print("ok   %d merges installed across the runs" % merged)

    # Damage: flip a byte in the largest live segment. A clean start and stop without
    # merges first removes what the last kill left behind (a merge's output no commit
    # names), so the file damaged is one the commit uses.
    try:
        quiet = HttpServer(data, ["--index-commit-ms", "20", "--merge-policy", "none"])
        quiet.start()
        check(quiet.stop() == 0, "clean stop before the damage")
        segs = sorted((f for f in index_files(data) if f.startswith("seg-")),
                      key=lambda f: os.path.getsize(os.path.join(data, "index", f)))
        check(segs, "segments on disk")
        path = os.path.join(data, "index", segs[-1])
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x10]))
        size = len(log_text(srv))
        srv.start()
        verify(srv, "after damage")
        # A fresh query is answered from a refresh, before the commit that ends the
        # rebuild logs "rebuild done" and clears `rebuilding`: wait for that commit.
        deadline = time.time() + 15
        while "rebuild done" not in log_text(srv)[size:] or status(Http(srv.http_port))["rebuilding"]:
            check(time.time() < deadline, "the rebuild never ended: %s" % log_text(srv)[size:][-2000:])
            time.sleep(0.05)
        after = log_text(srv)[size:]
        check(re.search(r"cannot be trusted \(.*%s" % re.escape(segs[-1]), after), "the damage is named: %s" % after)
        check(re.search(r"rebuilding: txn \d+ of \d+", after), "rebuild progress shown")
        check("rebuild done" in after, "rebuild done")
        st = status(Http(srv.http_port))
        check(st["rebuilt"] and not st["rebuilding"], "rebuilt in _status: %r" % st)
        srv.stop()
        print("ok   a damaged segment: detected, rebuilt with progress, reported, answers exact")
    except Exception as e:  # noqa
        failures += 1
        print("FAIL damage: %s" % e)
        srv.kill()   # the next part opens the same directory
    # Without the index: queries are refused plainly, documents still served.
    try:
        off = HttpServer(data, ["--no-index"])
        off.start()
        h = Http(off.http_port)
        st, _, b = h.json("POST", "/c/%s/_find" % COL, {"filter": {}})
        check(st == 503 and error_code(b) == "index_off", "find without the index: %d %r" % (st, b))
        st, _, b = h.json("GET", "/c/%s/docs/marker" % COL)
        check(st == 200 and b["tag"] == "marker", "get without the index: %d" % st)
        st, _, b = h.json("GET", "/_status")
        check(st == 200 and "index" not in b, "no index in _status")
        off.stop()
        bad = subprocess.run([BIN, "serve", "--data", data, "--merge-policy", "tiered"], capture_output=True)
        check(bad.returncode == 2 and b"--merge-policy must be" in bad.stderr, "bad --merge-policy: %r" % bad)
        print("ok   --no-index answers 503 index_off; a bad --merge-policy is refused")
    except Exception as e:  # noqa
        failures += 1
        print("FAIL no-index: %s" % e)
    # A write of the index that fails (its folder gone): the indexer stops, _status says
    # why, queries answer 503 index_failed, documents are still served; a restart with
    # the folder back resumes from the last commit and answers exactly.
    moved = os.path.join(data, "index.moved")
    try:
        srv = HttpServer(data, ["--index-commit-ms", "20", "--merge-policy", "none"])
        srv.start()
        h = Http(srv.http_port)
        st, _, b = h.json("PUT", "/c/%s/docs/before-failure" % COL, {"n": 1, "tag": "x"})
        check(st in (200, 201), "put: %d" % st)
        st, _, b = h.json("POST", "/c/%s/_find" % COL, {"filter": {"tag": "x"}, "min_txn": b["txn"]})
        check(st == 200 and b["count"] == 1, "find before the failure: %d %r" % (st, b))
        os.rename(os.path.join(data, "index"), moved)
        st, _, b = h.json("PUT", "/c/%s/docs/after-failure" % COL, {"n": 2, "tag": "y"})
        check(st in (200, 201), "a write while the index fails is still taken: %d" % st)
        txn = b["txn"]
        for _ in range(250):
            ix = status(h)
            if ix["failed"]:
                break
            time.sleep(0.02)
        check(ix["failed"] and "cannot write" in ix.get("failure", "") and "index" in ix["failure"],
              "the failure is reported with its reason: %r" % ix)
        st, _, b = h.json("POST", "/c/%s/_find" % COL, {"filter": {"tag": "y"}})
        check(st == 503 and error_code(b) == "index_failed", "find after the failure: %d %r" % (st, b))
        st, _, b = h.json("GET", "/c/%s/docs/after-failure" % COL)
        check(st == 200 and b["tag"] == "y", "get after the failure: %d" % st)
        srv.stop()
        os.rename(moved, os.path.join(data, "index"))
        srv = HttpServer(data, ["--index-commit-ms", "20"])
        srv.start()
        h = Http(srv.http_port)
        st, _, b = h.json("POST", "/c/%s/_find" % COL, {"filter": {"tag": "y"}, "min_txn": txn})
        check(st == 200 and [x["_id"] for x in b["hits"]] == ["after-failure"], "resumed: %d %r" % (st, b))
        check("failure" not in status(h) and not status(h)["failed"], "no failure after the restart")
        for doc in ("before-failure", "after-failure"):   # verify knows only its own documents
            st, _, _ = h.call("DELETE", "/c/%s/docs/%s" % (COL, doc))
            check(st == 200, "delete %s: %d" % (doc, st))
        verify(srv, "after the failed index write")
        srv.stop()
        print("ok   a failed index write: stopped, reason in _status, 503 index_failed, resumed after a restart")
    except Exception as e:  # noqa
        failures += 1
        print("FAIL failed index write: %s" % e)
        srv.kill()
    return failures


def main():
    run_suite("hanudb-index-crash-", run_main, [])


if __name__ == "__main__":
    main()
