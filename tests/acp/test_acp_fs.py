"""ACP.md §5, fs/*: the agent reads and writes real files through the client, inside
the allowed roots only (`..` and symlinks out of the root refused)."""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading

import pytest

from acp.fs import FileSystem, fixed_roots
from acp_testlib import make_client, run
from ide_protocol.wire.jsonrpc import JsonRpcError

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def agent_asks(root, requests, **client_kwargs):
    """Have the fake agent send each (method, params) to the client; return the answers."""

    async def main():
        async with make_client(**client_kwargs) as client:
            await client.initialize()
            session = await client.new_session(root)
            answers = []
            for method, params in requests:
                result = await session.prompt("RAW %s %s" % (method, json.dumps(params)))
                assert result.text.startswith("RAW-RESULT "), result.text
                answers.append(json.loads(result.text[len("RAW-RESULT "):]))
            return answers

    return run(main())


def make_tree(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    # (bytes: text mode would write CRLF on Windows)
    (root / "a.txt").write_bytes("one\ntwo\u2028still two\nthree\nfour".encode("utf-8"))
    (tmp_path / "secret.txt").write_bytes(b"secret\n")
    return root


def test_read_whole_file_and_line_ranges(tmp_path):
    root = make_tree(tmp_path)
    path = str(root / "a.txt")
    answers = agent_asks(str(root), [
        ("fs/read_text_file", {"path": path}),
        ("fs/read_text_file", {"path": path, "line": 2, "limit": 2}),  # 1-based
        ("fs/read_text_file", {"path": path, "line": 4}),
        ("fs/read_text_file", {"path": path, "limit": 1}),
        ("fs/read_text_file", {"path": path, "line": 0}),
    ])
    assert answers[0] == {"result": {"content": "one\ntwo\u2028still two\nthree\nfour"}}
    assert answers[1] == {"result": {"content": "two\u2028still two\nthree\n"}}
    assert answers[2] == {"result": {"content": "four"}}
    assert answers[3] == {"result": {"content": "one\n"}}
    assert answers[4]["error"]["code"] == -32602


def test_paths_outside_the_root_are_refused(tmp_path):
    root = make_tree(tmp_path)
    answers = agent_asks(str(root), [
        ("fs/read_text_file", {"path": str(tmp_path / "secret.txt")}),
        ("fs/read_text_file", {"path": str(root) + "/../secret.txt"}),
        ("fs/read_text_file", {"path": "a.txt"}),
        ("fs/write_text_file", {"path": str(tmp_path / "new.txt"), "content": "x"}),
    ])
    for answer in answers:
        assert answer["error"]["code"] == -32602, answer
        assert "result" not in answer
    assert "outside the allowed folders" in answers[0]["error"]["message"]
    assert not (tmp_path / "new.txt").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="needs symlinks that realpath follows: Windows lets only an "
                    "administrator or developer mode make one, and Wine 8's realpath does not follow it; the "
                    "refusal of a symlink out of the root is untested there")
def test_symlinks_out_of_the_root_are_refused(tmp_path):
    root = make_tree(tmp_path)
    os.symlink(str(tmp_path / "secret.txt"), str(root / "link-out.txt"))
    os.symlink(str(tmp_path), str(root / "dir-out"))
    os.symlink(str(root / "a.txt"), str(root / "link-in.txt"))
    answers = agent_asks(str(root), [
        ("fs/read_text_file", {"path": str(root / "link-out.txt")}),
        ("fs/read_text_file", {"path": str(root / "dir-out" / "secret.txt")}),
        ("fs/read_text_file", {"path": str(root / "link-in.txt"), "limit": 1}),
        ("fs/write_text_file", {"path": str(root / "dir-out" / "new.txt"), "content": "x"}),
        ("fs/write_text_file", {"path": str(root / "link-out.txt"), "content": "pwned"}),
    ])
    for answer in answers[:2] + answers[3:]:
        assert answer["error"]["code"] == -32602, answer
        assert "result" not in answer
    assert "outside the allowed folders" in answers[0]["error"]["message"]
    assert answers[2] == {"result": {"content": "one\n"}}  # a link inside the root is fine
    assert not (tmp_path / "new.txt").exists()
    assert (tmp_path / "secret.txt").read_text(encoding="utf-8") == "secret\n"


@pytest.mark.stdio_only  # no agent: the handlers on a real file system, with a real thread racing them
@pytest.mark.skipif(sys.platform == "win32", reason="needs symlinks (see above); on Windows a folder swapped for "
                    "a link between the check and the open is still followed: the opening beneath the root "
                    "needs POSIX's dir_fd and O_NOFOLLOW")
@pytest.mark.parametrize("swapped", ["a link in the root", "a folder"])
def test_a_folder_swapped_for_a_link_while_a_read_or_write_runs_never_reaches_outside(tmp_path, swapped):
    """Something the agent runs (its own shell, a terminal it was allowed) can swap a
    folder of the root for a link out of it, between the check of a path and its
    opening. Before, the path was resolved twice (checked inside, opened outside) and
    the opening followed links again: reads got the outside file, writes changed it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (root / "real" / "f").write_text("inside")
    (outside / "f").write_text("SECRET")
    files = FileSystem(fixed_roots([str(root)]))
    sub = str(root / "sub")
    if swapped == "a link in the root":  # sub: a link flipped between real/ and outside/
        os.symlink(str(root / "real"), sub)
        states = [str(outside), str(root / "real")]
    else:  # sub: a real folder, renamed away and replaced by a link out, and back
        os.rename(str(root / "real"), sub)
        states = ["link", "folder"]
    stop = threading.Event()

    aside = str(root / "aside")

    def swap(state):
        if swapped == "a link in the root":
            os.symlink(state, sub + ".new")
            os.replace(sub + ".new", sub)
        elif state == "link":
            os.rename(sub, aside)
            os.symlink(str(outside), sub)
        else:
            os.remove(sub)
            os.rename(aside, sub)

    def back_to_the_folder():
        """After a step lost a race with a write (which makes a missing sub/ again)."""
        for path in (sub + ".new", sub):
            if os.path.islink(path):
                os.remove(path)
            elif os.path.isdir(path) and os.path.isdir(aside):
                shutil.rmtree(path, ignore_errors=True)
        if os.path.isdir(aside) and not os.path.lexists(sub):
            os.rename(aside, sub)

    def swapper():
        while not stop.is_set():
            for state in states:
                try:
                    swap(state)
                except OSError:
                    try:
                        back_to_the_folder()
                    except OSError:
                        pass

    async def main():
        seen = set()
        for n in range(500):
            try:
                seen.add((await files.read_text_file({"path": sub + "/f"}))["content"])
            except JsonRpcError:
                pass
            try:
                await files.write_text_file({"path": sub + "/f", "content": "inside"})
            except JsonRpcError:
                pass
        return seen

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        seen = run(main())
    finally:
        stop.set()
        thread.join()
    assert "SECRET" not in seen and (outside / "f").read_text() == "SECRET"
    assert not os.path.exists(str(outside / "real"))


def test_write_creates_and_replaces_files(tmp_path):
    root = make_tree(tmp_path)
    answers = agent_asks(str(root), [
        ("fs/write_text_file", {"path": str(root / "a.txt"), "content": "new \u65e5\u672c\r\nline"}),
        ("fs/write_text_file", {"path": str(root / "sub" / "dir" / "b.txt"), "content": "b"}),
        ("fs/read_text_file", {"path": str(root / "missing.txt")}),
    ])
    assert answers[0] == {"result": None} and answers[1] == {"result": None}  # null (ACP.md §5)
    assert (root / "a.txt").read_bytes() == "new \u65e5\u672c\r\nline".encode("utf-8")
    assert (root / "sub" / "dir" / "b.txt").read_text(encoding="utf-8") == "b"
    assert answers[2]["error"]["code"] == -32002


def test_explicit_roots_replace_the_session_folder(tmp_path):
    root = make_tree(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "c.txt").write_text("c", encoding="utf-8")
    answers = agent_asks(str(root), [
        ("fs/read_text_file", {"path": str(other / "c.txt")}),
        ("fs/read_text_file", {"path": str(root / "a.txt")}),
    ], fs_roots=[str(other)])
    assert answers[0] == {"result": {"content": "c"}}
    assert answers[1]["error"]["code"] == -32602


def test_replaced_handler_that_raises_gives_an_error_and_disabled_fs_is_unknown(tmp_path):
    root = make_tree(tmp_path)

    def broken(params, client):
        raise KeyError("oops")

    answers = agent_asks(str(root), [
        ("fs/read_text_file", {"path": str(root / "a.txt")}),
        ("fs/write_text_file", {"path": str(root / "a.txt"), "content": "x"}),
        ("fs/read_text_file", {"path": str(root / "a.txt")}),  # still alive afterwards
    ], handlers={"fs/read_text_file": broken, "fs/write_text_file": None})
    assert answers[0]["error"]["code"] == -32603 and "KeyError" in answers[0]["error"]["message"]
    assert answers[1]["error"]["code"] == -32601
    assert answers[2]["error"]["code"] == -32603
    assert (root / "a.txt").read_text(encoding="utf-8").startswith("one")
