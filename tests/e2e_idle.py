#!/usr/bin/env python3
"""e2e_idle.py: an idle server costs (nearly) nothing, and wakes at once for a write.

- A server on the default settings (index, a local folder as the bucket, its lease)
  with a collection and documents: once caught up, over 2 s its indexer thread does
  not wake (it used to poll the change feed every 5 ms: about 400 wake-ups), no thread
  wakes more than about once a second (the event loop woke every 100 ms for the
  key-value expiry sweep and the lease; now once a second with no key that has an
  expiry, and when its lease would lapse), and the process uses at most a few ticks
  of CPU;
- the sleeping indexer wakes for the next append: a write's index lag goes back to 0
  within a second without any query asking (its safety-net wake-up is 60 s away),
  then a fresh _find and a key-value write (a database the index does not want) find
  it asleep again afterwards.
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hanuhttp import HttpServer, Http  # noqa: E402
from hanukv import check  # noqa: E402
import hanukv  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def threads(pid):
    """name -> (voluntary + involuntary context switches) of every thread."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                name = "%s/%s" % (f.read().strip(), tid)
            switches = 0
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
            out[name] = switches
        except FileNotFoundError:
            pass   # a thread that ended meanwhile
    return out


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def index_lag(h):
    st, _, body = h.json("GET", "/_status")
    check(st == 200, "/_status: %d" % st)
    return body["index"]["lag_txns"], body["txn"]


def settle(h, what):
    deadline = time.time() + 10
    while index_lag(h)[0] != 0:
        check(time.time() < deadline, "the index never caught up %s" % what)
        time.sleep(0.05)


def quiet_for(pid, seconds, what):
    before, c0 = threads(pid), cpu_ticks(pid)
    time.sleep(seconds)
    after, c1 = threads(pid), cpu_ticks(pid)
    woke = {n: after[n] - before[n] for n in after if n in before}
    indexer = [v for n, v in woke.items() if n.startswith("hanu-indexer/")]
    check(len(indexer) == 1, "one indexer thread: %r" % woke)
    check(indexer[0] <= 2, "%s: the idle indexer woke %d times in %.0f s: %r" % (what, indexer[0], seconds, woke))
    busiest = max(woke.values())
    check(busiest <= seconds * 3 + 3, "%s: a thread woke %d times in %.0f s: %r" % (what, busiest, seconds, woke))
    check(c1 - c0 <= 5, "%s: %d ticks of CPU (1/%d s) while idle" % (what, c1 - c0, TICK))
    return woke, c1 - c0


def main():
    with tempfile.TemporaryDirectory(prefix="hanudb-e2e-idle-") as tmp:
        srv = HttpServer(os.path.join(tmp, "d"))
        srv.start()
        h = Http(srv.http_port)
        try:
            pid = srv.proc.pid
            check(h.json("PUT", "/c/notes", {})[0] in (200, 201), "create the collection")
            for i in range(20):
                st, _, _ = h.json("POST", "/c/notes/docs", {"_id": "n%d" % i, "text": "hello idle world %d" % i})
                check(st == 201, "write %d: %d" % (i, st))
            settle(h, "after the first writes")
            time.sleep(2.0)   # the indexer's empty polls (100 ms), the sealer's last segment
            woke, ticks = quiet_for(pid, 2.0, "after the writes")
            print("ok   idle for 2 s: the indexer did not wake; %d ticks of CPU; wake-ups %r" % (ticks, woke))

            # The next write wakes it: its lag goes to 0 with no query asking.
            st, _, _ = h.json("POST", "/c/notes/docs", {"_id": "late", "text": "woken"})
            check(st == 201, "a write after the idle time: %d" % st)
            t0 = time.time()
            while index_lag(h)[0] != 0:
                check(time.time() - t0 < 1.0, "the sleeping indexer did not wake for a write (lag %r)" % (index_lag(h),))
                time.sleep(0.01)
            print("ok   a write wakes the sleeping indexer: caught up in %.0f ms" % ((time.time() - t0) * 1000))
            st, _, body = h.json("POST", "/c/notes/_find", {"filter": {"_id": "late"}})
            check(st == 200 and [d["_id"] for d in body["hits"]] == ["late"], "a fresh find: %d %r" % (st, body))

            # A key-value write (the index does not want its database) wakes it too; it
            # reads past it and sleeps again.
            kv = hanukv.Conn(srv.port)
            kv.set("k", "v")
            kv.close()
            settle(h, "after a key-value write")
            time.sleep(2.0)
            quiet_for(pid, 2.0, "after a key-value write")
            print("ok   after a key-value write it sleeps again")
        finally:
            h.close()
            srv.stop()
    print("e2e_idle: ok")


if __name__ == "__main__":
    main()
