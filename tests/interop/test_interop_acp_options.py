"""The real Copilot CLI (offline, the fake model) with the options of `python3 -m acp`
that it supports (ACP.md §3.3, §3.5, §11): logging in (Copilot's `copilot login`,
named in its `authMethods`, run only with consent; offline it refuses, and says so),
logging out, `--mode`, `--config`, and attachments (an image and a text file)."""

import base64
import json
import os

import pytest

import copilot_harness as H
from acp_output import result_line
from fake_model import Turn

pytestmark = pytest.mark.interop



def _png() -> bytes:
    """A real 1x1 PNG (Copilot reads an image's bytes: a signature alone is not one)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


PNG = _png()


def test_login_runs_copilots_own_command_with_consent(acp_cli, copilot_bin):
    proc = acp_cli("--login", "--yes")
    status = proc.wait(60)
    err = proc.output("err")
    assert "  [1] Log in with Copilot CLI (copilot-login)" in err, err
    assert "      $ %s login" % copilot_bin in err  # the command as Copilot names it
    assert "Logging in with [1] (--yes)" in err
    # `copilot login` ran in our terminal (its words on our stderr): offline it refuses.
    assert "Login is not available in offline mode." in err
    assert status == 1 and "login exited with status 1: not logged in" in err


def test_login_refused_runs_nothing(acp_cli):
    proc = acp_cli("--login", "--no")
    assert proc.wait(60) == 1
    err = proc.output("err")
    assert "(not logged in: refused by --no)" in err
    assert "offline mode" not in err


def test_logout(acp_cli):
    proc = acp_cli("--logout")  # advertised (auth.logout); offline there is nothing to end
    assert proc.wait(60) == 0, proc.output()
    assert "(logged out)" in proc.output("err")


def test_mode_plan_reaches_the_model(acp_cli, fake_model):
    fake_model.script(Turn.say("A plan."))
    proc = acp_cli("--mode", "plan", "Plan the work")
    assert proc.wait(60) == 0, proc.output()
    assert "[[PLAN]] Plan the work" in fake_model.user_texts()[-1]  # Copilot's plan mode


def test_an_unknown_mode_names_copilots_modes(acp_cli, fake_model):
    proc = acp_cli("--mode", "yolo", "Go")
    assert proc.wait(60) == 2
    err = proc.output("err")
    assert "unknown mode 'yolo'" in err and "session-modes#autopilot (autopilot)" in err
    assert not fake_model.chat_requests()


def test_config_allow_all_lets_an_edit_through_without_a_question(acp_cli, fake_model, workspace):
    """`allow_all=on` is Copilot's own approval: the edit needs no permission, so it is
    made even under --no, which would refuse a question."""
    path = os.path.join(workspace, "hello.py")
    fake_model.script(Turn.tool("edit", {"path": path, "old_str": "return x", "new_str": "return 7"}),
                      Turn.say("Done."))
    proc = acp_cli("--no", "--config", "allow_all=on", "--json", "Fix hello.py")
    assert proc.wait(60) == 0, proc.output()
    assert "return 7" in H.read(path)
    updates = [json.loads(line)["update"] for line in proc.lines("out") if '"config_option_update"' in line]
    allow_all = [o for o in updates[-1]["configOptions"] if o["id"] == "allow_all"][0]
    assert allow_all["currentValue"] == "on"
    assert result_line(proc)["exitCode"] == 0


def test_a_bad_config_value_names_copilots_values(acp_cli, fake_model):
    proc = acp_cli("--config", "allow_all=maybe", "Go")
    assert proc.wait(60) == 2
    assert "config option allow_all cannot be 'maybe': its values are on, off" in proc.output("err")
    assert not fake_model.chat_requests()


def test_an_image_and_a_file_reach_the_model(acp_cli, fake_model, workspace, tmp_path):
    png = tmp_path / "shot.png"
    png.write_bytes(PNG)
    notes = tmp_path / "notes.txt"
    notes.write_text("the notes\n", encoding="utf-8")
    fake_model.script(Turn.say("Seen."))
    proc = acp_cli("--attach", str(png), "--attach", str(notes), "Look at these")
    assert proc.wait(60) == 0, proc.output()
    parts = [part for m in fake_model.chat_requests()[-1]["body"]["messages"] if m.get("role") == "user"
             and isinstance(m.get("content"), list) for part in m["content"]]
    images = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    assert images == ["data:image/png;base64," + base64.b64encode(PNG).decode()]
    texts = "\n".join(p.get("text", "") for p in parts)
    # The embedded file is named to the model by its URI's path (a file of Copilot's own,
    # for the turn, when the URI names none).
    assert "Look at these" in texts and "<tagged_files>" in texts and str(notes) in texts


def test_copilot_is_warned_about_for_a_stdio_mcp_server(acp_cli, fake_model):
    fake_model.script(Turn.say("OK."))
    proc = acp_cli("--mcp-server", "files=stdio:files-server --root /", "Hello")
    assert proc.wait(60) == 0, proc.output()
    assert "Warning: Copilot CLI ignores stdio MCP servers given by an ACP client" in proc.output("err")
