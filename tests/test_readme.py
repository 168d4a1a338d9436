"""The README's commands run as written, from a fresh copy of the checkout in a fresh HOME.

Every ```sh block of README.md carries a marker on the line before it:

* `<!-- runnable -->`: run here;
* `<!-- runnable: while serve runs in ~/my-project -->`: run here while `copilot-ide
  serve` runs in that folder (the "other terminal" the README speaks of);
* `<!-- not runnable: REASON -->` or `<!-- not run by tests/test_readme.py: REASON -->`:
  reported as skipped with REASON (the real Copilot CLI, npm, the suite itself).

The runnable blocks run in order in one bash, as a reader types them into one terminal
(so `. activate` carries over), each starting in the checkout, with standard input at
end of file (so `copilot-ide serve` stops by itself) and `set -e`: any failing command
fails its block. The one thing the README leaves to the reader, "your project", is
`~/my-project` with one file in it. `python3` is the Python running the tests.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from typing import Dict, List, NamedTuple, Optional

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO, "README.md")
MARKER = re.compile(r"^\s*<!--\s*(runnable|not runnable|not run by [^:]+)(?::\s*(.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
WITH_SERVE = "while serve runs in ~/my-project"
#: What pip says when PyPI cannot be reached (the build back end comes from there).
NO_PYPI = re.compile(r"NewConnectionError|Temporary failure in name resolution|Network is unreachable|"
                     r"No matching distribution found for setuptools|Could not find a version that satisfies")
#: Folders a fresh clone does not have.
NOT_IN_A_CLONE = (".venv*", ".interop", ".bench-venv", ".bench-node", ".vscode-replica", "build", "dist", "*.egg-info",
                  "__pycache__", ".pytest_cache", "interop-logs", ".git")


class Block(NamedTuple):
    line: int            # where the fence opens (1-based)
    marker: Optional[str]
    note: str
    body: str


def shell_blocks(path: str = README) -> List[Block]:
    """The ```sh blocks of the README, each with the marker on the line before it."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    blocks: List[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, language = i, m.group(2)
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            j += 1
        if language == "sh":
            before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            mk = MARKER.match(before)
            body = textwrap.dedent("\n".join(lines[start + 1:j]))
            blocks.append(Block(start + 1, mk.group(1) if mk else None, (mk.group(2) or "") if mk else "", body))
        i = j + 1
    return blocks


BLOCKS = shell_blocks()


def test_every_shell_block_says_whether_it_runs() -> None:
    unmarked = [b.line for b in BLOCKS if b.marker is None]
    assert not unmarked, "README.md: ```sh blocks without a <!-- runnable --> or <!-- not runnable: WHY --> " \
                         "line before them, at lines %s" % unmarked
    for b in BLOCKS:
        if b.marker != "runnable":
            assert b.note, "README.md line %d: say why the block is not run" % b.line
        else:
            assert b.note in ("", WITH_SERVE), "README.md line %d: unknown condition %r" % (b.line, b.note)


def test_the_readme_is_short_and_starts_with_the_quick_start() -> None:
    with open(README, encoding="utf-8") as fh:
        text = fh.read()
    lines = text.split("\n")
    assert len(lines) <= 310, "README.md has %d lines" % len(lines)
    first_screen = "\n".join(lines[:60])
    for needed in ("npm install -g @github/copilot", "pip install .", "copilot-ide serve", "copilot"):
        assert needed in first_screen, needed
    assert "python3 -m ide_protocol serve" in text and "make test" in text  # the two commands


def _github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but `-` and `_`
    dropped, each space a `-`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_link_to_a_section_finds_its_heading() -> None:
    """A link `docs/X.md#anchor` (or `#anchor` in the README itself) that no heading
    makes lands at the top of the page."""
    with open(README, encoding="utf-8") as fh:
        readme = fh.read()
    broken = []
    for target, anchor in re.findall(r"\]\(([\w./-]*)#([^)\s]+)\)", readme):
        path = os.path.join(REPO, target) if target else README
        with open(path, encoding="utf-8") as fh:
            headings = [line.lstrip("#") for line in fh if re.match(r"#{1,6} ", line)]
        if anchor not in {_github_slug(h) for h in headings}:
            broken.append("%s#%s" % (target or "README.md", anchor))
    assert not broken, broken


def _fresh_clone(dest: str) -> str:
    clone = os.path.join(dest, "checkout")
    listed = None
    if os.path.isdir(os.path.join(REPO, ".git")) or os.path.isfile(os.path.join(REPO, ".git")):
        try:
            out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                 cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
            listed = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]
        except (OSError, subprocess.CalledProcessError):
            listed = None
    if listed is None:  # an unpacked sdist: no git, the tree is the release
        shutil.copytree(REPO, clone, symlinks=True, ignore=shutil.ignore_patterns(*NOT_IN_A_CLONE))
        return clone
    for rel in listed:
        src = os.path.join(REPO, rel)
        if not os.path.lexists(src):  # deleted in the work tree, not yet committed
            continue
        target = os.path.join(clone, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
    return clone


def _script(clone: str, blocks: List[Block]) -> str:
    """One bash script: each runnable block as a function run in the checkout."""
    parts = ["set -e", "CHECKOUT=%s" % _quote(clone), "CURRENT=none",
             "trap 'echo \"@@@ stopped in block $CURRENT (status $?)\"' EXIT",
             "start_serve() {",
             "  ( cd ~/my-project && exec copilot-ide serve --ignore-eof </dev/null >~/serve.log 2>&1 ) &",
             "  SERVE_PID=$!",
             "  for _ in $(seq 600); do grep -q '^serving ' ~/serve.log 2>/dev/null && return 0; sleep 0.1; done",
             "  echo 'serve did not start:'; cat ~/serve.log; return 1",
             "}",
             "stop_serve() { kill -TERM $SERVE_PID; wait $SERVE_PID; }"]
    for b in blocks:
        if b.marker != "runnable":
            continue
        parts.append("block_%d() {\n%s\n}" % (b.line, b.body))
        parts.append("CURRENT=%d; echo '@@@ begin %d'; cd \"$CHECKOUT\"" % (b.line, b.line))
        if b.note == WITH_SERVE:
            parts.append("start_serve")
        parts.append("block_%d </dev/null" % b.line)
        if b.note == WITH_SERVE:
            parts.append("stop_serve")
        parts.append("echo '@@@ end %d'" % b.line)
    parts.append("CURRENT=none; trap - EXIT; echo '@@@ all done'")
    return "\n".join(parts) + "\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> Dict[int, str]:
    """Runs every runnable block once; each block's output by its line (an output
    that lacks "@@@ end" means the block failed or never ran)."""
    if os.name != "posix" or shutil.which("bash") is None:
        pytest.skip("the README's shell blocks are POSIX sh; Windows has its own page (docs/WINDOWS.md)")
    base = str(tmp_path_factory.mktemp("readme"))
    home = os.path.join(base, "home")
    project = os.path.join(home, "my-project")
    os.makedirs(project)
    with open(os.path.join(project, "hello.py"), "w", encoding="utf-8") as fh:
        fh.write("def hello():\n    return x\n")
    shims = os.path.join(base, "bin")  # `python3` in the README is the Python under test
    os.makedirs(shims)
    os.symlink(sys.executable, os.path.join(shims, "python3"))
    clone = _fresh_clone(base)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env.update(HOME=home, PATH=shims + os.pathsep + env.get("PATH", ""), NO_COLOR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1",
               # Downloads (the build back end) are kept between runs, outside the fresh HOME.
               PIP_CACHE_DIR=os.path.join(tempfile.gettempdir(), "copilot-ide-readme-pip-%d" % os.getuid()))
    script = _script(clone, BLOCKS)
    try:
        proc = subprocess.run(["bash", "-c", script], cwd=clone, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
        output = proc.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode("utf-8", "replace") + "\n(the README's blocks did not end in 900 s)"
    results: Dict[int, str] = {}
    for chunk in re.split(r"^@@@ begin ", output, flags=re.M)[1:]:
        number, _, rest = chunk.partition("\n")
        results[int(number)] = rest
    results[0] = output
    return results


@pytest.mark.parametrize("block", BLOCKS, ids=["line%d" % b.line for b in BLOCKS])
def test_readme_block_runs_as_written(block: Block, readme_run: Dict[int, str]) -> None:
    if block.marker != "runnable":
        pytest.skip("README.md line %d: %s" % (block.line, block.note))
    output = readme_run.get(block.line)
    if output is None:
        pytest.fail("README.md line %d never ran: an earlier block failed\n%s" % (block.line, readme_run[0]))
    if "@@@ end %d" % block.line not in output and NO_PYPI.search(output) and "pip install" in block.body:
        pytest.skip("PyPI unreachable (pip needs setuptools from it): %s" % NO_PYPI.search(output).group(0))
    assert "@@@ end %d" % block.line in output, "README.md line %d failed:\n%s\n---\n%s" % (
        block.line, block.body, output)
