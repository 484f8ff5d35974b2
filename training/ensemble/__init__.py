"""Ensembles of runs (DREML meta-class members or independent seeds): ``ensemble_training`` (train the
members, resumably) and ``ensemble_eval`` (the joined embedding's val/test metrics)."""
