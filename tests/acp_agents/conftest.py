"""Fixtures of the third-party agent suite: ACP agents this project did not write,
installed pinned by `make acp-agents` (tests/acp_agents/install.sh) into .acp-agents/.

Every test here is marked ``interop`` (the unit suite deselects it; `make
interop-acp-agents` runs it) and is skipped, with the installer's reason, when its agent
could not be installed.
"""
import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
AGENTS = os.path.join(ROOT, ".acp-agents")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.interop)


TIMEOUT = 60  # only against hangs


def run(coro, timeout=TIMEOUT):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def _environment(env):
    # `-m acp` from the checkout finds our package; no PYTHONPATH, which the agent would
    # inherit: the SDK's own top-level `acp` must stay the one its agents import.
    environment = dict(os.environ, **(env or {}))
    environment.pop("PYTHONPATH", None)
    return environment


def cli(agent, args, stdin="", env=None):
    """(exit status, stdout, stderr) of our command line driving `agent`."""
    proc = subprocess.run([sys.executable, "-m", "acp", "--agent", agent] + args, input=stdin.encode(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_environment(env), cwd=ROOT,
                          timeout=TIMEOUT)
    return proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")


def cli_interrupted(agent, args, shown, env=None):
    """Our command line driving `agent`, given one Ctrl-C (SIGINT) once `shown` is on its
    stdout, the turn still running: (exit status, stdout, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "acp", "--agent", agent] + args, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_environment(env), cwd=ROOT)
    seen = b""
    try:
        deadline = time.monotonic() + TIMEOUT
        while shown.encode() not in seen and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], deadline - time.monotonic())[0]:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                seen += chunk
        assert shown.encode() in seen and proc.poll() is None, seen
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, (seen + out).decode("utf-8"), err.decode("utf-8")


def texts(updates):
    """The agent's message text in a list of `session/update` updates."""
    return "".join(u["content"].get("text", "") for u in updates
                   if u.get("sessionUpdate") == "agent_message_chunk" and isinstance(u.get("content"), dict))


def installed(name):
    """The folder of an installed agent kit, or a skip with the installer's reason."""
    folder = os.path.join(AGENTS, name)
    skipped = os.path.join(folder, "SKIPPED")
    if os.path.exists(skipped):
        with open(skipped, encoding="utf-8") as handle:
            pytest.skip(handle.read().strip())
    if not os.path.exists(os.path.join(folder, "VERSION")):
        pytest.skip("%s is not installed: run `make acp-agents`" % name)
    return folder


#: What the model-backed agents' tests were written against: the pinned package and the
#: parts of it that talk to us or to the model (the adapter's Claude Code and ACP SDK).
KNOWN = {
    "claude-code-acp": {"@zed-industries/claude-code-acp": "0.16.2",
                        "@anthropic-ai/claude-agent-sdk": "0.2.44",
                        "@agentclientprotocol/sdk": "0.14.1"},
    "gemini-cli": {"@google/gemini-cli": "0.61.0"},
}


def npm_package(name, package):
    """The folder of an npm agent's package, or a skip: with the installer's reason, or,
    when what is installed differs from what the tests know (KNOWN: the pin moved, or a
    part of it was republished), with the versions: that is upstream drift, not a fault
    of ours, and these jobs are optional."""
    folder = installed(name)
    modules = os.path.join(folder, "node_modules")
    for part, known in KNOWN[name].items():
        try:
            with open(os.path.join(modules, *part.split("/"), "package.json"), encoding="utf-8") as handle:
                found = json.load(handle).get("version")
        except (OSError, ValueError) as exc:
            pytest.skip("upstream drift: %s cannot be read (%s); the tests know %s" % (part, exc, known))
        if found != known:
            pytest.skip("upstream drift: %s %s is installed, the tests know %s" % (part, found, known))
    return os.path.join(modules, *package.split("/"))


@pytest.fixture
def python_sdk():
    """(python, examples folder) of the official Python SDK's own environment."""
    folder = installed("python-sdk")
    return os.path.join(folder, "venv", "bin", "python"), os.path.join(folder, "examples")


@pytest.fixture
def ts_sdk():
    """The TypeScript SDK's package folder (its example agent is dist/examples/agent.js)."""
    folder = installed("ts-sdk")
    return os.path.join(folder, "node_modules", "@agentclientprotocol", "sdk")


@pytest.fixture
def work(tmp_path):
    root = tmp_path / "work"
    root.mkdir()
    (root / "hello.txt").write_text("line one\nline two\nline three\n", encoding="utf-8")
    return str(root)


@pytest.fixture
def claude_code_acp():
    """Claude Code's ACP adapter's package folder (its agent is dist/index.js)."""
    return npm_package("claude-code-acp", "@zed-industries/claude-code-acp")


@pytest.fixture
def gemini_cli():
    """Gemini CLI's package folder (its program is bundle/gemini.js)."""
    return npm_package("gemini-cli", "@google/gemini-cli")
