"""fsync-failure test (fsyncgate): when fdatasync fails, the write it covered is
never acknowledged, every later write is refused with "store stopped" until a
restart (even once the disk works again: no retry of the sync), reads go on,
and after a restart every write acknowledged before the failure is there.
The failure is injected with an LD_PRELOAD library (tests/fault_fsync.c) that
makes fdatasync return EIO while a trigger file exists."""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa

BUILD = os.environ.get("HANUDB_BUILD", os.path.join(ROOT, "build"))


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-fsync-")
    trigger = os.path.join(tmp, "fail-now")
    data = os.path.join(tmp, "data")
    os.environ["LD_PRELOAD"] = os.path.join(BUILD, "tests", "libfault_fsync.so")
    os.environ["HANUDB_FAULT_FSYNC_TRIGGER"] = trigger
    srv = Server(data, ["--file-size", "1M"])
    try:
        srv.start()
        del os.environ["LD_PRELOAD"]
        c = Conn(srv.port)
        acked = {}
        for i in range(50):
            st, p = c.set("k%d" % i, "v%d" % i)
            check(st == OK, "set before the failure")
            acked["k%d" % i] = ("v%d" % i).encode()
        open(trigger, "w").close()
        # The write whose sync fails: never an Ok.
        try:
            st, p = c.set("doomed", "x")
            check(st != OK, "a write covered by a failed fdatasync was acknowledged")
        except ConnectionError:
            pass   # closed without an answer: the outcome is unknown, not a success
        os.unlink(trigger)   # the disk "works" again: writes must still be refused
        time.sleep(0.1)
        c = Conn(srv.port)
        st, p = c.set("later", "y")
        check(st == INTERNAL_ERROR and b"stopped" in p, "write after failed sync: %d %r" % (st, p))
        st, p = c.call(OPS["CREATE"], db_field("x"))
        check(st == INTERNAL_ERROR, "create after failed sync: %d" % st)
        for k, v in acked.items():
            check(c.get(k)[2] == v, "reads go on after the failure")
        st, p = c.call(OPS["STATS"])
        check(json.loads(p)["store_failed"] is True, "stats say the store failed")
        check(" ERROR store: fdatasync of the active log file failed" in srv.tail(), "the server says why, at level ERROR")
        srv.kill()
        srv.start()
        c = Conn(srv.port)
        for k, v in acked.items():
            check(c.get(k)[2] == v, "acknowledged write %s after restart" % k)
        check(c.set("after-restart", "ok")[0] == OK, "writes work after a restart")
        srv.stop()
        print("ok   fsync failure: nothing acknowledged after it, writes refused until restart, reads kept going")
    finally:
        srv.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
