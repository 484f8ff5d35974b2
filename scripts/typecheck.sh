#!/usr/bin/env bash
# mypy over the source folders as the installed package `retrieval`.
# The folders map to `retrieval` (api/) and `retrieval.<name>` through setuptools package-dir, which mypy
# cannot see through an editable install, so a tree of symlinks under build/ presents the same layout.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tree="$root/build/typecheck"
rm -rf "$tree" && mkdir -p "$tree/retrieval"
for folder in training indexing serving cli; do ln -s "$root/$folder" "$tree/retrieval/$folder"; done
for module in "$root"/api/*.py; do ln -s "$module" "$tree/retrieval/$(basename "$module")"; done
cd "$tree"
exec "${PYTHON:-$root/.venv/bin/python}" -m mypy --config-file "$root/pyproject.toml" \
  --namespace-packages --explicit-package-bases -p retrieval
