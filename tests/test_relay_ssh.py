"""The relay over a real SSH connection: OpenSSH's sshd on 127.0.0.1 (a free port, a
throwaway host key and user key in the test's own folder, its own configuration), the
CLI's half starting the IDE's half with `--via 'ssh ... python3 copilot-ide.pyz relay
ide-side --stdio ...'` from the one-file zipapp, as on a server with nothing installed.
Our client and `check` then work through it. Skipped, with the reason, where sshd
cannot be had (tests/install_sshd.sh installs Debian's openssh-server as root)."""
from __future__ import annotations

import asyncio
import getpass
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from typing import Any, Iterator, List, Optional

import pytest

from ide_protocol.client import IdeClient
from ide_protocol.common.tools import Selection
from ide_protocol.server.ide_server import IdeServer
from test_relay_e2e import LIMIT, ROOT, build_pyz, ide_half_pids, relay_lock, relay_locks, setup, stop_relay, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
PRIVSEP_DIR = "/run/sshd"  # Debian's sshd, run as root, wants it (the service would make it)


def sshd_binary() -> Optional[str]:
    found = shutil.which("sshd") or ("/usr/sbin/sshd" if os.access("/usr/sbin/sshd", os.X_OK) else None)
    return found and os.path.abspath(found)


def why_no_sshd() -> Optional[str]:
    if not sys.platform.startswith("linux"):
        return "the SSH test runs OpenSSH's sshd on Linux only (this is %s)" % sys.platform
    if not os.path.isfile("/bin/bash"):
        return "no bash to run tests/install_sshd.sh"
    try:
        done = subprocess.run(["bash", os.path.join(HERE, "install_sshd.sh")], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=1200)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "tests/install_sshd.sh failed: %s" % exc
    if done.returncode != 0 or sshd_binary() is None:
        return "no OpenSSH server: " + done.stdout.decode("utf-8", "replace").strip().splitlines()[-1:][0] \
            if done.stdout.strip() else "no OpenSSH server (tests/install_sshd.sh: status %d)" % done.returncode
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Sshd:
    """`sshd -D` on 127.0.0.1 with a configuration, keys and pid file of its own."""

    def __init__(self, folder: Any) -> None:
        self.folder = folder
        folder.mkdir()
        for name in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "relay-test", "-f",
                            str(folder / name)], check=True, timeout=60)
        (folder / "authorized_keys").write_text((folder / "user_key.pub").read_text())
        self.made_privsep = False
        if not os.path.isdir(PRIVSEP_DIR):
            os.makedirs(PRIVSEP_DIR, 0o755)
            self.made_privsep = True
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        for _attempt in range(3):  # a free port taken by someone else meanwhile: another one
            self.port = free_port()
            (folder / "sshd_config").write_text("\n".join([
                "Port %d" % self.port, "ListenAddress 127.0.0.1", "HostKey %s" % (folder / "host_key"),
                "AuthorizedKeysFile %s" % (folder / "authorized_keys"), "PidFile %s" % (folder / "sshd.pid"),
                "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password", "StrictModes no", "UsePAM no", "X11Forwarding no",
                "AllowTcpForwarding no", "PrintMotd no", "LogLevel ERROR", ""]))
            self.proc = subprocess.Popen([sshd_binary() or "sshd", "-D", "-e", "-f", str(folder / "sshd_config")],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=open(str(folder / "sshd.log"), "wb"))
            if self._listening():
                return
            self.stop()
        raise AssertionError("sshd did not start: %s" % (folder / "sshd.log").read_text())

    def _listening(self) -> bool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proc is not None and self.proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.1)
        return False

    def ssh(self) -> List[str]:
        return ["ssh", "-F", "/dev/null", "-p", str(self.port), "-i", str(self.folder / "user_key"),
                "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "%s@127.0.0.1" % getpass.getuser()]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)

    def close(self) -> None:
        self.stop()
        if self.made_privsep:
            try:
                os.rmdir(PRIVSEP_DIR)  # only if still empty: it was ours
            except OSError:
                pass


@pytest.fixture
def sshd(tmp_path: Any) -> Iterator[Sshd]:
    reason = why_no_sshd()
    if reason:
        pytest.skip(reason)
    server = Sshd(tmp_path / "ssh")
    try:
        yield server
    finally:
        server.close()
    assert server.proc is not None and server.proc.poll() is not None


def test_client_and_check_through_the_relay_over_ssh(tmp_path: Any, sshd: Sshd) -> None:
    setup(tmp_path)
    bare = tmp_path / "bare"
    bare.mkdir()
    pyz = build_pyz(str(bare / "copilot-ide.pyz"))
    ide_path = str(tmp_path / "project" / "a.py")
    cli_path = str(tmp_path / "cliview" / "a.py")
    remote = [sys.executable, "-I", pyz, "relay", "ide-side", "--stdio", "--folder", str(tmp_path / "project"),
              "--lock-dir", str(tmp_path / "ide")]
    # ssh passes the remote command to the login shell as one string: quoted once here
    via = " ".join(shlex.quote(a) for a in sshd.ssh() + [" ".join(shlex.quote(a) for a in remote)])
    argv = [sys.executable, "-m", "ide_protocol", "relay", "cli-side", "--via", via,
            "--map", "%s=%s" % (tmp_path / "project", tmp_path / "cliview"), "--lock-dir", str(tmp_path / "cli-ide")]

    async def scenario() -> None:
        async with IdeServer([str(tmp_path / "project")], lock_dir=str(tmp_path / "ide"), ide_name="Test IDE") as server:
            relay = subprocess.Popen(argv, env=dict(os.environ, PYTHONPATH=ROOT), cwd=str(tmp_path),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            loop = asyncio.get_event_loop()
            lock: Any = None
            try:
                lock = await relay_lock(tmp_path, relay, 60)
                assert ide_half_pids(tmp_path), "the IDE's half is not running (under sshd)"
                client = IdeClient.discover(str(tmp_path / "cliview"), str(tmp_path / "cli-ide"), timeout=30)
                async with client:
                    server.set_selection(Selection(ide_path, "print", (0, 0), (0, 5)))
                    selection = await client.get_selection()
                    assert (selection["filePath"], selection["text"]) == (cli_path, "print")
                    push = await client.wait_push("selection_changed", timeout=30)
                    assert push.params["filePath"] == cli_path
                checked = await loop.run_in_executor(None, lambda: subprocess.run(
                    [sys.executable, "-m", "ide_protocol", "check", "--strict", "--lock-dir", str(tmp_path / "cli-ide")],
                    cwd=str(tmp_path / "cliview"), env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, timeout=180))
                assert checked.returncode == 0 and " 0 failed" in checked.stdout, checked.stdout
            finally:
                await stop_relay(relay, lock)
            assert relay_locks(tmp_path) == []
            # the IDE's half, under sshd, ends with the SSH session
            await wait_for(lambda: not ide_half_pids(tmp_path), "the IDE's half to end", 30)

    asyncio.run(asyncio.wait_for(scenario(), LIMIT * 3))
