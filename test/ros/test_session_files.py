"""The session file store and the store's session services on it: no ROS, no models, milliseconds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memspec_ros.ros import session_files
from memspec_ros.ros.dialogue_store import DialogueStore, token_digest
from memspec_ros.ros.session_files import (
    SavedSession,
    SessionDirLock,
    SessionFileStore,
    file_name,
    model_fingerprint,
    node_session_dir,
    prepare_session_dir,
    session_dir_path,
)
from memspec_ros.runtime.chat import ChatMessage
from memspec_ros.runtime.conversation import Conversation, ConversationRecord

REPO = Path(__file__).resolve().parents[2]

MODEL = "m" * 64


def _saved(sid: str = "kitchen", token: str = "secret", last_used: float = 1000.0) -> SavedSession:
    record = ConversationRecord(chat=True, turns=2, token_ids=(1, 2, 3, 4),
                                messages=(ChatMessage("system", "Be brief."), ChatMessage("user", "Go"),
                                          ChatMessage("assistant", " Okay.")))
    return SavedSession(sid, token_digest(token), record, last_used)


def test_round_trip_keeps_everything_but_the_token(tmp_path: Path) -> None:
    store = SessionFileStore(tmp_path / "s", MODEL)
    store.save(_saved())
    store.save(_saved("../../etc/passwd\x00 and more", last_used=500.0))
    loaded, skipped = store.load_all()
    assert skipped == []
    assert [s.session_id for s in loaded] == ["../../etc/passwd\x00 and more", "kitchen"]  # oldest use first
    assert loaded[1] == _saved()
    names = sorted(p.name for p in (tmp_path / "s").iterdir())
    assert names == sorted(file_name(s.session_id) for s in loaded)  # hashed: safe for any id
    text = store.path_for("kitchen").read_text()
    assert "secret" not in text and token_digest("secret") in text
    assert (store.path_for("kitchen").stat().st_mode & 0o777) == 0o600


def test_a_write_is_atomic_and_a_crashed_write_leaves_the_old_file(tmp_path: Path, monkeypatch) -> None:
    store = SessionFileStore(tmp_path, MODEL)
    store.save(_saved())
    before = store.path_for("kitchen").read_bytes()
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(session_files.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))

    def crash(_src, _dst) -> None:
        raise OSError("power lost")

    monkeypatch.setattr(session_files.os, "replace", crash)
    longer = _saved()
    longer = SavedSession(longer.session_id, longer.token_digest,
                          ConversationRecord(True, 3, (1, 2, 3, 4, 5, 6), longer.conversation.messages), 2000.0)
    with pytest.raises(OSError):
        store.save(longer)
    assert synced, "the temporary file is fsynced before it replaces the old one"
    assert store.path_for("kitchen").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [file_name("kitchen")], "no temporary file left"
    # A temporary file from a process killed mid-write is cleaned up on load, the old file kept.
    (tmp_path / ".tmp-abc.json").write_text('{"format": "memspec_sess')
    loaded, skipped = store.load_all()
    assert [s.session_id for s in loaded] == ["kitchen"] and skipped == []
    assert not (tmp_path / ".tmp-abc.json").exists()


def test_corrupt_and_foreign_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    store = SessionFileStore(tmp_path, MODEL, vocab_size=100)
    store.save(_saved())
    good = json.loads(store.path_for("kitchen").read_text())
    cases = {
        "truncated": store.path_for("kitchen").read_text()[:40],
        "other-model": json.dumps({**good, "session_id": "other-model", "model": "x" * 64}),
        "other-format": json.dumps({**good, "session_id": "other-format", "format": "something/2"}),
        "bad-ids": json.dumps({**good, "session_id": "bad-ids", "token_ids": [1, "2"]}),
        "big-ids": json.dumps({**good, "session_id": "big-ids", "token_ids": [1, 100]}),
        "no-digest": json.dumps({k: v for k, v in {**good, "session_id": "no-digest"}.items() if k != "token_sha256"}),
    }
    for sid, text in cases.items():
        (tmp_path / file_name(sid)).write_text(text)
    (tmp_path / file_name("renamed")).write_text(json.dumps(good))  # kitchen's content under another name
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / file_name("binary")).write_bytes(b"\xff\xfe\x00")
    loaded, skipped = store.load_all()
    assert [s.session_id for s in loaded] == ["kitchen"]
    reasons = {p.path.name: p.reason for p in skipped}
    assert len(skipped) == len(cases) + 3
    assert "unreadable" in reasons[file_name("truncated")] and "unreadable" in reasons[file_name("binary")]
    assert "another model" in reasons[file_name("other-model")]
    assert "not a memspec_session/1 file" in reasons[file_name("other-format")]
    assert "vocabulary" in reasons[file_name("big-ids")]
    assert "wrong type" in reasons[file_name("bad-ids")] and "wrong type" in reasons[file_name("no-digest")]
    assert "file name" in reasons[file_name("renamed")] and "not a session file" in reasons["notes.txt"]
    assert (tmp_path / "notes.txt").exists(), "files that are not ours are left alone"


def test_the_fingerprint_follows_the_tokenizer(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "tokenizer.json").write_text('{"vocab": 1}')
    first = model_fingerprint(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"weights change, token ids keep their meaning")
    assert model_fingerprint(tmp_path) == first
    (tmp_path / "tokenizer.json").write_text('{"vocab": 2}')
    assert model_fingerprint(tmp_path) != first


def test_session_dir_values(monkeypatch, tmp_path: Path) -> None:
    assert session_dir_path("") is None and session_dir_path("  ") is None
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    assert session_dir_path("$ROS_HOME/memspec_sessions") == tmp_path / "memspec_sessions"
    monkeypatch.delenv("ROS_HOME")
    assert session_dir_path("$ROS_HOME/s") == Path.home() / ".ros" / "s"
    assert session_dir_path("~/x") == Path.home() / "x"
    assert node_session_dir(tmp_path, "/robot1/memspec", 0) == tmp_path / "domain_0" / "robot1" / "memspec"
    assert node_session_dir(tmp_path, "/memspec", 7) == tmp_path / "domain_7" / "memspec"
    with pytest.raises(ValueError):
        node_session_dir(tmp_path, "/../x", 0)
    made = tmp_path / "a" / "b"
    prepare_session_dir(made)
    assert made.is_dir() and (made.stat().st_mode & 0o777) == 0o700


def test_a_session_folder_serves_one_node_at_a_time(tmp_path: Path) -> None:
    """Two nodes of one name on one ROS domain would load and delete each other's files: the second
    is refused by the folder's lock, with the holder named; the lock ends with its holder."""
    import subprocess
    import sys

    first = SessionDirLock(tmp_path)
    with pytest.raises(OSError, match=f"in use by pid {os.getpid()}.*another name or namespace"):
        SessionDirLock(tmp_path)
    first.release()
    SessionDirLock(tmp_path).release()
    # a holder killed without cleanup (SIGKILL) leaves no stale lock
    code = ("import sys, time, pathlib; sys.path.insert(0, sys.argv[1]);"
            "from memspec_ros.ros.session_files import SessionDirLock;"
            "lock = SessionDirLock(pathlib.Path(sys.argv[2])); print('locked', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(REPO), str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    with pytest.raises(OSError, match=f"pid {holder.pid}"):
        SessionDirLock(tmp_path)
    holder.kill()
    holder.wait()
    SessionDirLock(tmp_path).release()
    (tmp_path / "plain-file").write_text("")
    with pytest.raises(OSError):  # configure fails naming session_dir, instead of failing on the first write
        prepare_session_dir(tmp_path / "plain-file" / "sessions")


# ---------------------------------------------------------------- the store with files
def test_reset_close_and_list_need_the_owner_and_bound_the_disk(tmp_path: Path) -> None:
    files = SessionFileStore(tmp_path, MODEL)
    store = DialogueStore(2, files=files)
    token = store.claim("a", "", chat=True).token
    store.get("a").conversation.messages = [ChatMessage("user", "hi")]
    store.get("a").conversation.turns = 1
    assert "queued or running" in store.reset("a", token)  # a goal holds it
    store.persist("a")
    store.release("a")
    assert files.path_for("a").exists()
    assert "belongs to another client" in store.reset("a", "guess")
    assert "belongs to another client" in store.close("a", "guess")
    assert "no session" in store.close("nope", token)
    [summary] = store.summaries()
    assert (summary.session_id, summary.chat, summary.turns, summary.busy) == ("a", True, 1, False)

    assert store.reset("a", token) is None
    conv = store.get("a").conversation
    assert conv.turns == 0 and conv.messages == [] and store.get("a").restart_reason == "reset"
    assert files.load_all()[0][0].conversation.turns == 0, "reset rewrites the file"
    assert store.claim("a", token, chat=True).problem is None, "the token stays valid after a reset"
    store.release("a")

    assert store.close("a", token) is None
    assert "a" not in store and not files.path_for("a").exists()
    again = DialogueStore(2, files=files)
    again.claim("x", "")
    again.claim("y", "")
    again.claim("z", "")
    for sid in "xyz":
        again.persist(sid)
        again.release(sid)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([file_name("y"), file_name("z")]), \
        "max_sessions bounds the files too"


def test_a_dropped_session_coming_back_says_why(tmp_path: Path) -> None:
    store = DialogueStore(1)
    old = store.claim("a", "").token
    store.release("a")
    store.claim("b", "")  # evicts a (max_sessions=1)
    store.release("b")
    assert store.claim("a", old).token != old and store.get("a").restart_reason == "evicted"
    store.release("a")
    stranger = DialogueStore(1)
    stranger.claim("q", "someone's token")
    assert stranger.get("q").restart_reason == "unknown"
    fresh = DialogueStore(1)
    fresh.claim("n", "")
    assert fresh.get("n").restart_reason == ""


def test_restored_sessions_keep_ownership_and_expire_across_a_restart(tmp_path: Path) -> None:
    files = SessionFileStore(tmp_path, MODEL)
    now = __import__("time").time()
    files.save(_saved("recent", "tok-r", last_used=now - 10))
    files.save(_saved("stale", "tok-s", last_used=now - 10_000))
    store = DialogueStore(4, idle_timeout_s=900.0, files=files)
    store.restore(files.load_all()[0])
    assert "stale" not in store and not files.path_for("stale").exists()
    kept = store.get("recent")
    assert kept.token == "" and kept.conversation.turns == 2 and kept.conversation.stored_ids == (1, 2, 3, 4)
    assert "belongs to another client" in store.claim("recent", "tok-x", chat=True).problem
    assert store.claim("recent", "tok-r", chat=True).token == "tok-r"


def test_a_conversation_record_round_trips() -> None:
    conv = Conversation.from_record(_saved().conversation)
    assert conv.context_tokens == 4 and conv.is_chat and conv.record() == _saved().conversation
    checkpoint = conv.checkpoint()
    conv.forget()
    assert conv.record() == ConversationRecord(True, 0, (), ())
    conv.restore(checkpoint)
    assert conv.stored_ids == (1, 2, 3, 4)
