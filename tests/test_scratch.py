"""Scratch folders of killed fsdask processes are removed by the next one — and nothing else."""

import os
import subprocess
import sys

import fsdask.io.scratch as scratch


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_new_scratch_folder_removes_only_what_killed_fsdask_processes_of_this_host_left(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path))
    host, dead = scratch.host_tag(), _dead_pid()
    left = tmp_path / f"fsdask-csr-{host}-{dead}-abc123"
    (left / "sub").mkdir(parents=True)
    (left / "sub" / "b0.0.vals").write_bytes(b"x" * 100)
    kept = {
        "running": tmp_path / f"fsdask-csr-{host}-{os.getpid()}-def456",
        "other host": tmp_path / f"fsdask-csr-otherhost{host}-{dead}-ghi789",
        "other kind": tmp_path / f"fsdask-rechunk-{host}-{dead}-jkl012",
        "not ours": tmp_path / f"fsdask-csr-{dead}-mno345",
        "a user's": tmp_path / f"mydata-csr-{host}-{dead}-pqr678",
    }
    for path in kept.values():
        path.mkdir()
    a_file = tmp_path / f"fsdask-csr-{host}-{dead}-stu901"  # a file, not a folder fsdask made
    a_file.write_text("keep")

    folder = scratch.scratch_dir("csr")

    assert not left.exists()
    assert {k: p.exists() for k, p in kept.items()} == {k: True for k in kept}
    assert a_file.read_text() == "keep"
    assert os.path.isdir(folder) and os.path.dirname(folder) == str(tmp_path)
    assert os.path.basename(folder).startswith(f"fsdask-csr-{host}-{os.getpid()}-")
    assert scratch.stale("csr") == []  # this process's own folder is alive


def test_rechunk_and_csr_copies_use_named_scratch_folders(tmp_path, monkeypatch):
    from fsdask.io.anndata import copy_location
    from fsdask.io.rechunk import new_location

    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path))
    url, _, temporary = new_location(None, None)
    folder, temporary_csr = copy_location(None, None)
    assert temporary and temporary_csr
    assert os.path.basename(url).startswith(f"fsdask-rechunk-{scratch.host_tag()}-{os.getpid()}-")
    assert os.path.basename(folder).startswith(f"fsdask-csr-{scratch.host_tag()}-{os.getpid()}-")
