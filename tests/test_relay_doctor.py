"""doctor's remote hint: under SSH, in a container or WSL with no IDE for the folder, it
names where it runs and the relay command that would bring the editor here."""
from __future__ import annotations

from typing import Any, Dict

from ide_protocol.programs.doctor.diagnose import diagnose


def run(tmp: Any, env: Dict[str, str], dockerenv: str) -> Any:
    folder = tmp / "p"
    folder.mkdir(exist_ok=True)
    env = dict(env, HOME=str(tmp))
    return diagnose(str(folder), env=env, home=str(tmp), try_handshake=False, dockerenv=dockerenv)


def test_remote_without_ide_names_the_place_and_the_relay(tmp_path: Any) -> None:
    report = run(tmp_path, {"SSH_CONNECTION": "10.0.0.1 5000 10.0.0.2 22"}, str(tmp_path / "no-dockerenv"))
    remote = [f for f in report.findings if f.code == "remote"]
    assert len(remote) == 1 and "an SSH session (SSH_CONNECTION)" in remote[0].message
    assert "relay cli-side" in remote[0].fix and str(tmp_path / "p") in remote[0].fix
    marker = tmp_path / "dockerenv"
    marker.write_text("")
    report = run(tmp_path, {"WSL_DISTRO_NAME": "Ubuntu"}, str(marker))
    (remote,) = [f for f in report.findings if f.code == "remote"]
    assert "WSL (WSL_DISTRO_NAME) and a container" in remote.message


def test_no_remote_hint_on_the_editor_s_own_machine(tmp_path: Any) -> None:
    report = run(tmp_path, {}, str(tmp_path / "no-dockerenv"))
    assert not [f for f in report.findings if f.code == "remote"]
