"""What a training run is asked to do, before torch loads: ``train_config`` (``TrainConfig`` and its
sections, YAML layers merged and validated, unknown keys refused) and ``recipes`` (``--recipe``: named
starting points, one per loss on a shared base, plus papers' own setups). Neither imports torch."""
