# SPDX-License-Identifier: MIT
# status_test.py BUILD_DIR: zl-ss lists what a preloaded process holds and
# what a zipline server counts, exactly, and survives hostile status pages:
#  - a switched TCP pair, its dup and a Unix pair: side, addresses, PATH
#    ring, the bytes each way; a client kept on the kernel (no preloaded
#    listener) and an accepted socket whose client is not preloaded, with
#    their reasons and the kernel's bytes (tcp_info); a closed socket gone; a forked child listing the same;
#    ZL_STATUS=0 listing nothing;
#  - zl-kvd's counters (requests served), live; a process's channels
#    (zl_connect, zl_accept), their messages and bytes each way, gone at
#    zl_close;
#  - pages a same-uid process forged: unsealed, short, a slot count past
#    the page, another pid's, strings without an end, a torn slot, a slot
#    at another fd's index, rings that are not rings: each skipped or shown
#    cleaned, never a crash.
import json, os, socket, struct, subprocess, sys, tempfile, time

B = sys.argv[1]
ZLRUN, ZLSS = B + "/tools/zl-run", B + "/tools/zl-ss"
LIB = B + "/src/preload/libzipline-preload.so"
fails = []


def fail(msg):
    print("FAIL:", msg)
    fails.append(msg)


def zlss(*args):
    return subprocess.run([ZLSS, *args], capture_output=True, text=True, timeout=30)


def rows(pid, *opts):
    r = zlss("--csv", "-", "--pid", str(pid), *opts)
    lines = r.stdout.splitlines()
    if r.returncode != 0 or not lines or not lines[0].startswith("PID,PROGRAM,FD"):
        fail("zl-ss --pid %d: exit %d, '%s' '%s'" % (pid, r.returncode, r.stdout, r.stderr))
        return {}, r
    cols = lines[0].split(",")
    out = {}
    for l in lines[1:]:
        d = dict(zip(cols, l.split(",")))
        key = d["FD"] if d["FD"] != "-" else d["PATH"]
        if key in out and key not in ("server", "channel"):
            fail("zl-ss --pid %d: fd %s listed twice: '%s'" % (pid, key, r.stdout))
        if len(l.split(",")) != len(cols):
            fail("zl-ss --pid %d: a row of %d fields: '%s'" % (pid, len(l.split(",")), l))
        out[key] = d
    return out, r


def addr(t):
    return "%s:%d" % tuple(t)


# ---- a preloaded process ---------------------------------------------------
CHILD = r'''
import json, os, socket, subprocess, sys, time
def say(d): print(json.dumps(d), flush=True)
def exch(x, y, n, m):
    x.sendall(b"a" * n); got = 0
    while got < n: got += len(y.recv(65536))
    y.sendall(b"b" * m); got = 0
    while got < m: got += len(x.recv(65536))
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(8)
c = socket.create_connection(l.getsockname()); a = l.accept()[0]
exch(c, a, 1000, 77)
path = sys.argv[2] + "/u.sock"
lu = socket.socket(socket.AF_UNIX); lu.bind(path); lu.listen(8)
cu = socket.socket(socket.AF_UNIX); cu.connect(path); au = lu.accept()[0]
exch(cu, au, 5, 3)
d = os.dup(c.fileno())
k = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
k.sendall(b"333")
lp = socket.socket(); lp.bind(("127.0.0.1", 0)); lp.listen(8)
say({"pid": os.getpid(), "c": c.fileno(), "a": a.fileno(), "cu": cu.fileno(), "au": au.fileno(),
     "d": d, "k": k.fileno(), "cl": c.getsockname(), "cp": c.getpeername(),
     "kl": k.getsockname(), "kp": k.getpeername(), "lp": lp.getsockname()[1]})
ap = lp.accept()[0]
ap.sendall(b"666666")
say({"ap": ap.fileno(), "apl": ap.getsockname(), "app": ap.getpeername()})
for cmd in sys.stdin:
    cmd = cmd.strip()
    if cmd == "close":  # (and a subprocess: CPython's vfork child closes fds
        # on our memory, which must not clear our slots)
        os.close(d); k.close(); subprocess.run(["true"], check=True); say({})
    elif cmd == "fork":
        p = os.fork()
        if p == 0:
            say({"child": os.getpid()}); time.sleep(60); os._exit(0)
        say({})
    elif cmd == "churn":  # connections made and closed, a close_range, a fork
        t0 = time.time()
        socks = []
        for i in range(20):
            x = socket.create_connection(l.getsockname())
            socks += [x, l.accept()[0]]
        fds = sorted(s.fileno() for s in socks)
        for s in socks:
            s.detach()
        os.closerange(fds[0], fds[-1] + 1)
        p = os.fork()
        if p == 0:
            os._exit(0)
        st = os.waitpid(p, 0)[1]
        exch(c, a, 10, 10)
        say({"churn_s": time.time() - t0, "child": st})
    elif cmd == "exit":
        break
'''

tmp = tempfile.mkdtemp()
plain = socket.socket()
plain.bind(("127.0.0.1", 0))
plain.listen(8)
p = subprocess.Popen([ZLRUN, "--lib", LIB, "--log", "error", "--", sys.executable, "-c", CHILD,
                      str(plain.getsockname()[1]), tmp],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
st = json.loads(p.stdout.readline())
kin = plain.accept()[0]
kin.sendall(b"4444")  # (unread: the kernel's tcp_info counts them received)
mine = socket.create_connection(("127.0.0.1", st["lp"]))
mine.sendall(b"999999999")
st.update(json.loads(p.stdout.readline()))
kin.recv(3)  # (bytes acked: without the connecting SYN, as ss -ti would not)
mine.recv(6)
pid = st["pid"]

want = {
    st["c"]: ("tcp", "client", addr(st["cl"]), addr(st["cp"]), "ring", "1000", "77", "-"),
    st["d"]: ("tcp", "client", addr(st["cl"]), addr(st["cp"]), "ring", "1000", "77", "-"),
    st["a"]: ("tcp", "server", addr(st["cp"]), addr(st["cl"]), "ring", "77", "1000", "-"),
    st["cu"]: ("unix", "client", None, None, "ring", "5", "3", "-"),
    st["au"]: ("unix", "server", None, None, "ring", "3", "5", "-"),
    st["k"]: ("tcp", "-", addr(st["kl"]), addr(st["kp"]), "kernel", "3", "4",
              "no preloaded listener there"),
    st["ap"]: ("tcp", "-", addr(st["apl"]), addr(st["app"]), "kernel", "6", "9",
               "the client is not preloaded"),
}


def check(pid, want, what, tries=20):
    got, r = rows(pid)
    # (a peer's delayed ACK may hold the kernel's bytes acked back 40 ms)
    while tries > 1 and any(got.get(str(fd), {}).get("OUT") != w[5]
                            for fd, w in want.items() if w[4] == "kernel"):
        time.sleep(0.1)
        tries -= 1
        got, r = rows(pid)
    if sorted(got) != sorted(str(f) for f in want):
        fail("%s: fds %s listed, want %s (%s)" % (what, sorted(got), sorted(want), r.stdout))
        return
    for fd, w in want.items():
        g = got[str(fd)]
        have = (g["PROTO"], g["SIDE"], g["LOCAL"], g["PEER"], g["PATH"], g["OUT"], g["IN"],
                g["WHY"])
        for i, (x, y) in enumerate(zip(have, w)):
            if y is not None and x != y:
                fail("%s: fd %d: %s is '%s', want '%s' (row %s)" % (what, fd, list(g)[i + 3],
                                                                   x, y, g))
    if str(pid) not in (r.stdout.splitlines()[1] if len(r.stdout.splitlines()) > 1 else ""):
        fail("%s: rows not of pid %d" % (what, pid))


check(pid, want, "a preloaded process")

# its page forged by another process of the user's: every slot taken and
# "being written", the slot count past the page; the process never reads
# its page back, so it goes on as before (no crash, no wait), and zl-ss
# shows what the forger wrote, cleaned or skipped
for fd in os.listdir("/proc/%d/fd" % pid):
    try:
        link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
    except OSError:
        continue
    if link == "/memfd:zipline-status (deleted)":
        with open("/proc/%d/fd/%s" % (pid, fd), "r+b") as f:
            f.seek(28)
            f.write(struct.pack("<I", 0xFFFFFFFF))
            for off in range(128, 128 + 65536 * 256, 256 * 61):
                f.seek(off)
                f.write(struct.pack("<IH", 1, 3))
p.stdin.write("churn\n")
p.stdin.flush()
line = p.stdout.readline()
if not line or json.loads(line).get("churn_s", 99) > 5 or json.loads(line).get("child") != 0:
    fail("after its page was forged, the process: '%s' (exit %s)" % (line, p.poll()))
r = zlss("--pid", str(pid))
if r.returncode != 0:
    fail("zl-ss on a forged page: exit %d, '%s'" % (r.returncode, r.stderr))
# (the process rewrote what it writes since: its slots' counts and the
# page's slot count; the churn's 10 bytes each way are in the counts)
for fd in (st["c"], st["d"]):
    want[fd] = want[fd][:5] + ("1010", "87") + want[fd][7:]
want[st["a"]] = want[st["a"]][:5] + ("87", "1010") + want[st["a"]][7:]
want[st["cu"]] = want[st["cu"]]
# --kernel and --ring split the rows
k_rows, _ = rows(pid, "--kernel")
r_rows, _ = rows(pid, "--switched")
if sorted(k_rows) != sorted([str(st["k"]), str(st["ap"])]) or len(r_rows) != 5:
    fail("--kernel lists %s, --switched %s" % (sorted(k_rows), sorted(r_rows)))
# the plain text form has the same rows
r = zlss("--pid", str(pid))
if r.returncode != 0 or len(r.stdout.splitlines()) != 8 or "no preloaded listener there" not in r.stdout:
    fail("plain output: exit %d, '%s'" % (r.returncode, r.stdout))

p.stdin.write("close\n")
p.stdin.flush()
p.stdout.readline()
del want[st["d"]], want[st["k"]]
check(pid, want, "after closing the dup and the kernel socket")

p.stdin.write("fork\n")
p.stdin.flush()
said = [json.loads(p.stdout.readline()), json.loads(p.stdout.readline())]
child = [x["child"] for x in said if "child" in x][0]
check(child, want, "the forked child")
check(pid, want, "the parent after the fork")
os.kill(child, 9)
p.stdin.write("exit\n")
p.stdin.flush()
p.wait(timeout=30)

# ZL_STATUS=0: no page
env = dict(os.environ, ZL_STATUS="0")
q = subprocess.Popen([ZLRUN, "--lib", LIB, "--log", "error", "--", sys.executable, "-c", CHILD,
                      str(plain.getsockname()[1]), tempfile.mkdtemp()],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
s0 = json.loads(q.stdout.readline())
keep = [plain.accept()[0], socket.create_connection(("127.0.0.1", s0["lp"]))]
q.stdout.readline()
got, r = rows(s0["pid"])
if got:
    fail("ZL_STATUS=0 listed %s" % r.stdout)
q.stdin.write("exit\n")
q.stdin.flush()
q.wait(timeout=30)

# ---- a zipline server's counters --------------------------------------------
kvd = B + "/tools/zl-kvd"
ycsb = B + "/tools/zl-ycsb"
sock = tmp + "/kv.sock"
srv = subprocess.Popen([kvd, "--listen", "unix://" + sock], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
try:
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    y = subprocess.run([ycsb, "--records", "100", "--ops", "1000", "--quiet",
                        "zl://unix://" + sock], capture_output=True, text=True, timeout=120)
    if y.returncode != 0:
        fail("zl-ycsb: %s" % y.stderr)
    time.sleep(0.3)  # (the counters are copied at most every 100 ms)
    got, r = rows(srv.pid)
    s = got.get("server")
    ctr = dict(kv.split("=") for kv in s["WHY"].split(";")) if s else {}
    if not s or s["LOCAL"] != "unix://" + sock or int(ctr.get("requests", 0)) < 1100 or \
            ctr.get("accepted") != "2" or ctr.get("spurious") != "0":
        fail("zl-kvd's row: %s" % r.stdout)
finally:
    srv.kill()
    srv.wait()

# ---- a process's channels (zl_connect, zl_accept), through ctypes -----------
# each side's counts are copied every 1024 messages, and when a call of that
# side returns without one
import ctypes, threading
zl = ctypes.CDLL(B + "/libzipline.so")
vp = ctypes.c_void_p
zl.zl_listen.argtypes = [ctypes.c_char_p, vp, ctypes.POINTER(vp)]
zl.zl_connect.argtypes = [ctypes.c_char_p, vp, ctypes.c_int64, ctypes.POINTER(vp)]
zl.zl_accept.argtypes = [vp, ctypes.c_int64, ctypes.POINTER(vp)]
zl.zl_send.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64]
zl.zl_recv.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                       ctypes.c_int64]
zl.zl_close.argtypes = [vp]
zl.zl_listener_close.argtypes = [vp]
lst, cli, acc = vp(), vp(), vp()
curl = ("unix://%s/ch.sock" % tmp).encode()
if zl.zl_listen(curl, None, ctypes.byref(lst)):
    fail("zl_listen %s" % curl)
else:
    t = threading.Thread(target=lambda: zl.zl_accept(lst, 5000000, ctypes.byref(acc)))
    t.start()
    rc = zl.zl_connect(curl, None, 5000000, ctypes.byref(cli))
    t.join()
    buf, n = ctypes.create_string_buffer(200), ctypes.c_size_t()
    msg = b"m" * 100
    for i in range(1029):  # 1024 copied; then 5 more on the sending side are not
        if zl.zl_send(cli, msg, 100, 1000000) or zl.zl_recv(acc, buf, 200, ctypes.byref(n),
                                                          1000000) or n.value != 100:
            fail("channel message %d" % i)
            break
    zl.zl_recv(acc, buf, 200, ctypes.byref(n), 0)  # -EAGAIN: the receiver copies its 1029
    got, r = rows(os.getpid())
    lines = [l.split(",") for l in r.stdout.splitlines()[1:]]
    chans = sorted([l for l in lines if l[7] == "channel"], key=lambda l: l[11 - 1])
    want = [[str(os.getpid()), "python3", "-", "-", "channel", curl.decode(), "-", "channel",
             "0", "102900", "msgs_sent=0;msgs_recv=1029"],
            [str(os.getpid()), "python3", "-", "-", "channel", curl.decode(), "-", "channel",
             "102400", "0", "msgs_sent=1024;msgs_recv=0"]]
    if rc or chans != sorted(want, key=lambda l: l[10]):
        fail("channels: %s, want %s" % (chans, want))
    zl.zl_close(cli)
    zl.zl_close(acc)
    zl.zl_listener_close(lst)
    got, r = rows(os.getpid())
    if "channel" in r.stdout:
        fail("closed channels still listed: %s" % r.stdout)

# ---- forged pages -----------------------------------------------------------
PAGE = 128 + 65536 * 256
F_ADD_SEALS, F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW = 1033, 1, 2, 4
import fcntl


def memfd(name, size, seal=True):
    fd = os.memfd_create(name, os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    if seal:
        fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
    return fd


def hdr(pid, hi, nslots=65536):
    return struct.pack("<IIIIIiII", 0x54534c5a, 1, 128, 256, nslots, pid, 1, hi) + bytes(96)


def slot(seq, typ, state, fd, mem, own, ino, why, name=b""):
    s = struct.pack("<IHHiiiB3xQ", seq, typ, state, fd, mem, own, 0, ino)
    return s + why.ljust(80, b"\0")[:80] + name.ljust(80, b"\0")[:80] + bytes(64)


me = os.getpid()
victim = socket.socket()  # real sockets of ours for slots to name
vfd, vino = victim.fileno(), os.fstat(victim.fileno()).st_ino
victim2 = socket.socket()
v2fd, v2ino = victim2.fileno(), os.fstat(victim2.fileno()).st_ino
bad_rings = memfd("zipline-preload", 100)
pages = []
for seal, size, h in [(False, PAGE, hdr(me, 0)),            # not sealed
                      (True, 64, b""),                      # shorter than a header
                      (True, PAGE, hdr(me, 0xFFFFFFFF)),    # hi past the slots
                      (True, PAGE, hdr(me, 0, 1 << 30)),    # nslots past the page
                      (True, PAGE, hdr(me + 1, 0))]:        # another pid's
    fd = memfd("zipline-status", size, seal=False)
    os.pwrite(fd, h, 0)
    if seal:
        fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
    pages.append(fd)
good = memfd("zipline-status", PAGE, seal=False)
hi = max(vfd, v2fd, 40) + 2
os.pwrite(good, hdr(me, hi), 0)
junk = bytes(range(1, 32)) + b",\x7f\xff" * 20
os.pwrite(good, slot(2, 1, 4, vfd, -1, -1, vino, junk), 128 + 256 * vfd)       # dirty why
os.pwrite(good, slot(3, 1, 4, v2fd, -1, -1, v2ino, b"torn"), 128 + 256 * v2fd)  # odd count
os.pwrite(good, slot(2, 1, 2, vfd, bad_rings, 0, vino, b""), 128 + 256 * 3)  # fd != index
os.pwrite(good, slot(2, 2, 0, -1, -1, -1, 0, b"", junk), 128 + 256 * 20)     # a server
fcntl.fcntl(good, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
got, r = rows(me)
skips = [l for l in r.stderr.splitlines() if "not a status page" in l]
if len(skips) != 5:
    fail("forged pages: %d skipped, want 5: '%s'" % (len(skips), r.stderr))
if sorted(got) != sorted([str(vfd), "server"]):
    fail("forged pages: rows %s, want fd %d and a server: '%s'" % (sorted(got), vfd, r.stdout))
else:
    w = got[str(vfd)]["WHY"]
    if len(w) > 79 or not w.isprintable() or "," in w or not w.startswith("?"):
        fail("a dirty reason shown as '%s'" % w)
# a ring slot whose rings are not: listed without bytes
os.close(good)
good = memfd("zipline-status", PAGE, seal=False)
os.pwrite(good, hdr(me, hi), 0)
os.pwrite(good, slot(2, 1, 2, vfd, bad_rings, vfd, vino, b""), 128 + 256 * vfd)
fcntl.fcntl(good, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
got, r = rows(me)
v = got.get(str(vfd))
if not v or v["OUT"] != "-" or v["IN"] != "-" or v["PATH"] != "ring":
    fail("rings that are not rings: '%s' '%s'" % (r.stdout, r.stderr))

if fails:
    sys.exit(1)
print("PASS: zl-ss lists sockets, reasons, bytes, forks, closes and a server's counters; "
      "forged pages skipped or cleaned")
