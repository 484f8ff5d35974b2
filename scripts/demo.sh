#!/usr/bin/env bash
# The main job end to end on the built-in generated dataset:
#   data synth -> train (normalized softmax) -> export ONNX -> index (float + binary) -> eval -> serve.
# Environment: DEMO_DIR (default ./demo), DEMO_EPOCHS, DEMO_SERVE=0 to stop before serving,
# DEMO_CLASSES, DEMO_PER_CLASS, DEMO_BATCH, PORT (default 8000), RETRIEVAL (the command; default .venv/bin/retrieval).
set -euo pipefail
cd "$(dirname "$0")/.."
RETRIEVAL=${RETRIEVAL:-.venv/bin/retrieval}
DEMO_DIR=${DEMO_DIR:-demo}
EPOCHS=${DEMO_EPOCHS:-8}
CLASSES=${DEMO_CLASSES:-40}
PER_CLASS=${DEMO_PER_CLASS:-30}
BATCH=${DEMO_BATCH:-64}
PORT=${PORT:-8000}

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1/6 generate $CLASSES classes x $PER_CLASS images (first half of classes trains, second half tests)"
"$RETRIEVAL" data synth "$DEMO_DIR/data" --classes "$CLASSES" --per-class "$PER_CLASS" --size 64 --seed 0 --overwrite

step "2/6 train resnet18 with normalized softmax + LayerNorm ($EPOCHS epochs, CPU unless a GPU is present)"
rm -rf "$DEMO_DIR/run"
"$RETRIEVAL" train --config configs/demo.yaml --data "$DEMO_DIR/data" --out "$DEMO_DIR/run" \
  --epochs "$EPOCHS" --batch-size "$BATCH"

step "3/6 export to ONNX (parity with torch checked)"
"$RETRIEVAL" export "$DEMO_DIR/run"

step "4/6 index the unseen test classes: float (exact) + 2048-bit binary"
rm -rf "$DEMO_DIR/index"
"$RETRIEVAL" index build --model "$DEMO_DIR/run" --data "$DEMO_DIR/data" --split test --out "$DEMO_DIR/index"

step "5/6 evaluate retrieval on the index (Recall@K, MAP@R, R-precision, P@1, NMI; float and binary)"
"$RETRIEVAL" eval --index "$DEMO_DIR/index" --out "$DEMO_DIR/eval"

if [ "${DEMO_SERVE:-1}" = 0 ]; then
  echo "DEMO_SERVE=0: not starting the service. Start it with: $RETRIEVAL serve --index $DEMO_DIR/index"
  exit 0
fi
step "6/6 serve: open the web page at the URL below (Ctrl-C stops)"
exec "$RETRIEVAL" serve --index "$DEMO_DIR/index" --host 127.0.0.1 --port "$PORT"
