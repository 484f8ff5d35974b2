"""``retrieval.indexing`` must work without torch: import everything, embed, build and search, through
the store and through the torch-free Python API (``retrieval.indexing.usecases``, and the flat ``from retrieval
import ...``, whose train and export load torch only when called)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    from pathlib import Path

    import retrieval.indexing
    names = []
    for info in pkgutil.walk_packages(retrieval.indexing.__path__, "retrieval.indexing."):
        importlib.import_module(info.name)
        names.append(info.name)
    for wanted in ("retrieval.indexing.store.files.index_store", "retrieval.indexing.eval.evaluation", "retrieval.indexing.usecases"):
        assert wanted in names, names

    from retrieval.indexing import usecases as api
    from retrieval.indexing.data.records import ImageRecord
    from retrieval.indexing.store.build.builder import build_index
    from retrieval.indexing.store.files.index_store import IndexStore
    from retrieval.indexing.exported_model.onnx_embedder import OnnxEmbedder

    model, gallery, out = (Path(arg) for arg in sys.argv[1:4])
    records = [ImageRecord(path=p, label=p.parent.name) for p in sorted(gallery.glob("*/*.png"))]
    build_index(model, records, out, progress=False)
    query = OnnxEmbedder(model).embed_paths([records[3].path], progress=False).embeddings
    with IndexStore.open(out) as store:
        assert store.items(store.search(query, 1).ids[0])[0].path == str(records[3].path)
        assert store.items(store.search(query, 1, kind="binary", rerank=5).ids[0])[0].path == str(records[3].path)
    api_out = out.parent / "api_index"
    assert api.build_index(model, records, api_out, progress=False).count == len(records)
    (hits,) = api.search(api_out, records[3].path, k=1)
    assert hits[0][0].path == str(records[3].path)
    assert api.evaluate(index=api_out, progress=False).num_gallery == len(records)
    assert len(api.embed(model, records, progress=False).ids) == len(records)
    import retrieval
    from retrieval import build_index, evaluate, export, search, train  # the flat API: torch only when training
    (hits,) = search(api_out, records[3].path, k=2)
    assert hits[0].item.path == str(records[3].path) and hits[0].score > hits[1].score
    heavy = sorted(name for name in sys.modules if name.split(".")[0] in ("torch", "torchvision", "pytorch_metric_learning"))
    assert not heavy, heavy
    print("ok", len(names))
    """
)


def test_indexing_never_imports_torch(tiny_model_dir: Path, gallery_dir: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tiny_model_dir), str(gallery_dir), str(tmp_path / "index")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")
