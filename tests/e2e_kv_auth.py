"""Key-value authentication (docs/PROTOCOL.md, "Authentication"): a real server with
--tokens refuses every op but Ping and Close until the connection sends Auth with a
known token, then applies the token's read-only flag and scope exactly as HTTP does;
the same through `hanudb kv --token` / HANUDB_TOKEN (the C client library); and a
server without tokens behaves as before, Auth included."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from hanukv import *  # noqa
from hanuhttp import HttpServer, Http, error_code  # noqa

ADMIN, READER, USERS = "admin-token-1", "reader-token-1", "users-writer-1"
TOKENS = "# comment\n%s rw *\n%s ro *\n%s rw users\n" % (ADMIN, READER, USERS)
AUTH_FIRST = b"authenticate first: this server has --tokens; send Auth (op 0x14) with a token"
D = db_field("default")


def every_op_but_auth(db="default"):
    """(name, op, payload) for every op that names or spans databases."""
    d = db_field(db)
    k, v, t = bytes_field("k"), bytes_field("v"), struct.pack("<Q", 1)
    return [
        ("Stats", OPS["STATS"], b""),
        ("Create", OPS["CREATE"], db_field("made-" + db)),
        ("Info", OPS["INFO"], d),
        ("Drop", OPS["DROP"], d),
        ("Get", OPS["GET"], d + k),
        ("Set", OPS["SET"], d + k + v),
        ("SetIfExists", OPS["SET_IF_EXISTS"], d + k + v),
        ("SetIfNotExists", OPS["SET_IF_NOT_EXISTS"], d + k + v),
        ("CompareSet", OPS["COMPARE_SET"], d + k + t + v),
        ("Delete", OPS["DELETE"], d + k),
        ("CompareDelete", OPS["COMPARE_DELETE"], d + k + t),
        ("WriteBatch", OPS["WRITE_BATCH"], batch_payload(db, [("set", "k", "v")])),
    ]


WRITES = ("Create", "Drop", "Set", "SetIfExists", "SetIfNotExists", "CompareSet", "Delete",
          "CompareDelete", "WriteBatch")


def t_refused_before_auth(srv):
    c = Conn(srv.port)
    for name, op, payload in every_op_but_auth():
        check(c.call(op, payload) == (UNAUTHORIZED, AUTH_FIRST), "%s before Auth" % name)
    # refused before it is parsed: no InvalidRequest tells a stranger about the payload
    check(c.call(0x7F) == (UNAUTHORIZED, AUTH_FIRST), "unknown op before Auth")
    check(c.call(OPS["GET"], b"\x00") == (UNAUTHORIZED, AUTH_FIRST), "malformed Get before Auth")
    check(c.call(OPS["PING"]) == (PONG, b""), "Ping needs no token")
    # nothing above ran
    a = Conn(srv.port)
    check(a.auth(ADMIN) == (OK, b""), "admin Auth")
    check(a.get("k")[0] == KEY_NOT_FOUND, "no write went through before Auth")
    check(a.call(OPS["INFO"], db_field("made-default"))[0] == DB_NOT_FOUND, "no Create went through")
    # Close needs no token either
    check(c.call(OPS["CLOSE"]) == (OK, b""), "Close needs no token")
    check(c.sock.recv(10) == b"", "Close closes")
    # a frame larger than an Auth's is not buffered: refused, and the connection closed
    big = Conn(srv.port)
    big.send(frame(OPS["SET"], D + bytes_field("k") + bytes_field("v" * 1000)))
    st, p = big.read_response()
    check(st == UNAUTHORIZED and p.startswith(AUTH_FIRST) and b"closes the connection" in p, "big frame: %r" % p)
    check(big.sock.recv(10) == b"", "big frame before Auth closes the connection")


def t_wrong_token(srv):
    c = Conn(srv.port)
    check(c.auth("wrong-token-9") == (UNAUTHORIZED, b"unknown token"), "wrong token")
    check(c.get("k") == (UNAUTHORIZED, None, AUTH_FIRST), "still unauthenticated after a wrong token")
    check(c.auth(ADMIN[:-1]) == (UNAUTHORIZED, b"unknown token"), "a prefix of a token")
    st, p = c.auth(ADMIN + "x")
    check(st == UNAUTHORIZED and b"closing the connection" in p, "third failure: %r" % p)
    try:
        c.call(OPS["PING"])
        check(False, "connection should be closed after three failed Auth ops")
    except (ConnectionError, OSError):
        pass
    # a failed Auth after a good one leaves the connection unauthenticated
    c = Conn(srv.port)
    check(c.auth(ADMIN) == (OK, b""), "admin Auth")
    check(c.get("k")[0] == KEY_NOT_FOUND, "authenticated")
    check(c.auth("wrong-token-9")[0] == UNAUTHORIZED, "then a wrong one")
    check(c.get("k") == (UNAUTHORIZED, None, AUTH_FIRST), "a failed Auth drops the earlier one")
    # malformed Auth payloads
    check(c.call(OPS["AUTH"], b"")[0] == INVALID_REQUEST, "Auth without a token")
    check(c.call(OPS["AUTH"], b"\x00")[0] == INVALID_REQUEST, "Auth with an empty token")
    check(c.call(OPS["AUTH"], b"\x09abc")[0] == INVALID_REQUEST, "Auth token past the payload")
    check(c.call(OPS["AUTH"], b"\x03abcd")[0] == INVALID_REQUEST, "Auth trailing bytes")


def t_admin_everything(srv):
    c = Conn(srv.port)
    # pipelined: Auth and the ops after it in one send
    c.send(frame(OPS["AUTH"], bytes([len(ADMIN)]) + ADMIN.encode()) +
           frame(OPS["SET"], D + bytes_field("a") + bytes_field("1")) + frame(OPS["GET"], D + bytes_field("a")))
    check(c.read_response() == (OK, b""), "pipelined Auth")
    st, p = c.read_response()
    check(st == OK and len(p) == 8, "pipelined Set after Auth")
    st, p = c.read_response()
    check(st == KEY_VALUE_TOKEN and p[8:] == b"1", "pipelined Get after Auth")
    check(c.call(OPS["CREATE"], db_field("users"))[0] == OK, "admin creates users")
    check(c.call(OPS["CREATE"], db_field("other"))[0] == OK, "admin creates other")
    for db in ("default", "users", "other"):
        check(c.set("k", "v", db=db)[0] == OK, "admin writes %s" % db)
    for name, op, payload in every_op_but_auth("other"):
        st, p = c.call(op, payload)
        want = {"Stats": OK, "Create": OK, "Info": OK, "Drop": OK, "Get": DB_NOT_FOUND}.get(name, DB_NOT_FOUND)
        check(st == want, "admin %s: %d %r" % (name, st, p))
    check(c.call(OPS["CREATE"], db_field("other"))[0] == OK, "admin re-creates other")
    check(c.set("k", "v", db="other")[0] == OK, "admin writes other again")
    check(json.loads(c.call(OPS["STATS"])[1])["databases"] >= 3, "stats")


def t_read_only(srv):
    c = Conn(srv.port)
    check(c.auth(READER) == (OK, b""), "reader Auth")
    check(c.get("a")[2] == b"1", "read-only token reads")
    check(c.get("k", db="users")[2] == b"v", "read-only * token reads every database")
    check(c.call(OPS["INFO"], db_field("users"))[0] == OK, "read-only Info")
    check(c.call(OPS["STATS"])[0] == OK, "read-only Stats")
    for name, op, payload in every_op_but_auth():
        if name in WRITES:
            check(c.call(op, payload) == (FORBIDDEN, b"a read-only token cannot write"), "read-only %s" % name)
    for durability in (NONE, BUCKET):
        check(c.set("a", "2", flags=durability)[0] == FORBIDDEN, "read-only Set at durability %d" % durability)
    check(c.get("a")[2] == b"1" and c.get("k")[2] == b"v", "refused writes changed nothing")


def t_scoped(srv):
    c = Conn(srv.port)
    check(c.auth(USERS) == (OK, b""), "users Auth")
    check(c.set("u1", "x", db="users")[0] == OK, "scoped token writes its database")
    check(c.get("u1", db="users")[2] == b"x", "and reads it")
    check(c.call(OPS["INFO"], db_field("users"))[0] == OK, "Info of its database")
    check(c.call(OPS["STATS"])[0] == OK, "Stats with any token (as /_status over HTTP)")
    for db in ("default", "other", "ghost"):
        want = b'the token does not cover the database "%s"' % db.encode()
        for name, op, payload in every_op_but_auth(db):
            if name in ("Stats", "Create"):
                continue
            check(c.call(op, payload) == (FORBIDDEN, want), "scoped token: %s on %s" % (name, db))
    # Forbidden comes before DbNotFound: no probing of names outside the scope
    check(c.call(OPS["CREATE"], db_field("ghost")) == (FORBIDDEN, b'the token does not cover the database "ghost"'),
          "scoped Create elsewhere")
    check(c.call(OPS["DROP"], db_field("users"))[0] == OK, "scoped token drops its database")
    check(c.call(OPS["CREATE"], db_field("users"))[0] == OK, "and creates it")
    a = Conn(srv.port)
    a.auth(ADMIN)
    check(a.get("k")[2] == b"v" and a.get("k", db="other")[2] == b"v", "other databases untouched")
    check(a.call(OPS["INFO"], db_field("ghost"))[0] == DB_NOT_FOUND, "ghost was never created")


def run_cli(srv, args, env_token=None, stdin=None):
    env = dict(os.environ)
    env.pop("HANUDB_TOKEN", None)
    if env_token is not None:
        env["HANUDB_TOKEN"] = env_token
    p = subprocess.run([BIN, "kv", "--addr", "127.0.0.1:%d" % srv.port] + list(args),
                       input=stdin, capture_output=True, timeout=20, env=env)
    return p.returncode, p.stdout, p.stderr


def no_secret(err, *secrets):
    return all(s.encode() not in err for s in secrets)


def t_cli(srv):
    rc, out, err = run_cli(srv, ["get", "a"])
    check(rc == 2 and out == b"" and b"unauthorized" in err and b"authenticate first" in err,
          "cli without a token: %d %r" % (rc, err))
    check(run_cli(srv, ["ping"])[:2] == (0, b"pong\n"), "cli ping without a token")
    rc, out, err = run_cli(srv, ["--token", "wrong-token-9", "get", "a"])
    check(rc == 2 and b"auth: unauthorized: unknown token" in err and no_secret(err, "wrong-token-9"),
          "cli wrong --token: %d %r" % (rc, err))
    rc, out, err = run_cli(srv, ["get", "a"], env_token="wrong-token-8")
    check(rc == 2 and b"unknown token" in err and no_secret(err, "wrong-token-8"), "cli wrong HANUDB_TOKEN: %r" % err)
    check(run_cli(srv, ["--token", ADMIN, "get", "a"])[:2] == (0, b"1\n"), "cli --token")
    check(run_cli(srv, ["get", "a"], env_token=ADMIN)[:2] == (0, b"1\n"), "cli HANUDB_TOKEN")
    check(run_cli(srv, ["--token", "wrong-token-9", "get", "a"], env_token=ADMIN)[0] == 2,
          "cli --token wins over HANUDB_TOKEN")
    rc, out, err = run_cli(srv, ["set", "a", "2"], env_token=READER)
    check(rc == 2 and b"set: forbidden: a read-only token cannot write" in err and no_secret(err, READER),
          "cli read-only set: %r" % err)
    check(run_cli(srv, ["get", "a"], env_token=READER)[:2] == (0, b"1\n"), "cli read-only get")
    rc, out, err = run_cli(srv, ["--db", "other", "get", "k"], env_token=USERS)
    check(rc == 2 and b"forbidden" in err and no_secret(err, USERS), "cli scoped token elsewhere: %r" % err)
    rc, out, _ = run_cli(srv, ["--db", "users", "set", "c1", "v"], env_token=USERS)
    check(rc == 0 and out.strip().isdigit(), "cli scoped token in its database")
    rc, out, _ = run_cli(srv, ["--db", "users", "batch"], env_token=USERS, stdin=b"set b1 1\ndel c1\n")
    check(rc == 0, "cli batch with a token")
    rc, _, err = run_cli(srv, ["--token", "", "get", "a"])
    check(rc == 2 and b"--token" in err, "cli empty --token")
    rc, _, err = run_cli(srv, ["--token", "x" * 256, "get", "a"])
    check(rc == 2 and no_secret(err, "x" * 256), "cli --token over 255 bytes")


def t_tokens_never_logged(srv):
    log = srv.tail(1 << 20)
    for t in (ADMIN, READER, USERS, "wrong-token-9", "wrong-token-8"):
        check(t not in log, "the server log holds no token")


def run_with_tokens(tmp):
    path = os.path.join(tmp, "tokens")
    with open(path, "w") as f:
        f.write(TOKENS)
    # --http-addr off (the default of these tests): tokens guard the key-value port alone too
    srv = Server(os.path.join(tmp, "auth"), ["--tokens", path])
    srv.start()
    check("tokens required" in srv.tail(), "the server says the key-value port needs tokens")
    failures = 0
    try:
        for t in (t_refused_before_auth, t_wrong_token, t_admin_everything, t_read_only, t_scoped, t_cli,
                  t_tokens_never_logged):
            try:
                t(srv)
                print("ok   %s" % t.__name__, flush=True)
            except Exception as e:  # noqa
                failures += 1
                print("FAIL %s: %s" % (t.__name__, e), flush=True)
    finally:
        srv.stop()
    return failures


def run_on(srv, fn):
    """Runs fn(srv) on a started server; 1 when it failed."""
    srv.start()
    try:
        fn(srv)
        print("ok   %s" % fn.__name__, flush=True)
        return 0
    except Exception as e:  # noqa
        print("FAIL %s: %s" % (fn.__name__, e), flush=True)
        return 1
    finally:
        srv.stop()


def t_shared_with_http(srv):
    """One token table for both faces: HANUDB_TOKENS-style inline lines, a collection
    written over HTTP is guarded the same over the key-value port."""
    check(Http(srv.http_port, token=USERS).json("PUT", "/c/users/docs/a", {"v": 1})[0] == 201, "HTTP write")
    check(Http(srv.http_port, token=USERS).json("PUT", "/c/secret/docs/a", {"v": 1})[0] == 403, "HTTP scope")
    check(Http(srv.http_port, token=ADMIN).json("PUT", "/c/secret/docs/a", {"v": 2})[0] == 201, "HTTP admin")
    c = Conn(srv.port)
    check(c.get("a", db="secret")[0] == UNAUTHORIZED, "collection unreadable over kv without a token")
    check(c.auth(USERS) == (OK, b""), "users Auth")
    st, _, v = c.get("a", db="users")
    check(st == KEY_VALUE_TOKEN and json.loads(v)["v"] == 1, "scoped token reads its collection over kv")
    check(c.get("a", db="secret")[0] == FORBIDDEN, "and not another collection")
    check(c.set("a", '{"v":3}', db="secret")[0] == FORBIDDEN, "nor writes it")
    check(Http(srv.http_port, token=ADMIN).json("GET", "/c/secret/docs/a")[2]["v"] == 2, "secret untouched")


def t_without_tokens(srv):
    """No --tokens: nothing changes; Auth answers Ok to any token."""
    c = Conn(srv.port)
    check(c.set("a", "1")[0] == OK and c.get("a")[2] == b"1", "no Auth needed")
    check(c.call(OPS["CREATE"], db_field("users"))[0] == OK, "create without a token")
    check(c.auth("anything-at-all") == (OK, b""), "Auth answers Ok without tokens")
    check(c.auth("x") == (OK, b""), "any token, of any length")
    check(c.set("a", "2")[0] == OK and c.set("k", "v", db="users")[0] == OK, "writes after Auth")
    check(c.call(OPS["AUTH"], b"")[0] == INVALID_REQUEST, "a malformed Auth is still refused")
    check(c.call(0x7F)[0] == INVALID_REQUEST, "unknown op: InvalidRequest, as before")
    big = Conn(srv.port)
    big.send(frame(OPS["SET"], D + bytes_field("big") + bytes_field("v" * 1000)))
    check(big.read_response()[0] == OK, "large frames need no Auth")
    check(run_cli(srv, ["get", "a"])[:2] == (0, b"2\n"), "cli without a token")
    check(run_cli(srv, ["--token", "whatever-1", "get", "a"])[:2] == (0, b"2\n"), "cli --token without tokens")
    check(run_cli(srv, ["get", "a"], env_token="whatever-2")[:2] == (0, b"2\n"), "cli HANUDB_TOKEN without tokens")
    check("tokens required" not in srv.tail(), "no tokens claimed")


def main():
    tmp = tempfile.mkdtemp(prefix="hanudb-kvauth-")
    try:
        failures = run_with_tokens(tmp)
        failures += run_on(HttpServer(os.path.join(tmp, "both"), ["--tokens", TOKENS.replace("\n", ";")]),
                           t_shared_with_http)
        failures += run_on(Server(os.path.join(tmp, "open")), t_without_tokens)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        sys.exit(1)


if __name__ == "__main__":
    main()
