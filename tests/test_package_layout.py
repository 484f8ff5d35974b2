"""The layout of the source packages, read from the code with ``ast`` (nothing is imported):

- no import cycle between their modules (module-level imports, ``if TYPE_CHECKING`` ones included);
- no import inside a function, except the few optional ones listed in ``LAZY_IMPORTS``; the CLI's command
  modules, which ``COMMAND_LOADER`` imports by name when a command is named, count as its lazy imports;
- the package arrows of docs/CONTRACTS.md, and the order of the sub-packages of ``ORDERS``;
- no two sibling folders (sub-packages of one package) that import each other, in every package;
- no product module over ``MAX_MODULE_LINES`` lines;
- every module and sub-package named in its package's ``__init__`` map.

``PACKAGES`` lists the checked packages; a package joins all checks by one more line there.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [
    "retrieval",
    "retrieval.training",
    "retrieval.indexing",
    "retrieval.serving",
    "retrieval.cli",
]
MAX_FLAT_MODULES = 12  # flat modules per package; more is a heap (../shared/style.md)
MAX_MODULE_LINES = 400  # a product module past it is two things (the developers' guide)
LAZY_IMPORTS = {
    # module imported inside a function -> why it may not be imported at module level
    "onnxruntime": "fast_transpose: evaluation needs it, searching an index does not (cpu/gpu extras)",
    "pyarrow": "the parquet extra, checked before any work",
    "pyarrow.parquet": "the parquet extra",
    "pymilvus": "the milvus extra: the files backend never needs it",
    "scipy.io": "only the Cars196 layout reads a .mat file",
    "timm": "the pretrained extra: torchvision backbones never need it",
    "open_clip": "the pretrained extra: only a CLIP export's text tower and tokenizer need it",
    "huggingface_hub": "hub weights (--pretrained hub, timm's local cache), for the transformers and timm:NAME only",
    "safetensors.torch": "hub weights and .safetensors files only",
    "torch.utils.tensorboard": "the tracking extra (--tensorboard)",
    "retrieval.training": "torch (the train extra): the commands and the flat API's searches never load it",
    "retrieval.serving.app": "FastAPI: `retrieval serve` loads it to serve, its --help and argument errors do not",
}
TORCH_LOADERS = ("retrieval.cli.", "retrieval.pipeline")  # may import retrieval.training inside a function
COMMAND_LOADER = "retrieval.cli.command_registry"
"""Its ``COMMANDS`` table names a module of ``retrieval.cli`` per command (``CommandSource("retrieval.cli.x", ...)``),
imported when the command is named so that one command never pays for another's imports: each name is read
here as a lazy import of the loader, allowed for ``retrieval.cli`` modules and nowhere else."""
ARROWS = {  # package -> the top-level packages it may import (docs/CONTRACTS.md)
    "retrieval": {"retrieval.indexing", "retrieval.training"},  # the flat API (api/): training only lazily
    "retrieval.indexing": set(),
    "retrieval.serving": {"retrieval.indexing"},
    "retrieval.training": {"retrieval.indexing"},
    "retrieval.cli": {"retrieval.indexing", "retrieval.serving", "retrieval.training"},
}
ORDERS = {  # package -> its sub-packages and modules, lowest first: an import never points right
    "retrieval.indexing": [
        {"common"},
        {"data"},
        {"exported_model"},
        {"search"},
        {"probability"},
        {"calibration"},
        {"store"},
        {"eval"},
        {"usecases"},
    ],
    "retrieval.training": [
        {"losses"},
        {"config"},
        {"model"},
        {"data_pipeline"},
        {"run"},
        {"ensemble"},
        {"export"},
        {"study"},
        {"usecases"},
    ],
    "retrieval.serving": [  # routes/ is the top floor under the app factory: nothing below imports a route
        {"settings", "glibc_malloc"},
        {"api_models"},
        {"http"},
        {"images", "service_state", "batcher"},
        {"dependencies", "item_views"},
        {"lifecycle", "query_pipeline"},
        {"routes"},
        {"app"},
    ],
    "retrieval.training.run": [{"inputs", "outputs"}, {"measures"}, {"fitting"}],
    "retrieval.training.study": [
        {"study_state"},
        {"backends"},
        {"tuning"},
        {"reporting"},
        {"final_runs"},
        {"runner"},
    ],
    "retrieval.indexing.store": [
        {"shared"},
        {"files", "milvus"},
        {"backends", "calibrated_hits", "stored_embeddings"},
        {"item_search"},
        {"build", "maintenance"},
    ],
}
INDEPENDENT = {  # side by side, neither imports the other
    ("retrieval.indexing.store", "files", "milvus"),
    ("retrieval.indexing.store", "build", "maintenance"),
}


def folder(package: str) -> Path:
    """``retrieval`` lives in ``api/``, ``retrieval.X.Y`` in ``X/Y`` (pyproject.toml's package-dir)."""
    return ROOT / "api" if package == "retrieval" else ROOT.joinpath(*package.split(".")[1:])


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    line: int
    lazy: bool  # inside a function


@cache
def modules() -> dict[str, Path]:
    """Every module of the checked packages (a package as its ``__init__``) -> its file."""
    found = {}
    for package in PACKAGES:
        for path in sorted(folder(package).rglob("*.py")):
            parts = path.relative_to(folder(package)).with_suffix("").parts
            name = ".".join([package, *parts])
            found[name.removesuffix(".__init__")] = path
    return found


def _targets(node: ast.Import | ast.ImportFrom, importer: str) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: ``from .x import y`` counts from the importer's package
        parts = importer.split(".") if modules()[importer].name == "__init__.py" else importer.split(".")[:-1]
        base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
    for alias in node.names:
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base


def _walk(node: ast.AST, lazy: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, lazy
        inside = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        yield from _walk(child, inside)


@cache
def imports() -> list[Import]:
    found = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, lazy in _walk(tree, lazy=False):
            found += [Import(name, target, node.lineno, lazy) for target in _targets(node, name)]
        if name == COMMAND_LOADER:
            found += [Import(name, target, line, lazy=True) for target, line in _named_modules(tree)]
    return found


def _named_modules(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """The module names of ``CommandSource("module", ...)`` calls, with their lines."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CommandSource" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield first.value, node.lineno


def _where(item: Import) -> str:
    return f"{modules()[item.importer].relative_to(ROOT)}:{item.line} imports {item.target}"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (as a path that ends where it starts), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_import_cycle_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for item in imports():
        if not item.lazy and item.target in modules() and item.target != item.importer:
            graph.setdefault(item.importer, set()).add(item.target)
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_command_loader_names_command_modules() -> None:
    """Every module the command table names exists, is a CLI module and was read as the loader's lazy import."""
    named = [item.target for item in imports() if item.importer == COMMAND_LOADER and item.lazy]
    assert {"retrieval.cli.commands.train_commands", "retrieval.cli.commands.serve_commands"} <= set(named)
    assert all(name in modules() and name.startswith("retrieval.cli.") for name in named), named


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}}) is None


def _package_of(module: str) -> str:
    """The most specific checked package that holds ``module`` (``retrieval`` holds only the api/ modules)."""
    return max((package for package in ARROWS if module == package or module.startswith(package + ".")), key=len)


def _optional(item: Import) -> bool:
    """A lazy import of ``LAZY_IMPORTS``; a first-party one (torch's ``retrieval.training``) only from the CLI
    and the flat API's ``train``/``export``/``study``."""
    if item.importer == COMMAND_LOADER and item.target.startswith("retrieval.cli."):
        return item.target in modules()
    listed = any(item.target == name or item.target.startswith(name + ".") for name in LAZY_IMPORTS)
    return listed and (not item.target.startswith("retrieval.") or item.importer.startswith(TORCH_LOADERS))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_inside_a_function(package: str) -> None:
    """An import moved into a function to dodge a cycle is a cycle; only optional ones may wait."""
    wrong = [
        _where(item)
        for item in imports()
        if item.lazy and _package_of(item.importer) == package and not _optional(item)
    ]
    assert not wrong, "imports inside functions:\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", PACKAGES)
def test_package_arrows(package: str) -> None:
    """cli -> all; training -> indexing; serving -> indexing; indexing -> nothing of the others."""
    wrong = [
        _where(item)
        for item in imports()
        if _package_of(item.importer) == package
        and item.target.startswith("retrieval.")
        and _package_of(item.target) not in ARROWS[package] | {package}
    ]
    assert not wrong, "\n".join(wrong)


def _part(module: str, package: str) -> str | None:
    return module.removeprefix(package + ".").split(".")[0] if module.startswith(package + ".") else None


@pytest.mark.parametrize("package", sorted(ORDERS))
def test_sub_packages_import_only_to_their_left(package: str) -> None:
    rank = {part: position for position, group in enumerate(ORDERS[package]) for part in group}
    wrong = []
    for item in imports():
        here, there = _part(item.importer, package), _part(item.target, package)
        if here is None or there is None or here == there:
            continue
        if rank[there] > rank[here] or (package, *sorted((here, there))) in INDEPENDENT:
            wrong.append(_where(item))
    assert not wrong, "\n".join(wrong)


def test_the_orders_name_every_sub_package() -> None:
    for package, groups in ORDERS.items():
        named = set().union(*groups)
        children = {_part(module, package) for module in modules() if module.startswith(package + ".")}
        assert children == named, (package, children ^ named)


def _packages() -> list[str]:
    return sorted(name for name, path in modules().items() if path.name == "__init__.py")


@pytest.mark.parametrize("package", _packages())
def test_every_module_is_named_in_its_package_map(package: str) -> None:
    """Each package ``__init__`` opens with a map that names each of its modules and sub-packages."""
    text = ast.get_docstring(ast.parse(modules()[package].read_text(encoding="utf-8"))) or ""
    children = sorted(
        {name.removeprefix(package + ".").split(".")[0] for name in modules() if name.startswith(package + ".")}
    )
    missing = [child for child in children if not re.search(rf"``{re.escape(child)}(/|\.\w[\w.]*)?``", text)]
    assert not missing, f"{package}'s __init__ map does not name: {', '.join(missing)}"


def test_no_package_holds_more_than_a_dozen_flat_modules() -> None:
    """Past about a dozen modules a folder is a heap: split it by concept into sub-packages, each with its map."""
    flat: dict[str, int] = {}
    for name, path in modules().items():
        if path.name != "__init__.py":
            parent = name.rsplit(".", 1)[0]
            flat[parent] = flat.get(parent, 0) + 1
    heaps = {package: count for package, count in flat.items() if count > MAX_FLAT_MODULES}
    assert not heaps, f"more than {MAX_FLAT_MODULES} flat modules: {heaps}"


def _sibling_folder_edges() -> set[tuple[str, str, str]]:
    """(package, folder, folder) for each module-level import from one sub-package of a package into another."""
    packages = set(_packages())
    edges = set()
    for item in imports():
        if item.lazy or item.target not in modules():
            continue
        here, there = item.importer.split("."), item.target.split(".")
        common = next((i for i, (a, b) in enumerate(zip(here, there)) if a != b), None)
        if common is None or common >= len(here) - 1 or common >= len(there) - 1:
            continue  # one is inside the other, or a module of the package itself
        folders = (".".join(here[: common + 1]), ".".join(there[: common + 1]))
        if all(name in packages for name in folders):
            edges.add((".".join(here[:common]), here[common], there[common]))
    return edges


def test_no_two_sibling_folders_import_each_other() -> None:
    """Sub-folders of one package are layers: one imports the other, never both ways."""
    edges = _sibling_folder_edges()
    both_ways = sorted(f"{package}: {a} <-> {b}" for package, a, b in edges if (package, b, a) in edges and a < b)
    assert not both_ways, "sibling folders importing each other:\n" + "\n".join(both_ways)


def test_the_sibling_check_sees_the_folders() -> None:
    edges = _sibling_folder_edges()
    assert ("retrieval.training.run", "fitting", "inputs") in edges  # the trainer reads its inputs
    assert ("retrieval.serving", "routes", "http") in edges


def test_no_product_module_is_over_the_line_limit() -> None:
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by responsibility): {long}"
