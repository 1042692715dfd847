"""hanuresp.py: a raw RESP client (replies kept as their exact bytes) and a real
redis-server process, for the end-to-end tests of the Redis face (docs/RESP.md)."""
import os
import shutil
import subprocess
import tempfile
import time

import hanukv


def encode(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(b), b)
    return out


class Conn(hanukv.Conn):
    """Sends commands and reads whole replies as their raw bytes (the socket
    handling is hanukv.Conn's)."""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf += chunk

    def _line(self, pos):
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill()

    def _end(self, pos):
        """The end of the reply starting at pos (reads as needed)."""
        i = self._line(pos)
        t = self.buf[pos:pos + 1]
        if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
            return i + 2
        n = int(self.buf[pos + 1:i])
        if t in (b"$", b"=", b"!"):
            if n < 0:
                return i + 2
            while len(self.buf) < i + 2 + n + 2:
                self._fill()
            return i + 2 + n + 2
        if t in (b"*", b"~", b">", b"%", b"|"):
            p = i + 2
            for _ in range(max(n, 0) * (2 if t in (b"%", b"|") else 1)):
                p = self._end(p)
            return p
        raise ValueError("bad reply type %r in %r" % (t, self.buf[pos:pos + 40]))

    def reply(self):
        end = self._end(0)
        r, self.buf = self.buf[:end], self.buf[end:]
        return r

    def call(self, *args):
        self.send(encode(*args))
        return self.reply()

    def expect_closed(self, what):
        """The server closed this connection (after an answer already read)."""
        try:
            self.call("PING")
        except (ConnectionError, OSError):
            return
        raise AssertionError("the connection stays open " + what)


def resp_server(data_dir, extra=()):
    """A hanudb server with --resp-addr on a free port; returns (server, resp port)."""
    port = hanukv.free_port()
    srv = hanukv.Server(data_dir, extra=["--resp-addr", "127.0.0.1:%d" % port] + list(extra))
    srv.start()
    return srv, port


class Redis:
    """A real redis-server on a free port in a temporary folder, no persistence
    unless extra says otherwise."""

    def __init__(self, extra=()):
        self.dir = tempfile.mkdtemp(prefix="hanudb-redis-")
        self.port = hanukv.free_port()
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
                "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", ""]
        self.proc = subprocess.Popen(args + list(extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                c = Conn(self.port, timeout=1)
                if c.call("PING") == b"+PONG\r\n":
                    c.close()
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


def have_redis():
    return shutil.which("redis-server") is not None and shutil.which("redis-benchmark") is not None
