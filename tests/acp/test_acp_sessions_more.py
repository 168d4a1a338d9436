"""The session methods beyond new, load and prompt (ACP.md §3.5), over stdio and TCP:
`session/list` followed page after page (`nextCursor`), `session/resume` and
`session/delete` where advertised (and refused before sending where not),
`additionalDirectories`, and message chunks merged by `messageId`."""
from __future__ import annotations

import json

import pytest

from acp import AcpError, NotAdvertised
from acp import render
from acp_testlib import make_client, read_log, run, run_cli, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


def sent(log, method):
    return [msg["params"] for direction, msg in read_log(log)
            if direction == "C>A" and isinstance(msg, dict) and msg.get("method") == method]


def test_session_list_follows_next_cursor_to_the_last_page(tmp_path):
    root = workspace(tmp_path)
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log, env={"FAKE_ACP_PAGE": "2"}) as client:
            await client.initialize()
            made = [(await client.new_session(root)).session_id for _ in range(5)]
            first, cursor = await client.list_sessions_page(cwd=root)
            every = await client.list_sessions(cwd=root)
            streamed = [entry["sessionId"] async for entry in client.iter_sessions(cwd=root)]
            return made, first, cursor, every, streamed

    made, first, cursor, every, streamed = run(main())
    assert len(first) == 2 and cursor == "from:2"
    assert [entry["sessionId"] for entry in every] == made == streamed
    assert [p.get("cursor") for p in sent(log, "session/list")][:4] == [None, None, "from:2", "from:4"]


def test_the_command_line_lists_every_page(tmp_path):
    root = workspace(tmp_path)
    store = str(tmp_path / "store.json")
    env = {"FAKE_ACP_PAGE": "2", "FAKE_ACP_STORE": store}
    for n in range(5):
        code, _, err = run_cli(["--folder", root, "hello %d" % n], env=env)
        assert code == 0, err
    code, out, err = run_cli(["--folder", root, "--list-sessions"], env=env)
    assert code == 0, err
    assert len(out.splitlines()) == 5


def test_a_cursor_that_comes_back_ends_the_listing_with_an_error(tmp_path):
    async def main():
        async with make_client(env={"FAKE_ACP_PAGE": "loop"}) as client:
            await client.initialize()
            await client.new_session(workspace(tmp_path))
            with pytest.raises(AcpError) as info:
                await client.list_sessions()
            return str(info.value)

    assert "nextCursor 'again' came back a second time" in run(main())


def test_resume_and_delete_where_advertised(tmp_path):
    root = workspace(tmp_path)
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log, env={"FAKE_ACP_CAPS": "full"}) as client:
            await client.initialize()
            session = await client.new_session(root)
            await session.prompt("hello")
            await session.close()  # (an open session is "already loaded")
            resumed = await client.resume_session(session.session_id, root)
            again = await resumed.prompt("again")
            await client.delete_session(session.session_id)
            left = [entry["sessionId"] for entry in await client.list_sessions()]
            return session.session_id, resumed, again, left

    sid, resumed, again, left = run(main())
    assert resumed.history == [{"role": "user", "text": "again"}, {"role": "agent", "text": "Hello from the fake agent."}]
    assert again.text == "Hello from the fake agent."  # nothing replayed before it
    assert sid not in left
    assert sent(log, "session/resume") == [{"sessionId": sid, "cwd": root, "mcpServers": []}]
    assert sent(log, "session/delete") == [{"sessionId": sid}]


def test_resume_delete_and_more_folders_are_refused_before_sending_where_not_advertised(tmp_path):
    root = workspace(tmp_path)
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log) as client:  # as Copilot 1.0.102: none of the three
            await client.initialize()
            for call in (client.resume_session("x", root), client.delete_session("x"),
                         client.new_session(root, additional_directories=[str(tmp_path)])):
                with pytest.raises(NotAdvertised):
                    await call

    run(main())
    assert not sent(log, "session/resume") and not sent(log, "session/delete") and not sent(log, "session/new")


def test_the_command_line_resumes_with_session_resume_and_deletes(tmp_path):
    root = workspace(tmp_path)
    env = {"FAKE_ACP_CAPS": "noload", "FAKE_ACP_STORE": str(tmp_path / "store.json")}
    code, out, err = run_cli(["--folder", root, "--json", "hello"], env=env)
    assert code == 0, err
    sid = json.loads(out.splitlines()[-1])["sessionId"]
    code, out, err = run_cli(["--folder", root, "--resume", sid, "again"], env=env)
    assert code == 0, err
    assert out == "(resumed session %s; the agent replays no history)\nHello from the fake agent.\n" % sid
    code, out, err = run_cli(["--delete-session", sid], env=env)
    assert (code, out, err) == (0, "", "")
    code, out, _ = run_cli(["--list-sessions"], env=env)
    assert sid not in out
    # Copilot 1.0.102 offers neither: a usage error, nothing sent.
    code, _, err = run_cli(["--delete-session", sid])
    assert code == 2 and "does not advertise sessionCapabilities.delete" in err


def test_additional_directories_are_sent_and_served(tmp_path):
    root = workspace(tmp_path)
    more = tmp_path / "more"
    more.mkdir()
    (more / "notes.txt").write_bytes(b"more notes\n")  # (bytes: text mode writes \r\n on Windows)
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log, env={"FAKE_ACP_CAPS": "full"}) as client:
            await client.initialize()
            session = await client.new_session(root, additional_directories=[str(more)])
            read = await session.prompt('RAW fs/read_text_file {"path": %s}' % json.dumps(str(more / "notes.txt")))
            return session.additional_directories, read.text

    folders, text = run(main())
    assert folders == [str(more)]
    assert json.loads(text[len("RAW-RESULT "):]) == {"result": {"content": "more notes\n"}}
    assert sent(log, "session/new")[0]["additionalDirectories"] == [str(more)]
    code, _, err = run_cli(["--folder", root, "--add-dir", str(more), "hello"], env={"FAKE_ACP_CAPS": "full"})
    assert code == 0, err
    code, _, err = run_cli(["--folder", root, "--add-dir", str(more), "hello"])
    assert code == 2 and "does not advertise sessionCapabilities.additionalDirectories" in err


def test_chunks_are_merged_by_message_id(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            turn = session.prompt("MSGIDS")
            updates = [update async for update in turn]
            return session.history, updates

    history, updates = run(main())
    assert history == [{"role": "user", "text": "MSGIDS"},
                       {"role": "agent", "text": "One one. Still one.", "messageId": "m1"},
                       {"role": "agent", "text": "Two two.", "messageId": "m2"},
                       {"role": "thought", "text": "hmm", "messageId": "t1"}]
    assert render.history_lines(updates) == ["you: MSGIDS", "agent: One one. Still one.", "agent: Two two."]
