"""`bayesbench score --model SPEC --checkpoint FILE` (bayesbench/scoring/trained_elsewhere.py): what a
--checkpoint that is not a weights file is told."""

from __future__ import annotations

import os

from bayesbench.cli import main

NET = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outside_net.py")


def test_a_checkpoint_that_is_a_folder_is_named_as_one(tmp_path, capsys):
    """A run directory given as --checkpoint was 'no such file' (it exists: it is a folder)."""
    run_dir = tmp_path / "runs" / "quick" / "sticky-mine"
    run_dir.mkdir(parents=True)
    (run_dir / "checkpoint.pt").write_bytes(b"")
    for folder, says in ((run_dir, f"--checkpoint {run_dir} is a folder: give its checkpoint, "
                                   f"{run_dir / 'checkpoint.pt'} (a state dict file or a bayesbench checkpoint.pt)"),
                         (tmp_path / "runs", f"--checkpoint {tmp_path / 'runs'} is a folder (a state dict file")):
        assert main(["score", "--model", f"{NET}:build", "--checkpoint", str(folder), "--task", "sticky",
                     "--db", str(tmp_path / "r.sqlite")]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and "\n" not in err, err
