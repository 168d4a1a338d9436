"""Fill in two Windows APIs that Wine 8 lacks, for the Windows CPython of `make test-windows`.

CPython 3.12 calls ``PssCaptureSnapshot`` in ``os.getppid`` and ``CopyFile2`` in
``shutil.copy2``; Wine 8.0 has neither, and calling an unimplemented function aborts the
whole process. Under Wine only (its ``ntdll`` exports ``wine_get_version``):
``os.getppid`` asks ``NtQueryInformationProcess`` instead, and ``shutil.copy2`` takes its
portable path (``copyfile`` + ``copystat``). On real Windows this module does nothing.

A development tool: tools/windows/setup.sh copies it into that CPython's site-packages
(so that the tests' subprocesses have it too); never part of the library.
"""
import os
import sys


def _under_wine():
    if sys.platform != "win32":
        return False
    try:
        import ctypes

        return hasattr(ctypes.WinDLL("ntdll"), "wine_get_version")
    except (ImportError, OSError):
        return False


def _parent_pid():
    """The parent's pid from ``PROCESS_BASIC_INFORMATION.InheritedFromUniqueProcessId``."""
    import ctypes
    from ctypes import wintypes

    class ProcessBasicInformation(ctypes.Structure):
        _fields_ = [
            ("ExitStatus", ctypes.c_long),
            ("PebBaseAddress", ctypes.c_void_p),
            ("AffinityMask", ctypes.c_size_t),
            ("BasePriority", ctypes.c_long),
            ("UniqueProcessId", ctypes.c_size_t),
            ("InheritedFromUniqueProcessId", ctypes.c_size_t),
        ]

    ntdll = ctypes.WinDLL("ntdll")
    kernel32 = ctypes.WinDLL("kernel32")
    kernel32.GetCurrentProcess.restype = wintypes.HANDLE
    info = ProcessBasicInformation()
    status = ntdll.NtQueryInformationProcess(
        wintypes.HANDLE(kernel32.GetCurrentProcess()), 0, ctypes.byref(info), ctypes.sizeof(info), None)
    if status != 0:
        raise OSError("NtQueryInformationProcess failed: 0x%08x" % (status & 0xFFFFFFFF))
    return int(info.InheritedFromUniqueProcessId)


if _under_wine():
    os.getppid = _parent_pid
    import _winapi

    if hasattr(_winapi, "CopyFile2"):
        del _winapi.CopyFile2  # shutil.copy2 checks for it and falls back
