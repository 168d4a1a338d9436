"""The command lines as users type them: `--version` everywhere, the real program name
in usage lines, options after the action, and what `serve` and `client` say when two
live IDEs serve one folder. Real subprocesses, real sockets."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ide_protocol
from ide_protocol import ThreadedIdeServer
from ide_protocol.programs import client_cli
from ide_protocol.programs.progname import program_name
from acp import cli as acp_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 120  # generous: a loaded 2-core machine


def run(*argv: str, cwd: str = ROOT, stdin: str = "", env: "dict | None" = None) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=ROOT, NO_COLOR="1")
    environ.update(env or {})
    return subprocess.run([sys.executable] + list(argv), cwd=cwd, input=stdin.encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ, timeout=TIMEOUT)


# --- one version, shown by every program ---------------------------------------------------

def test_the_version_is_defined_once_and_setup_cfg_reads_it():
    with open(os.path.join(ROOT, "setup.cfg"), encoding="utf-8") as fh:
        assert "version = attr: ide_protocol.__version__" in fh.read()
    assert ide_protocol.__version__.count(".") == 2


@pytest.mark.parametrize("argv, name", [
    (["-m", "ide_protocol", "--version"], "python3 -m ide_protocol"),
    (["-m", "ide_protocol", "client", "--version"], "python3 -m ide_protocol client"),
    (["-m", "acp", "--version"], "python3 -m acp"),
])
def test_version_option(argv, name, tmp_path):
    done = run(*argv, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "%s %s" % (name, ide_protocol.__version__)


def test_usage_names_the_console_script_when_started_through_it():
    assert program_name("serve", argv0="/venv/bin/copilot-ide") == "copilot-ide serve"
    assert program_name(argv0=r"C:\venv\Scripts\copilot-ide.exe".replace("\\", os.sep)) == "copilot-ide"
    assert program_name("serve", argv0="/x/ide_protocol/__main__.py") == "python3 -m ide_protocol serve"
    assert program_name(argv0="-c") == "python3 -m ide_protocol"
    assert acp_cli.program_name("/venv/bin/acp-client") == "acp-client"
    assert acp_cli.program_name("/x/acp/__main__.py") == "python3 -m acp"


def test_top_level_usage_shows_the_module_form_when_run_with_dash_m(tmp_path):
    done = run("-m", "ide_protocol", "--help", cwd=str(tmp_path))
    assert done.returncode == 0
    assert done.stdout.decode().startswith("usage: python3 -m ide_protocol COMMAND")


# --- options after the action ------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["call", "get_selection", "--folder", "/w", "--json", "--timeout", "5"],
    ["--folder", "/w", "call", "get_selection", "--json", "--timeout", "5"],
    ["--json", "--timeout", "5", "call", "--folder", "/w", "get_selection"],
])
def test_client_options_before_or_after_the_action(argv):
    args = client_cli.parse_args(argv)
    assert (args.action, args.tool, args.folder, args.json, args.timeout) == \
        ("call", "get_selection", "/w", True, 5.0)


def test_client_watch_options_after_the_action():
    args = client_cli.parse_args(["watch", "--count", "2", "--lock-dir", "/d", "--lock", "/d/x.lock"])
    assert (args.count, args.lock_dir, args.lock, args.folder) == (2, "/d", "/d/x.lock", None)
    defaults = client_cli.parse_args(["list"])
    assert (defaults.json, defaults.timeout, defaults.folder, defaults.lock) == (False, 60.0, None, None)


def test_client_lock_and_folder_exclude_each_other_on_either_side(tmp_path):
    done = run("-m", "ide_protocol", "client", "--lock", "/x.lock", "call", "get_selection", "--folder", "/w",
               cwd=str(tmp_path))
    assert done.returncode == 2
    assert b"--lock and --folder exclude each other" in done.stderr


# --- two live IDEs for one folder ----------------------------------------------------------------

@pytest.fixture
def one_ide(tmp_path):
    """A live IDE (real lock file, real socket) serving `ws`, its locks in `locks`."""
    ws, locks = tmp_path / "ws", tmp_path / "locks"
    ws.mkdir()
    server = ThreadedIdeServer([str(ws)], ide_name="First IDE", lock_dir=str(locks))
    server.start()
    yield server, str(ws), str(locks)
    server.stop()


def test_serve_warns_when_a_live_ide_already_serves_the_folder(one_ide, tmp_path):
    server, ws, locks = one_ide
    done = run("-m", "ide_protocol", "serve", "--lock-dir", locks, ws, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    err = done.stderr.decode()
    assert "warning:" in err and '"First IDE"' in err and server.lock_path in err, err
    assert "stopped (lock file and socket removed)" in done.stdout.decode()


def test_serve_does_not_warn_for_another_folder(one_ide, tmp_path):
    _, _, locks = one_ide
    other = tmp_path / "other"
    other.mkdir()
    done = run("-m", "ide_protocol", "serve", "--lock-dir", locks, str(other), cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert b"warning" not in done.stderr


def test_client_says_which_of_two_ides_it_chose(one_ide, tmp_path):
    first, ws, locks = one_ide
    second = ThreadedIdeServer([ws], ide_name="Second IDE", lock_dir=locks)
    second.start()
    try:
        named = sorted([(os.path.basename(first.lock_path), "First IDE", first.lock_path),
                        (os.path.basename(second.lock_path), "Second IDE", second.lock_path)])
        done = run("-m", "ide_protocol", "client", "list", "--folder", ws, "--lock-dir", locks, cwd=str(tmp_path))
    finally:
        second.stop()
    assert done.returncode == 0, done.stderr
    err = done.stderr.decode()
    (_, chosen, chosen_lock), (_, passed, passed_lock) = named
    assert "2 live IDE locks list this folder; chose %s (pid %d, %s)" % (chosen, os.getpid(), chosen_lock) in err, err
    assert "passed over: %s (pid %d, %s)" % (passed, os.getpid(), passed_lock) in err
    assert "# connected to %s" % chosen in err


def test_check_says_which_of_two_ides_it_checks(one_ide, tmp_path):
    first, ws, locks = one_ide
    second = ThreadedIdeServer([ws], ide_name="Second IDE", lock_dir=locks)
    second.start()
    try:
        chosen = sorted([(os.path.basename(first.lock_path), "First IDE"),
                         (os.path.basename(second.lock_path), "Second IDE")])[0][1]
        done = run("-m", "ide_protocol", "check", "--only", "lock.fields", "--lock-dir", locks, ws, cwd=str(tmp_path))
    finally:
        second.stop()
    err = done.stderr.decode()
    assert "2 live IDE locks list this folder; chose %s" % chosen in err, err
    assert "checking %s" % chosen in done.stdout.decode()


def test_client_says_nothing_about_a_choice_with_one_ide(one_ide, tmp_path):
    _, ws, locks = one_ide
    done = run("-m", "ide_protocol", "client", "list", "--folder", ws, "--lock-dir", locks, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert b"passed over" not in done.stderr
