"""e2e_crash_states.py: every crash state of a recorded server run (docs/TESTING.md,
"Crash states"). Runs tests/crash/crash_workload.py against a real `hanudb serve` under
the recorder (build/tests/libcrash_record.so), then build/tests/crash_check builds the
process-crash and power-loss states of the trace, recovers each with store_open and
checks every promise the answers had made. Fails on the first violation it reports.

Environment (the longer run, docs/TESTING.md):
  HANUDB_CRASH_SEEDS   workload seeds, space-separated (default "1 2")
  HANUDB_CRASH_STATES  states checked per seed, sampled evenly (default 6000; 0: all)
  HANUDB_CRASH_RUNS    server runs per seed (default 4; one offline compaction between)
  HANUDB_CRASH_OPS     requests per run (default 600)
  HANUDB_CRASH_KEEP    directory to keep the first failing states in, and the trace of a
                       failing seed (seed-N-work: crash_check --dump, --at OP)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("HANUDB_BUILD", os.path.join(os.path.dirname(HERE), "build"))


def main():
    # Two workloads of 6 000 states beat one of 12 000: the interleavings of background
    # compaction and syncs differ from run to run, and they are what finds bugs.
    seeds = os.environ.get("HANUDB_CRASH_SEEDS", "1 2").split()
    states = os.environ.get("HANUDB_CRASH_STATES", "6000")
    runs = os.environ.get("HANUDB_CRASH_RUNS", "4")
    ops = os.environ.get("HANUDB_CRASH_OPS", "600")
    keep = os.environ.get("HANUDB_CRASH_KEEP")
    failed = total = 0
    for seed in seeds:
        work = tempfile.mkdtemp(prefix="hanudb-crash-")
        try:
            subprocess.run([sys.executable, os.path.join(HERE, "crash", "crash_workload.py"), work, "--seed", seed,
                            "--runs", runs, "--ops", ops], check=True)
            cmd = [os.path.join(BUILD, "tests", "crash_check"), work, "--states", states, "--seed", seed]
            if keep:
                os.makedirs(keep, exist_ok=True)
                cmd += ["--keep", os.path.join(keep, "seed-" + seed)]
            res = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            print(res.stdout, end="", flush=True)
            rc = res.returncode
            m = re.search(r"; (\d+) of (\d+) candidate states checked", res.stdout)
            checked, candidates = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            total += checked
            # A trace that yields few states proves little: the recorder or the workload broke.
            if rc == 0 and candidates < 5000:
                print("seed %s: only %d candidate states" % (seed, candidates))
                rc = 3
            print("seed %s: %s" % (seed, "ok" if rc == 0 else "FAILED (exit %d)" % rc), flush=True)
            failed += rc != 0
            if rc != 0 and keep:
                # the trace and the requests, to rerun crash_check --dump / --at on them
                shutil.copytree(work, os.path.join(keep, "seed-%s-work" % seed), ignore=shutil.ignore_patterns("data"),
                                dirs_exist_ok=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print("%d crash states checked over %d workloads" % (total, len(seeds)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
