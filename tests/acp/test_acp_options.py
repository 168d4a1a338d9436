"""Every option Copilot offers, from the command line (ACP.md §3.2, §3.3, §3.5), over
stdio and TCP: `--mode` (an id, or the last part of a URL id), `--config ID=VALUE`
(booleans sent with their type), `--mcp-server` (HTTP, SSE, stdio; a warning where the
agent ignores a kind), `--attach` (checked against `promptCapabilities`). A name or
value the agent does not offer is a usage error listing those it does, and nothing
is prompted."""
from __future__ import annotations

import json
import os

import pytest

from acp import JsonRpcError
from acp.options import OptionError
from acp_testlib import make_client, read_log, run, run_cli, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)

PLAN = "https://agentclientprotocol.com/protocol/session-modes#plan"


def sent(log, method):
    return [msg["params"] for direction, msg in read_log(log)
            if direction == "C>A" and isinstance(msg, dict) and msg.get("method") == method]


@pytest.fixture
def acp(tmp_path):
    """`acp(args, **env)`: the command line in a workspace, the agent logging."""
    root = workspace(tmp_path)
    log = str(tmp_path / "agent.log")

    def call(args, **env):
        return run_cli(["--folder", root] + args, env=dict(env, FAKE_ACP_LOG=log))

    call.log = log
    call.root = root
    return call


@pytest.mark.parametrize("given", ["plan", "PLAN", PLAN])
def test_mode_by_id_or_its_last_part(acp, given):
    code, out, err = acp(["--mode", given, "hello"])
    assert code == 0, err
    assert sent(acp.log, "session/set_mode")[0]["modeId"] == PLAN
    assert out == "Hello from the fake agent.\n"


def test_an_unknown_mode_is_a_usage_error_naming_the_modes(acp):
    code, _, err = acp(["--mode", "yolo", "hello"])
    assert code == 2
    assert "unknown mode 'yolo': the agent's modes are" in err
    assert "%s (plan)" % PLAN in err and "#autopilot (autopilot)" in err
    assert not sent(acp.log, "session/prompt") and not sent(acp.log, "session/set_mode")


def test_config_select_and_boolean(acp):
    code, _, err = acp(["--config", "allow_all=on", "--config", "brave=true", "hello"])
    assert code == 0, err
    assert [{k: v for k, v in p.items() if k != "sessionId"} for p in sent(acp.log, "session/set_config_option")] \
        == [{"configId": "allow_all", "value": "on"}, {"configId": "brave", "value": True, "type": "boolean"}]
    caps = sent(acp.log, "initialize")[0]["clientCapabilities"]
    assert caps["session"] == {"configOptions": {"boolean": {}}}


@pytest.mark.parametrize("spec,said", [
    ("allow_all=maybe", "config option allow_all cannot be 'maybe': its values are on, off"),
    ("brave=yes", "config option brave is a boolean: true or false, not 'yes'"),
    ("speed=max", "unknown config option 'speed': the agent's options are mode, allow_all, brave"),
    ("allow_all", "--config 'allow_all': expected ID=VALUE"),
])
def test_a_bad_config_is_a_usage_error_naming_what_is_valid(acp, spec, said):
    code, _, err = acp(["--config", spec, "hello"])
    assert code == 2 and said in err, err
    assert not sent(acp.log, "session/prompt")


def test_mcp_servers_of_every_kind(acp):
    code, _, err = acp(["--mcp-server", "docs=http://127.0.0.1:9/mcp", "--mcp-server", "feed=sse:https://x.example/sse",
                        "--mcp-server", 'files=stdio:npx -y files-server "/a b"', "hello"])
    assert code == 0, err
    assert sent(acp.log, "session/new")[0]["mcpServers"] == [
        {"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp", "headers": []},
        {"type": "sse", "name": "feed", "url": "https://x.example/sse", "headers": []},
        {"name": "files", "command": "npx", "args": ["-y", "files-server", "/a b"], "env": []}]
    assert "Warning" not in err


def test_copilot_is_warned_about_for_stdio_servers(acp):
    code, _, err = acp(["--mcp-server", "files=stdio:files-server", "hello"], FAKE_ACP_AGENT_NAME="Copilot")
    assert code == 0, err
    assert "Warning: Copilot CLI ignores stdio MCP servers given by an ACP client" in err and "files" in err


def test_an_mcp_kind_the_agent_does_not_take_is_refused(acp):
    code, _, err = acp(["--mcp-server", "docs=http://127.0.0.1:9/mcp", "hello"], FAKE_ACP_CAPS="bare")
    assert code == 2 and "the agent does not take HTTP MCP servers (mcpCapabilities.http): docs" in err
    assert not sent(acp.log, "session/new")


@pytest.mark.parametrize("spec", ["docs", "docs=ftp://x", "=http://x", "s=stdio:", 's=stdio:"open'])
def test_a_malformed_mcp_server_is_a_usage_error(acp, spec):
    code, _, err = acp(["--mcp-server", spec, "hello"])
    assert code == 2 and "--mcp-server" in err


def test_attachments_image_text_and_binary(acp, tmp_path):
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"remember this\n")  # (bytes: text mode writes \r\n on Windows)
    blob = tmp_path / "data.bin"
    blob.write_bytes(b"\xff\xfe\x00" * 10)
    code, out, err = acp(["--attach", str(png), "--attach", str(notes), "--attach", str(blob), "BLOCKS"])
    assert code == 0, err
    blocks = json.loads(out[len("BLOCKS-RESULT "):])
    assert blocks == [
        {"type": "text", "mimeType": None, "uri": None, "size": len("BLOCKS")},
        {"type": "image", "mimeType": "image/png", "uri": None, "size": 108},
        {"type": "resource", "mimeType": "text/plain", "uri": notes.as_uri(), "size": 14},
        {"type": "resource", "mimeType": "application/octet-stream", "uri": blob.as_uri(), "size": 30}]


def test_an_attachment_the_agent_does_not_take_is_refused_naming_it(acp, tmp_path):
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG")
    code, _, err = acp(["--attach", str(png), "hello"], FAKE_ACP_CAPS="bare")
    assert code == 2
    assert "the agent does not take images in a prompt (promptCapabilities.image is not true)" in err
    assert not sent(acp.log, "session/new")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_an_attachment_that_is_not_a_regular_file_is_refused_without_blocking(acp, tmp_path):
    fifo = str(tmp_path / "pipe.txt")
    os.mkfifo(fifo)
    code, _, err = acp(["--attach", fifo, "hello"])
    assert code == 2 and "is not a file" in err
    code, _, err = acp(["--attach", str(tmp_path / "missing.txt"), "hello"])
    assert code == 2 and "is not a file" in err


def test_the_library_checks_prompt_content_before_sending(tmp_path):
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log, env={"FAKE_ACP_CAPS": "bare"}) as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            with pytest.raises(OptionError) as info:
                session.prompt([{"type": "text", "text": "look"},
                                {"type": "image", "mimeType": "image/png", "data": ""}])
            return str(info.value)

    assert "does not take images" in run(main())
    assert not sent(log, "session/prompt")


def test_the_library_sends_booleans_with_their_type(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            await session.set_config_option("brave", True)
            with pytest.raises(JsonRpcError):
                await session.set_config_option("brave", "true")  # a string is no boolean
            return session.config_value("brave")

    assert run(main()) is True
