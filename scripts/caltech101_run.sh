#!/usr/bin/env bash
# The real development run of docs/caltech101.md: normalized softmax and triplet (semi-hard) on
# Caltech-101, first 50 classes (case-sensitive sort) train, last 50 test, same backbone, size,
# augmentation and optimizer. About 15 minutes per loss on a quiet 2-core CPU.
# Usage: bash scripts/caltech101_run.sh [OUT_DIR]   (data: ../shared/data/caltech101 or $CALTECH)
set -euo pipefail
cd "$(dirname "$0")/.."
RETRIEVAL=${RETRIEVAL:-.venv/bin/retrieval}
DATA=${CALTECH:-../shared/data/caltech101}
OUT=${1:-runs/caltech101}
EPOCHS=${EPOCHS:-8}
LR=${LR:-1e-3}
COMMON=(--data "$DATA" --backbone resnet18 --image-size 112 --embedding-dim 512 --epochs "$EPOCHS"
        --batch-size 64 --lr "$LR" --workers 2 --device auto --quiet)
for loss in normsoftmax triplet; do
  "$RETRIEVAL" train --out "$OUT/$loss" --overwrite --recipe "$loss" "${COMMON[@]}" --set optimizer.head_lr=1e-3
done
"$(dirname "$RETRIEVAL")/python" - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| loss | split | MAP@R untrained | MAP@R trained | R@1 untrained | R@1 trained | binary MAP@R | binary R@1 |")
print("|---|---|---|---|---|---|---|---|")
for loss in ("normsoftmax", "triplet"):
    t = json.loads((out / loss / "test_metrics.json").read_text())
    u, f, b = t["untrained"]["float"], t["float"], t["binary"]
    print(f"| {loss} | test (50 classes) | {u['map_at_r']:.4f} | {f['map_at_r']:.4f} | {u['recall_at_k']['1']:.4f} "
          f"| {f['recall_at_k']['1']:.4f} | {b['map_at_r']:.4f} | {b['recall_at_k']['1']:.4f} |")
PY
