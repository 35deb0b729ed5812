import pytest

from hilsim.core.files import open_atomic, write_text_atomic


def test_failed_streamed_write_keeps_the_old_file(tmp_path) -> None:
    target = write_text_atomic(tmp_path / "r.jsonl", "old\n")
    with pytest.raises(RuntimeError), open_atomic(target) as handle:
        handle.write("half a ")
        raise RuntimeError("workload died")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.jsonl"]


def test_streamed_write_replaces_on_success(tmp_path) -> None:
    with open_atomic(tmp_path / "r.jsonl") as handle:
        handle.write("a\nb\n")
    assert (tmp_path / "r.jsonl").read_text() == "a\nb\n"
