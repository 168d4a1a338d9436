"""Tests for ide_protocol.common.paths: PROTOCOL.md §6 URIs (both OS rule sets) and UTF-16 columns."""

from __future__ import annotations

import os

import pytest

from ide_protocol.common.paths import (
    codepoint_column,
    path_to_uri,
    resolve_path,
    uri_to_path,
    utf16_column,
    utf16_len,
    wire_file_path,
)

# --- POSIX rules -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, uri",
    [
        ("/home/a b/x#.py", "file:///home/a%20b/x%23.py"),
        ("/", "file:///"),
        ("/tmp/100%/q?.txt", "file:///tmp/100%25/q%3F.txt"),
        ("/srv/caf\u00e9/\u65e5\u672c.md", "file:///srv/caf%C3%A9/%E6%97%A5%E6%9C%AC.md"),
        ("/a/b:c;d=e&f+g,h'i(j)!k*l@m$n", "file:///a/b%3Ac%3Bd%3De%26f%2Bg%2Ch%27i%28j%29%21k%2Al%40m%24n"),
        ("/keep/A-Z_a.z~0-9", "file:///keep/A-Z_a.z~0-9"),
        ("/emoji/\U0001F600.txt", "file:///emoji/%F0%9F%98%80.txt"),
        ("//double/lead", "file:////double/lead"),
    ],
)
def test_posix_path_to_uri_and_back(path: str, uri: str) -> None:
    assert path_to_uri(path, windows=False) == uri
    assert uri_to_path(uri, windows=False) == path


@pytest.mark.parametrize(
    "name",
    ["a b", "x#y", "p%20q", "100%", "what?", "caf\u00e9", "\u65e5\u672c\u8a9e", "\U0001F600", "a&b=c", "[x]"],
)
def test_posix_round_trip(name: str) -> None:
    path = "/home/user/" + name + "/" + name + ".py"
    uri = path_to_uri(path, windows=False)
    assert uri.startswith("file:///home/user/")
    assert " " not in uri and "#" not in uri and "?" not in uri
    assert uri_to_path(uri, windows=False) == path
    # and the URI is canonical: converting back and forth is stable
    assert path_to_uri(uri_to_path(uri, windows=False), windows=False) == uri


def test_posix_undecodable_name_round_trips() -> None:
    # A file name that is not UTF-8 comes out of os.listdir as a surrogate escape.
    path = b"/data/\xff\xfe.bin".decode("utf-8", "surrogateescape")
    uri = path_to_uri(path, windows=False)
    assert uri == "file:///data/%FF%FE.bin"
    assert uri_to_path(uri, windows=False) == path


@pytest.mark.parametrize(
    "uri, path",
    [
        ("file://localhost/etc/hosts", "/etc/hosts"),
        ("file:/etc/hosts", "/etc/hosts"),
        ("FILE:///etc/hosts", "/etc/hosts"),
        ("file:///home/x%20y.py#L10", "/home/x y.py"),
        ("file:///home/x.py?query=1", "/home/x.py"),
        ("file:///home/caf\u00e9", "/home/caf\u00e9"),  # raw non-ASCII accepted
        ("file:///home/caf%c3%a9", "/home/caf\u00e9"),  # lower-case hex accepted
    ],
)
def test_posix_lenient_input(uri: str, path: str) -> None:
    assert uri_to_path(uri, windows=False) == path


@pytest.mark.parametrize(
    "uri",
    ["http://example.com/x", "file://server/share/x", "file:relative", "file://", "/no/scheme", "file:///a%00b"],
)
def test_posix_uri_errors(uri: str) -> None:
    with pytest.raises(ValueError):
        uri_to_path(uri, windows=False)


@pytest.mark.parametrize("path", ["relative/x", "", "./x", "/a\x00b"])
def test_posix_path_errors(path: str) -> None:
    with pytest.raises(ValueError):
        path_to_uri(path, windows=False)


def test_type_errors() -> None:
    with pytest.raises(TypeError):
        path_to_uri(b"/x", windows=False)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        uri_to_path(None, windows=False)  # type: ignore[arg-type]


# --- Windows rules -----------------------------------------------------------------


@pytest.mark.parametrize(
    "path, uri",
    [
        ("c:\\Users\\me\\a.ts", "file:///c%3A/Users/me/a.ts"),  # the PROTOCOL.md §6 example
        ("c:\\", "file:///c%3A/"),
        ("d:\\My Files\\x#1.txt", "file:///d%3A/My%20Files/x%231.txt"),
        ("c:\\p\\100%\\caf\u00e9\\\U0001F600.md", "file:///c%3A/p/100%25/caf%C3%A9/%F0%9F%98%80.md"),
        ("\\\\server\\share\\x", "file://server/share/x"),
        ("\\\\server\\share\\a b\\#.txt", "file://server/share/a%20b/%23.txt"),
    ],
)
def test_windows_path_to_uri_and_back(path: str, uri: str) -> None:
    assert path_to_uri(path, windows=True) == uri
    assert uri_to_path(uri, windows=True) == path


def test_windows_drive_letter_lower_cased_and_slashes_accepted() -> None:
    assert path_to_uri("C:\\Users\\me\\a.ts", windows=True) == "file:///c%3A/Users/me/a.ts"
    assert path_to_uri("C:/Users/me/a.ts", windows=True) == "file:///c%3A/Users/me/a.ts"


@pytest.mark.parametrize(
    "uri",
    [
        "file:///C:/Users/me/a.ts",
        "file:///c:/Users/me/a.ts",
        "file:///c%3A/Users/me/a.ts",
        "file:///C%3a/Users/me/a.ts",
        "file:///c|/Users/me/a.ts",
        "file://C:/Users/me/a.ts",
        "file://localhost/C:/Users/me/a.ts",
    ],
)
def test_windows_accepts_drive_variants(uri: str) -> None:
    assert uri_to_path(uri, windows=True) == "c:\\Users\\me\\a.ts"


@pytest.mark.parametrize(
    "name",
    ["a b", "x#y", "p%20q", "100%", "what", "caf\u00e9", "\u65e5\u672c\u8a9e", "\U0001F600", "a&b=c", "[x]"],
)
def test_windows_round_trip(name: str) -> None:
    for path in ("c:\\work\\" + name + "\\" + name + ".py", "\\\\srv\\share\\" + name):
        uri = path_to_uri(path, windows=True)
        assert "\\" not in uri and " " not in uri and "#" not in uri
        assert uri_to_path(uri, windows=True) == path
        assert path_to_uri(uri_to_path(uri, windows=True), windows=True) == uri


def test_windows_long_path_prefix() -> None:
    assert path_to_uri("\\\\?\\C:\\x\\y", windows=True) == "file:///c%3A/x/y"
    assert path_to_uri("\\\\?\\UNC\\srv\\share\\y", windows=True) == "file://srv/share/y"


@pytest.mark.parametrize("path", ["relative\\x", "c:relative", "\\\\", "x"])
def test_windows_path_errors(path: str) -> None:
    with pytest.raises(ValueError):
        path_to_uri(path, windows=True)


@pytest.mark.parametrize("path", ["C:\\Users\\Me\\A.ts", "c:\\Users\\Me\\A.ts", "C:/Users/Me/A.ts", "Z:"])
def test_wire_file_path_lower_cases_only_the_drive_letter_on_windows(path: str) -> None:
    # The editor may name the drive either way; the wire carries it in lower case, in
    # filePath as in fileUrl, and the rest of the path keeps its case (PROTOCOL.md §6).
    wire = wire_file_path(path, windows=True)
    assert wire == path[0].lower() + path[1:]
    assert wire_file_path(wire, windows=True) == wire
    assert uri_to_path(path_to_uri(path, windows=True), windows=True) == wire.replace("/", "\\")


@pytest.mark.parametrize("path", ["\\\\srv\\Share\\X", "/Home/A.ts", "C:relative", "Cx:\\no"])
def test_wire_file_path_keeps_other_paths(path: str) -> None:
    # A UNC name, a path without a drive, a drive-relative one: nothing to lower-case.
    assert wire_file_path(path, windows=True) == path
    # POSIX: a name may begin with "C:", which is no drive there.
    assert wire_file_path("C:\\x", windows=False) == "C:\\x"


def test_default_follows_running_os() -> None:
    if os.name == "nt":
        assert path_to_uri("C:\\x") == "file:///c%3A/x"
    else:
        assert path_to_uri("/x y") == "file:///x%20y"
        assert uri_to_path("file:///x%20y") == "/x y"


# --- resolve_path ------------------------------------------------------------------


def test_resolve_relative_posix() -> None:
    assert resolve_path("src/../lib/x.py", "/work/proj", windows=False) == "/work/proj/lib/x.py"
    assert resolve_path("./a//b/", "/work/proj/", windows=False) == "/work/proj/a/b"


def test_resolve_absolute_ignores_root() -> None:
    assert resolve_path("/etc/./hosts", "/work/proj", windows=False) == "/etc/hosts"


def test_resolve_file_uri() -> None:
    assert resolve_path("file:///work/a%20b/x.py", "/elsewhere", windows=False) == "/work/a b/x.py"
    assert resolve_path("file:///C:/w/x.py", "d:\\other", windows=True) == "c:\\w\\x.py"


def test_resolve_windows() -> None:
    assert resolve_path("src\\..\\lib/x.py", "C:\\proj", windows=True) == "c:\\proj\\lib\\x.py"
    assert resolve_path("D:\\a\\.\\b", "c:\\proj", windows=True) == "d:\\a\\b"


def test_resolve_relative_root_uses_cwd(tmp_path, monkeypatch) -> None:
    if os.name == "nt":
        pytest.skip("POSIX cwd semantics")
    monkeypatch.chdir(tmp_path)
    assert resolve_path("x.py", "sub") == os.path.join(os.path.abspath("sub"), "x.py")


# --- UTF-16 positions --------------------------------------------------------------


def test_utf16_len() -> None:
    assert utf16_len("") == 0
    assert utf16_len("abc") == 3
    assert utf16_len("caf\u00e9") == 4  # BMP: one unit each
    assert utf16_len("\u65e5\u672c") == 2
    assert utf16_len("a\U0001F600b") == 4  # astral: a surrogate pair
    assert utf16_len("\ud800") == 1  # a lone surrogate does not crash


def test_utf16_column_and_back() -> None:
    line = "x = '\U0001F600' + '\u00e9'"
    # code point 5 is the emoji; after it, wire columns are shifted by one
    assert utf16_column(line, 5) == 5
    assert utf16_column(line, 6) == 7
    assert utf16_column(line, len(line)) == utf16_len(line)
    for col in range(len(line) + 1):
        assert codepoint_column(line, utf16_column(line, col)) == col


def test_columns_clamp_and_round_down() -> None:
    line = "a\U0001F600b"
    assert utf16_column(line, 99) == 4
    assert utf16_column(line, -3) == 0
    assert codepoint_column(line, 99) == 3
    assert codepoint_column(line, -1) == 0
    # wire column 2 is between the two halves of the emoji: round down to its start
    assert codepoint_column(line, 2) == 1
    assert codepoint_column(line, 3) == 2
