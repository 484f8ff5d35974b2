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
        "from .routes import routes_search\nfrom . import state\n"
        "from .routes.schemas import SearchHit\n"
        "from ..indexing.api import search\n"
        "from retrieval.serving.http import api_examples\nfrom retrieval.serving import app\n"
    )


def test_relative_imports_of_a_moved_file_count_from_its_new_place(moves: ModuleType) -> None:
    table = moves.moves()
    source = "from .schemas import X\nfrom . import api_examples\nfrom .state import S\nfrom ..indexing.api import f\n"
    new, old = "retrieval.serving.routes.routes_items", "retrieval.serving.routes_items"
    once = moves.rewrite_imports(source, new, old, False, table)
    assert (
        once
        == "from .schemas import X\nfrom ..http import api_examples\nfrom ..state import S\nfrom ...indexing.api import f\n"
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


def test_no_new_name_starts_with_an_old_one(moves: ModuleType) -> None:
    """What makes a second run a no-op: a moved name is never rewritten again."""
    table = moves.moves()
    assert all(moves.mapped(new, table) == new for new in table.values())
    assert len(table) == len(set(table.values()))
