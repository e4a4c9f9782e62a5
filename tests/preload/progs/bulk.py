#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bulk.py: a stream of N bytes each way at once, byte-checked.

  bulk.py server PORTFILE N    listen on 127.0.0.1 (port into PORTFILE),
                               serve one connection, print the sha256 of
                               what came, exit
  bulk.py client PORT N [DONE] connect, print the sha256 of what came back;
                               with DONE, shut its sending side only after
                               the server's stream ended, and close only
                               once the file DONE is not empty (the
                               server's result): HAProxy 2.6 with splice
                               cuts a stream short or resets it when the
                               two ends' shutdowns cross it at once, or
                               when the client closes first, also without
                               any preload
  bulk.py expect N SEED        the sha256 of the stream SEED of N bytes

Each side sends the stream of its seed (client 1, server 2: a 1 MiB block
of random bytes from the seed, each repeat rotated by one byte, so that a
lost, doubled or misplaced chunk shows) and reads until the peer's end.
"""
import hashlib
import os
import random
import socket
import sys
import threading
import time

CHUNK = 65536


def stream(seed, n):
    block = random.Random(seed).randbytes(1 << 20)
    i = 0
    while n > 0:
        rot = i % len(block)
        b = block[rot:] + block[:rot]
        i += 1
        take = min(n, len(b))
        for off in range(0, take, CHUNK):
            yield b[off:min(off + CHUNK, take)]
        n -= take


def run(sock, seed, n, done=None):
    ended = threading.Event()  # the peer's stream came to its end

    def send():
        for c in stream(seed, n):
            sock.sendall(c)
        if done and os.environ.get("ZL_BULK_CROSSING") != "1":
            ended.wait(120)
        sock.shutdown(socket.SHUT_WR)
    t = threading.Thread(target=send)
    t.start()
    h = hashlib.sha256()
    got = 0
    buf = bytearray(CHUNK)
    while True:
        k = sock.recv_into(buf)
        if not k:
            ended.set()
            break
        h.update(memoryview(buf)[:k])
        got += k
    t.join()
    print(f"{got} {h.hexdigest()}", flush=True)
    deadline = time.monotonic() + 60
    while done and time.monotonic() < deadline:
        try:
            if os.path.getsize(done) > 0:
                break
        except OSError:
            pass
        time.sleep(0.01)


def main():
    mode, n = sys.argv[1], int(sys.argv[3])
    if mode == "expect":
        h = hashlib.sha256()
        for c in stream(int(sys.argv[3]), int(sys.argv[2])):
            h.update(c)
        print(f"{sys.argv[2]} {h.hexdigest()}")
    elif mode == "server":
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        with open(sys.argv[2], "w") as f:
            f.write(str(ls.getsockname()[1]))
        ls.settimeout(60)
        s, _ = ls.accept()
        s.settimeout(120)
        run(s, 2, n)
    else:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=60)
        s.settimeout(120)
        run(s, 1, n, sys.argv[4] if len(sys.argv) > 4 else None)


main()
