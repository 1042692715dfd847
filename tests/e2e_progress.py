"""Progress of long operations (docs/OPERATIONS.md, "Progress"): on a terminal a
progress line is drawn in place ("\\r", clear to the end of the line) and taken
off before the command's summary; written to a pipe or a file there is no "\\r"
at all, only log lines. Checked on `hanudb restore` (snapshot fetch and chain
replay), `hanudb compact` and `hanudb export` run under a real pseudo-terminal
and through a pipe; HANUDB_PROGRESS_MS=0 makes every step draw, so the check does
not depend on how fast this machine is. The server's own export progress is in
_status (bucket.exports)."""
import os
import pty
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http

DRAW = "\r\x1b[K"


def under_pty(args, env):
    """Runs args with stdout and stderr on a new pseudo-terminal: (exit status, all output)."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execve(args[0], args, env)
        finally:
            os._exit(127)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def through_pipe(args, env):
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    return r.returncode, r.stdout + r.stderr


def check_both(name, make_args, env, drawn_text):
    code, out = under_pty(make_args("tty"), env)
    check(code == 0, "%s on a terminal: exit %d: %s" % (name, code, out[-800:]))
    draws = out.count(DRAW + drawn_text)
    check(draws >= 2, "%s on a terminal: %d lines drawn in place, want at least 2: %r" % (name, draws, out[-800:]))
    code, out = through_pipe(make_args("pipe"), env)
    check(code == 0, "%s through a pipe: exit %d: %s" % (name, code, out[-800:]))
    check("\r" not in out and "\x1b" not in out, "%s through a pipe: no line drawn in place: %r" % (name, out[-400:]))
    return draws


def main(tmp):
    bdir = os.path.join(tmp, "bucket")
    data = os.path.join(tmp, "data")
    srv = HttpServer(data, ["--bucket", "file://" + bdir, "--seal-interval-ms", "20", "--file-size", "256K",
                            "--no-compaction"])
    srv.start()
    h = Http(srv.http_port)
    for round_ in range(12):   # a dozen segments at least, and several log files
        for i in range(60):
            st, _, _ = h.json("PUT", "/c/notes/docs/n%d-%d" % (round_, i), {"text": "x" * 300, "r": round_})
            check(st == 201, "put %d" % st)
        h.json("PUT", "/c/notes/docs/sync%d?durability=bucket" % round_, {"r": round_})
    st, _, snap = h.json("POST", "/_admin/snapshot")
    check(st == 200, "snapshot %d %r" % (st, snap))
    for i in range(200):
        st, _, _ = h.json("PUT", "/c/notes/docs/after%d?durability=bucket" % i, {"i": i})
        check(st == 201, "put after the snapshot %d" % st)
    env = dict(os.environ, HANUDB_PROGRESS_MS="0")

    # hanudb export: the server counts its documents in _status (the CLI's line moves
    # with them once a second: an export of this size ends before, so only the counts
    # and the pipe's silence are checked here).
    url = "http://127.0.0.1:%d" % srv.http_port
    st0 = h.json("GET", "/_status")[2]["bucket"]["exports"]
    for how in ("tty", "pipe"):
        code, out = (under_pty if how == "tty" else through_pipe)([BIN, "export", "--url", url, "--collection",
                                                                   "notes"], env)
        check(code == 0 and '"docs":%d' % (12 * 61 + 200) in out, "export (%s): %d %r" % (how, code, out[-400:]))
        check(how == "tty" or ("\r" not in out and "\x1b" not in out), "export through a pipe: %r" % out[-400:])
    st1 = h.json("GET", "/_status")[2]["bucket"]["exports"]
    check(st1["running"] == 0 and st1["documents"] - st0["documents"] == 2 * (12 * 61 + 200),
          "_status exports after two exports: %r -> %r" % (st0, st1))
    print("ok   export: _status counts %d documents of two exports, nothing drawn through a pipe"
          % (st1["documents"] - st0["documents"]))
    srv.stop()

    # hanudb restore: the snapshot's files, then the segments after it.
    draws = check_both("restore", lambda how: [BIN, "restore", "--bucket", "file://" + bdir, "--to",
                                               os.path.join(tmp, "restored-" + how)], env, "replaying the chain: ")
    print("ok   restore: %d lines drawn in place on a terminal, none through a pipe" % draws)

    # hanudb compact: one step a log file.
    def compact_args(how):
        copy = os.path.join(tmp, "compact-" + how)
        subprocess.run(["cp", "-a", data, copy], check=True)
        return [BIN, "compact", "--data", copy]
    draws = check_both("compact", compact_args, env, "compacting: ")
    print("ok   compact: %d lines drawn in place on a terminal, none through a pipe" % draws)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(tmp)
