"""kernel32 through `ctypes`, for the few Windows calls the project makes: a pid's
liveness (`winpipe.pid_alive`, as the CLI's `process.kill(pid, 0)` sees it) and job
objects (`acp/process_tree.py`: a child and what it starts, ended as one).

Loaded on first use, on Windows only: importing this module imports nothing. The
prototypes are declared once here, since a handle is pointer-sized and `ctypes`'s
default `int` result would cut it on 64-bit Windows.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

_kernel32: Optional[Any] = None


def kernel32() -> Any:
    """kernel32 with `use_last_error` and the prototypes of the calls used here.
    Raises ImportError, AttributeError or OSError where it cannot be had (no `ctypes`,
    not Windows)."""
    global _kernel32
    if _kernel32 is None:
        if sys.platform != "win32":
            raise OSError("kernel32 is Windows's")
        import ctypes
        from ctypes import wintypes

        k = ctypes.WinDLL("kernel32", use_last_error=True)
        handle, dword, boolean = wintypes.HANDLE, wintypes.DWORD, wintypes.BOOL
        for name, restype, argtypes in (
                ("OpenProcess", handle, [dword, boolean, dword]),
                ("CloseHandle", boolean, [handle]),
                ("GetExitCodeProcess", boolean, [handle, ctypes.POINTER(dword)]),
                ("WaitForSingleObject", dword, [handle, dword]),
                ("CreateJobObjectW", handle, [ctypes.c_void_p, wintypes.LPCWSTR]),
                ("AssignProcessToJobObject", boolean, [handle, handle]),
                ("TerminateJobObject", boolean, [handle, ctypes.c_uint])):
            function = getattr(k, name)
            function.restype, function.argtypes = restype, argtypes
        _kernel32 = k
    return _kernel32
