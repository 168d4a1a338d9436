"""The Vim plugin's doorbell (editors/vim/python3/copilot_ide_vim/bell.py), outside Vim:
the folder it makes is private, a ring is one file however often it rings, and it
removes only what it made (never a folder whose name existed, never what is not its
own inside its folder), nothing after it is closed."""
from __future__ import annotations

import os
import stat
import sys
import threading

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "editors", "vim",
                                "python3"))

from copilot_ide_vim import bell as bell_module  # noqa: E402
from copilot_ide_vim.bell import Bell  # noqa: E402


def test_rings_answers_and_closes(tmp_path) -> None:
    folder = str(tmp_path / "copilot-ide-vim-1-2")
    bell = Bell(folder)
    assert bell.make() and bell.made
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert os.listdir(folder) == []
    bell.ring()
    bell.ring()  # rung already: still one file
    assert os.listdir(folder) == ["ring"]
    bell.answer()
    assert os.listdir(folder) == []
    bell.ring()
    bell.close()
    assert not os.path.exists(folder)
    bell.ring()  # closed: creates nothing, not even the folder
    bell.answer()
    assert not os.path.exists(folder)
    assert bell.make() and os.path.isdir(folder)  # a start after a stop makes it again
    bell.close()
    assert not os.path.exists(folder)


def test_a_folder_whose_name_exists_is_not_the_bells(tmp_path) -> None:
    folder = tmp_path / "taken"
    folder.mkdir()
    (folder / "ring").write_text("someone else's\n")
    (folder / "other").write_text("keep\n")
    bell = Bell(str(folder))
    assert not bell.make()
    bell.ring()
    bell.answer()
    bell.close()
    assert sorted(os.listdir(str(folder))) == ["other", "ring"]
    assert (folder / "ring").read_text() == "someone else's\n"


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix", reason="symbolic links: POSIX")
def test_a_symbolic_link_of_that_name_is_not_followed(tmp_path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "copilot-ide-vim-1-2"
    link.symlink_to(target)
    bell = Bell(str(link))
    assert not bell.make()
    bell.ring()
    bell.close()
    assert os.listdir(str(target)) == [] and os.path.islink(str(link))


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name != "posix", reason="symbolic links: POSIX")
def test_a_ring_is_never_created_through_a_symbolic_link(tmp_path) -> None:
    folder = str(tmp_path / "bell")
    bell = Bell(folder)
    assert bell.make()
    victim = tmp_path / "victim"
    os.symlink(str(victim), os.path.join(folder, "ring"))
    bell.ring()
    assert not victim.exists()


def test_a_folder_removed_by_someone_else_is_made_again_at_the_next_ring(tmp_path) -> None:
    folder = str(tmp_path / "bell")
    bell = Bell(folder)
    assert bell.make()
    os.rmdir(folder)  # as a cleaner of old files in /tmp does, after days
    bell.ring()
    assert os.listdir(folder) == ["ring"]
    if os.name == "posix":
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    bell.close()
    assert not os.path.exists(folder)


def test_a_folder_of_that_name_made_by_someone_else_after_ours_went_is_left_alone(tmp_path) -> None:
    if sys.platform == "win32":
        # Without a folder held open, ours is told from a later one by its file id.
        pytest.skip("Windows: the folder's file id tells ours from a later one; NTFS changes an id's "
                    "sequence number when it is used again, but Wine gives the Linux inode, which "
                    "comes back at once, so real Windows is untested here")
    folder = tmp_path / "bell"
    bell = Bell(str(folder))
    assert bell.make()
    os.rmdir(str(folder))
    folder.mkdir()  # someone else's now, with what they keep in it
    (folder / "ring").write_text("theirs\n")
    bell.answer()
    bell.ring()
    bell.close()
    assert os.listdir(str(folder)) == ["ring"] and (folder / "ring").read_text() == "theirs\n"
    (folder / "ring").unlink()
    bell.close()  # and when it is empty, not removed either
    assert folder.is_dir()


def test_what_is_not_its_own_keeps_the_folder(tmp_path) -> None:
    folder = tmp_path / "bell"
    bell = Bell(str(folder))
    assert bell.make()
    (folder / "not-ours").write_text("keep\n")
    bell.close()  # rmdir only: the folder stays, with what is in it
    assert os.listdir(str(folder)) == ["not-ours"]


def test_no_folder_no_bell(tmp_path) -> None:
    for name in ("", None, str(tmp_path / "missing" / "bell")):
        bell = Bell(name)
        assert not bell.make()
        bell.ring()
        bell.close()
    assert os.listdir(str(tmp_path)) == []


def test_rings_from_many_threads_then_close_leave_nothing(tmp_path) -> None:
    folder = str(tmp_path / "bell")
    bell = Bell(folder)
    assert bell.make()
    go = threading.Event()

    def ring() -> None:
        go.wait()
        for _ in range(200):
            bell.ring()

    threads = [threading.Thread(target=ring) for _ in range(4)]
    for t in threads:
        t.start()
    go.set()
    bell.close()  # while they ring: after close, nothing more is created
    for t in threads:
        t.join()
    assert not os.path.exists(folder)


@pytest.mark.parametrize("interrupted", ["answer", "close"])
def test_the_exit_run_on_top_of_vims_thread_goes_through_the_lock_it_holds(tmp_path, interrupted) -> None:
    # A deadly signal's handler runs Vim's exit on Vim's own thread, on top of whatever
    # that thread was doing: the timer's `answer` (seen in CI), or `close` itself (a
    # second signal during VimLeavePre), holding the bell's lock. That exit calls
    # `close` (VimLeavePre) and `at_exit` (Python's finalisation) on the same thread:
    # they must go through, not wait for the lock for ever, and do the whole work.
    folder = str(tmp_path / "copilot-ide-vim-1-2")
    bell = Bell(folder)
    assert bell.make()
    bell.ring()
    done = threading.Event()

    def vims_thread() -> None:
        with bell._lock:  # the interrupted call...
            if interrupted == "close":
                bell.made = False  # ...after its first step
            bell.close()  # the exit on top of it: VimLeavePre
            bell.at_exit()  # then Python's exit hooks
            done.set()

    threading.Thread(target=vims_thread, daemon=True).start()
    assert done.wait(10), "the exit waited for the lock its own thread holds"
    assert not os.path.exists(folder)
    bell.at_exit()  # done already: nothing more
    assert not os.path.exists(folder)


def test_a_ring_from_another_thread_gives_up_once_the_exit_closes_the_bell(tmp_path) -> None:
    # Vim's thread, interrupted inside `answer`, holds the lock for good while its exit
    # runs; that exit's server stop queues the pending diffs' closing, which rings from
    # the server's thread. That ring must not wait for ever (it held the stop for its
    # whole 2 s, the socket left behind): it gives up once the bell is closing.
    folder = str(tmp_path / "copilot-ide-vim-1-2")
    bell = Bell(folder)
    assert bell.make()
    held, exit_done, rang = threading.Event(), threading.Event(), threading.Event()

    def vims_thread() -> None:
        with bell._lock:  # the interrupted `answer`, never resumed
            held.set()
            bell.close()  # the exit on top of it
            exit_done.set()
            rang.wait(10)  # (Vim's process ends here; the lock is never let go)

    threading.Thread(target=vims_thread, daemon=True).start()
    assert held.wait(10)
    ringer = threading.Thread(target=lambda: (bell.ring(), rang.set()), daemon=True)
    ringer.start()
    assert exit_done.wait(10)
    assert rang.wait(10), "the ring waited for the lock Vim's thread keeps"
    assert not os.path.exists(folder)


@pytest.mark.skipif(not bell_module._HOLD, reason="Windows cannot hold a folder open: there is no descriptor to close")
def test_the_held_folder_is_closed_once_when_the_release_is_entered_twice(tmp_path, monkeypatch) -> None:
    # The exit may run on top of `close` between its closing the held folder and its
    # forgetting it: the second run must not close that number again (another thread
    # may have been given it meanwhile).
    folder = str(tmp_path / "copilot-ide-vim-1-2")
    bell = Bell(folder)
    assert bell.make()
    closed = []
    real_close = os.close

    def close_then_the_exit_runs_again(fd: int) -> None:
        closed.append(fd)
        real_close(fd)
        if len(closed) == 1:
            bell.at_exit()  # the second exit, run on top of this step

    monkeypatch.setattr(os, "close", close_then_the_exit_runs_again)
    bell.close()
    monkeypatch.undo()
    fds = [fd for fd in closed if fd == closed[0]]
    assert len(fds) == 1, closed
    assert not os.path.exists(folder)


def test_at_exit_after_close_removes_nothing_made_since_by_another(tmp_path) -> None:
    folder = str(tmp_path / "copilot-ide-vim-1-2")
    bell = Bell(folder)
    assert bell.make()
    bell.close()
    os.mkdir(folder)  # someone else's now
    with open(os.path.join(folder, "ring"), "w") as f:
        f.write("theirs\n")
    bell.at_exit()
    assert os.listdir(folder) == ["ring"]
