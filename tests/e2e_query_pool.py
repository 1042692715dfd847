"""Queries off the event loop (docs/QUERY.md, "Execution") against a real server:
a collection big enough that one _search scans for a good fraction of a second, then
- gets are not queued behind queries: with one query thread and four searches
  outstanding (the server's own counters say 1 running, 3 queued), a GET by id is
  answered, and the searches are still outstanding after it;
- overload: with --query-queue 2 full, more queries answer 503 overloaded with
  Retry-After, and hanudb_query_rejected_total counts exactly those;
- clients that close their socket mid-query (FIN and RST) break nothing: the others
  get exact answers, the counters return to zero, the server stops cleanly (exit 0);
- SIGTERM with queries queued: each gets its answer or 503 shutting_down, exit 0;
- the answers (hits, scores, aggregations, the listing, a 400 a worker finds) are
  byte-identical to those of --query-threads 0 over the same data."""
import http.client
import json
import os
import select
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanuhttp import HttpServer, Http, check, error_code, run_suite  # noqa

DOCS = 3000
WORDS = ["disk", "full", "write", "error", "slow", "answer", "node", "test", "quick", "brown", "fox",
         "lazy", "dog", "cache", "miss", "retry", "timeout", "queue", "worker", "thread"]
SLOW = {"q": "disk full write error", "limit": 5}   # held 300 ms on its worker (run_main)


def load(h, col="big"):
    txn = 0
    for start in range(0, DOCS, 3000):
        ops = []
        for i in range(start, min(DOCS, start + 3000)):
            words = " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] for k in range(12))
            ops.append({"op": "put", "id": "d%05d" % i,
                        "doc": {"user": "u%d" % (i % 50), "ts": 1700000000 + i, "kind": ["log", "http", "db"][i % 3],
                                "ms": i % 997, "tags": ["t%d" % (i % 5)], "msg": words}})
        st, _, body = h.json("POST", "/c/%s/_batch" % col, {"ops": ops})
        check(st == 200, "batch: %d %r" % (st, body))
        txn = body["txn"]
    return txn


class Pending:
    """One request sent on its own connection; the answer is read later."""

    def __init__(self, port, method, path, body=None):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        data = json.dumps(body).encode() if body is not None else None
        self.c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})

    def answered(self):
        """Whether any byte of the answer has arrived (never blocks)."""
        return bool(select.select([self.c.sock], [], [], 0)[0])

    def result(self):
        r = self.c.getresponse()
        data = r.read()
        hdrs = dict((k.lower(), v) for k, v in r.getheaders())
        self.c.close()
        return r.status, hdrs, data

    def drop(self, rst):
        if rst:   # RST instead of FIN
            self.c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.c.close()


def query_status(h):
    st, _, body = h.json("GET", "/_status")
    check(st == 200 and "query" in body, "status: %r" % body)
    return body["query"]


def wait_status(h, pred, what, limit=10.0):
    """Polls /_status (answered by the loop) until pred(query) holds."""
    deadline = time.time() + limit
    while time.time() < deadline:
        q = query_status(h)
        if pred(q):
            return q
        time.sleep(0.002)
    raise AssertionError("%s never held: %r" % (what, query_status(h)))


def metric(h, name):
    st, _, data = h.call("GET", "/metrics")
    check(st == 200, "metrics")
    for line in data.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError("no %s in /metrics" % name)


def requests(txn):
    """Requests whose answers must not depend on where they ran."""
    r = []
    for q in ["disk full", "+quick -lazy", "\"write error\"", "fox dog cache", "thread"]:
        r.append(("POST", "/c/big/_search", {"q": q, "limit": 7, "min_txn": txn}))
        r.append(("POST", "/c/big/_search", {"q": q, "limit": 3, "offset": 4, "filter": {"kind": "log"}}))
    r += [("POST", "/c/big/_find", {"filter": {"user": "u7"}, "sort": {"ts": -1}, "limit": 5}),
          ("POST", "/c/big/_find", {"filter": {"ms": {"$gte": 990}}, "sort": [{"ms": 1}, {"user": -1}],
                                    "limit": 30, "offset": 2}),
          ("POST", "/c/big/_find", {"filter": {"$or": [{"kind": "db"}, {"tags": "t3"}]}, "count": True}),
          ("POST", "/c/big/_find", {"filter": {"user": "u3"}, "sort": {"tags": 1}}),   # 400 found by the worker
          ("POST", "/c/big/_aggs", {"aggs": {"k": {"terms": {"field": "kind"}}, "s": {"stats": {"field": "ms"}},
                                             "h": {"histogram": {"field": "ms", "interval": 100},
                                                   "filter": {"kind": "http"}}}}),
          ("GET", "/c/big/docs?limit=50&after=d01234", None),
          ("GET", "/c/big/docs?limit=3", None),
          ("POST", "/c/nosuch/_find", {}),
          ("POST", "/c/big/_find", {"filter": {"$foo": 1}})]
    return r


def answers(port, txn):
    h = Http(port)
    out = []
    for m, p, b in requests(txn):
        st, _, data = h.call(m, p, b)
        out.append((st, data))
    h.close()
    return out


def start_slow(srv):
    """Every query on a worker takes 300 ms longer (a test-only hook of the pool), so that
    queries stay queued long enough to be seen, however fast the executor is."""
    os.environ["HANUDB_TEST_QUERY_DELAY_MS"] = "300"
    try:
        srv.start()
    finally:
        del os.environ["HANUDB_TEST_QUERY_DELAY_MS"]


def run_main(tmp):
    ddir = os.path.join(tmp, "d")
    srv = HttpServer(ddir, ["--query-threads", "1", "--query-queue", "64", "--index-commit-ms", "50",
                            "--query-inline-postings", "0"])
    start_slow(srv)
    h = Http(srv.http_port)
    txn = load(h)
    st, _, _ = h.json("POST", "/c/big/_find", {"count": True, "min_txn": txn})
    check(st == 200, "index caught up")
    q = query_status(h)
    check(q["threads"] == 1 and q["queue_cap"] == 64, "query pool in _status: %r" % q)

    # Gets are not queued behind queries: one running and three queued searches.
    expect = Http(srv.http_port).json("POST", "/c/big/_search", SLOW)
    slow = [Pending(srv.http_port, "POST", "/c/big/_search", SLOW) for _ in range(4)]
    wait_status(h, lambda q: q["running"] == 1 and q["queued"] == 3, "1 running, 3 queued")
    st, hd, body = h.json("GET", "/c/big/docs/d00042")
    check(st == 200 and body["msg"].startswith(WORDS[(42 * 7) % len(WORDS)]), "get: %d %r" % (st, body))
    q = query_status(h)
    check(q["running"] + q["queued"] >= 1 and not all(p.answered() for p in slow),
          "the get was answered while searches were outstanding: %r" % q)
    for p in slow:
        st, _, data = p.result()
        check(st == 200 and json.loads(data) == expect[2], "queued search answered exactly")
    print("ok   a get is answered while four searches are outstanding on one query thread")

    # Clients that leave mid-query: FIN and RST, queued and running.
    wants = {}
    for rnd in range(3):
        kept, dropped = [], []
        for i in range(12):
            body = SLOW if i % 3 == 0 else {"filter": {"user": "u%d" % i}, "sort": {"ts": 1}, "limit": 3}
            p = Pending(srv.http_port, "POST", "/c/big/_search" if i % 3 == 0 else "/c/big/_find", body)
            (kept if i % 2 else dropped).append((p, body))
        for i, (p, _) in enumerate(dropped):
            p.drop(rst=(i + rnd) % 2 == 0)
        for p, body in kept:
            st, _, data = p.result()
            key = json.dumps(body)
            if key not in wants:
                wants[key] = h.json("POST", "/c/big/_search" if "q" in body else "/c/big/_find", body)[2]
            check(st == 200 and json.loads(data) == wants[key], "a kept client's answer is exact")
    q = wait_status(h, lambda q: q["running"] == 0 and q["queued"] == 0, "the pool idle")
    check(q["cancelled"] >= 1, "cancelled jobs counted: %r" % q)
    check(metric(h, "hanudb_query_cancelled_total") == q["cancelled"], "cancelled in /metrics")
    print("ok   clients closing mid-query (FIN and RST): others exact, %d jobs cancelled" % q["cancelled"])

    jobs = metric(h, "hanudb_query_jobs_total")
    check(jobs == query_status(h)["jobs"] and jobs > 0, "jobs in /metrics and _status")
    h.close()
    check(srv.stop() == 0, "clean stop after cancelled queries: " + srv.tail())

    # Overload: one running, the queue of 2 full, then more.
    srv = HttpServer(ddir, ["--query-threads", "1", "--query-queue", "2", "--query-inline-postings", "0"])
    start_slow(srv)
    h = Http(srv.http_port)
    first = [Pending(srv.http_port, "POST", "/c/big/_search", SLOW)]
    wait_status(h, lambda q: q["running"] == 1, "1 running")
    first += [Pending(srv.http_port, "POST", "/c/big/_search", SLOW) for _ in range(2)]
    wait_status(h, lambda q: q["running"] == 1 and q["queued"] == 2, "1 running, 2 queued")
    burst = [Pending(srv.http_port, "POST", "/c/big/_search", SLOW) for _ in range(8)]
    refused = 0
    for p in first + burst:
        st, hd, data = p.result()
        if st == 503:
            body = json.loads(data)
            check(error_code(body) == "overloaded" and hd.get("retry-after") == "1", "503: %r %r" % (hd, body))
            refused += 1
        else:
            check(st == 200 and json.loads(data) == expect[2], "accepted query answered exactly")
    check(refused >= 1, "some of the burst was refused")
    check(metric(h, "hanudb_query_rejected_total") == refused == query_status(h)["rejected"],
          "rejections counted exactly (%d)" % refused)
    print("ok   a full queue answers 503 overloaded with Retry-After (%d of 8)" % refused)

    # SIGTERM with queries queued: answered (or 503 shutting_down), then exit 0.
    queued = [Pending(srv.http_port, "POST", "/c/big/_search", SLOW)]
    wait_status(h, lambda q: q["running"] == 1, "1 running")
    queued += [Pending(srv.http_port, "POST", "/c/big/_search", SLOW) for _ in range(2)]
    wait_status(h, lambda q: q["running"] + q["queued"] == 3, "3 in the pool")
    h.close()
    srv.proc.send_signal(signal.SIGTERM)
    for p in queued:
        st, _, data = p.result()
        check((st == 200 and json.loads(data) == expect[2]) or
              (st == 503 and error_code(json.loads(data)) == "shutting_down"), "answer at shutdown: %d" % st)
    check(srv.stop() == 0, "clean stop with queries queued: " + srv.tail())
    print("ok   SIGTERM with queries queued: each answered, exit 0")

    # The same answers as on the loop, and with the cheap ones on the loop (--query-inline-postings:
    # with a huge limit every find and search runs there but those whose filter has a range or $or).
    got, counts = {}, {}
    configs = {"2": ["--query-threads", "2", "--query-inline-postings", "0"], "0": ["--query-threads", "0"],
               "inline": ["--query-threads", "1", "--query-inline-postings", "1000000000"]}
    for name, args in configs.items():
        srv = HttpServer(ddir, args)
        srv.start()
        got[name] = answers(srv.http_port, txn)
        h = Http(srv.http_port)
        counts[name] = (metric(h, "hanudb_query_inline_total"), metric(h, "hanudb_query_jobs_total"))
        h.close()
        check(srv.stop() == 0, "clean stop")
    check(len(got["2"]) == len(requests(txn)), "every request answered")
    for other in ("0", "inline"):
        for i, (a, b) in enumerate(zip(got["2"], got[other])):
            check(a == b, "request %d differs between 2 query threads and %s: %r / %r" % (i, other, a[:1], b[:1]))
    statuses = sorted(set(a[0] for a in got["2"]))
    check(statuses == [200, 400, 404], "the requests cover answers and errors: %r" % statuses)
    # 10 searches and the 2 finds by user on the loop; the range, the $or, the aggregations and
    # the 2 listings on the worker; the 404 and the bad filter never reach either
    check(counts["inline"] == (12, 5), "inline and worker queries: %r" % (counts["inline"],))
    check(counts["2"] == (0, 17), "with --query-inline-postings 0 every query on a worker: %r" % (counts["2"],))
    print("ok   %d answers byte-identical with --query-threads 2, 0 and the cheap ones on the loop "
          "(12 on the loop, 5 on the worker)" % len(got["2"]))
    return 0


if __name__ == "__main__":
    run_suite("/tmp/qpool-e2e-", run_main, [])
