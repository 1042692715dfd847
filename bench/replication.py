#!/usr/bin/env python3
"""Replication figures (docs/REPLICATION.md): follower lag under the docbench write
phase, the follower's read throughput, and the take-over time after a SIGKILL.

  python3 bench/replication.py [--duration S] [--ttl S] [--rounds N] [--dir /tmp/hanu-repl]
                               [--only lag|takeover] [--seal-ms N] [--poll-ms N] [--no-reads] [--clean]

Leader and follower on one file bucket (default seal interval and poll interval,
1 s each), docbench writing to the leader while the two `_status` txns are sampled
every 100 ms; then the time until the follower reaches the leader's txn after the load
stops; then docbench's read phase against the follower and against the leader. Then
two `--lease` nodes: SIGKILL the leader, time until the other answers a write."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "hanudb")
DOCBENCH = os.path.join(ROOT, "build", "bench", "docbench")


def status(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/_status" % port, timeout=5) as r:
        return json.load(r)


def put(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 method="PUT", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def serve(data, kv, http, args, cpu="0"):
    p = subprocess.Popen(["taskset", "-c", cpu, BIN, "serve", "--data", data, "--kv-addr", "127.0.0.1:%d" % kv,
                          "--http-addr", "127.0.0.1:%d" % http] + args,
                         stdout=subprocess.DEVNULL, stderr=open(data + ".log", "ab"))
    for _ in range(600):
        try:
            status(http)
            return p
        except OSError:
            time.sleep(0.05)
    raise SystemExit("server on %d did not start" % http)


def docbench(port, phase, duration, ids, extra=()):
    out = subprocess.run(["taskset", "-c", "1", DOCBENCH, "--url", "http://127.0.0.1:%d" % port, "--phase", phase,
                          "--duration", str(duration), "--ids", ids, "--json"] + list(extra),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("docbench %s: %s" % (phase, out.stderr[-500:]))
    return json.loads(out.stdout)


def lag_and_reads(d, duration, seal_ms, poll_ms, reads):
    url = "file://" + os.path.join(d, "bucket")
    leader = serve(os.path.join(d, "leader"), 28101, 28102, ["--bucket", url, "--seal-interval-ms", str(seal_ms)])
    follower = serve(os.path.join(d, "follower"), 28103, 28104, ["--bucket", url, "--follow", "--poll-ms", str(poll_ms)])
    samples, stop = [], threading.Event()

    def sample():
        while not stop.is_set():
            samples.append(status(28102)["txn"] - status(28104)["txn"])
            time.sleep(0.1)
    t = threading.Thread(target=sample)
    t.start()
    ids = os.path.join(d, "ids.txt")
    w = docbench(28102, "write", duration, ids)
    stop.set()
    t.join()
    target, t0 = status(28102)["txn"], time.time()
    while status(28104)["txn"] < target:
        time.sleep(0.01)
    caught = time.time() - t0
    samples.sort()
    print("write phase: %.0f writes/s (p50 %.1f ms); follower behind the leader by median %d, p90 %d, "
          "max %d txns (%d samples every 100 ms); at the leader's txn %d %.2f s after the load stopped" %
          (w["writes_per_s"], w["write_p50_us"] / 1000, samples[len(samples) // 2],
           samples[len(samples) * 9 // 10], samples[-1], len(samples), target, caught))
    print("(seal interval %d ms, poll interval %d ms)" % (seal_ms, poll_ms))
    for mix in ("get=100", "get=50,find=25,search=25") if reads else ():
        for name, port in (("follower", 28104), ("leader", 28102)):
            r = docbench(port, "read", duration, ids, ["--mix", mix])
            print("read phase %s on the %s: %.0f reads/s, p50 %.2f ms, p99 %.2f ms, errors %d" %
                  (mix, name, r["reads_per_s"], r["read_p50_us"] / 1000, r["read_p99_us"] / 1000,
                   r.get("read_errors", 0)))
    for p in (leader, follower):
        p.send_signal(signal.SIGTERM)
        p.wait()


def takeover(d, ttl, rounds, sig):
    url = "file://" + os.path.join(d, "lease-bucket")
    ports = [(28111, 28112), (28113, 28114)]
    procs = {}
    for i, (kv, http) in enumerate(ports):
        procs[http] = serve(os.path.join(d, "n%d" % i), kv, http,
                            ["--bucket", url, "--lease", "--lease-ttl", str(ttl), "--poll-ms", "100"])
    times = []
    for r in range(rounds):
        while True:
            roles = {h: status(h)["role"] for h in procs}
            leaders = [h for h, role in roles.items() if role == "leader"]
            if len(leaders) == 1 and all(role in ("leader", "standby") for role in roles.values()):
                break
            time.sleep(0.05)
        lead = leaders[0]
        assert put(lead, "/c/t/docs/r%d" % r, {"r": r}) == 201
        other = [h for h in procs if h != lead][0]
        t0 = time.time()
        procs[lead].send_signal(sig)
        procs[lead].wait()
        while put(other, "/c/t/docs/after%d" % r, {"r": r}) != 201:
            time.sleep(0.02)
        times.append(time.time() - t0)
        print("take-over %d: a write answered by the standby %.2f s after %s (TTL %d s)" %
              (r + 1, times[-1], signal.Signals(sig).name, ttl))
        # The killed node comes back as a standby on a fresh directory (its own holds unsealed txns).
        i = [h for _, h in ports].index(lead)
        shutil.rmtree(os.path.join(d, "n%d" % i), ignore_errors=True)
        procs[lead] = serve(os.path.join(d, "n%d" % i), ports[i][0], lead,
                            ["--bucket", url, "--lease", "--lease-ttl", str(ttl), "--poll-ms", "100"])
    for p in procs.values():
        p.send_signal(signal.SIGTERM)
        p.wait()
    print("take-over times: %s" % ", ".join("%.2f" % t for t in times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--ttl", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/hanu-repl")
    ap.add_argument("--only", choices=["lag", "takeover"])
    ap.add_argument("--seal-ms", type=int, default=1000)
    ap.add_argument("--poll-ms", type=int, default=1000)
    ap.add_argument("--no-reads", action="store_true")
    ap.add_argument("--clean", action="store_true", help="stop the leader with SIGTERM (it releases the lease)")
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    if a.only != "takeover":
        lag_and_reads(a.dir, a.duration, a.seal_ms, a.poll_ms, not a.no_reads)
    if a.only != "lag":
        takeover(a.dir, a.ttl, a.rounds, signal.SIGTERM if a.clean else signal.SIGKILL)


if __name__ == "__main__":
    main()
