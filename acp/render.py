"""Text shown to a person: tool call lines, edit diffs, permission questions.

Pure functions (strings in, strings out) so the command line and the terminal asker
share them and tests can check them without a terminal.
"""
from __future__ import annotations

import difflib
import json
import re
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Sequence

from . import elicitation
from ._core import safe_text
from .session import Transcript, chunk_of

if TYPE_CHECKING:  # pragma: no cover
    from .auth import LoginMethod
    from .elicitation import ElicitationRequest, Field
    from .permissions import PermissionRequest

STATUS_MARKS = {"completed": "done", "failed": "FAILED", "cancelled": "cancelled",
                "pending": "pending", "in_progress": "running"}
# How a permission choice is shown: by its kind (ACP.md §5: Copilot offers allow_once,
# allow_always and reject_once), whatever name the agent gives it.
CHOICE_LABELS = {"allow_once": "allow once", "allow_always": "allow always",
                 "reject_once": "reject", "reject_always": "reject always"}
ERROR_DATA_LIMIT = 500  # characters of an error's `data` shown
PREVIEW_WIDTH = 100  # a replayed message is shown as one line of at most this many characters


def _lines(text: str) -> List[str]:
    """Lines with their "\n" kept (the last one may lack it). Split on "\n" only: U+2028
    inside file text is content, not a line break (ACP.md §1)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


NO_NEWLINE = "\\ No newline at end of file"


def diff_text(old: str, new: str, path: str) -> str:
    """A unified diff of one diff content block. Copilot's `oldText`/`newText` are the
    replaced fragment, not the whole file (ACP.md §4), so line numbers are relative.
    Lines are compared with their terminators, so a new file, a deletion or a change
    of the final newline shows no empty line that is not there (a missing final
    newline is marked as `diff` marks it when only that changed)."""
    mark = bool(old and new) and old.endswith("\n") != new.endswith("\n")
    out = []
    for line in difflib.unified_diff(_lines(old), _lines(new),
                                     "a/" + path.lstrip("/") if old else "/dev/null",
                                     "b/" + path.lstrip("/"), lineterm="", n=2):
        if line.endswith("\n"):
            out.append(line[:-1])
        else:
            out.append(line)
            if mark and line[:1] in "+- " and not line.startswith(("---", "+++")):
                out.append(NO_NEWLINE)
    return "\n".join(out)


def content_diffs(content: Any) -> Iterable[str]:
    """Unified diffs of every `{type: "diff"}` block in a tool call's content."""
    if not isinstance(content, list):
        return
    for block in content:
        if isinstance(block, dict) and block.get("type") == "diff":
            yield diff_text(str(block.get("oldText") or ""), str(block.get("newText") or ""),
                            str(block.get("path") or "?"))


def tool_call_line(call: Dict[str, Any]) -> str:
    """One line for a tool call: `[edit] done: Editing /w/hello.txt`."""
    kind = call.get("kind") or "tool"
    status = call.get("status") or "pending"
    title = " ".join(str(call.get("title") or call.get("toolCallId") or "").split())
    return "[%s] %s: %s" % (kind, STATUS_MARKS.get(status, status), title)


def tool_call_block(call: Dict[str, Any], with_diff: bool = True) -> str:
    """The tool call line followed by the diff of an edit, each diff line indented."""
    parts = [tool_call_line(call)]
    if with_diff and call.get("status") != "failed":
        for diff in content_diffs(call.get("content")):
            parts.extend("    " + line for line in diff.split("\n"))
    return "\n".join(parts) + "\n"


def one_line(text: str) -> str:
    """A string the agent chose (a command, a path, a variable) as one line a person can
    read whole: every control character escaped, newlines too (one could start a line of
    the agent's making), and a long run of blanks shown as its length (a command padded
    with thousands of spaces pushes what comes first out of sight on the terminal)."""
    return _LONG_BLANKS.sub(lambda m: "<%d blanks>" % len(m.group(0)), safe_text(text, multiline=False))


_LONG_BLANKS = re.compile(r"\s{8,}")
LONG_COMMAND = 200  # characters: a longer command's length is shown as well


def permission_question(request: "PermissionRequest") -> str:
    """What the agent asks permission for, every string it chose escaped (the question
    may go straight to a terminal)."""
    call = request.tool_call
    lines = ["", "Permission requested: %s%s" % (one_line(request.title),
                                                   " (%s)" % one_line(str(call["kind"])) if call.get("kind") else "")]
    raw_input = call.get("rawInput")
    raw: Dict[str, Any] = raw_input if isinstance(raw_input, dict) else {}
    if isinstance(raw.get("command"), str):
        lines.extend(_command_lines(raw["command"]))
    if isinstance(raw.get("diff"), str) and raw["diff"].strip():
        lines.extend("    " + line for line in safe_text(raw["diff"].strip("\n")).split("\n"))
    else:
        for location in call.get("locations") or []:
            if isinstance(location, dict) and location.get("path"):
                lines.append("    " + one_line(str(location["path"])))
    return "\n".join(lines) + "\n"


def _command_lines(command: str) -> List[str]:
    lines = ["    $ " + one_line(command)]
    if len(command) > LONG_COMMAND:
        lines.append("    (the command is %d characters long)" % len(command))
    return lines


def terminal_question(request: Any) -> str:
    """The question before a terminal command runs: what, where and with which variables
    (those the agent sets: they can change what a command does, as `GIT_CONFIG_*` can
    make `git status` run a program), every string escaped, one key per answer."""
    lines = ["", "The agent wants to run a command:"] + _command_lines(request.command_line)
    lines.append("    in " + one_line(request.cwd or "(the current folder)"))
    lines.extend("    with %s=%s" % (one_line(name), one_line(value)) for name, value in (request.env or {}).items())
    lines.append("  [1] allow once  [2] allow for this session  [3] refuse")
    return "\n".join(lines) + "\nAnswer (Enter refuses): "


def login_methods(methods: Sequence["LoginMethod"]) -> str:
    """The agent's login methods (ACP.md §11), numbered, each with what it does: the
    command a terminal method runs and every variable it sets (a variable can change
    what a program does), or that the agent logs in by itself. Every string is the
    agent's: escaped, one line each."""
    lines = ["", "The agent needs you to log in. It offers:"]
    for number, method in enumerate(methods, 1):
        lines.append("  [%d] %s (%s)" % (number, one_line(method.name), one_line(method.id)))
        if method.description:
            lines.append("      " + one_line(method.description))
        if method.command is not None:
            lines.extend("  " + line for line in _command_lines(method.command.command_line))
            lines.extend("      with %s=%s" % (one_line(name), one_line(value))
                         for name, value in method.command.env.items())
        elif method.terminal:
            lines.append("      (runs the agent's own program, which this client did not start: not here)")
        else:
            lines.append("      (the agent logs in by itself)")
    return "\n".join(lines) + "\n"


def elicitation_question(request: "ElicitationRequest") -> str:
    """The agent's request for information (ACP.md §12): who asks and why (its
    message, escaped), then for a URL the URL whole, its host and any warning, and
    that this client opens nothing."""
    lines = ["", "The agent asks you for information:"]
    lines.extend("    " + line for line in safe_text(request.message.strip("\n")).split("\n"))
    if request.mode == "url" and request.url is not None:
        lines.append("    URL: " + one_line(request.url))
        lines.extend("    " + one_line(note) for note in elicitation.url_notes(request.url))
        lines.append("  Nothing is opened by this client: open the URL yourself if you agree.")
    return "\n".join(lines) + "\n"


def field_prompt(field: "Field") -> str:
    """The question for one form field: its title (and name), its choices or kind,
    its default, whether it may be left empty."""
    parts = ["  %s" % one_line(field.title)]
    if field.title != field.name:
        parts.append(" (%s)" % one_line(field.name))
    if field.description:
        parts.append(": %s" % one_line(field.description))
    if field.choices:
        parts.append(" [%s%s]" % (", ".join("%d=%s" % (n, one_line(label)) for n, (_, label) in
                                            enumerate(field.choices, 1)),
                                  "; several, by commas" if field.kind == "array" else ""))
    elif field.kind != "string":
        parts.append(" [%s]" % {"boolean": "yes/no", "integer": "a whole number", "number": "a number"}[field.kind])
    if field.default is not None:
        parts.append(" (Enter: %s)" % one_line(json.dumps(field.default, ensure_ascii=False)))
    elif not field.required:
        parts.append(" (Enter: leave empty)")
    return "".join(parts) + ": "


def error_text(exc: BaseException, limit: int = ERROR_DATA_LIMIT) -> str:
    """An error as a person sees it: for a JSON-RPC error its message and code and,
    when the agent sent one, its `data` (the reason, often), cut to `limit`
    characters; every control character escaped."""
    text = str(exc)
    data = getattr(exc, "data", None)
    if data is not None:
        shown = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=repr)
        if len(shown) > limit:
            shown = shown[:limit] + "... (%d more characters)" % (len(shown) - limit)
        text += ": " + shown
    return safe_text(text)


def choice_label(option: Dict[str, Any]) -> str:
    """`allow once`, `allow always`, `reject`; the agent's own name (as one line) for
    other kinds."""
    return CHOICE_LABELS.get(str(option.get("kind"))) or one_line(str(option.get("name") or option["optionId"]))


def permission_choices(request: "PermissionRequest") -> str:
    names = ["[%d] %s" % (i + 1, choice_label(option)) for i, option in enumerate(request.options)]
    return "  %s\nAnswer (number or name; Enter rejects): " % "  ".join(names)


def preview(text: str, width: int = PREVIEW_WIDTH) -> str:
    """One line: whitespace runs (newlines too) as one space, cut with `...`."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[:width - 3].rstrip() + "..."


def history_lines(updates: Iterable[Dict[str, Any]], width: int = PREVIEW_WIDTH) -> List[str]:
    """A replayed history (`session/load`, ACP.md §3.5) in brief: one line per message
    (`you: ...`, `agent: ...`, chunks of one message merged) and per tool call (its
    final state, ACP.md §4: updates merge into the call)."""
    transcript = Transcript()  # the messages, merged as the session merges them
    entries: List[Any] = []  # message indexes into the transcript and tool call dicts, in order
    calls: Dict[str, Dict[str, Any]] = {}
    for update in updates:
        kind = update.get("sessionUpdate")
        chunk = chunk_of(update)
        if chunk is not None:
            if chunk[0] != "thought":
                index, new = transcript.add(*chunk)
                if new:
                    entries.append(index)
        elif kind in ("tool_call", "tool_call_update") and isinstance(update.get("toolCallId"), str):
            transcript.cut()  # the text after a tool call is shown after it
            call = calls.get(update["toolCallId"])
            fields = {k: v for k, v in update.items() if k != "sessionUpdate"}
            if call is None or kind == "tool_call":
                call = calls[update["toolCallId"]] = fields
                entries.append(call)
            else:
                call.update(fields)
    messages = transcript.entries
    lines = []
    for entry in entries:
        if isinstance(entry, int):
            message = messages[entry]
            lines.append(preview("%s: %s" % ("you" if message["role"] == "user" else "agent", message["text"]), width))
        else:
            lines.append(preview(tool_call_line(entry), width))
    return lines
