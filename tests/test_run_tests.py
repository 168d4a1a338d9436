"""tools/run_tests.py, what `make test` runs: test files shared among pytest processes,
one summary, the exit status of the failures.

Each case runs the runner on a small suite of its own (its own pytest.ini, so this
repository's configuration and conftest stay out), in two pytest processes."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from typing import Any, Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODULE_FIXTURE = '''
import os, pytest

@pytest.fixture(scope="module")
def once():
    log = os.environ["FIXTURE_LOG"]
    with open(log, "a") as f:
        f.write("setup %d\\n" % os.getpid())
    yield
    with open(log, "a") as f:
        f.write("teardown %d\\n" % os.getpid())

def test_one(once):
    pass

def test_two(once):
    pass

def test_skipped():
    pytest.skip("a reason of its own")
'''


def suite(tmp_path: Any, files: Dict[str, str]) -> str:
    root = tmp_path / "suite"
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    return str(root)


def run(root: str, *args: str, tmp_path: Any) -> subprocess.CompletedProcess:
    """The runner on the suite at `root`; its temporary folders (the logs it keeps when
    a test fails) in `tmp_path`, never left in the machine's."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, FIXTURE_LOG=str(tmp_path / "fixture.log"), RUN_TESTS_TIMES=str(tmp_path / "times.json"),
               TMPDIR=str(tmp), TEMP=str(tmp), TMP=str(tmp))
    env.pop("TEST_JOBS", None)
    return subprocess.run([sys.executable, os.path.join(REPO, "tools", "run_tests.py"),
                           "--config-file=" + os.path.join(root, "pytest.ini"), "-p", "no:cacheprovider"]
                          + list(args) + [root], cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, timeout=300, universal_newlines=True)


def fixture_log(tmp_path: Any) -> List[str]:
    return (tmp_path / "fixture.log").read_text().split()[0::2]


def test_files_run_in_several_processes_and_add_up(tmp_path: Any) -> None:
    root = suite(tmp_path, {"test_a.py": MODULE_FIXTURE,
                            "test_b.py": "import os\ndef test_pid():\n    assert os.getpid()\n",
                            "test_c.py": "def test_c():\n    pass\n"})
    ran = run(root, "--jobs", "2", tmp_path=tmp_path)
    assert ran.returncode == 0, ran.stdout
    assert "in 2 pytest processes" in ran.stdout, ran.stdout
    assert "run_tests: 4 passed, 1 skipped in" in ran.stdout, ran.stdout
    assert "test_a.py::test_skipped: a reason of its own" in ran.stdout, ran.stdout
    # A file's module fixture: set up once, ended once (in that file's process).
    assert fixture_log(tmp_path) == ["setup", "teardown"], ran.stdout
    # Each file's time is kept for the next run's order (the slowest first).
    assert sorted(json.loads((tmp_path / "times.json").read_text())) == ["test_a.py", "test_b.py", "test_c.py"]


def test_a_failure_anywhere_fails_the_run_and_shows_pytests_report(tmp_path: Any) -> None:
    root = suite(tmp_path, {"test_a.py": MODULE_FIXTURE,
                            "test_bad.py": "def test_bad():\n    assert 1 + 1 == 3, 'arithmetic'\n",
                            "test_c.py": "def test_c():\n    pass\n"})
    ran = run(root, "--jobs", "2", tmp_path=tmp_path)
    assert ran.returncode == 1, ran.stdout
    assert "AssertionError: arithmetic" in ran.stdout, ran.stdout
    assert "1 failed, 3 passed, 1 skipped" in ran.stdout and "FAILED (exit 1)" in ran.stdout, ran.stdout
    logs = re.search(r"their logs in (\S+) \(removed when all pass\)", ran.stdout)
    assert logs and os.path.isdir(logs.group(1)), ran.stdout  # kept: the run failed
    assert os.path.realpath(logs.group(1)).startswith(os.path.realpath(str(tmp_path))), ran.stdout


def test_single_tests_and_one_job_run_plain_pytest(tmp_path: Any) -> None:
    root = suite(tmp_path, {"test_a.py": MODULE_FIXTURE, "test_c.py": "def test_c():\n    pass\n"})
    ran = run(root, "--jobs", "1", tmp_path=tmp_path)
    assert ran.returncode == 0 and "run_tests:" not in ran.stdout, ran.stdout
    assert "3 passed, 1 skipped" in ran.stdout, ran.stdout
    env_ran = subprocess.run([sys.executable, os.path.join(REPO, "tools", "run_tests.py"), "-p", "no:cacheprovider",
                              "--config-file=" + os.path.join(root, "pytest.ini"),
                              os.path.join(root, "test_c.py") + "::test_c"],
                             cwd=REPO, env=dict(os.environ, FIXTURE_LOG=str(tmp_path / "fixture.log")), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
                             universal_newlines=True)
    assert env_ran.returncode == 0 and "run_tests:" not in env_ran.stdout, env_ran.stdout
    assert "1 passed" in env_ran.stdout, env_ran.stdout


def test_a_file_longer_than_its_share_is_cut_into_parts(tmp_path: Any) -> None:
    """The last run's times say test_a.py took far longer than the rest: its tests are
    shared between the two processes, each part with its own module fixture."""
    root = suite(tmp_path, {"test_a.py": MODULE_FIXTURE + "".join(
                                "\ndef test_more_%d(once):\n    pass\n" % n for n in range(8)),
                            "test_c.py": "def test_c():\n    pass\n"})
    (tmp_path / "times.json").write_text(json.dumps({"test_a.py": 100.0, "test_c.py": 0.1}))
    ran = run(root, "--jobs", "2", tmp_path=tmp_path)
    assert ran.returncode == 0, ran.stdout
    assert "run_tests: 11 passed, 1 skipped in" in ran.stdout, ran.stdout
    assert sorted(fixture_log(tmp_path)) == ["setup", "setup", "teardown", "teardown"], ran.stdout


def test_compiled_modules_are_kept_in_the_cache_folder_when_none_would_be_kept(tmp_path: Any,
                                                                               monkeypatch: Any) -> None:
    """With PYTHONDONTWRITEBYTECODE set every process of the suite would compile (and
    rewrite the asserts of) every module again: the runner's processes keep them in
    `.pytest_cache/pycache` instead, and what it kept for temporary files goes after."""
    from tools import run_tests
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = run_tests.process_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == run_tests.PYCACHE
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.pycache_prefix, sys.dont_write_bytecode)"],
                           env=env, stdout=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert probe.stdout.split() == [run_tests.PYCACHE, "False"]
    mirrored = os.path.splitdrive(os.path.realpath(str(tmp_path)))[1].lstrip(os.sep)  # (as Python mirrors it)
    kept = os.path.join(run_tests.PYCACHE, mirrored, "__pycache__")
    os.makedirs(kept)
    run_tests.forget_temporary_modules(env)
    assert not os.path.exists(kept)
    # Bytecode written beside the sources, or a prefix of the caller's own, is left alone.
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE")
    assert "PYTHONPYCACHEPREFIX" not in run_tests.process_env()
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "mine"))
    assert run_tests.process_env()["PYTHONPYCACHEPREFIX"] == str(tmp_path / "mine")
