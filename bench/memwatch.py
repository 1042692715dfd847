#!/usr/bin/env python3
"""bench/memwatch.py PID: samples a process's anonymous memory (RssAnon of
/proc/PID/status) and the machine's dirty page cache (Dirty + Writeback of
/proc/meminfo) every 100 ms until the process exits or SIGTERM/SIGINT arrives, then
prints one JSON line: the peaks, the peak of their sum sampled together, and the
count of samples. The dirty figure is machine-wide: run it on an otherwise idle
machine for it to mean the server's."""
import json
import signal
import sys
import time


def kb(text, field):
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def main():
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        sys.exit("usage: memwatch.py PID")
    pid = sys.argv[1]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    peak_anon = peak_dirty = peak_sum = samples = 0
    while not stop:
        try:
            with open("/proc/%s/status" % pid) as f:
                anon = kb(f.read(), "RssAnon")
        except OSError:
            break
        with open("/proc/meminfo") as f:
            m = f.read()
        dirty = kb(m, "Dirty") + kb(m, "Writeback")
        peak_anon, peak_dirty = max(peak_anon, anon), max(peak_dirty, dirty)
        peak_sum = max(peak_sum, anon + dirty)
        samples += 1
        time.sleep(0.1)
    print(json.dumps({"peak_anon_kb": peak_anon, "peak_dirty_kb": peak_dirty,
                      "peak_anon_plus_dirty_kb": peak_sum, "samples": samples}), flush=True)


if __name__ == "__main__":
    main()
