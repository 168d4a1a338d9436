"""An agent's command line given as one string becomes argv as the platform's own
programs would split it: POSIX shell words, or on Windows the C runtime's rules, so
that a quoted program path keeps no quotes (`"C:\\Program Files\\...\\copilot.exe"`)."""
from __future__ import annotations

import random
import subprocess

import pytest

from acp.endpoints import split_command, windows_argv
from acp.errors import AgentStartError


def test_a_quoted_windows_program_path_loses_its_quotes() -> None:
    line = r'"C:\Program Files\GitHub Copilot\copilot.exe" --acp --stdio'
    assert split_command(line, windows=True) == [r"C:\Program Files\GitHub Copilot\copilot.exe", "--acp", "--stdio"]
    # A path's backslashes stay as they are; only those before a quote are special.
    assert windows_argv(r"C:\a\b.exe x\\y") == [r"C:\a\b.exe", r"x\\y"]
    assert windows_argv(r'say \"hi\" "a b"') == ["say", '"hi"', "a b"]


def test_windows_splitting_undoes_what_subprocess_joins() -> None:
    # subprocess.list2cmdline is how Python builds a Windows command line from argv:
    # splitting it again must give the same words, whatever they hold.
    rng = random.Random(7)
    alphabet = ' \t"\\ab'
    for _ in range(5000):
        argv = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 4))]
        assert windows_argv(subprocess.list2cmdline(argv)) == argv, argv


def test_posix_splitting_is_a_shells() -> None:
    assert split_command("copilot --acp --folder 'my project'", windows=False) == [
        "copilot", "--acp", "--folder", "my project"]
    with pytest.raises(AgentStartError):
        split_command("   ", windows=False)
    with pytest.raises(AgentStartError):
        split_command("   ", windows=True)
