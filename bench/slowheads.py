#!/usr/bin/env python3
"""slowheads.py - slow request heads against an HTTP server (issue #26).

Opens N connections that each send an incomplete request head
("GET /hello.txt HTTP/1.1\\r\\n", then, with --trickle, one header byte
every --every seconds) and keep them open; meanwhile a normal client asks
for PATH on a fresh connection every 0.2 s and records how long each answer
took. At the end it waits for the server to close the slow connections and
reports, from each one's connect, when that happened.

    bench/slowheads.py --port 8080 --slow 15 --seconds 6 [--trickle]

Prints one summary line; used for the figures in docs/design/prefork.md and
bench/results/history.md. Bounded: --seconds of load, then at most
--wait seconds for the slow connections to close.
"""
import argparse
import select
import socket
import statistics
import time


def request(host, port, path, timeout):
    t0 = time.monotonic()
    try:
        s = socket.create_connection((host, port), timeout=timeout)
        s.sendall(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        if not data.startswith(b"HTTP/1."):
            return None
    except OSError:
        return None
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--slow", type=int, default=15)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--trickle", action="store_true", help="one header byte per --every s")
    ap.add_argument("--every", type=float, default=0.5)
    ap.add_argument("--wait", type=float, default=10.0, help="for the slow ones to close")
    ap.add_argument("--path", default="/hello.txt")
    a = ap.parse_args()

    slow = []
    for _ in range(a.slow):
        s = socket.create_connection((a.host, a.port))
        s.sendall(b"GET /hello.txt HTTP/1.1\r\n")
        s.setblocking(False)
        slow.append([s, time.monotonic(), None])
    time.sleep(0.1)
    lat = []
    failed = 0
    end = time.monotonic() + a.seconds
    nxt = time.monotonic()
    while time.monotonic() < end:
        now = time.monotonic()
        if a.trickle and now >= nxt:
            for e in slow:
                if e[2] is None:
                    try:
                        e[0].send(b"X")
                    except OSError:
                        e[2] = now - e[1]
            nxt = now + a.every
        t = request(a.host, a.port, a.path, max(0.5, end - now + 1))
        if t is None:
            failed += 1
        else:
            lat.append(t)
        for e in slow:
            if e[2] is None:
                r, _, _ = select.select([e[0]], [], [], 0)
                if r:
                    try:
                        if e[0].recv(4096) == b"":
                            e[2] = time.monotonic() - e[1]
                    except OSError:
                        e[2] = time.monotonic() - e[1]
        time.sleep(0.2)
    stop = time.monotonic() + a.wait
    while time.monotonic() < stop and any(e[2] is None for e in slow):
        live = [e for e in slow if e[2] is None]
        r, _, _ = select.select([e[0] for e in live], [], [], 0.05)
        for e in live:
            if e[0] in r:
                try:
                    data = e[0].recv(4096)
                except OSError:
                    data = b""
                if data == b"":
                    e[2] = time.monotonic() - e[1]
    closed = sorted(e[2] for e in slow if e[2] is not None)
    print(
        "slow %d: client answers %d (failed %d) latency median %.3f s max %.3f s; "
        "slow ones closed %d/%d at %s s after connect"
        % (
            a.slow,
            len(lat),
            failed,
            statistics.median(lat) if lat else -1,
            max(lat) if lat else -1,
            len(closed),
            a.slow,
            "%.2f-%.2f" % (closed[0], closed[-1]) if closed else "-",
        )
    )


if __name__ == "__main__":
    main()
