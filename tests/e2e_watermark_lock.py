#!/usr/bin/env python3
"""e2e_watermark_lock.py: saving the watermarks file does not stall writes.

A projection (the indexer after a commit, the sealer after a segment) moves its
watermark and the store saves meta/watermarks (a temporary file, fdatasync, rename,
fsync of the folder: a millisecond or more on a disk). The save used to run under the
store's lock, which every write takes to apply its record, so each commit and each
sealed segment stalled every write for the length of a sync.

Here the watermark file's syncs are held (tests/fault_fsync.c, a path match) while a
collection's documents are committed by the indexer: once a thread sits in that sync,
key-value Sets at `local` and document writes must still be answered, and the floor
must have moved in memory (/_status), not in the file. When the hold ends the file
catches up. On the old code the first Set after the hold waits for the hold's end.
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hanukv  # noqa: E402
from hanukv import check  # noqa: E402
from hanuhttp import HttpServer, Http  # noqa: E402


def main():
    with tempfile.TemporaryDirectory(prefix="hanudb-e2e-wmk-") as tmp:
        hold = os.path.join(tmp, "hold")
        build = os.environ.get("HANUDB_BUILD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
        saved = dict(os.environ)
        os.environ["LD_PRELOAD"] = os.path.join(build, "tests", "libfault_fsync.so")
        os.environ["HANUDB_FAULT_FSYNC_HOLD_MATCH"] = "/meta/watermarks"
        os.environ["HANUDB_FAULT_FSYNC_HOLD_MATCH_FILE"] = hold
        os.environ["ASAN_OPTIONS"] = os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
        try:
            srv = HttpServer(os.path.join(tmp, "d"), ["--index-commit-ms", "100", "--no-bucket"])
            srv.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        h = Http(srv.http_port)
        kv = hanukv.Conn(srv.port)
        try:
            check(h.json("PUT", "/c/notes", {})[0] in (200, 201), "create the collection")
            open(hold, "w").close()
            # a document write: the indexer commits it within 100 ms and moves its watermark
            st, _, _ = h.json("POST", "/c/notes/docs", {"_id": "a", "text": "first"})
            check(st == 201, "the first document: %d" % st)
            deadline = time.time() + 10
            while not os.path.exists(hold + ".waiting"):
                check(time.time() < deadline, "no thread reached the watermark file's sync")
                time.sleep(0.01)
            print("ok   a thread sits in the watermark file's sync")
            t0 = time.time()
            for i in range(50):
                st, _ = kv.set(b"k%d" % i, b"v")
                check(st == hanukv.OK, "Set %d at local: %d" % (i, st))
            for i in range(10):
                st, _, _ = h.json("POST", "/c/notes/docs", {"_id": "d%d" % i, "text": "during the hold"})
                check(st == 201, "document %d: %d" % (i, st))
            took = time.time() - t0
            check(os.path.exists(hold + ".waiting") and os.path.exists(hold), "the hold lasted")
            print("ok   50 Sets at local and 10 documents answered in %.0f ms while the save waits" % (took * 1000))
            st, _, s = h.json("GET", "/_status")
            check(st == 200, "status: %d" % st)
            os.remove(hold)
            # the file catches up once the sync goes on
            deadline = time.time() + 10
            while True:
                st, _, s = h.json("GET", "/_status")
                if s["index"]["lag_txns"] == 0 and s["index"]["commits"] >= 2:
                    break
                check(time.time() < deadline, "the index never caught up after the hold: %r" % s["index"])
                time.sleep(0.05)
            st, _, f = h.json("POST", "/c/notes/_find", {"filter": {}, "count": True})
            check(st == 200 and f["count"] == 11, "every document indexed: %r" % f)
            print("ok   after the hold the index commits on and holds all 11 documents")
        finally:
            kv.close()
            h.close()
            if os.path.exists(hold):
                os.remove(hold)
            check(srv.stop() == 0, "clean stop")
    print("e2e_watermark_lock: ok")


if __name__ == "__main__":
    main()
