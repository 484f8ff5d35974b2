"""``retrieval train --exclude FILE``: the listed images are left out of every split, and the run says which."""

from __future__ import annotations

from pathlib import Path

import pytest
from duplicates_fixtures import planted_gallery

from retrieval.indexing.common.errors import ConfigError
from retrieval.training.config.train_config import DataConfig
from retrieval.training.data_pipeline.run_data import prepare_run_data


def test_listed_images_leave_every_split(tmp_path: Path) -> None:
    data = planted_gallery(tmp_path / "data")
    listed = [data / "class_4" / "copy_exact.bmp", data / "class_0" / "copy_exact.png", tmp_path / "gone.png"]
    exclude = tmp_path / "exclude.txt"
    exclude.write_text("# from retrieval data duplicates\n" + "".join(f"{p}\n" for p in listed) + "\n")
    run_data = prepare_run_data(DataConfig(path=data, exclude=exclude, val_fraction=0.0), progress=False)
    kept = {r.path for part in (run_data.splits.train, run_data.splits.val, run_data.splits.test) for r in part}
    assert sorted(run_data.excluded) == sorted(listed[:2])
    assert not kept & set(listed)
    assert len(kept) == 34 - 2
    whole = prepare_run_data(DataConfig(path=data, val_fraction=0.0), progress=False)
    assert whole.excluded == [] and sum(len(s) for s in (whole.splits.train, whole.splits.test)) == 34


def test_a_missing_list_is_one_sentence(tmp_path: Path) -> None:
    data = planted_gallery(tmp_path / "data")
    with pytest.raises(ConfigError, match="cannot read the exclusion list"):
        prepare_run_data(DataConfig(path=data, exclude=tmp_path / "nope.txt", val_fraction=0.0), progress=False)
