#!/usr/bin/env python3
"""resp-vs-redis.py: HanuDB's Redis face against redis-server on the same cores
(docs/PERFORMANCE.md, "Redis protocol"). Each server in turn is pinned to CPU 0
(taskset), redis-benchmark to CPU 1; for every pair (HanuDB local vs Redis
appendfsync always, HanuDB none vs Redis everysec) and every shape (-c 32 -P 1 and
-P 16, SET then GET, -r 100000 keys) it prints ops/s and the server's CPU
microseconds per op (utime+stime of /proc/PID/stat over the run). --memory loads
1M keys (11-byte keys, 16-byte values) through redis-cli --pipe and prints the
RSS growth per key of each server.

    BUILD=build python3 bench/resp-vs-redis.py [--runs 2] [--memory] [--pair none|local]
        [--hanudb-args "--lazy-sync-ms 1000"]

--pair runs one pair only; --hanudb-args adds server options to HanuDB's command line
(everysec syncs once a second; HanuDB's `none` syncs after --lazy-sync-ms, 10 by default).
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from hanukv import free_port  # noqa: E402  (below the ephemeral ports, never given twice)
BIN = os.path.join(ROOT, os.environ.get("BUILD", "build"), "hanudb")
TICK = os.sysconf("SC_CLK_TCK")


def wait_ping(port):
    for _ in range(200):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=1)
            s.sendall(b"PING\r\n")
            if s.recv(16).startswith(b"+PONG"):
                s.close()
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("server on %d did not answer" % port)


class Server:
    def __init__(self, kind, durability):
        self.kind, self.dir, self.port = kind, tempfile.mkdtemp(prefix="resp-bench-", dir="/var/tmp"), free_port()
        if kind == "hanudb":
            args = [BIN, "serve", "--data", os.path.join(self.dir, "d"), "--no-bucket", "--http-addr", "off",
                    "--kv-addr", "127.0.0.1:%d" % free_port(), "--resp-addr", "127.0.0.1:%d" % self.port,
                    "--resp-durability", durability] + HANUDB_ARGS
        else:
            args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir, "--save", "",
                    "--daemonize", "no", "--logfile", "", "--appendonly", "yes", "--appendfsync", durability]
        self.proc = subprocess.Popen(["taskset", "-c", "0"] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ping(self.port)

    def cpu_ticks(self):
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def rss(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) * 1024

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def bench(srv, test, pipeline, n):
    c0 = srv.cpu_ticks()
    out = subprocess.run(["taskset", "-c", "1", "redis-benchmark", "-p", str(srv.port), "-t", test, "-n", str(n),
                          "-c", "32", "-P", str(pipeline), "-r", "100000", "-q"], capture_output=True, text=True)
    c1 = srv.cpu_ticks()
    m = re.search(r"([\d.]+) requests per second", out.stdout.replace("\r", "\n"))
    if not m:
        raise RuntimeError("redis-benchmark: %s %s" % (out.stdout[-300:], out.stderr[-300:]))
    return float(m.group(1)), (c1 - c0) * 1e6 / TICK / n


HANUDB_ARGS = []
PAIRS = [(("hanudb", "local"), ("redis", "always")), (("hanudb", "none"), ("redis", "everysec"))]
SHAPES = [("set", 1, 40000), ("get", 1, 100000), ("set", 16, 400000), ("get", 16, 400000)]


def speed(runs, only=None):
    print("| pair | test | HanuDB ops/s | Redis ops/s | ratio | HanuDB CPU us/op | Redis CPU us/op |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for run in range(runs):
        for (hk, hd), (rk, rd) in PAIRS:
            if only and hd != only:
                continue
            results = {}
            for kind, dur in ((hk, hd), (rk, rd)):   # in turns, the same shapes
                srv = Server(kind, dur)
                try:
                    for test, p, n in SHAPES:
                        results[(kind, test, p)] = bench(srv, test, p, n)
                finally:
                    srv.stop()
            for test, p, _ in SHAPES:
                (ho, hc), (ro, rc) = results[(hk, test, p)], results[(rk, test, p)]
                print("| %s %s vs %s %s (run %d) | %s -P %d | %.0f | %.0f | %.2fx | %.1f | %.1f |"
                      % (hk, hd, rk, rd, run + 1, test.upper(), p, ho, ro, ho / ro, hc, rc), flush=True)


def memory(keys=1000000):
    data = b"".join(b"*3\r\n$3\r\nSET\r\n$11\r\nkey:%07d\r\n$16\r\n%016d\r\n" % (i, i) for i in range(keys))
    print("| server | RSS before | RSS after 1M keys | bytes per key |")
    print("|---|---:|---:|---:|")
    for kind, dur in (("hanudb", "none"), ("redis", "everysec")):
        srv = Server(kind, dur)
        try:
            before = srv.rss()
            subprocess.run(["redis-cli", "-p", str(srv.port), "--pipe"], input=data, capture_output=True, check=True)
            time.sleep(1)
            after = srv.rss()
            print("| %s | %.1f MB | %.1f MB | %.0f |" % (kind, before / 1e6, after / 1e6, (after - before) / keys))
        finally:
            srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--pair", choices=["local", "none"])
    ap.add_argument("--hanudb-args", default="")
    a = ap.parse_args()
    HANUDB_ARGS.extend(a.hanudb_args.split())
    if not a.no_speed:
        speed(a.runs, a.pair)
    if a.memory:
        memory()


if __name__ == "__main__":
    sys.exit(main())
