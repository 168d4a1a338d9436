"""An agent that stops reading its answers (ACP.md §1), over stdio and TCP: past the
client's limit of unsent bytes its requests get a small error instead of the large
answer, what waits for it stays bounded, and the client reads on, so an agent that
writes while it does not read never stalls it (the fake agent's FLOOD turn: file reads
sent at once, then thousands of lines that are not JSON, each owed a -32700)."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

import acp_testlib
from acp_testlib import ROOT, make_client, run, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)

LIMIT = 256 * 1024  # the client's max_unsent in these tests
FILE = 200 * 1024  # each read's answer: most of the limit


def big_file(tmp_path):
    root = workspace(tmp_path)
    path = tmp_path / "work" / "big.txt"
    path.write_text("y" * (FILE - 1) + "\n", encoding="utf-8")
    return root, str(path)


async def flood(client, root, path, reads, junk):
    await client.start()
    try:
        await client.initialize()
        session = await client.new_session(root)
        result = await session.prompt("FLOOD %d %s %d" % (reads, path, junk))
        peer = client.conn.peer
        while peer.handler_tasks:  # every read answered one way or the other
            await asyncio.sleep(0.02)
        return result.text, client.conn.unsent, peer.refused_answers, peer.dropped_answers
    finally:
        await client.close(grace=0.2)  # (the agent reads nothing more: not even its stdin's end)


def test_answers_past_the_limit_become_small_errors(tmp_path):
    root, path = big_file(tmp_path)

    async def main():
        return await flood(make_client(fs_roots=[root], max_unsent=LIMIT), root, path, 10, 0)

    text, unsent, refused, dropped = run(main())
    assert text == "FLOODED 10 0"  # the agent sent its ten reads
    # One answer went (alone, it always fits); none of the others fit beside it.
    assert unsent <= LIMIT, unsent
    assert dropped == 0


def test_an_agent_writing_while_it_reads_nothing_never_stalls_the_client(tmp_path):
    """Before, the -32700 answers to lines that are not JSON were written inside the
    read loop, waiting for the agent to take them: once the pipe was full the client
    stopped reading, and the agent, still writing, waited for ever."""
    root, path = big_file(tmp_path)

    async def main():
        return await flood(make_client(fs_roots=[root], max_unsent=LIMIT), root, path, 5, 20000)

    text, unsent, refused, dropped = run(main(), timeout=60)
    assert text == "FLOODED 5 20000"  # the agent could write all of it: we read on
    assert unsent < 2 * LIMIT + 1024, unsent  # the hard limit (and the one small error that reached it)
    if acp_testlib.TRANSPORT == "stdio":  # (a pipe holds 64 KiB; a socket's buffers may take it all)
        assert refused > 0 and dropped > 0


@pytest.mark.stdio_only
@pytest.mark.skipif(sys.platform == "win32", reason="the benchmark reads its memory through `resource` (POSIX)")
def test_the_memory_benchmark_runs():
    """tools/bench_acp_memory.py end to end, small (it measures; nothing is asserted of
    the figure here)."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bench_acp_memory.py"), "--mib", "2",
                           "--requests", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert "3 fs/read_text_file of a 2.1 MB file" in proc.stdout.decode() and "peak" in proc.stdout.decode()
