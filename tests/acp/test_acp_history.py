"""A long message streamed in small chunks (ACP.md §3.3: a model's word-sized pieces,
each its own `agent_message_chunk`) is merged in time linear in its length: the chunks
are kept as pieces and joined when the text is read, in `Session.history` and in the
history a resume shows (`render.history_lines`). Adding each chunk to the text so far
copied all of it every time, which made 40 000 chunks take 40 s."""
from __future__ import annotations

import asyncio

import pytest

from acp import render
from acp.session import Session
from acp_testlib import make_client, run, workspace


class CountedText(str):
    """A chunk's text that counts how often it is added to other text: each such `+`
    copies the text so far."""

    additions = 0

    def __add__(self, other: str) -> str:
        CountedText.additions += 1
        return str.__add__(self, other)

    def __radd__(self, other: str) -> str:
        CountedText.additions += 1
        return str.__add__(other, self)


def chunk(kind: str, text: str) -> dict:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def test_session_history_joins_the_chunks_when_read_not_as_they_come():
    CountedText.additions = 0

    async def made() -> Session:  # (a Session's lock is made in a loop: Python 3.8 and 3.9 bind it there)
        return Session(None, "s1", "/w")  # type: ignore[arg-type]  # (merging needs no host)

    session = asyncio.run(made())
    session.apply(chunk("user_message_chunk", "hello"))
    pieces = [CountedText("w%d " % n) for n in range(1000)]
    for piece in pieces:
        session.apply(chunk("agent_message_chunk", piece))
    assert CountedText.additions == 0
    assert session.history == [{"role": "user", "text": "hello"}, {"role": "agent", "text": "".join(pieces)}]
    session.apply(chunk("agent_message_chunk", CountedText("more")))  # after a read: still one entry
    session.apply(chunk("agent_thought_chunk", "hmm"))
    assert CountedText.additions == 0
    assert [entry["text"] for entry in session.history] == ["hello", "".join(pieces) + "more", "hmm"]


def test_resume_preview_joins_the_chunks_once():
    CountedText.additions = 0
    pieces = [CountedText("w%d " % n) for n in range(1000)]
    lines = render.history_lines([chunk("user_message_chunk", "hello")]
                                 + [chunk("agent_message_chunk", piece) for piece in pieces])
    assert CountedText.additions == 0
    assert lines == ["you: hello", render.preview("agent: " + "".join(pieces))]


@pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)
def test_a_message_of_many_chunks_reads_whole_at_any_moment(tmp_path):
    async def main():
        async with make_client() as client:
            await client.initialize()
            session = await client.new_session(workspace(tmp_path))
            turn = session.prompt("CHUNKS 3000")
            midway = None
            async for update in turn:
                if update.get("content") == {"type": "text", "text": "w1499 "}:
                    midway = session.history[-1]["text"]  # read while the message streams
            return session.history, midway, await turn

    history, midway, result = run(main())
    words = ["w%d " % n for n in range(3000)]
    # (the read loop may have merged a few more chunks than the iteration has shown)
    assert midway is not None and midway.startswith("".join(words[:1500]))
    assert "".join(words).startswith(midway)
    assert history == [{"role": "user", "text": "CHUNKS 3000"}, {"role": "agent", "text": "".join(words)}]
    assert result.text == "".join(words)
