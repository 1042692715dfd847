"""The server's log and access log (docs/OPERATIONS.md, "The log"), on a real
server: with --log-format json every line of --log-file is one object with
exactly time, level, subsystem and msg; with text every line is "TIME LEVEL
subsystem: message"; --access-log has one line per HTTP answer with method,
path, status, bytes, microseconds and the token's name, never a token; SIGHUP
opens both files again under their names (after a rotation); a bad --log-format
or an unwritable --log-file stops start-up with exit status 2."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http

TOKEN = "s3cr3t-log-test-token-0123456789"
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
TEXT_LINE = re.compile(r"^" + TIME + r" (ERROR|WARN|INFO) [a-z]+: .+$")
ACCESS_TEXT = re.compile(r"^" + TIME + r" (GET|PUT|POST|DELETE|HEAD|OPTIONS) (\S+) (\d{3}) (\d+) (\d+) (\S+)$")


def read_lines(path):
    with open(path) as f:
        return f.read().splitlines()


def wait_for(pred, what, timeout=5.0):
    deadline = time.time() + timeout
    while not pred():
        check(time.time() < deadline, "timed out waiting for " + what)
        time.sleep(0.02)


def json_logs(tmp):
    log, access = os.path.join(tmp, "server.log"), os.path.join(tmp, "access.log")
    srv = HttpServer(os.path.join(tmp, "data-json"), ["--no-bucket", "--tokens", TOKEN + " rw *", "--log-format",
                                                       "json", "--log-file", log, "--access-log", access])
    srv.start()
    try:
        h = Http(srv.http_port, token=TOKEN)
        st, _, _ = h.json("PUT", "/c/users/docs/alice", {"name": "Alice"})
        check(st == 201, "put %d" % st)
        st, _, _ = h.json("GET", "/c/users/docs/nobody")
        check(st == 404, "get %d" % st)
        st, _, _ = Http(srv.http_port).json("GET", "/c/users/docs/alice")   # no token: 401
        check(st == 401, "no token %d" % st)
        wait_for(lambda: len(read_lines(access)) >= 4, "four access lines")
        lines = [json.loads(l) for l in read_lines(access)]
        check(len(lines) == 4 and lines[0]["path"] == "/_health", "access lines: %r" % lines)   # start()'s probe
        lines = lines[1:]
        for o in lines:
            check(sorted(o) == ["bytes", "method", "path", "status", "time", "token", "us"], "access keys %r" % o)
            check(re.match("^" + TIME + "$", o["time"]) and o["us"] >= 0, "access line %r" % o)
        check([(o["method"], o["path"], o["status"]) for o in lines] ==
              [("PUT", "/c/users/docs/alice", 201), ("GET", "/c/users/docs/nobody", 404),
               ("GET", "/c/users/docs/alice", 401)], "access lines %r" % lines)
        check(lines[0]["token"].startswith("t:") and len(lines[0]["token"]) == 18 and lines[2]["token"] == "",
              "token names %r" % [o["token"] for o in lines])
        check(lines[1]["bytes"] > 0, "the 404's body bytes %r" % lines[1])
        # Rotation: both files renamed, SIGHUP, the next lines go to new files of the old names.
        os.rename(log, log + ".1")
        os.rename(access, access + ".1")
        srv.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: os.path.exists(log), "the log file opened again")
        st, _, _ = h.json("GET", "/_status")
        check(st == 200, "status %d" % st)
        wait_for(lambda: os.path.exists(access) and read_lines(access), "a new access line")
        check([json.loads(l)["path"] for l in read_lines(access)] == ["/_status"], "after SIGHUP: %r"
              % read_lines(access))
        check(srv.proc.poll() is None, "SIGHUP does not stop the server")
    finally:
        check(srv.stop() == 0, "clean stop")
    for path in (log + ".1", log):
        for line in read_lines(path):
            o = json.loads(line)
            check(sorted(o) == ["level", "msg", "subsystem", "time"], "log keys %r" % o)
            check(o["level"] in ("error", "warn", "info") and re.match("^[a-z]+$", o["subsystem"]) and
                  re.match("^" + TIME + "$", o["time"]), "log line %r" % o)
    msgs = [json.loads(l)["msg"] for l in read_lines(log)]
    check("SIGHUP: log files opened again" in msgs and "stopped cleanly" in msgs, "after SIGHUP: %r" % msgs)
    for path in (log, log + ".1", access, access + ".1", srv.log_path):
        with open(path) as f:
            check(TOKEN not in f.read(), "the token is not in %s" % path)


def text_logs(tmp):
    srv = HttpServer(os.path.join(tmp, "data-text"), ["--no-bucket", "--access-log", "-"])
    srv.start()
    try:
        h = Http(srv.http_port)
        st, _, _ = h.json("PUT", "/c/notes/docs/n%201", {"t": "x"})
        check(st == 201, "put %d" % st)
        st, _, _ = h.json("DELETE", "/c/notes/docs/n%201")
        check(st == 200, "delete %d" % st)
    finally:
        check(srv.stop() == 0, "clean stop")
    with open(srv.log_path) as f:   # stdout and stderr both go there
        lines = f.read().splitlines()
    access = [ACCESS_TEXT.match(l) for l in lines if ACCESS_TEXT.match(l) and "/_health" not in l]
    check([(m.group(1), m.group(2), m.group(3), m.group(6)) for m in access] ==
          [("PUT", "/c/notes/docs/n%201", "201", "-"), ("DELETE", "/c/notes/docs/n%201", "200", "-")],
          "text access lines %r" % [m.group(0) for m in access])
    others = [l for l in lines if not ACCESS_TEXT.match(l)]
    check(any(" GET /_health 200 " in l for l in lines), "start()'s probe is in the access log")
    check(others and all(TEXT_LINE.match(l) for l in others), "text log lines %r" %
          [l for l in others if not TEXT_LINE.match(l)])
    check(any(" INFO server: stopped cleanly" in l for l in others), "the stop is logged")


def refusals(tmp):
    for extra, want in ((["--log-format", "xml"], "--log-format must be text or json"),
                        (["--log-file", os.path.join(tmp, "no-such-dir", "x.log")], "cannot open the log file")):
        r = subprocess.run([BIN, "serve", "--data", os.path.join(tmp, "never"), "--http-addr", "off", "--kv-addr",
                            "127.0.0.1:%d" % free_port()] + extra, capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and want in r.stderr, "%r: %d %r" % (extra, r.returncode, r.stderr))
        check(not os.path.exists(os.path.join(tmp, "never")), "%r: nothing created" % extra)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        json_logs(tmp)
        print("ok   json log and access log: exact keys, token names only, SIGHUP reopens both")
        text_logs(tmp)
        print("ok   text log and access log on stdout")
        refusals(tmp)
        print("ok   a bad --log-format or --log-file stops start-up (exit 2), nothing created")
