"""Fixtures of the interop suite (real Copilot CLI, fully offline).

Every test in this folder is marked ``interop`` and skipped unless
``INTEROP_COPILOT_BIN`` names the CLI's native binary: ``make interop``
(tests/interop/run.sh) installs the pinned CLI and sets it. So the unit suite, which
collects this folder too, skips these tests at once.
"""

import os
import shlex
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import copilot_harness as H  # noqa: E402
from fake_model import FakeModel  # noqa: E402
from tmux_driver import Tmux, become_subreaper  # noqa: E402

SAMPLE = "def hello():\n    return x\n"


# Fixtures that start the CLI's ACP agent: on a CLI whose agent refuses offline sessions
# the tests using them are skipped, with the reason (copilot_harness.ACP_OFFLINE_SINCE).
ACP_AGENT_FIXTURES = ("acp_cli", "tcp_agent")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    binary, reason = H.cli_binary()
    no_acp = H.no_offline_acp_reason()
    for item in items:
        if not str(item.fspath).startswith(here + os.sep):
            continue
        item.add_marker(pytest.mark.interop)
        if binary is None:
            item.add_marker(pytest.mark.skip(reason=reason))
        elif no_acp and set(ACP_AGENT_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.skip(reason=no_acp))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    H.record_report(item, outcome.get_result())


# --- session-wide -------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def copilot_bin():
    binary, reason = H.cli_binary()
    if binary is None:
        pytest.skip(reason)
    become_subreaper()
    return binary


@pytest.fixture(scope="session")
def log_root(tmp_path_factory):
    root = os.environ.get(H.LOG_ENV)
    if root:
        os.makedirs(root, exist_ok=True)
        return root
    return str(tmp_path_factory.mktemp("interop-logs"))


# --- per test ---------------------------------------------------------------------------------------

@pytest.fixture
def logdir(request, log_root):
    """This test's log folder: removed when the test passed, teardown included (unless
    INTEROP_KEEP_LOGS=1), kept for a failed one."""
    return H.new_log_folder(request.node, log_root)


@pytest.fixture
def workspace(tmp_path):
    """A temporary workspace (its real path: the CLI compares its physical cwd) with one
    small Python file, ``hello.py``."""
    ws = os.path.realpath(str(tmp_path / "ws"))
    os.makedirs(ws)
    with open(os.path.join(ws, "hello.py"), "w", encoding="utf-8") as fh:
        fh.write(SAMPLE)
    return ws


@pytest.fixture
def copilot_home(tmp_path, leak_check):
    home = os.path.realpath(str(tmp_path / "copilot-home"))
    os.makedirs(home)
    leak_check.append(home)
    return home


@pytest.fixture(autouse=True)
def leak_check(request):
    """Set up first, so torn down last: no process may still run with this test's COPILOT_HOME, no lock file
    may be left in its ``ide`` folder. Leftovers are killed/removed and fail the test."""
    homes = []
    yield homes
    problems = []
    for home in homes:
        problems += H.remove_leftovers(home, os.path.join(home, "ide"))
    if problems and not H.test_failed(request.node):
        pytest.fail("left behind:\n  " + "\n  ".join(problems))


@pytest.fixture
def fake_model(logdir):
    """The fake OpenAI-compatible model. On a CLI without the offline provider nothing
    ever reaches it, so scripting a turn skips the test there, with the reason."""
    model = FakeModel(log_path=os.path.join(logdir, "model.jsonl")).start()
    if not H.has_offline_provider():
        def script(*turns, **kw):
            pytest.skip(H.no_model_reason())
        model.script = script
    yield model
    model.stop()


@pytest.fixture
def cli_env(copilot_home, fake_model):
    return H.copilot_env(copilot_home, fake_model.base_url)


@pytest.fixture
def tmux(logdir):
    t = Tmux(width=160, height=50, log_dir=logdir)
    yield t
    if t.pane_pid is not None:
        try:
            t.save_screen("final")
        except Exception:
            pass
    t.close()
    sock = os.path.join(os.environ.get("TMUX_TMPDIR", "/tmp"), "tmux-%d" % os.getuid(),
                        t.socket_name)
    assert not os.path.exists(sock), "tmux socket left behind: " + sock


@pytest.fixture
def tui(copilot_bin, tmux, workspace, cli_env, logdir):
    """The CLI's TUI in ``workspace`` (not started: call ``tui.start()``)."""
    return H.CopilotTui(tmux, copilot_bin, workspace, cli_env, logdir)


@pytest.fixture
def serve(request, workspace, copilot_home, cli_env, logdir):
    """A factory: ``serve()`` starts ``python3 -m ide_protocol serve WORKSPACE``."""
    if not H.module_available("ide_protocol"):
        pytest.skip("`python3 -m ide_protocol serve` does not exist yet (no ide_protocol/__main__.py)")
    started = []

    def start(*args, **kw):
        s = H.Serve(kw.get("folder", workspace), copilot_home, cli_env,
                    os.path.join(logdir, "serve-%d.log" % (len(started) + 1)), args=args)
        started.append(s)
        return s

    yield start
    problems = []
    for s in started:
        status = s.stop()
        problems += ["serve (exit status %s) left its %s" % (status, x) for x in s.leftovers()]
    if problems and not H.test_failed(request.node):
        pytest.fail("\n".join(problems))


@pytest.fixture
def acp_cli(copilot_bin, workspace, copilot_home, cli_env, logdir):
    """A factory: ``acp_cli("prompt", "--yes")`` runs
    ``python3 -m acp --agent "<copilot --acp --stdio ...>" --cwd WORKSPACE ...`` as a
    ``Proc`` (call ``.wait()``)."""
    if not H.module_available("acp"):
        pytest.skip("`python3 -m acp` does not exist yet (no acp/__main__.py)")
    started = []
    cli_logs = os.path.join(logdir, "cli")
    os.makedirs(cli_logs, exist_ok=True)
    agent = " ".join(shlex.quote(a) for a in H.acp_agent_argv(copilot_bin, cli_logs))

    def run(*args):
        argv = [sys.executable, "-m", "acp", "--agent", agent, "--cwd", workspace] + list(args)
        p = H.Proc(argv, cwd=workspace, env=H.python_env(cli_env, copilot_home),
                   log_path=os.path.join(logdir, "acp-%d.log" % (len(started) + 1)))
        started.append(p)
        return p

    yield run
    for p in started:
        p.stop()

