"""Start-up that fails leaves nothing behind: with the HTTP or the key-value port
taken, bad tokens or a missing certificate, `serve --data NEW` exits 2 and
neither NEW nor NEW.bucket exists afterwards (nor NEW when an S3 bucket is
unreachable); a second server on a data directory in use exits 2 naming the
PID of the first (so does `compact`)."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import BIN, Server, free_port, check  # noqa


def serve(data, http_port, kv_port, extra=()):
    """Runs serve until it exits (it must fail): its status and stderr."""
    r = subprocess.run([BIN, "serve", "--data", data, "--http-addr", "127.0.0.1:%d" % http_port,
                        "--kv-addr", "127.0.0.1:%d" % kv_port] + list(extra), capture_output=True, text=True,
                       timeout=30)
    return r.returncode, r.stderr


def taken_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", free_port()))
    s.listen(1)
    return s


def nothing_made(data, what):
    check(not os.path.exists(data) and not os.path.exists(data + ".bucket"),
          "%s: nothing created, but %s" % (what, sorted(os.listdir(os.path.dirname(data)))))


def t_port_taken(tmp):
    for face in ("http", "kv"):
        s = taken_port()
        port = s.getsockname()[1]
        data = os.path.join(tmp, "new-" + face)
        http_port, kv_port = (port, free_port()) if face == "http" else (free_port(), port)
        code, err = serve(data, http_port, kv_port)
        s.close()
        flag = "--http-addr" if face == "http" else "--kv-addr"
        check(code == 2 and "127.0.0.1:%d (%s)" % (port, flag) in err and "in use" in err,
              "%s port taken: exit %d, %r" % (face, code, err))
        nothing_made(data, face + " port taken")


def t_bad_options(tmp):
    data = os.path.join(tmp, "new-tokens")
    code, err = serve(data, free_port(), free_port(), ["--tokens", "short rw *"])
    check(code == 2 and "tokens" in err, "bad tokens: exit %d, %r" % (code, err))
    nothing_made(data, "bad tokens")
    data = os.path.join(tmp, "new-tls")
    code, err = serve(data, free_port(), free_port(), ["--tls-cert", os.path.join(tmp, "missing.pem"),
                                                       "--tls-key", os.path.join(tmp, "missing.key")])
    check(code == 2 and "TLS" in err, "missing certificate: exit %d, %r" % (code, err))
    nothing_made(data, "missing certificate")


def t_bucket_unreachable(tmp):
    """The bucket is reached (listed) before the data directory is made."""
    data = os.path.join(tmp, "new-s3")
    env = dict(os.environ, AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="y",
               AWS_ENDPOINT_URL_S3="http://127.0.0.1:%d" % free_port())
    r = subprocess.run([BIN, "serve", "--data", data, "--http-addr", "127.0.0.1:%d" % free_port(), "--kv-addr",
                        "127.0.0.1:%d" % free_port(), "--bucket", "s3://bucket/prefix"], capture_output=True,
                       text=True, timeout=60, env=env)
    check(r.returncode == 2 and "s3://bucket/prefix" in r.stderr, "bucket unreachable: exit %d, %r" %
          (r.returncode, r.stderr))
    check(not os.path.exists(data), "bucket unreachable: no data directory")


def t_directory_in_use(tmp):
    data = os.path.join(tmp, "used")
    first = Server(data)
    first.start()
    try:
        with open(os.path.join(data, "LOCK")) as f:
            check(f.read() == "%d\n" % first.proc.pid, "LOCK holds the holder's PID")
        code, err = serve(data, free_port(), free_port())
        want = "PID %d" % first.proc.pid
        check(code == 2 and "in use" in err and want in err, "second server: exit %d, %r" % (code, err))
        r = subprocess.run([BIN, "compact", "--data", data], capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and want in r.stderr, "compact: exit %d, %r" % (r.returncode, r.stderr))
    finally:
        check(first.stop() == 0, "the first server stops cleanly")
    # the lock is the flock, not the file: a stale PID does not keep anyone out
    again = Server(data)
    again.start()
    again.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-startup-")
    try:
        for t in (t_port_taken, t_bad_options, t_bucket_unreachable, t_directory_in_use):
            t(tmp)
            print("ok   %s" % t.__name__)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
