"""The token file that lets ``memspec_generate`` continue a session across runs."""

from __future__ import annotations

import stat

from memspec_ros.ros.cli_session_tokens import FILE_NAME, SessionTokenFile, default_path


def test_tokens_are_remembered_per_action_and_session_privately(tmp_path) -> None:
    tokens = SessionTokenFile(tmp_path / "t.json")
    assert tokens.get("/memspec/generate", "kitchen") == ""
    tokens.put("/memspec/generate", "kitchen", "abc")
    tokens.put("/robot1/memspec/generate", "kitchen", "xyz")
    again = SessionTokenFile(tmp_path / "t.json")
    assert again.get("/memspec/generate", "kitchen") == "abc"
    assert again.get("/robot1/memspec/generate", "kitchen") == "xyz"
    assert stat.S_IMODE((tmp_path / "t.json").stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary file left behind


def test_a_damaged_file_means_no_tokens(tmp_path) -> None:
    path = tmp_path / "t.json"
    for content in ("{not json", "[1, 2]", '{"/a": 3, "/b": {"s": 4}}'):
        path.write_text(content)
        assert SessionTokenFile(path).get("/a", "s") == ""
        assert SessionTokenFile(path).get("/b", "s") == ""
    SessionTokenFile(path).put("/a", "s", "fresh")
    assert SessionTokenFile(path).get("/a", "s") == "fresh"


def test_default_location_follows_ros_home(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("ROS_HOME", str(tmp_path))
    assert default_path() == tmp_path / FILE_NAME
