#!/usr/bin/env python3
"""resp-lists.py: what an LPUSH costs on the Redis face as the list grows
(docs/RESP.md, "Lists"). A list is kept in chunks (src/kvlist): a push writes the
edge chunk and the list's head (a few bytes per chunk), so the cost grows with the
list's chunk count only, by about 12 bytes per 256 elements. HanuDB is pinned to CPU 0 (taskset), this
client to CPU 1; for each length the list is first filled (RPUSH of 1 000 elements a
command), then up to OPS LPUSHes (fewer for the longest lists) of a 3-byte element are pipelined 50 at a time and the
server's CPU microseconds per push (utime+stime of /proc/PID/stat) and log bytes
per push (growth of the log, --prealloc append) are printed.

    BUILD=build python3 bench/resp-lists.py [--runs 2] [--ops 2000] [--durability none|local]
                                            [--lengths 0,10000,80000,500000]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import hanuresp  # noqa: E402
from hanukv import free_port  # noqa: E402
BIN = os.path.join(ROOT, os.environ.get("BUILD", "build"), "hanudb")
TICK = os.sysconf("SC_CLK_TCK")
# list lengths measured: 80 000 elements of 7 bytes are 880 KB, near --max-value (1 MiB),
# which bounded a list of the old one-value format; 500 000 are 3.5 MB
LENGTHS = [0, 1000, 10000, 80000, 500000]


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def run(ops, durability, lengths):
    tmp = tempfile.mkdtemp(prefix="resp-lists-", dir="/var/tmp")
    port = free_port()
    proc = subprocess.Popen(["taskset", "-c", "0", BIN, "serve", "--data", os.path.join(tmp, "d"), "--no-bucket",
                             "--http-addr", "off", "--kv-addr", "127.0.0.1:%d" % free_port(),
                             "--resp-addr", "127.0.0.1:%d" % port, "--resp-durability", durability,
                             "--file-size", "2G", "--prealloc", "append"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        os.sched_setaffinity(0, {1})
        for _ in range(200):
            try:
                c = hanuresp.Conn(port)
                break
            except OSError:
                time.sleep(0.05)
        rows = []
        for i, length in enumerate(lengths):
            n = ops
            key = "list%d" % i
            for start in range(0, length, 1000):
                c.call("RPUSH", key, *(["e%06d" % j for j in range(start, min(length, start + 1000))]))
            time.sleep(0.2)
            t0, b0 = cpu_ticks(proc.pid), dir_bytes(tmp)
            for start in range(0, n, 50):
                c.send(b"".join(hanuresp.encode("LPUSH", key, "xyz") for _ in range(50)))
                for _ in range(50):
                    c.reply()
            time.sleep(0.2)   # the lazy sync lands in the window
            t1, b1 = cpu_ticks(proc.pid), dir_bytes(tmp)
            rows.append((length, n, (t1 - t0) * 1e6 / TICK / n, (b1 - b0) / n))
        c.close()
        return rows
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--durability", default="none")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    a = ap.parse_args()
    lengths = [int(x) for x in a.lengths.split(",")]
    for r in range(a.runs):
        print("run %d (durability %s, %d LPUSH per length)" % (r + 1, a.durability, a.ops))
        print("%10s %8s %14s %16s" % ("length", "pushes", "server us/op", "log bytes/op"))
        for length, n, us, b in run(a.ops, a.durability, lengths):
            print("%10d %8d %14.1f %16.0f" % (length, n, us, b))


if __name__ == "__main__":
    main()
