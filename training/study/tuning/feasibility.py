"""Before the first trial: can every loss's batches be formed on every fold's training classes?

A trial changes learning rates and loss parameters, never the batch shape, so one check per loss and fold
covers every trial. The sampler is built exactly as the trainer and the head training build it
(``train_batch_sampler``, numpy only), on each fold's training records; its refusal, which names the
setting to lower, becomes the study's first error instead of a failure minutes into the search.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.records import ImageRecord
from retrieval.training.config.loss_and_sampler import sampler_kind
from retrieval.training.config.train_config import TrainConfig
from retrieval.training.data_pipeline.data_loaders import train_batch_sampler
from retrieval.training.data_pipeline.image_dataset import label_index
from retrieval.training.study.backends.folds import fold_split


def check_batches(configs: Mapping[str, TrainConfig], records: Sequence[ImageRecord], folds: int) -> None:
    """DataError naming the loss, the fold and the setting to lower when a fold cannot form its batches."""
    splits = [fold_split(records, fold, folds) for fold in range(folds)]
    for loss, cfg in configs.items():
        kind = sampler_kind(cfg)
        for fold, split in enumerate(splits):
            index = label_index(split.train)
            try:
                train_batch_sampler([index[record.label] for record in split.train], index, cfg, kind)
            except DataError as error:
                raise DataError(
                    f"--losses {loss} cannot train on fold {fold} of {folds} ({len(split.train)} images of "
                    f"{len(split.train_classes)} classes): {error}; no trial has run (--batch-size or --set KEY=VALUE "
                    "change it for every loss; fewer --folds leave each fold more training classes)"
                ) from None
