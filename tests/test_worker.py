"""A training rank (`python -m abacus_interp.training.worker RUN_DIR CONFIG_JSON`) ends like a
command: an expected error on one line and exit status 2, never a traceback."""

from __future__ import annotations

import errno
import json

from abacus_interp.training import get_preset, worker


def test_a_rank_says_a_user_error_in_one_line(tmp_path, capsys):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    config = json.dumps(get_preset("plain-add").to_dict())
    assert worker.main([str(in_the_way), config]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run directory") and err.count("\n") == 1 and "Traceback" not in err


def test_a_rank_says_a_full_disk_in_one_line(tmp_path, capsys, monkeypatch):
    def full_disk(cfg, run_dir, progress=True):
        raise OSError(errno.ENOSPC, "No space left on device", str(run_dir))

    monkeypatch.setattr(worker, "train", full_disk)
    assert worker.main([str(tmp_path / "run"), json.dumps(get_preset("plain-add").to_dict())]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No space left on device") and "free some disk space" in err
