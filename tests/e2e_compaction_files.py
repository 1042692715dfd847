"""Compaction keeps the number of log files bounded: overwritten data in many
small files is compacted and merged in the background, and `_status` and
`/metrics` report the file count as it falls. The log alone (--no-bucket): the
sealer's watermark would hold the floor until it seals (e2e_bucket.py)."""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http


def status(h):
    st, _, body = h.call("GET", "/_status")
    check(st == 200, "status: %d" % st)
    return json.loads(body)


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-files-")
    srv = HttpServer(os.path.join(tmp, "data"), ["--file-size", "64K", "--prealloc", "append", "--no-bucket"])
    try:
        srv.start()
        c = Conn(srv.port)
        value = "x" * 400
        for i in range(3000):   # ~1.3 MB over 40 keys: ~20 files, nearly all dead
            check(c.set("k%d" % (i % 40), value, flags=NONE)[0] == OK, "set")
        check(c.set("last", "1")[0] == OK, "a synced write")
        h = Http(srv.http_port)
        st0 = status(h)
        before = st0["files"]
        # The documents index is the one projection (it skips key-value databases).
        check(set(st0["watermarks"]) <= {"index"} and st0["floor_txn"] <= st0["durable_txn"],
              "only the index registered: the floor is at most the durable txn (%r)" % st0)
        # Background compaction may already have started while the writes ran:
        # many files, or some compaction already done, both show the setup worked.
        check(before >= 15 or (before >= 5 and st0["compactions"] > 0),
              "many small files before compaction: %d (compactions %d)" % (before, st0["compactions"]))
        deadline = time.time() + 40
        after = before
        while time.time() < deadline:
            time.sleep(0.5)
            after = status(h)["files"]
            if after <= 4:
                break
        check(after <= 4, "files after background compaction and merging: %d (before %d)" % (after, before))
        st, _, body = h.call("GET", "/metrics")
        check(("hanudb_log_files %d" % after).encode() in body or b"hanudb_log_files " in body, "metric")
        for i in range(40):
            check(c.get("k%d" % i)[2] == value.encode(), "every live value kept")
        srv.kill()
        srv.start()
        c = Conn(srv.port)
        for i in range(40):
            check(c.get("k%d" % i)[2] == value.encode(), "every live value after a restart")
        srv.stop()
        print("ok   compaction and merging: %d files -> %d, values kept" % (before, after))
    finally:
        srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
