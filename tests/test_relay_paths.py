"""The relay's path tables and their application to parsed JSON-RPC messages."""
from __future__ import annotations

import json

import pytest

from ide_protocol.relay.pathmap import PathMap, parse_map, wsl_pairs
from ide_protocol.relay.rewrite import Rewriter


def test_posix_longest_prefix_on_whole_components() -> None:
    m = PathMap([("/home/me/p", "/w"), ("/home/me/p/sub", "/s")])
    assert m.path_to_cli("/home/me/p/a.py") == "/w/a.py"
    assert m.path_to_cli("/home/me/p") == "/w"
    assert m.path_to_cli("/home/me/p/sub/x") == "/s/x"
    assert m.path_to_cli("/home/me/pq") is None
    assert m.path_to_cli("/Home/me/p/a") is None  # case-sensitive, as the CLI matches
    assert m.path_to_ide("/w/a b.py") == "/home/me/p/a b.py"
    assert m.path_to_ide("/s") == "/home/me/p/sub"


def test_dot_dot_is_resolved_before_the_prefix_is_matched() -> None:
    """`/w/../../etc/passwd` is `/etc/passwd`, outside the mapping: mapped as if under
    `/w` it named another file on the other side (`/home/me/p/../../etc/passwd`, which
    is `/home/etc/passwd`): the person approved one file, the CLI wrote another."""
    m = PathMap([("/home/me/p", "/w"), ("C:\\proj", "/c")])
    assert m.path_to_ide("/w/../../etc/passwd") is None
    assert m.path_to_ide("/w/sub/../a.py") == "/home/me/p/a.py"
    assert m.path_to_ide("/w/./a.py") == "/home/me/p/a.py"
    assert m.path_to_cli("/home/me/p/../../../etc/passwd") is None
    assert m.path_to_cli("C:\\proj\\..\\secret.txt") is None
    assert m.path_to_cli("C:\\proj\\x\\..\\a.txt") == "/c/a.txt"


def test_uris_are_decoded_mapped_and_encoded_again() -> None:
    m = PathMap([("/home/me/p", "/w")])
    assert m.uri_to_cli("file:///home/me/p/a%20b%23.py") == "file:///w/a%20b%23.py"
    assert m.uri_to_ide("file:///w/%C3%A9.py") == "file:///home/me/p/%C3%A9.py"
    assert m.uri_to_cli("file:///elsewhere") is None
    assert m.uri_to_cli("https://x/home/me/p") is None
    assert m.uri_to_cli("file:///home/me/p/%00") is None


def test_wsl_preset_drive_letters_in_any_case() -> None:
    m = PathMap([("C:\\Users\\me\\proj", "/home/me/proj")] + wsl_pairs())
    assert m.path_to_cli("C:\\Users\\me\\proj\\a.py") == "/home/me/proj/a.py"
    assert m.path_to_cli("c:/Users/me/proj/a.py") == "/home/me/proj/a.py"
    assert m.path_to_cli("c:\\x\\y") == "/mnt/c/x/y"
    assert m.path_to_cli("D:\\") == "/mnt/d"
    assert m.path_to_ide("/mnt/c/x/y") == "C:\\x\\y"
    assert m.path_to_ide("/mnt/c") == "C:\\"
    assert m.path_to_ide("/home/me/proj/src/a.py") == "C:\\Users\\me\\proj\\src\\a.py"
    assert m.uri_to_cli("file:///c%3A/Users/me/proj/a.py") == "file:///home/me/proj/a.py"
    assert m.uri_to_cli("file:///C:/x/%C3%A9.py") == "file:///mnt/c/x/%C3%A9.py"
    assert m.uri_to_ide("file:///mnt/c/x/%C3%A9.py") == "file:///c%3A/x/%C3%A9.py"
    assert m.path_to_ide("/tmp/x") is None


def test_unc_paths() -> None:
    m = PathMap([("\\\\srv\\share", "/net/share")])
    assert m.path_to_cli("\\\\srv\\share\\d\\f") == "/net/share/d/f"
    assert m.path_to_cli("//srv/share/d") == "/net/share/d"
    assert m.path_to_ide("/net/share/d") == "\\\\srv\\share\\d"
    assert m.uri_to_cli("file://srv/share/d/f") == "file:///net/share/d/f"
    assert m.uri_to_ide("file:///net/share/d") == "file://srv/share/d"
    assert m.path_to_cli("\\\\other\\x") is None


def test_parse_map() -> None:
    assert parse_map("C:\\p=/mnt/p") == ("C:\\p", "/mnt/p")
    assert parse_map("/a=/b") == ("/a", "/b")
    for bad in ("/a", "=/b", "a=/b", "/a=b"):
        with pytest.raises(ValueError):
            parse_map(bad)


def text_result(payload: object) -> dict:
    return {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": json.dumps(payload)}]}}


def test_messages_toward_the_ide() -> None:
    r = Rewriter(PathMap([("/ide/p", "/cli/p")]))
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "open_diff", "arguments": {"original_file_path": "/cli/p/a.py", "tab_name": "t",
                                                         "new_file_contents": "/cli/p/a.py"}}}
    out = r.to_ide(msg)
    assert out["params"]["arguments"] == {"original_file_path": "/ide/p/a.py", "tab_name": "t",
                                          "new_file_contents": "/cli/p/a.py"}
    assert msg["params"]["arguments"]["original_file_path"] == "/cli/p/a.py"  # not changed in place
    diag = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "get_diagnostics", "arguments": {"uri": "file:///cli/p/a.py"}}}
    assert r.to_ide(diag)["params"]["arguments"]["uri"] == "file:///ide/p/a.py"
    other = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    assert r.to_ide(other) is other


def test_results_and_pushes_toward_the_cli_and_unmapped_reported_once() -> None:
    seen = []
    r = Rewriter(PathMap([("/ide/p", "/cli/p")]), seen.append)
    sel = {"text": "x", "filePath": "/ide/p/a.py", "fileUrl": "file:///ide/p/a.py",
           "selection": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}, "isEmpty": False},
           "current": True}
    out = json.loads(r.to_cli(text_result(sel))["result"]["content"][0]["text"])
    assert out["filePath"] == "/cli/p/a.py" and out["fileUrl"] == "file:///cli/p/a.py"
    diags = [{"uri": "file:///ide/p/a.py", "filePath": "/ide/p/a.py", "diagnostics": []}]
    out = json.loads(r.to_cli(text_result(diags))["result"]["content"][0]["text"])
    assert out == [{"uri": "file:///cli/p/a.py", "filePath": "/cli/p/a.py", "diagnostics": []}]
    diff = {"success": True, "result": "SAVED", "trigger": "accepted_via_button", "tab_name": "t",
            "message": "User accepted changes for /ide/p/a.py"}
    out = json.loads(r.to_cli(text_result(diff))["result"]["content"][0]["text"])
    assert out["message"] == "User accepted changes for /cli/p/a.py" and out["tab_name"] == "t"
    push = {"jsonrpc": "2.0", "method": "diagnostics_changed", "params": {"uris": [{"uri": "file:///ide/p/b.py",
                                                                                   "diagnostics": []}]}}
    assert r.to_cli(push)["params"]["uris"][0]["uri"] == "file:///cli/p/b.py"
    push = {"jsonrpc": "2.0", "method": "selection_changed", "params": dict(sel, filePath="/elsewhere/x")}
    assert r.to_cli(push)["params"]["filePath"] == "/elsewhere/x"
    r.to_cli(push)
    assert seen == ["/elsewhere/x"]
    unchanged = text_result({"success": True})
    assert r.to_cli(unchanged) is unchanged
    deep: object = "x"
    for _ in range(2000):
        deep = [deep]
    r.to_cli({"jsonrpc": "2.0", "method": "selection_changed", "params": deep})  # bounded, no RecursionError


def test_windows_prefixes_match_in_any_letter_case_and_keep_the_paths_own() -> None:
    """The Windows CLI takes `C:\\Users\\Me` and `c:\\users\\me` for one folder (PROTOCOL.md
    §1): so does the mapping; what follows the prefix keeps its spelling."""
    m = PathMap([("C:\\Users\\Me\\Proj", "/home/me/proj")])
    assert m.path_to_cli("c:\\users\\ME\\proj\\Src\\A.py") == "/home/me/proj/Src/A.py"
    assert m.path_to_cli("C:/USERS/me/PROJ") == "/home/me/proj"
    assert m.path_to_cli("C:\\Users\\Me\\Project\\a.py") is None      # whole components only
    assert m.path_to_ide("/home/me/proj/Src/A.py") == "C:\\Users\\Me\\Proj\\Src\\A.py"
    # A prefix whose lower case is longer than itself (U+0130) still splits where it ends.
    m = PathMap([("C:\\\u0130", "/i")])
    assert m.path_to_cli("c:\\\u0130\\B.txt") == "/i/B.txt"
