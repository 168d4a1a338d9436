"""What the client and the agent agree on at `initialize` (ACP.md §3.1), over stdio and
TCP: the protocol version (a version other than 1 is refused before anything else is
asked), and the capabilities the client advertises."""
from __future__ import annotations

import pytest

from acp import ProtocolVersionError
from acp_testlib import make_client, read_log, run, run_cli, workspace

pytestmark = pytest.mark.usefixtures("transport")  # stdio and TCP (conftest.py)


@pytest.mark.parametrize("version,shown", [("2", "version 2"), ("0", "version 0"), ('"1"', 'none given: "1"'),
                                           ("none", "none given: null")])
def test_a_protocol_version_other_than_1_is_refused_before_session_new(tmp_path, version, shown):
    """ACP's version negotiation: an agent answering another version than the one
    asked (1, the only one) is not spoken to further; the command line says which."""
    log = str(tmp_path / "agent.log")

    async def main():
        async with make_client(log=log, env={"FAKE_ACP_VERSION": version}) as client:
            with pytest.raises(ProtocolVersionError) as info:
                await client.initialize()
            return info.value

    error = run(main())
    assert shown in str(error) and "this client speaks version 1" in str(error)
    code, _, err = run_cli(["--cwd", workspace(tmp_path), "hello"], env={"FAKE_ACP_VERSION": version,
                                                                          "FAKE_ACP_LOG": log})
    assert code == 1 and "Error: the agent speaks ACP protocol version" in err and shown in err
    methods = [msg.get("method") for direction, msg in read_log(log) if direction == "C>A" and isinstance(msg, dict)]
    assert "session/new" not in methods
