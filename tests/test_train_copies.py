"""``retrieval train`` repeats what ``retrieval data check`` found, beside the verdict and in model.json: the exact
copies across classes (possible label noise) and across the split (a leak that inflates the test figures)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retrieval import export, train
from retrieval.indexing.data.sources import load_records
from retrieval.indexing.data.splits import split_records
from retrieval.indexing.usecases import SplitSettings, find_exact_copies

FAST = {
    "image_size": 32,
    "num_workers": 0,
    "backbone": "resnet18",
    "embedding_dim": 16,
    "device": "cpu",
    "progress": False,
    "overwrite": True,
}


@pytest.mark.slow
def test_train_repeats_the_copies_data_check_counts_beside_the_verdict_and_in_model_json(
    synth_data: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(synth_data, data)
    splits = split_records(load_records(data), val_fraction=0.2)
    first, second = splits.train[0].path, next(r.path for r in splits.train if r.label != splits.train[0].label)
    shutil.copyfile(first, second.parent / "planted_across_classes.png")  # two training classes
    shutil.copyfile(first, splits.test[0].path.parent / "planted_leak.png")  # a test class: across the split too
    checked = find_exact_copies(data, split=SplitSettings(val_fraction=0.2), progress=False).counts("exact")
    assert checked.across_classes >= 2 and checked.across_split >= 1  # the planted ones, at least
    run = train(data, tmp_path / "run", epochs=0, **FAST)
    assert run.verdict is not None and run.verdict.data_copies is not None
    counts = run.verdict.data_copies
    assert (counts.within_class, counts.across_classes, counts.across_split) == (
        checked.within_class,
        checked.across_classes,
        checked.across_split,
    )
    assert f"exact copy pairs: {checked.across_classes} across classes" in run.verdict.sentence
    assert f"{checked.across_split} across the split" in run.verdict.sentence
    assert export(run.run_dir).manifest.verdict == run.verdict  # model.json keeps them
