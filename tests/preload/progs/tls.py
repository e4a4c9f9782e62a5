#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tls.py: TLS alerts that come just before a close.

  tls.py server CERT KEY PORTFILE N   N connections, one at a time
  tls.py client PORT N

Each connection: a TLS 1.3 handshake, a request; the server answers with
64 KiB that the client never reads (it waits until they are there); the
client sends close_notify (a TLS alert) and closes at once, its unread
bytes making its kernel reset the connection. The server must still read the alert that came before the
reset: it prints one line per connection, "alert" or what it got instead.
"""
import select
import socket
import ssl
import sys
import time


def server(cert, key, portfile, n):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    with open(portfile, "w") as f:
        f.write(str(ls.getsockname()[1]))
    ls.settimeout(30)
    for _ in range(n):
        raw, _ = ls.accept()
        raw.settimeout(10)
        s = ctx.wrap_socket(raw, server_side=True, suppress_ragged_eofs=False)
        try:
            s.recv(100)
            s.sendall(b"x" * (64 << 10))
            # the client's close_notify: a clean end (b""; without it,
            # an end is SSLEOFError here)
            print("data" if s.recv(100) else "alert")
        except ssl.SSLZeroReturnError:
            print("alert")
        except (ConnectionResetError, BrokenPipeError) as e:
            print(type(e).__name__)
        except ssl.SSLError as e:
            print("ssl", e.reason)
        finally:
            raw.close()


def client(port, n):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for _ in range(n):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        s = ctx.wrap_socket(raw)
        s.sendall(b"request")
        select.select([s], [], [], 10)  # the answer is here: left unread
        time.sleep(0.005)
        s.setblocking(False)
        try:
            s.unwrap()  # sends close_notify; the answer is never read
        except (ssl.SSLWantReadError, ssl.SSLError, OSError):
            pass
        s.close()


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        client(int(sys.argv[2]), int(sys.argv[3]))
