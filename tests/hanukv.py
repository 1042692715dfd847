"""hanukv.py: a tiny Python client for HanuDB's key-value protocol (docs/PROTOCOL.md)
and helpers to run a real server process, used by the end-to-end tests."""
import os
import signal
import socket
import struct
import subprocess
import tempfile
import time

OPS = dict(STATS=0x00, PING=0x01, CLOSE=0x02, CREATE=0x03, INFO=0x04, DROP=0x05, GET=0x06,
           SET=0x07, SET_IF_EXISTS=0x08, SET_IF_NOT_EXISTS=0x09, COMPARE_SET=0x10, DELETE=0x11,
           COMPARE_DELETE=0x12, WRITE_BATCH=0x13, AUTH=0x14, SET_TTL=0x15, TTL=0x16)
OK, PONG, DB_NOT_FOUND, DB_ALREADY_EXISTS, KEY_VALUE_TOKEN, KEY_NOT_FOUND = 0, 1, 2, 3, 4, 5
KEY_ALREADY_EXISTS, KEY_TOKEN_MISMATCH, INVALID_REQUEST, PAYLOAD_TOO_LARGE = 6, 7, 8, 9
INTERNAL_ERROR, UNAUTHORIZED, FORBIDDEN = 0x10, 0x11, 0x12
LOCAL, NONE, BUCKET = 0, 1, 2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("HANUDB_BIN", os.path.join(ROOT, "build", "hanudb"))


def db_field(name):
    b = name.encode() if isinstance(name, str) else name
    return bytes([len(b)]) + b


def bytes_field(v):
    b = v.encode() if isinstance(v, str) else v
    return struct.pack("<I", len(b)) + b


def frame(op, payload=b"", flags=LOCAL):
    return struct.pack("<BBI", op, flags, len(payload)) + payload


def batch_payload(db, items):
    """items: list of ("set", key, value) or ("del", key)."""
    out = db_field(db) + struct.pack("<I", len(items))
    for it in items:
        if it[0] == "set":
            out += b"\x00" + bytes_field(it[1]) + bytes_field(it[2])
        else:
            out += b"\x01" + bytes_field(it[1])
    return out


class Conn:
    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk

    def read_response(self):
        self._need(5)
        status, length = struct.unpack("<BI", self.buf[:5])
        self._need(5 + length)
        payload = self.buf[5:5 + length]
        self.buf = self.buf[5 + length:]
        return status, payload

    def call(self, op, payload=b"", flags=LOCAL):
        self.send(frame(op, payload, flags))
        return self.read_response()

    # conveniences
    def set(self, key, value, db="default", flags=LOCAL):
        return self.call(OPS["SET"], db_field(db) + bytes_field(key) + bytes_field(value), flags)

    def get(self, key, db="default"):
        st, p = self.call(OPS["GET"], db_field(db) + bytes_field(key))
        if st == KEY_VALUE_TOKEN:
            return st, struct.unpack("<Q", p[:8])[0], p[8:]
        return st, None, p

    def set_ttl(self, key, value, ttl_ms, db="default", flags=LOCAL):
        """SetTtl: db key u64 ttl_ms value."""
        return self.call(OPS["SET_TTL"], db_field(db) + bytes_field(key) + struct.pack("<Q", ttl_ms)
                         + bytes_field(value), flags)

    def ttl(self, key, db="default"):
        """Ttl: (status, token, expiry ms since the epoch or 0, ms left or 0); None fields
        when the status is not Ok."""
        st, p = self.call(OPS["TTL"], db_field(db) + bytes_field(key))
        if st == OK and len(p) == 24:
            return (st,) + struct.unpack("<QQQ", p)
        return st, None, None, p

    def delete(self, key, db="default", flags=LOCAL):
        return self.call(OPS["DELETE"], db_field(db) + bytes_field(key), flags)

    def batch(self, items, db="default", flags=LOCAL):
        return self.call(OPS["WRITE_BATCH"], batch_payload(db, items), flags)

    def auth(self, token):
        """Auth: u8 length, then the token's bytes (docs/PROTOCOL.md)."""
        b = token.encode() if isinstance(token, str) else token
        return self.call(OPS["AUTH"], bytes([len(b)]) + b)


def token_of(payload):
    return struct.unpack("<Q", payload[:8])[0]


_given_ports = set()


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port():
    """A port nobody listens on, below the kernel's ephemeral range and not
    handed out before by this process. A port the kernel picks for port 0 comes
    from the ephemeral range, where any outgoing connection of the test may take
    it before the server binds it (seen: "Address already in use" in
    e2e_lease); and two calls could return the same released port."""
    import random
    lo, _ = _ephemeral_range()
    first = max(1024, lo - 12000)
    for _ in range(1000):
        port = random.randrange(first, lo)
        if port in _given_ports:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _given_ports.add(port)
        return port
    raise RuntimeError("no free port below %d" % lo)


class Server:
    """A real hanudb serve process on a fresh port."""

    def __init__(self, data_dir, extra=(), port=None):
        self.data_dir = data_dir
        self.extra = list(extra)
        if "--http-addr" not in self.extra:
            # No HTTP port unless a test asks for one: the default 8080 may be taken.
            self.extra += ["--http-addr", "off"]
        self.port = port or free_port()
        self.proc = None
        self.log_path = os.path.join(tempfile.gettempdir(), "hanudb-e2e-%d-%d.log" % (os.getpid(), self.port))

    def start(self, expect_ok=True, timeout=15.0):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([BIN, "serve", "--data", self.data_dir, "--kv-addr",
                                      "127.0.0.1:%d" % self.port] + self.extra,
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                if expect_ok:
                    raise RuntimeError("server exited with %d: %s" % (self.proc.returncode, self.tail()))
                return False
            # A ping, not a connect: the port is bound (and takes connections into its
            # backlog) before the store opens, and a start-up may still fail then.
            try:
                c = Conn(self.port, timeout=max(0.1, deadline - time.time()))
                try:
                    st, _ = c.call(OPS["PING"])
                finally:
                    c.close()
                if st == PONG:
                    return True
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("server did not start listening: " + self.tail())

    def tail(self, n=2000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        if self.proc:
            self.log.close()
        code = self.proc.returncode if self.proc else None
        self.proc = None
        return code

    def stop(self):
        return self.kill(signal.SIGTERM)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def kill_rounds(srv, rounds, writers, port, verify, min_acked, pause=(0.15, 0.8), seed=None):
    """The SIGKILL loop both kill tests share: start the server, start fresh writer
    threads (writers(port) returns them), SIGKILL the server after a random pause,
    restart it, verify(port, writers), stop it; `rounds` times. Returns the total of
    acknowledged writes."""
    import random
    import time
    rng = random.Random(seed if seed is not None else int(time.time()))
    total = 0
    for rnd in range(rounds):
        srv.start()
        ws = writers(port(), rng)
        for w in ws:
            w.start()
        time.sleep(rng.uniform(*pause))
        srv.kill(signal.SIGKILL)
        for w in ws:
            w.join(timeout=10)
            check(w.error is None, "writer %d: %s" % (w.wid, w.error))
            total += w.acked
        srv.start()
        verify(port(), ws)
        srv.stop()
        print("round %2d: ok (%d writes acknowledged so far)" % (rnd + 1, total), flush=True)
    check(total > min_acked, "too few acknowledged writes to mean anything: %d" % total)
    return total
