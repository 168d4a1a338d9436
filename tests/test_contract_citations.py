"""Every citation of the contracts names a section that exists.

Code, docs and program output point readers at `docs/PROTOCOL.md` and `docs/ACP.md`
by section number ("PROTOCOL.md" or "ACP.md", then the section sign and a number, or a
number with a subsection such as 3.4). A citation of a section that is not there sends
the reader nowhere, so this test reads the headings of the two contracts, finds every
citation in the source tree and in what the programs print, and fails on any that does
not resolve.

What counts as a citation:

* a document name followed by the section sign: one number, `N.M`, a range `N–M`, or a
  list continued with `, §K` / `and §K`;
* a bare section sign with a number: it refers to the document named last before it in
  the same file (in ACP.md and PROTOCOL.md themselves: that document); with none named,
  to ACP.md for files of the `acp` package and its tests, else to PROTOCOL.md. A
  section sign after an RFC number (`RFC 9112 §2.2`) or after `JSON-RPC 2.0` belongs
  to that specification, not to ours.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from typing import Dict, Iterator, List, NamedTuple, Set, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTRACTS = {"PROTOCOL": os.path.join(ROOT, "docs", "PROTOCOL.md"), "ACP": os.path.join(ROOT, "docs", "ACP.md")}

#: Where citations are looked for (relative to the repository root).
SCANNED = ("ide_protocol", "acp", "docs", "editors", "tests", "tools", "README.md")
TEXT_SUFFIXES = (".py", ".md", ".txt", ".vim", ".lua", ".sh", ".cfg", ".toml", ".json", ".rst", ".el",
                 ".sublime-commands", ".sublime-settings", ".ini")
SKIPPED_DIRS = {"__pycache__", "node_modules", "captures", ".pytest_cache"}

SIGN = "\u00a7"
_NUMBER = r"\d+(?:\.\d+)*"
_ONE = r"%s\s*(%s)(?:\s*[\u2013-]\s*(%s))?" % (SIGN, _NUMBER, _NUMBER)
_MORE = r"(?:\s*(?:,|and|or|&)\s*%s\s*%s(?:\s*[\u2013-]\s*%s)?)" % (SIGN, _NUMBER, _NUMBER)
#: A document name, then one or more section numbers.
CITATION = re.compile(r"\b(PROTOCOL|ACP)\.md[\s\u00a0]*(%s%s*)" % (_ONE, _MORE))
ONE = re.compile(_ONE)
BARE = re.compile(r"(?<![\w%s])%s\s*(%s)(?:\s*[\u2013-]\s*(%s))?" % (SIGN, SIGN, _NUMBER, _NUMBER))
#: Section signs of other specifications: `RFC 9112 §2.2`, `JSON-RPC 2.0 §5`.
FOREIGN = re.compile(r"(?:(?:RFC|rfc)\s*\d+|JSON-RPC\s*2\.0)\s*$")
DOC_NAME = re.compile(r"\b(PROTOCOL|ACP)\.md\b")
HEADING = re.compile(r"^#{2,6}\s+(%s)\.?\s" % _NUMBER, re.M)


class Citation(NamedTuple):
    """One cited section: where it was found and what it names."""

    where: str      # "path:line" or "program output: ..."
    document: str   # "PROTOCOL" or "ACP"
    section: str    # "3" or "3.4"
    text: str       # the citation as written


def headings(path: str) -> Set[str]:
    """The section numbers of a contract: `## N. Title` and `### N.M Title` headings."""
    with open(path, encoding="utf-8") as f:
        return set(HEADING.findall(f.read()))


def _expand(first: str, last: str) -> List[str]:
    """`§2–5` cites 2, 3, 4 and 5; a range of subsections cites both ends."""
    if last and "." not in first and "." not in last and int(first) <= int(last):
        return [str(n) for n in range(int(first), int(last) + 1)]
    return [first] + ([last] if last else [])


def _default_document(where: str) -> str:
    parts = where.replace(os.sep, "/").split("/")
    return "ACP" if "acp" in parts or parts[-1].startswith("ACP.md") else "PROTOCOL"


def citations_in(text: str, where: str) -> Iterator[Citation]:
    """Every citation in `text` (see the module docstring); `where` names the source,
    a path relative to the root for files."""
    own = {"docs/PROTOCOL.md": "PROTOCOL", "docs/ACP.md": "ACP"}.get(where.replace(os.sep, "/"))
    taken: List[Tuple[int, int]] = []
    for match in CITATION.finditer(text):
        taken.append(match.span())
        line = text.count("\n", 0, match.start()) + 1
        for one in ONE.finditer(match.group(2)):
            for section in _expand(one.group(1), one.group(2) or ""):
                yield Citation("%s:%d" % (where, line), match.group(1), section, match.group(0))
    names = [(m.start(), m.group(1)) for m in DOC_NAME.finditer(text)]
    for match in BARE.finditer(text):
        if any(start <= match.start() < end for start, end in taken):
            continue
        before = text[max(0, match.start() - 16):match.start()]
        if FOREIGN.search(before):
            continue
        document = own
        if document is None:
            named = [name for start, name in names if start < match.start()]
            document = named[-1] if named else _default_document(where)
        line = text.count("\n", 0, match.start()) + 1
        for section in _expand(match.group(1), match.group(2) or ""):
            yield Citation("%s:%d" % (where, line), document, section, match.group(0))


def source_files() -> Iterator[str]:
    for entry in SCANNED:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            yield path
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
            for name in sorted(files):
                if name.endswith(TEXT_SUFFIXES) and os.path.join(folder, name) != os.path.abspath(__file__):
                    yield os.path.join(folder, name)


def _unresolved(found: List[Citation]) -> List[str]:
    sections = {doc: headings(path) for doc, path in CONTRACTS.items()}
    return sorted("%s: %r cites %s.md \u00a7%s, which has no such section"
                  % (c.where, c.text, c.document, c.section)
                  for c in found if c.section not in sections[c.document])


# ------------------------------------------------------------------ the parser itself


def test_headings_of_the_contracts_keep_the_cited_numbers() -> None:
    # Code cites PROTOCOL.md 1 to 7 and ACP.md 1 to 7, 3.1 to 3.6 (the numbering of
    # the pages the contracts grew from); those must stay.
    protocol = headings(CONTRACTS["PROTOCOL"])
    acp = headings(CONTRACTS["ACP"])
    assert {str(n) for n in range(1, 8)} <= protocol
    assert {str(n) for n in range(1, 8)} | {"3.%d" % n for n in range(1, 7)} <= acp


def test_the_parser_finds_each_form_of_citation() -> None:
    text = ("see PROTOCOL.md \u00a72\u20134 and ACP.md \u00a73.4, \u00a76\n"
            "(\u00a79) RFC 9112 \u00a72.2, JSON-RPC 2.0 \u00a75 and ACP.md\u00a712")
    found = [(c.document, c.section) for c in citations_in(text, "ide_protocol/x.py")]
    assert found == [("PROTOCOL", "2"), ("PROTOCOL", "3"), ("PROTOCOL", "4"), ("ACP", "3.4"), ("ACP", "6"),
                     ("ACP", "12"), ("ACP", "9")]
    assert [c.document for c in citations_in("a rule (\u00a75)", "acp/session.py")] == ["ACP"]
    assert [c.document for c in citations_in("a rule (\u00a75)", "ide_protocol/server/mcp.py")] == ["PROTOCOL"]
    assert [c.document for c in citations_in("PROTOCOL.md \u00a76 then \u00a74", "docs/ACP.md")] == [
        "PROTOCOL", "ACP"]


def test_a_citation_of_a_missing_section_is_reported() -> None:
    found = list(citations_in("the rule (PROTOCOL.md \u00a799, ACP.md \u00a73.99)", "x.py"))
    assert len(_unresolved(found)) == 2


# ------------------------------------------------------------------ the tree


def test_every_citation_in_the_tree_resolves() -> None:
    found: List[Citation] = []
    for path in source_files():
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue
        found.extend(citations_in(text, os.path.relpath(path, ROOT)))
    assert len(found) > 100, "the scan found almost no citations: is the pattern broken?"
    problems = _unresolved(found)
    assert not problems, "\n".join(problems)


CAPTURE = re.compile(r"(?:[\w./-]*/)?captures/([\w.*-]+\.log)")
OUTSIDE = re.compile(r"\bshared/(?:captures|seeds)\b")


def test_captures_are_cited_where_they_are_in_the_repository() -> None:
    """A capture is named by its place in the repository (`tests/captures/...`), and
    the file is there: never by a path outside the repository."""
    problems = []
    for path in source_files():
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except UnicodeDecodeError:
            continue
        for match in OUTSIDE.finditer(text):
            problems.append("%s:%d: %s is outside the repository"
                            % (os.path.relpath(path, ROOT), text.count("\n", 0, match.start()) + 1, match.group(0)))
        for match in CAPTURE.finditer(text):
            where = "%s:%d" % (os.path.relpath(path, ROOT), text.count("\n", 0, match.start()) + 1)
            cited = match.group(0)
            if "shared/" in cited or "../" in cited:
                problems.append("%s: %s is outside the repository" % (where, cited))
            elif "*" not in match.group(1) and not os.path.exists(os.path.join(ROOT, "tests", "captures",
                                                                                match.group(1))):
                problems.append("%s: %s is not in tests/captures" % (where, cited))
    assert not problems, "\n".join(problems)


def test_every_check_cites_a_protocol_section() -> None:
    from ide_protocol.programs import check

    sections = headings(CONTRACTS["PROTOCOL"])
    bad = ["%s cites %r" % (c.name, c.section) for c in check.CHECKS
           if not c.section.startswith(SIGN) or c.section[1:] not in sections]
    assert check.CHECKS and not bad, bad


# ------------------------------------------------------------------ program output

PROGRAMS = [
    ["-m", "ide_protocol", "--help"],
    ["-m", "ide_protocol", "serve", "--help"],
    ["-m", "ide_protocol", "client", "--help"],
    ["-m", "ide_protocol", "check", "--help"],
    ["-m", "ide_protocol", "check", "--list"],
    ["-m", "ide_protocol", "trace", "--help"],
    ["-m", "ide_protocol", "doctor", "--help"],
    ["-m", "acp", "--help"],
]


def _run(args: List[str], env: Dict[str, str]) -> str:
    proc = subprocess.run([sys.executable] + args, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")


@pytest.mark.parametrize("args", PROGRAMS, ids=lambda a: " ".join(a[1:]))
def test_citations_in_program_help_resolve(args: List[str], tmp_path: "os.PathLike[str]") -> None:
    env = dict(os.environ, COPILOT_HOME=str(tmp_path), NO_COLOR="1")
    output = _run(args, env)
    assert output.strip(), "no output from %s" % " ".join(args)
    where = "output of python3 %s" % " ".join(args)
    problems = _unresolved(list(citations_in(output, "acp" if args[1] == "acp" else where)))
    assert not problems, "\n".join(problems)


def check_statuses() -> Tuple[str, ...]:
    from ide_protocol.programs import check
    return check.STATUSES


def test_citations_in_a_check_report_resolve(tmp_path: "os.PathLike[str]") -> None:
    """The checker's report against a live server: every line names its section."""
    from ide_protocol import ThreadedIdeServer

    folder = tempfile.mkdtemp(dir=str(tmp_path))
    lock_dir = os.path.join(str(tmp_path), "ide")
    server = ThreadedIdeServer([folder], lock_dir=lock_dir).start(timeout=60)
    try:
        env = dict(os.environ, COPILOT_HOME=str(tmp_path), NO_COLOR="1")
        output = _run(["-m", "ide_protocol", "check", "--lock", server.lock_path, "--timeout", "30"], env)
    finally:
        server.stop()
    lines = [line for line in output.splitlines() if line.split(" ")[0] in check_statuses()]
    assert lines, output
    found = list(citations_in(output, "output of python3 -m ide_protocol check"))
    assert len([c for c in found if c.document == "PROTOCOL"]) >= len(lines), output
    problems = _unresolved(found)
    assert not problems, "\n".join(problems)
