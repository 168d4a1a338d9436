"""A minimal msgpack-RPC client of Neovim (`nvim --listen SOCKET`), standard library
only: the tests read Neovim's state with it (`nvim_eval`, `nvim_exec_lua`) without
typing into Neovim, so a read never changes its mode (Visual, Insert) or its screen.

Only what Neovim's API uses: nil, booleans, integers, floats, strings (Neovim's are
UTF-8; bytes that are not come back with surrogate escapes), binary, arrays, maps, and
the extension types of buffers, windows and tab pages (returned as their numbers).
"""
from __future__ import annotations

import socket
import struct
import time
from typing import Any, List, Tuple


class NvimError(RuntimeError):
    pass


def pack(obj: Any) -> bytes:
    if obj is None:
        return b"\xc0"
    if obj is True:
        return b"\xc3"
    if obj is False:
        return b"\xc2"
    if isinstance(obj, int):
        if 0 <= obj < 128:
            return bytes([obj])
        if -32 <= obj < 0:
            return struct.pack("b", obj)
        if 0 <= obj < 2 ** 32:
            return b"\xce" + struct.pack(">I", obj)
        if 0 <= obj:
            return b"\xcf" + struct.pack(">Q", obj)
        return b"\xd3" + struct.pack(">q", obj)
    if isinstance(obj, float):
        return b"\xcb" + struct.pack(">d", obj)
    if isinstance(obj, str):
        obj = obj.encode("utf-8", "surrogateescape")
    if isinstance(obj, bytes):
        n = len(obj)
        if n < 32:
            return bytes([0xA0 | n]) + obj
        return b"\xdb" + struct.pack(">I", n) + obj
    if isinstance(obj, (list, tuple)):
        return b"\xdd" + struct.pack(">I", len(obj)) + b"".join(pack(x) for x in obj)
    if isinstance(obj, dict):
        return b"\xdf" + struct.pack(">I", len(obj)) + b"".join(pack(k) + pack(v) for k, v in obj.items())
    raise TypeError("cannot pack %r" % (obj,))


class _Incomplete(Exception):
    pass


def unpack(data: bytes, i: int = 0) -> Tuple[Any, int]:
    """One value at `data[i:]` and the offset after it; raises _Incomplete."""
    def take(n: int) -> bytes:
        nonlocal i
        if i + n > len(data):
            raise _Incomplete()
        chunk = data[i:i + n]
        i += n
        return chunk

    b = take(1)[0]
    if b < 0x80:
        return b, i
    if b >= 0xE0:
        return b - 0x100, i
    if 0x80 <= b <= 0x8F:
        return _map(data, i, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _array(data, i, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        return take(b & 0x1F).decode("utf-8", "surrogateescape"), i
    if b == 0xC0:
        return None, i
    if b in (0xC2, 0xC3):
        return b == 0xC3, i
    if b in (0xC4, 0xC5, 0xC6):
        n = struct.unpack(">" + "BHI"[b - 0xC4], take(1 << (b - 0xC4)))[0]
        return take(n), i
    if b in (0xC7, 0xC8, 0xC9):  # ext 8/16/32
        n = struct.unpack(">" + "BHI"[b - 0xC7], take(1 << (b - 0xC7)))[0]
        take(1)
        return unpack(take(n))[0], i
    if b == 0xCA:
        return struct.unpack(">f", take(4))[0], i
    if b == 0xCB:
        return struct.unpack(">d", take(8))[0], i
    if 0xCC <= b <= 0xCF:
        n = 1 << (b - 0xCC)
        return struct.unpack(">" + "BHIQ"[b - 0xCC], take(n))[0], i
    if 0xD0 <= b <= 0xD3:
        n = 1 << (b - 0xD0)
        return struct.unpack(">" + "bhiq"[b - 0xD0], take(n))[0], i
    if 0xD4 <= b <= 0xD8:  # fixext 1..16: a buffer, window or tab page number
        take(1)
        return unpack(take(1 << (b - 0xD4)))[0], i
    if b in (0xD9, 0xDA, 0xDB):
        n = struct.unpack(">" + "BHI"[b - 0xD9], take(1 << (b - 0xD9)))[0]
        return take(n).decode("utf-8", "surrogateescape"), i
    if b in (0xDC, 0xDD):
        n = struct.unpack(">" + "HI"[b - 0xDC], take(2 << (b - 0xDC)))[0]
        return _array(data, i, n)
    if b in (0xDE, 0xDF):
        n = struct.unpack(">" + "HI"[b - 0xDE], take(2 << (b - 0xDE)))[0]
        return _map(data, i, n)
    raise ValueError("msgpack type byte 0x%02x" % b)


def _array(data: bytes, i: int, n: int) -> Tuple[List[Any], int]:
    out = []
    for _ in range(n):
        v, i = unpack(data, i)
        out.append(v)
    return out, i


def _map(data: bytes, i: int, n: int) -> Tuple[dict, int]:
    out = {}
    for _ in range(n):
        k, i = unpack(data, i)
        v, i = unpack(data, i)
        out[k if not isinstance(k, list) else tuple(k)] = v
    return out, i


class Nvim:
    """Requests to one Neovim, one at a time (a test's thread only)."""

    def __init__(self, address: str, timeout: float = 30.0) -> None:
        # The socket's file appears a moment before Neovim listens on it: connect until
        # it accepts (or `timeout`).
        deadline = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            try:
                self.sock.connect(address)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.buffer = b""
        self.next_id = 0

    def request(self, method: str, *args: Any) -> Any:
        self.next_id += 1
        msgid = self.next_id
        self.sock.sendall(pack([0, msgid, method, list(args)]))
        while True:
            message = self._read()
            if message[0] == 1 and message[1] == msgid:
                if message[2] is not None:
                    raise NvimError("%s: %s" % (method, message[2]))
                return message[3]
            # (notifications and requests of Neovim's own are not subscribed to: skipped)

    def _read(self) -> Any:
        while True:
            try:
                value, used = unpack(self.buffer)
                self.buffer = self.buffer[used:]
                return value
            except _Incomplete:
                pass
            chunk = self.sock.recv(65536)
            if not chunk:
                raise NvimError("Neovim closed the connection")
            self.buffer += chunk

    def eval(self, expr: str) -> Any:
        return self.request("nvim_eval", expr)

    def lua(self, code: str, *args: Any) -> Any:
        return self.request("nvim_exec_lua", code, list(args))

    def command(self, command: str) -> None:
        self.request("nvim_command", command)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
