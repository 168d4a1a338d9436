#!/usr/bin/env python3
"""Throughput of the HTTP/1.1 request parser on large bodies .

A 32 MiB body is fed in 64 KiB pieces (as a socket delivers it), once framed by
Content-Length and once chunked with 64 KiB chunks (the pieces do not line up with the
chunks, so chunk-size lines are cut too). Prints MB/s for both, then parses twice the
size to show the cost is linear (no quadratic buffer copying): the time ratio should be
close to 2.

    python3 tools/bench_parse.py [--mib 32] [--piece 65536] [--repeat 7]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from ide_protocol.wire.http11 import Data, EndOfMessage, RequestParser, write_request  # noqa: E402

MIB = 1024 * 1024


def make_pieces(size: int, chunked: bool, piece: int):
    body = (b"0123456789abcdef" * (size // 16 + 1))[:size]
    wire = write_request("POST", "/mcp", [("Host", "localhost"), ("content-type", "application/json")],
                         body, chunked=chunked, chunk_size=65536)
    return [wire[i:i + piece] for i in range(0, len(wire), piece)], size


def parse_once(pieces, size: int) -> float:
    parser = RequestParser(max_body=max(size, 32 * MIB))
    received = 0
    ended = False
    start = time.perf_counter()
    for p in pieces:
        for event in parser.feed(p):
            if type(event) is Data:
                received += len(event.data)
            elif type(event) is EndOfMessage:
                ended = True
    elapsed = time.perf_counter() - start
    if received != size or not ended:
        raise SystemExit("parse error: got %d of %d bytes, ended=%s" % (received, size, ended))
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=32, help="body size in MiB (default 32)")
    ap.add_argument("--piece", type=int, default=65536, help="bytes per feed() call (default 65536)")
    ap.add_argument("--repeat", type=int, default=7, help="runs per measurement; the best is kept")
    args = ap.parse_args()
    size = args.mib * MIB
    print("CPython %s, body %d MiB fed in %d-byte pieces, best of %d"
          % (sys.version.split()[0], args.mib, args.piece, args.repeat))
    status = 0
    for chunked in (False, True):
        label = "chunked (64 KiB chunks)" if chunked else "Content-Length"
        pieces, n = make_pieces(size, chunked, args.piece)
        pieces2, n2 = make_pieces(2 * size, chunked, args.piece)
        # Interleaved, best of each: the machine's noise hits both sizes alike.
        t1 = t2 = float("inf")
        for _ in range(args.repeat):
            t1 = min(t1, parse_once(pieces, n))
            t2 = min(t2, parse_once(pieces2, n2))
        del pieces, pieces2
        rate = n / t1 / 1e6
        ratio = t2 / t1
        print("%-24s %8.0f MB/s  (%d MiB: %.1f ms; %d MiB: %.1f ms, ratio %.2f -> %s)"
              % (label, rate, args.mib, t1 * 1e3, 2 * args.mib, t2 * 1e3, ratio,
                 "linear" if ratio < 3.0 else "NOT LINEAR"))
        if ratio >= 3.0:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
