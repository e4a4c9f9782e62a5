#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mp.py: Python's multiprocessing over local sockets, as programs use it.

A forkserver start method (its server takes each new process's fds over a
Unix socket with SCM_RIGHTS), a Pool, a Manager (a server on a Unix
socket), and a socket handed to another process over a
multiprocessing.connection Listener/Client connection (send_handle: fd
passing over a Unix stream), and a subprocess spawned beside a connection.
Prints its results; the caller compares them
plain and preloaded.
"""
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing import connection, reduction


PINGS = 100


def sq(x):
    return x * x


def take_socket(address):
    with connection.Client(address, family="AF_UNIX") as c:
        c.send("ready")
        for _ in range(PINGS):
            c.send(c.recv())
        fd = reduction.recv_handle(c)
        s = socket.socket(fileno=fd)
        s.sendall(s.recv(100).upper())
        s.close()
        c.send(c.recv() + " back")


def main():
    ctx = mp.get_context("forkserver")
    with ctx.Pool(4) as p:
        print("pool", sum(p.map(sq, range(2000))))
    with ctx.Manager() as m:
        d, items = m.dict(), m.list()
        for i in range(200):
            d[i] = 2 * i
            items.append(i)
        print("manager", sum(d.values()), sum(items))
    path = os.path.join(tempfile.mkdtemp(), "l")
    with connection.Listener(path, family="AF_UNIX") as ls:
        proc = ctx.Process(target=take_socket, args=(path,))
        proc.start()
        with ls.accept() as c:
            print("child", c.recv())
            # round trips first, over 0.2 s at least: preloaded, the
            # connection is switched when the fd goes (that moves it back)
            for i in range(PINGS):
                c.send(i)
                assert c.recv() == i
                time.sleep(0.002)
            mine, theirs = socket.socketpair()
            reduction.send_handle(c, theirs.fileno(), proc.pid)
            theirs.close()
            mine.sendall(b"over a passed socket")
            print("passed", mine.recv(100).decode())
            c.send("and the connection")
            print("after", c.recv())
        proc.join(30)
        print("exit", proc.exitcode)
    os.rmdir(os.path.dirname(path))  # (the Listener removed its socket file)
    # a subprocess (CPython spawns with vfork: the child closes fds on our
    # memory until it execs) leaves our connections as they were: bytes
    # sent before it still arrive
    with socket.create_server(("127.0.0.1", 0)) as ls:
        cl = socket.create_connection(ls.getsockname())
        sv = ls.accept()[0]
        cl.sendall(b"x")
        sv.recv(1)
        cl.sendall(b"sent before the spawn")
        subprocess.run(["true"], check=True)
        sv.settimeout(10)
        print("spawn", sv.recv(100).decode())
        cl.close()
        sv.close()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
