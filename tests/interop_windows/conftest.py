"""Fixtures of the Windows interop suite: the real Windows Copilot CLI (copilot.exe)
and this project's programs under the Windows CPython, both under Wine 10 in the root
that `make interop-windows` prepares (tests/interop_windows/run.sh, docs/WINDOWS.md).

Every test here is marked ``interop`` and skipped, with the reason, unless run.sh set
up the root. The harness of the Linux suite (tests/interop: the fake model, tmux, the
TUI driver, subprocesses) is shared; what differs is in `wine_root`: Windows paths,
chroot, Wine. Test logs live inside the root (the CLI writes them through C:), and are
removed for passing tests; run.sh moves the others to interop-logs/windows/.
"""

import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "interop"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the checkout

import copilot_harness as H  # noqa: E402
import wine_root as W  # noqa: E402
from fake_model import FakeModel  # noqa: E402
from tmux_driver import Tmux, become_subreaper  # noqa: E402

SAMPLE = "def hello():\n    return x\n"
WORKSPACE = "C:\\ws"
LOGS = "C:\\interop-logs"
#: Wine's own programs (its desktop, services, device drivers): started on demand by
#: whichever Windows program needs them first, so with that program's environment, and
#: they end with the session's wineserver, not with a test.
WINE_SERVICES = ("C:\\windows\\system32\\",)


def pytest_collection_modifyitems(config, items):
    reason = W.missing_reason()
    for item in items:
        if not str(item.fspath).startswith(HERE + os.sep):
            continue
        item.add_marker(pytest.mark.interop)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    H.record_report(item, outcome.get_result())


# --- session-wide -------------------------------------------------------------------------

@pytest.fixture(scope="session")
def root():
    """The root, with the checkout's packages copied in and a wineserver of its own for
    the session (stopped at the end: nothing of Wine outlives the suite)."""
    reason = W.missing_reason()
    if reason:
        pytest.skip(reason)
    become_subreaper()
    r = W.WineRoot()
    for leftover in ("C:\\homes", LOGS):   # of an earlier run
        shutil.rmtree(r.host(leftover), ignore_errors=True)
    r.copy_sources()
    r.start_wineserver()
    yield r
    r.stop_wineserver()


# --- per test -------------------------------------------------------------------------------

@pytest.fixture
def logdir(request, root):
    """This test's log folder, ``C:\\interop-logs\\<test>`` (the host path is returned)."""
    return H.new_log_folder(request.node, root.host(LOGS))


@pytest.fixture
def workspace(root):
    """``C:\\ws`` with one small Python file, ``hello.py`` (made anew for each test)."""
    host = root.host(WORKSPACE)
    shutil.rmtree(host, ignore_errors=True)
    os.makedirs(host)
    with open(os.path.join(host, "hello.py"), "w", encoding="utf-8") as fh:
        fh.write(SAMPLE)
    return WORKSPACE


@pytest.fixture
def copilot_home(request, root):
    """A COPILOT_HOME of the test's own, ``C:\\homes\\<n>`` (its lock folder ``ide``).
    Torn down last: no process may still run with it, no lock may be left in it."""
    win = "C:\\homes\\%d" % (len(os.listdir(root.host("C:\\homes"))) if os.path.isdir(root.host("C:\\homes")) else 0)
    host = root.host(win)
    shutil.rmtree(host, ignore_errors=True)
    os.makedirs(host)
    yield win
    problems = H.remove_leftovers(win, os.path.join(host, "ide"), shown=win + "\\ide", spare=WINE_SERVICES)
    if problems and not H.test_failed(request.node):
        pytest.fail("left behind:\n  " + "\n  ".join(problems))


@pytest.fixture
def fake_model(logdir):
    """The fake model on the host's 127.0.0.1 (the root shares the network)."""
    model = FakeModel(log_path=os.path.join(logdir, "model.jsonl")).start()
    yield model
    model.stop()


@pytest.fixture
def cli_env(copilot_home, fake_model):
    """The CLI's environment inside the root: offline, the fake model, the test's
    COPILOT_HOME (WINE_ENV comes on top, `WineRoot.argv`)."""
    return {"COPILOT_HOME": copilot_home, "COPILOT_OFFLINE": "true",
            "COPILOT_PROVIDER_BASE_URL": fake_model.base_url, "COPILOT_MODEL": H.MODEL,
            "COPILOT_AUTO_UPDATE": "false", "TERM": "xterm-256color"}


@pytest.fixture
def tmux(logdir, copilot_home):
    t = Tmux(width=200, height=50, log_dir=logdir)
    yield t
    if t.pane_pid is not None:
        try:
            t.save_screen("final")
        except Exception:
            pass
    t.close()


@pytest.fixture
def tui(root, tmux, workspace, cli_env, logdir):
    """The Windows CLI's TUI in ``C:\\ws`` (not started: call ``tui.start()``)."""
    return W.WinTui(root, tmux, workspace, cli_env, logdir)


@pytest.fixture
def serve(request, root, workspace, copilot_home, logdir):
    """A factory: ``serve(*args, folder=WORKSPACE)`` starts the Windows CPython's
    ``-m ide_protocol serve`` on the folder."""
    started = []

    def start(*args, **kw):
        s = W.WinServe(root, kw.get("folder", workspace), copilot_home,
                       os.path.join(logdir, "serve-%d.log" % (len(started) + 1)), args=args)
        started.append(s)
        return s

    yield start
    problems = []
    for s in started:
        status = s.stop(grace=15.0)
        problems += ["serve (exit status %s) left its %s" % (status, x) for x in s.leftovers()]
    if problems and not H.test_failed(request.node):
        pytest.fail("\n".join(problems))
