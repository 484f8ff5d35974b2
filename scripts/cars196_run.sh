#!/usr/bin/env bash
# The cars196 rows of docs/results.md: configs/cars196.yaml trained with SEEDS seeds, each exported and
# evaluated with `retrieval eval` (trained model and pretrained reference, float and binary), then one
# table of mean +- spread (half the range over the seeds) and the minutes each seed took end to end
# (train + export + eval). Classes 001-098 train (20 % of them validate), 099-196 are only retrieved.
# Usage: bash scripts/cars196_run.sh [OUT_DIR]   (data: ../shared/data/cars196 or $CARS196; SEEDS="0 1 2";
#   TRAIN_ARGS: more `retrieval train` options, e.g. TRAIN_ARGS="--set data.val_fraction=0" trains on all
#   98 training classes for the epochs validation chose: the second cars196 table of docs/results.md)
set -euo pipefail
cd "$(dirname "$0")/.."
RETRIEVAL=${RETRIEVAL:-.venv/bin/retrieval}
DATA=${CARS196:-../shared/data/cars196}
CONFIG=${CONFIG:-configs/cars196.yaml}
OUT=${1:-runs/cars196}
SEEDS=${SEEDS:-0 1 2}
read -r -a TRAIN_ARGS <<< "${TRAIN_ARGS:-}"
mkdir -p "$OUT"
for seed in $SEEDS; do
  run="$OUT/seed$seed"
  started=$(date +%s)
  "$RETRIEVAL" train --config "$CONFIG" --data "$DATA" --out "$run" --seed "$seed" --overwrite --quiet ${TRAIN_ARGS[@]+"${TRAIN_ARGS[@]}"}
  "$RETRIEVAL" export "$run"
  "$RETRIEVAL" eval --model "$run" --data "$DATA" --out "$run/eval"
  echo "$(( $(date +%s) - started ))" > "$run/seconds_end_to_end"
done
"$(dirname "$RETRIEVAL")/python" - "$OUT" $SEEDS <<'PY'
import json, sys
from pathlib import Path
import numpy as np
out, seeds = Path(sys.argv[1]), sys.argv[2:]
rows = {}
for seed in seeds:
    metrics = json.loads((out / f"seed{seed}" / "eval" / "metrics.json").read_text())
    minutes = int((out / f"seed{seed}" / "seconds_end_to_end").read_text()) / 60
    for model, source in (("trained", metrics), ("pretrained", metrics["reference"])):
        for kind in ("float", "binary"):
            m = source[kind]
            values = (m["recall_at_k"]["1"], m["map_at_r"], m["r_precision"], m["precision_at_1"])
            rows.setdefault((model, kind), []).append(values)
    rows.setdefault(("minutes", ""), []).append((minutes,))
def show(values):
    values = np.asarray(values)
    return " | ".join(f"{v:.3f} ± {s:.3f}" for v, s in zip(values.mean(0), (values.max(0) - values.min(0)) / 2))
print(f"| model | kind | R@1 | MAP@R | RP | P@1 |  ({len(seeds)} seeds: mean ± half the range)")
print("|---|---|---|---|---|---|")
for (model, kind), values in rows.items():
    if model != "minutes":
        print(f"| {model} | {kind} | {show(values)} |")
print(f"minutes per seed, train + export + eval: {show(rows[('minutes', '')])}")
PY
