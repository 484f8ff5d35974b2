"""scripts/house_moves.py rewrites what it moves, and a second run changes nothing: its pure rewrites on
hand-written inputs (relative imports re-relativised from the new place, ``from package import module``
split by destination, dotted names, paths, docs shorthand)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "house_moves.py"


@pytest.fixture(scope="module")
def moves() -> ModuleType:
    spec = importlib.util.spec_from_file_location("house_moves", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["house_moves"] = module
    spec.loader.exec_module(module)
    return module


def test_imports_of_a_file_that_stays(moves: ModuleType) -> None:
    table = moves.moves()
    source = (
        "from . import routes_search, state\n"
        "from .schemas import SearchHit\n"
        "from ..indexing.api import search\n"
        "from retrieval.serving import api_examples, app\n"
    )
    rewritten = moves.rewrite_imports(source, "retrieval.serving.app", "retrieval.serving.app", False, table)
    assert rewritten == (
        "from .routes import routes_search\nfrom . import service_state as state\n"
        "from .routes.schemas import SearchHit\n"
        "from ..indexing.usecases import search\n"
        "from retrieval.serving.http import api_examples\nfrom retrieval.serving import app\n"
    )


def test_relative_imports_of_a_moved_file_count_from_its_new_place(moves: ModuleType) -> None:
    table = moves.moves()
    source = "from .schemas import X\nfrom . import api_examples\nfrom .state import S\nfrom ..indexing.api import f\n"
    new, old = "retrieval.serving.routes.routes_items", "retrieval.serving.routes_items"
    once = moves.rewrite_imports(source, new, old, False, table)
    assert (
        once == "from .schemas import X\nfrom ..http import api_examples\nfrom ..service_state import S\n"
        "from ...indexing.usecases import f\n"
    )
    assert moves.rewrite_imports(once, new, new, False, table) == once  # the second run


def test_dotted_names_paths_and_shorthand(moves: ModuleType) -> None:
    table = moves.moves()
    paths = {moves.path_of(old): moves.path_of(new) for old, new in table.items()}
    text = 'patch("retrieval.serving.routes_search.x"); retrieval.cli.train_commands; see serving/uploads.py'
    once = moves.rewrite_paths(moves.rewrite_dotted(text, table), paths)
    assert once == (
        'patch("retrieval.serving.routes.routes_search.x"); retrieval.cli.commands.train_commands; '
        "see serving/images/uploads.py"
    )
    assert moves.rewrite_paths(moves.rewrite_dotted(once, table), paths) == once
    row = "| `retrieval.training.model.embedding_model`, `.pretrained`, `.npy` |"
    expanded = moves.rewrite_dotted(moves.expand_shorthand(row, table), table)
    assert (
        expanded
        == "| `retrieval.training.model.embedding_model`, `retrieval.training.model.trunks.pretrained`, `.npy` |"
    )
    assert moves.rewrite_dotted(moves.expand_shorthand(expanded, table), table) == expanded


def test_every_mapped_name_is_a_fixed_point(moves: ModuleType) -> None:
    """What makes a second run a no-op: a mapped name is never rewritten again."""
    table = moves.moves()
    finals = [moves.mapped(old, table) for old in table]
    assert all(moves.mapped(final, table) == final for final in finals)
    starts = [old for old in table if old not in table.values()]  # not the middle of a move-then-rename
    assert len({moves.mapped(old, table) for old in starts}) == len(starts)  # no two modules meet


def test_renames_keep_the_local_name_and_compose_with_group_moves(moves: ModuleType) -> None:
    """A renamed module is imported under its old local name; a module moved into a sub-package and then
    renamed reaches its last name in one run; and a second run changes nothing."""
    table = moves.moves()
    source = (
        "from retrieval.indexing import api\n"
        "from retrieval.training import api as training_api\n"
        "from retrieval.indexing.api import build_index\n"
        "from retrieval.training.study import evaluation, runner\n"
    )
    module = "retrieval.cli.commands.index_commands"
    once = moves.rewrite_dotted(moves.rewrite_imports(source, module, module, False, table), table)
    assert once == (
        "from retrieval.indexing import usecases as api\n"
        "from retrieval.training import usecases as training_api\n"
        "from retrieval.indexing.usecases import build_index\n"
        "from retrieval.training.study.reporting import study_evaluation as evaluation\n"
        "from retrieval.training.study import runner\n"
    )
    assert moves.rewrite_dotted(moves.rewrite_imports(once, module, module, False, table), table) == once
    assert moves.mapped("retrieval.indexing.store.shared.manifest.load", table) == (
        "retrieval.indexing.store.shared.index_directory.index_manifest.load"
    )  # a group move, then a rename
    assert (
        moves.mapped("retrieval.indexing.model.manifest", table) == "retrieval.indexing.exported_model.model_manifest"
    )
    assert moves.mapped("retrieval.indexing.model.onnx_embedder", table) == (
        "retrieval.indexing.exported_model.onnx_embedder"
    )  # a module of a renamed package


def test_renamed_paths_maps_and_orders(moves: ModuleType) -> None:
    paths = {"indexing/api": "indexing/usecases", "training/api.py": "training/usecases.py"}
    text = "see indexing/api/searching.py, `indexing/api`, training/api.py; not api/pipeline.py or indexing/apis"
    once = moves.rewrite_paths(text, paths)
    assert once == (
        "see indexing/usecases/searching.py, `indexing/usecases`, training/usecases.py; "
        "not api/pipeline.py or indexing/apis"
    )
    assert moves.rewrite_paths(once, paths) == once
    init = '"""``runner``, ``state`` (the study\'s state) and ``final_runs``."""\n'
    renames = {"retrieval.training.study.state": "retrieval.training.study.study_state"}
    assert moves.rename_in_parent_map(init, "retrieval.training.study", renames) == init.replace(
        "``state``", "``study_state``"
    )
    orders = (
        '\nORDERS = {\n    "retrieval.indexing": [{"common"}, {"model"}, {"api"}],\n'
        '    "retrieval.training": [\n        {"model"},\n        {"api"},\n    ],\n}\n'
    )
    renames = {"retrieval.indexing.api": "retrieval.indexing.usecases", "retrieval.indexing.model": "x.exported_model"}
    renamed = moves.rename_in_orders(orders, renames)
    assert renamed == orders.replace('{"model"}, {"api"}]', '{"exported_model"}, {"usecases"}]')  # training\'s stay
    assert moves.rename_in_orders(renamed, renames) == renamed


def test_imports_written_as_text_are_rewritten_too(moves: ModuleType) -> None:
    """Code in a string (run by a subprocess) and docs examples: the same imports as ``rewrite_imports``."""
    table = moves.moves()
    text = (
        'code = """\n    from retrieval.indexing import api\n    from retrieval.serving import app, state\n"""\n'
        "from retrieval.indexing.api import search\n"
    )
    once = moves.rewrite_dotted(moves.rewrite_import_lines(text, table), table)
    assert once == (
        'code = """\n    from retrieval.indexing import usecases as api\n'
        '    from retrieval.serving import app, service_state as state\n"""\n'
        "from retrieval.indexing.usecases import search\n"
    )
    assert moves.rewrite_dotted(moves.rewrite_import_lines(once, table), table) == once
