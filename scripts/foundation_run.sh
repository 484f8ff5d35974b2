#!/usr/bin/env bash
# Pretrained vision transformers measured with their real weights: the run docs/results.md ("Vision
# transformers: retrieval quality") has only figures reported by others for. Needs the internet once (each
# backbone's weights, downloaded into the weights cache with --allow-download: 90-350 MB each) and, better, a
# GPU (DEVICE=cuda; on this project's 2-core CPU a ViT-B embeds about 5 images/s).
# For each backbone: `retrieval train --epochs EPOCHS` on configs/cars196.yaml's recipe with the backbone
# swapped in (EPOCHS=0: nothing is trained; >0: fine-tuned, epoch 0 still a candidate), then `retrieval
# export` and `retrieval eval` on the test classes (classes the model never saw: cars196's 099-196). The
# table gives the run's model and, as "pretrained", the trunk's pooled features (PCA to the embedding size,
# L2-normalised: `retrieval eval`'s reference, what papers call off-the-shelf; with EPOCHS=0 the two are the
# same model), float and binary. The recipe's whitening stage is off (TRAIN_ARGS="--set whitening.method=auto"
# adds it: a third, "pretrained + whitening", column in each eval/metrics.json). A CLIP or SigLIP backbone's run
# model is its tower's own embedding (epoch 0, nothing fitted), and with EPOCHS=0 its export carries the text
# tower: `retrieval eval --prompt "$PROMPT"` then adds the text -> image row (one prompt per test class, from
# its folder name), MAP@R, P@1 and R@K, printed and in eval/metrics.json.
# Usage: bash scripts/foundation_run.sh [OUT_DIR]
#   DATA (../shared/data/cars196 or $CARS196), BACKBONES ("dinov2_vits14 dinov2_vitb14 clip_vitb16
#   clip_vitb32 siglip_vitb16"), POOLING (cls), IMAGE_SIZE (224), EPOCHS (0), DEVICE (auto), SEED (0),
#   TRAIN_ARGS (more `retrieval train` options), PROMPT ("a photo of a {label}"); the cache:
#   RETRIEVAL_WEIGHTS_CACHE or the Hugging Face one.
set -euo pipefail
cd "$(dirname "$0")/.."
RETRIEVAL=${RETRIEVAL:-.venv/bin/retrieval}
DATA=${DATA:-${CARS196:-../shared/data/cars196}}
CONFIG=${CONFIG:-configs/cars196.yaml}
OUT=${1:-runs/foundation}
BACKBONES=${BACKBONES:-dinov2_vits14 dinov2_vitb14 clip_vitb16 clip_vitb32 siglip_vitb16}
POOLING=${POOLING:-cls}
IMAGE_SIZE=${IMAGE_SIZE:-224}
EPOCHS=${EPOCHS:-0}
DEVICE=${DEVICE:-auto}
SEED=${SEED:-0}
PROMPT=${PROMPT:-"a photo of a {label}"}
read -r -a TRAIN_ARGS <<< "${TRAIN_ARGS:-}"
mkdir -p "$OUT"
for backbone in $BACKBONES; do
  run="$OUT/${backbone//[:\/]/_}"
  pooling=$POOLING
  if [[ "$backbone" == siglip_* && "$POOLING" == cls* ]]; then pooling=map; fi  # no class token: its own head
  started=$(date +%s)
  "$RETRIEVAL" train --config "$CONFIG" --data "$DATA" --out "$run" --backbone "$backbone" \
    --pretrained hub --allow-download --image-size "$IMAGE_SIZE" --epochs "$EPOCHS" --device "$DEVICE" \
    --seed "$SEED" --set "model.pooling=$pooling" --set whitening.method=none --overwrite --quiet \
    ${TRAIN_ARGS[@]+"${TRAIN_ARGS[@]}"}
  "$RETRIEVAL" export "$run"
  text=()
  if [[ "$EPOCHS" == 0 && ( "$backbone" == clip_* || "$backbone" == siglip_* ) ]]; then  # training-free: text tower
    text=(--prompt "$PROMPT")
  fi
  "$RETRIEVAL" eval --model "$run" --data "$DATA" --out "$run/eval" ${text[@]+"${text[@]}"}
  echo "$(( $(date +%s) - started ))" > "$run/seconds_end_to_end"
done
"$(dirname "$RETRIEVAL")/python" - "$OUT" "$EPOCHS" "$POOLING" "$IMAGE_SIZE" $BACKBONES <<'PY'
import json, sys
from pathlib import Path
out, epochs, pooling, size, backbones = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
print(f"| backbone | model | kind | R@1 | MAP@R | RP | P@1 | minutes |  ({pooling} pooling, {size} px, {epochs} epochs)")
print("|---|---|---|---|---|---|---|---|")
for backbone in backbones:
    run = out / backbone.replace(":", "_").replace("/", "_")
    metrics = json.loads((run / "eval" / "metrics.json").read_text())
    minutes = int((run / "seconds_end_to_end").read_text()) / 60
    for model, source in (("pretrained", metrics["reference"]), ("run", metrics)):
        for kind in ("float", "binary"):
            m = source[kind]
            values = (m["recall_at_k"]["1"], m["map_at_r"], m["r_precision"], m["precision_at_1"])
            print(f"| {backbone} | {model} | {kind} | " + " | ".join(f"{v:.3f}" for v in values) + f" | {minutes:.0f} |")
PY
