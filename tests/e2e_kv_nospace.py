"""No-space test: the data directory is a small tmpfs mounted by the test. Writes
past its size must fail with InternalError "no space left on device", only for
themselves: reads go on, nothing acknowledged is lost, no partial record is left
behind, and writes succeed again once space is freed. Run for every way the log
gets its blocks (append, fallocate, zerofill). Needs root for mount(8)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa

VALUE = 16 * 1024


TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (ERROR|WARN|INFO) [a-z]+: .+$")
NOSPACE_LINE = ('a write to database "default" failed: no space left on device '
                "(the data directory's disk is full)")


def check_log(srv, mode, fmt):
    """Every line of the server's log in the documented format (docs/OPERATIONS.md,
    "The log"), and the refused writes logged once (rate limited) with their cause."""
    with open(srv.log_path, "rb") as f:
        lines = f.read().decode().splitlines()
    check(lines, "%s: the log is empty" % mode)
    nospace = []
    for line in lines:
        if fmt == "json":
            o = json.loads(line)
            check(sorted(o) == ["level", "msg", "subsystem", "time"] and o["level"] in ("error", "warn", "info"),
                  "%s: log line %r" % (mode, line))
            if o["subsystem"] == "kv" and o["level"] == "error" and o["msg"].startswith(NOSPACE_LINE):
                nospace.append(line)
        else:
            check(TEXT_LINE.match(line), "%s: log line %r" % (mode, line))
            if (" ERROR kv: " + NOSPACE_LINE) in line:
                nospace.append(line)
    check(len(nospace) == 1, "%s: the full disk logged once in 10 s: %r" % (mode, nospace))


def run_mode(mode, fmt):
    mnt = tempfile.mkdtemp(prefix="hanudb-nospace-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt], check=True)
    try:
        filler = os.path.join(mnt, "filler")
        with open(filler, "wb") as f:
            f.write(b"\1" * (1024 * 1024))
        data = os.path.join(mnt, "data")
        srv = Server(data, ["--file-size", "512K", "--prealloc", mode, "--no-compaction", "--log-format", fmt])
        srv.start()
        c = Conn(srv.port)
        acked = {}
        failures = 0
        for i in range(400):
            k = "key-%04d" % i
            v = (b"%04d" % i) * (VALUE // 4)
            st, p = c.set(k, v)
            if st == OK:
                acked[k] = (v, token_of(p))
            else:
                check(st == INTERNAL_ERROR and b"no space" in p, "%s: write %d answered %d %r" % (mode, i, st, p))
                failures += 1
                if failures >= 5:
                    break
        check(failures >= 5, "%s: the tmpfs never filled up (%d acked)" % (mode, len(acked)))
        check(len(acked) > 20, "%s: too few writes before the disk filled: %d" % (mode, len(acked)))
        # reads go on, every acknowledged value is there
        for k, (v, t) in acked.items():
            check(c.get(k)[1:] == (t, v), "%s: read of %s while full" % (mode, k))
        check(c.call(OPS["PING"])[0] == PONG, "still serving")
        # free space: writes resume, with the next txn (no gap left by the failures)
        os.unlink(filler)
        last = max(t for _, t in acked.values())
        st, p = c.set("after-free", "yes")
        check(st == OK, "%s: write after freeing space answered %d %r" % (mode, st, p))
        check(token_of(p) == last + 1, "%s: failed writes used no txn (%d after %d)" % (mode, token_of(p), last))
        acked["after-free"] = (b"yes", token_of(p))
        c.close()
        check(srv.stop() == 0, "clean stop")
        # restart: the store opens (no partial record anywhere) and holds exactly the acked writes
        srv.start()
        c = Conn(srv.port)
        for k, (v, t) in acked.items():
            check(c.get(k)[1:] == (t, v), "%s: %s after restart" % (mode, k))
        st, _, _ = c.get("key-%04d" % len(acked))
        check(st == KEY_NOT_FOUND, "%s: a refused write is absent after restart" % mode)
        c.close()
        srv.stop()
        check_log(srv, mode, fmt)
        print("ok   %s: %d writes acknowledged, then 'no space left' (logged once, %s log), reads kept going, "
              "resumed after freeing" % (mode, len(acked) - 1, fmt))
    finally:
        subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(mnt, ignore_errors=True)


def main():
    if os.geteuid() != 0:
        print("this test mounts a tmpfs and must run as root")
        sys.exit(1)
    for mode, fmt in (("append", "text"), ("fallocate", "json"), ("zerofill", "text")):
        run_mode(mode, fmt)


if __name__ == "__main__":
    main()
