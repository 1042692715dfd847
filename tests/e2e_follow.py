"""`serve --follow`: a read-only replica of the bucket's chain, against a real leader
on a file bucket. Under a mixed load on the leader (documents, batches, deletes,
key-value sets) the follower reaches the leader's txn after the load stops, with the
same key-value values, documents, counts and query answers; writes to it get 421
not_leader over HTTP and InvalidRequest "not_leader: ..." over the key-value
protocol; `min_txn` on the follower waits until the txn is applied; `_status` and
/metrics show the role and the follower's position; a follower restarted on its own
data directory continues from it, and one started on an empty directory boots from
the bucket."""
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, error_code

POLL_MS = 100
CATCH_UP_BOUND_S = 20   # generous: the follower normally needs two poll intervals


def status(port):
    st, _, body = Http(port).json("GET", "/_status")
    check(st == 200, "status %d" % st)
    return body


def mixed_load(port, kv_port, seconds, seed):
    """Writers on the leader: document puts, batches, deletes, key-value sets."""
    stop = time.time() + seconds
    errors = []

    def docs_writer(n):
        rng = random.Random(seed + n)
        h = Http(port)
        while time.time() < stop:
            i = rng.randrange(300)
            r = rng.random()
            if r < 0.6:
                st, _, b = h.json("PUT", "/c/items/docs/d%d" % i,
                                  {"n": i, "group": "g%d" % (i % 7), "text": "word%d common" % (i % 13)})
            elif r < 0.8:
                ops = [{"op": "put", "id": "b%d" % rng.randrange(100), "doc": {"n": rng.randrange(1000)}}
                       for _ in range(5)]
                st, _, b = h.json("POST", "/c/items/_batch", {"ops": ops})
            else:
                st, _, b = h.json("DELETE", "/c/items/docs/d%d" % i)
                if st == 404:
                    st = 200
            if st not in (200, 201):
                errors.append((st, b))

    def kv_writer():
        rng = random.Random(seed + 99)
        c = Conn(kv_port)
        while time.time() < stop:
            st, p = c.set("k%d" % rng.randrange(200), "v%d" % rng.randrange(10 ** 6), flags=NONE)
            if st != OK:
                errors.append((st, p))

    threads = [threading.Thread(target=docs_writer, args=(n,)) for n in range(3)]
    threads.append(threading.Thread(target=kv_writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(not errors, "load errors: %r" % errors[:3])


def wait_caught_up(leader, follower):
    """Polls until the follower's txn equals the leader's (the leader idle); returns the seconds."""
    target = status(leader.http_port)["txn"]
    t0 = time.time()
    while time.time() - t0 < CATCH_UP_BOUND_S:
        if status(follower.http_port)["txn"] == target:
            return time.time() - t0
        time.sleep(0.02)
    raise AssertionError("follower at txn %d, leader at %d after %d s" %
                         (status(follower.http_port)["txn"], target, CATCH_UP_BOUND_S))


QUERIES = [
    ("/c/items/_find", {"filter": {"group": "g3"}, "sort": {"n": 1}, "limit": 1000}),
    ("/c/items/_find", {"filter": {"n": {"$gte": 100}}, "sort": {"n": -1}, "limit": 1000}),
    ("/c/items/_search", {"q": "common word5", "limit": 50}),
    ("/c/items/_aggs", {"aggs": {"by_group": {"terms": {"field": "group"}}}}),
]


def answers(port, min_txn):
    h = Http(port)
    out = []
    for path, body in QUERIES:
        body = dict(body, min_txn=min_txn)
        st, _, b = h.json("POST", path, body)
        check(st == 200, "%s: %d %r" % (path, st, b))
        b.pop("index_txn", None)
        out.append(b)
    st, _, listing = h.json("GET", "/c/items/docs?limit=1000")
    check(st == 200, "listing: %d" % st)
    out.append(listing)
    c = Conn(port_kv_of[port])
    out.append([c.get("k%d" % i) for i in range(200)])
    return out


port_kv_of = {}


def node(tmp, name, extra):
    srv = HttpServer(os.path.join(tmp, name), extra)
    port_kv_of[srv.http_port] = srv.port
    return srv


def run(tmp):
    url = "file://" + os.path.join(tmp, "bucket")
    leader = node(tmp, "leader", ["--bucket", url, "--seal-interval-ms", "100", "--retain", "0"])
    leader.start()
    h = Http(leader.http_port)
    st, _, first = h.json("PUT", "/c/items/docs/first", {"n": -1, "group": "g0", "text": "before"})
    check(st == 201, "first write %d" % st)
    follower = node(tmp, "follower", ["--bucket", url, "--follow", "--poll-ms", str(POLL_MS)])
    follower.start()
    fh = Http(follower.http_port)

    # Writes to a follower are refused, over both faces, and nothing is written.
    st, _, b = fh.json("PUT", "/c/items/docs/nope", {"n": 1})
    check(st == 421 and error_code(b) == "not_leader" and b["error"]["leader"] is None, "421: %d %r" % (st, b))
    for method, path, body in [("POST", "/c/items/docs", {"n": 1}), ("DELETE", "/c/items/docs/first", None),
                               ("POST", "/c/items/_batch", {"ops": []}), ("PUT", "/c/newcol", None),
                               ("DELETE", "/c/items", None)]:
        st, _, b = fh.json(method, path, body)
        check(st == 421 and error_code(b) == "not_leader", "%s %s: %d %r" % (method, path, st, b))
    c = Conn(follower.port)
    st, p = c.set("x", "y")
    check(st == INVALID_REQUEST and p.startswith(b"not_leader: "), "kv write: %d %r" % (st, p))
    st, p = c.call(OPS["CREATE"], db_field("newdb"))
    check(st == INVALID_REQUEST and p.startswith(b"not_leader: "), "kv create: %d %r" % (st, p))
    st, _, b = fh.json("POST", "/c/items/_find", {"filter": {}, "min_txn": first["txn"]})   # a POST that reads
    check(st == 200, "find on the follower: %d %r" % (st, b))
    print("ok   writes to a follower: 421 not_leader / InvalidRequest not_leader")

    mixed_load(leader.http_port, leader.port, 2.5, 7)
    took = wait_caught_up(leader, follower)
    ls, fs = status(leader.http_port), status(follower.http_port)
    check(fs["role"] == "follower" and ls["role"] == "leader", "roles %r %r" % (ls["role"], fs["role"]))
    check(fs["keys"] == ls["keys"] and fs["collections"] == ls["collections"],
          "counts: leader %d keys %d collections, follower %d %d" %
          (ls["keys"], ls["collections"], fs["keys"], fs["collections"]))
    check(fs["follower"]["txn"] == ls["txn"] and fs["follower"]["segment"] == ls["bucket"]["segment"],
          "follower position %r, leader bucket %r" % (fs["follower"], ls["bucket"]))
    a, b = answers(leader.http_port, ls["txn"]), answers(follower.http_port, ls["txn"])
    for i, (x, y) in enumerate(zip(a, b)):
        check(x == y, "answer %d differs:\n leader   %r\n follower %r" % (i, str(x)[:300], str(y)[:300]))
    print("ok   mixed load: follower at the leader's txn %d %.2f s after the load stopped (poll %d ms), "
          "same counts, documents, values and query answers" % (ls["txn"], took, POLL_MS))

    # min_txn on the follower waits until the txn is applied and indexed.
    st, _, w = h.json("PUT", "/c/items/docs/late", {"n": 5000, "group": "late", "text": "late"})
    check(st == 201, "late write %d" % st)
    st, _, q = fh.json("POST", "/c/items/_find", {"filter": {"group": "late"}, "min_txn": w["txn"]})
    check(st == 200 and [d["_id"] for d in q["hits"]] == ["late"] and q["index_txn"] >= w["txn"],
          "min_txn on the follower: %d %r" % (st, q))
    print("ok   min_txn on a follower waits until the txn is applied and indexed")

    st, _, m = fh.call("GET", "/metrics")
    text = m.decode()
    check('hanudb_role{role="follower"} 1' in text and "hanudb_follower_txn %d" % w["txn"] in text,
          "metrics: %s" % [l for l in text.splitlines() if "role" in l or "follower_txn" in l])

    # Restart on its own data directory: it continues from its txn.
    follower.stop()
    for i in range(5):
        st, _, _ = h.json("PUT", "/c/items/docs/r%d" % i, {"n": 6000 + i})
        check(st == 201, "write %d" % st)
    follower.start()
    took = wait_caught_up(leader, follower)
    fs = status(follower.http_port)
    check(fs["follower"]["records"] == 5, "a restarted follower replays only what is new: %r" % fs["follower"])
    st, _, d = Http(follower.http_port).json("GET", "/c/items/docs/r4")
    check(st == 200 and d["n"] == 6004, "r4 on the restarted follower: %d %r" % (st, d))
    print("ok   restarted follower continued from its own data directory")

    # A second follower on an empty directory boots from the whole chain.
    second = node(tmp, "second", ["--bucket", url, "--follow", "--poll-ms", str(POLL_MS)])
    second.start()
    wait_caught_up(leader, second)
    ls = status(leader.http_port)   # the writes since the first comparison included
    check(answers(second.http_port, ls["txn"]) == answers(leader.http_port, ls["txn"]),
          "a follower booted from an empty directory answers as the leader")
    print("ok   empty data directory: boots from the bucket")
    second.stop()

    # After a snapshot, retention removes the chain's start: a follower on an empty
    # directory then boots from the snapshot's files and follows the segments after it.
    st, _, snap = h.json("POST", "/_admin/snapshot")
    check(st == 200, "snapshot on the leader: %d %r" % (st, snap))
    st, _, w = h.json("PUT", "/c/items/docs/after-snapshot?durability=bucket", {"n": 7000, "group": "late"})
    check(st == 201, "write after the snapshot %d" % st)
    segs = sorted(n for n in os.listdir(os.path.join(tmp, "bucket", "segments")) if len(n) == 20 and n.isdigit())
    check(segs and not segs[0].endswith("00000001"), "retention removed segment 1: %r" % segs[:2])
    third = node(tmp, "third", ["--bucket", url, "--follow", "--poll-ms", str(POLL_MS)])
    third.start()
    wait_caught_up(leader, third)
    check("rebuild: snapshot manifests/" in third.tail(4000), "the third follower fetched the snapshot")
    ls = status(leader.http_port)
    check(answers(third.http_port, ls["txn"]) == answers(leader.http_port, ls["txn"]),
          "a follower booted from a snapshot answers as the leader")
    print("ok   empty data directory after retention: boots from the snapshot, then the chain")
    third.stop()
    follower.stop()
    check(leader.stop() == 0, "leader stopped cleanly")
    return 0


if __name__ == "__main__":
    from hanuhttp import run_suite
    run_suite("follow-", run, [])
