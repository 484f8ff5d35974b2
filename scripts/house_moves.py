"""Split the flat heaps into sub-packages (issue 31): a re-runnable, idempotent move of modules.

``python scripts/house_moves.py`` (from the repository root, with the project's virtualenv python):

1. ``git mv`` each module of ``MOVES`` that is still at its old place, and writes each new sub-package's
   ``__init__.py`` with its map (``MAPS``);
2. rewrites every import of a moved module in the repository: ``from retrieval.a import b`` where ``b`` is a
   moved module, relative imports (resolved against the importing file's package, mapped, and written
   back relative to the file's new place), and every dotted name ``retrieval.a.b`` in any tracked text
   file (imports, ``mock.patch`` targets, ``COMMANDS``, docs, mypy overrides);
3. rewrites path mentions (``serving/routes_search.py``) in tracked text files, and a parent package's
   map names a moved module as ``sub.module`` (which names the sub-package too);
4. adds the new sub-packages to pyproject.toml's setuptools ``packages`` and the flat-module limit test
   to tests/test_package_layout.py, then runs ruff's import sorting and formatter over what changed;
5. prints every package still above ``MAX_FLAT`` flat modules.

``RENAMES`` (old dotted module or package -> new) goes through the same machinery: the files are moved
(a package file by file), imports keep their local name (``from retrieval.indexing import usecases as
api``), dotted names and paths are rewritten, the parent's map and ``tests/test_package_layout.py``'s
``ORDERS`` name the new module. A name is mapped until it no longer changes, so a group move and a
rename of its result compose.

Running it again changes nothing (every mapped name is a fixed point of the table, checked below), so
after other branches are merged the same script moves what they added to the old places too.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {  # pyproject.toml's package-dir
    "retrieval": "api",
    "retrieval.training": "training",
    "retrieval.indexing": "indexing",
    "retrieval.serving": "serving",
    "retrieval.cli": "cli",
}
MAX_FLAT = 12
TEXT_SUFFIXES = set(".py .md .toml .txt .yaml .yml .cfg .ini .sh .ipynb .json .js .html .css".split()) | {""}
SKIP = {"scripts/house_moves.py", "tests/test_house_moves.py"}  # the script and its hand-written inputs

# sub-package (dotted) -> its modules (moved from the sub-package's parent)
GROUPS: dict[str, list[str]] = {
    "retrieval.serving.routes": [
        "routes_search", "routes_items", "routes_keys", "routes_browse", "routes_admin", "routes_health",
        "dependencies", "schemas", "strict_forms", "form_fields",
    ],
    "retrieval.serving.http": [
        "middleware", "admission", "rate_limit", "problems", "service_errors", "prometheus", "openapi",
        "api_examples",
    ],
    "retrieval.serving.images": ["uploads", "upload_storage", "thumbnails", "item_images"],
    "retrieval.cli.commands": [
        "data_commands", "train_commands", "backbone_commands", "study_commands", "export_commands",
        "index_commands", "shard_commands", "maintenance_commands", "search_commands", "embed_commands",
        "eval_commands", "serve_commands",
    ],
    "retrieval.cli.options": ["config_options", "train_options", "backend_options", "index_options"],
    "retrieval.training.run.inputs": ["train_batches", "frozen_prefix", "activation_cache", "split_inputs", "embed"],
    "retrieval.training.run.fitting": ["final_fit", "trainer", "loop", "optim", "distributed", "interrupt"],
    "retrieval.training.run.measures": [
        "split_metrics", "reference", "reference_eval", "verdict", "whitening_stage", "trained_run",
    ],
    "retrieval.training.run.outputs": ["run_dir", "run_model", "run_summary", "curves", "tracking"],
    "retrieval.training.study.tuning": ["search", "search_space", "study_config", "folds", "feasibility"],
    "retrieval.training.study.backends": [
        "finetune_backend", "cached_backend", "cached_features", "head_training", "fold_result",
    ],
    "retrieval.training.study.reporting": ["evaluation", "reference", "stats", "report", "summary"],
    "retrieval.training.model.trunks": [
        "backbones", "timm_trunks", "vit_trunks", "trunk_stages", "static_padding", "imagenet_weights", "pretrained",
    ],
    "retrieval.training.losses.native": [
        "normalized_softmax", "npairs", "proxy_triplet", "prototypical", "facility_location", "group_loss",
    ],
    "retrieval.indexing.store.files.segment_storage": [
        "segments", "segment_files", "segment_set", "segment_merge", "compaction_plan",
    ],
    "retrieval.indexing.store.files.faiss_search": ["segment_searcher", "filtered_search", "faiss_kinds", "faiss_gpu"],
    "retrieval.indexing.store.shared.items": ["items_db", "item_paths", "item_filter", "filter_conditions", "filter_sql"],
    "retrieval.indexing.store.shared.index_directory": [
        "manifest", "file_checksums", "compaction", "write_lock", "index_dir",
    ],
}  # fmt: skip

# old dotted module or package -> its new name: names that pass the one-guess test (issue 31): one "api"
# (the public ``retrieval`` package), and no two modules or packages of the same name
RENAMES: dict[str, str] = {
    "retrieval.indexing.api": "retrieval.indexing.usecases",
    "retrieval.training.api": "retrieval.training.usecases",
    "retrieval.serving.state": "retrieval.serving.service_state",
    "retrieval.training.study.state": "retrieval.training.study.study_state",
    "retrieval.indexing.model": "retrieval.indexing.exported_model",
    "retrieval.indexing.model.manifest": "retrieval.indexing.exported_model.model_manifest",
    "retrieval.indexing.store.shared.index_directory.manifest": (
        "retrieval.indexing.store.shared.index_directory.index_manifest"
    ),
    "retrieval.training.data": "retrieval.training.data_pipeline",
    "retrieval.training.study.reporting.evaluation": "retrieval.training.study.reporting.study_evaluation",
}

MAPS: dict[str, str] = {
    "retrieval.serving.routes": """The service's routes: HTTP in, a call of the service, HTTP out.

``routes_search`` (``/search``, ``/embed``, ``/items/{id}/similar``), ``routes_items`` (``/items``),
``routes_keys`` (``/items/by-key/{key}``: items by their own keys, upsert), ``routes_browse`` (``GET /labels``,
``GET /items``: counts and filtered pages behind a cursor), ``routes_admin`` (``/admin/reload``) and
``routes_health`` (``/healthz``, ``/readyz``, ``/metrics``), sharing ``dependencies`` (the service objects, the
API-key check), ``schemas`` (the request and response models), ``form_fields`` (the one vocabulary of upload
fields, old names deprecated) and ``strict_forms`` (form text that does not decode is a 400, not Latin-1
mojibake).
""",
    "retrieval.serving.http": """Around every request: ``middleware`` (methods, timeouts, body size,
metrics), ``admission`` (the bound on queued images), ``rate_limit`` (a per-client token bucket),
``service_errors`` (the service's own error meanings) and ``problems`` (``ERROR_STATUSES``, the one error ->
HTTP status table, and the problem+json handlers), ``prometheus`` (the metrics), ``openapi`` and
``api_examples`` (the OpenAPI document and its examples).
""",
    "retrieval.serving.images": """The images a request carries or asks for: ``uploads`` (size and type
checks of an uploaded query or item), ``upload_storage`` (the added images kept beside the index),
``thumbnails`` (their previews) and ``item_images`` (an item's image at full size).
""",
    "retrieval.cli.commands": """One module per stage of the ``retrieval`` command, imported when the command
is named (``command_registry``): ``data_commands``, ``train_commands`` (``train``, ``losses``),
``backbone_commands`` (``backbones``), ``study_commands``, ``export_commands``, ``index_commands`` (``index
build|info|add|remove|compact``) with ``shard_commands`` (``--shard``, ``index merge``) and
``maintenance_commands`` (``index snapshot|verify|rebuild|switch|rollback``), ``search_commands``,
``embed_commands``, ``eval_commands`` and ``serve_commands``. They parse and print; the work is in
``retrieval.indexing.api`` and ``retrieval.training``.
""",
    "retrieval.cli.options": """Options declared once and shared by several commands: ``config_options``
(options that stand for config keys, ``--epochs`` is ``trainer.epochs``), ``train_options`` (what ``train``
and ``study`` share), ``backend_options`` (``--backend`` and its Milvus settings) and ``index_options``
(what the index commands share).
""",
    "retrieval.training.run.inputs": """What a training run feeds its model: ``train_batches`` (images, or
activations of frozen stages) from ``frozen_prefix`` (frozen stages run in onnxruntime on the CPU) and
``activation_cache`` (K augmented views per image, made once); ``split_inputs`` (a val/test split, its
frozen-stage activations made once); ``embed`` (a loader's embeddings).
""",
    "retrieval.training.run.fitting": """The fit itself: ``final_fit`` (how a run is trained: one fit, or a
class-disjoint fit that chooses the epochs and a final fit on every class), ``trainer`` (fit, validate,
keep the best, test once) on ``loop`` (the optimisation step, the divergence stop and the choice of the
best epoch, shared with the study's head training), ``optim`` (parameter groups, optimizers, schedules),
``distributed`` (N ranks x B == 1 x N*B) and ``interrupt`` (Ctrl-C between steps).
""",
    "retrieval.training.run.measures": """What a run measures and reports: ``split_metrics`` (a split's typed
metrics), ``reference`` and ``reference_eval`` (the starting backbone as a model: epoch 0 and the
reference row), ``verdict`` (did training beat it, in one sentence), ``whitening_stage`` (after training:
the whitening and the code's rotation fitted on training classes, chosen on validation, folded into the
model) and ``trained_run`` (what a finished run reports, typed).
""",
    "retrieval.training.run.outputs": """The run directory and what a run writes into it: ``run_dir`` (the
directory's files, claiming it), ``run_model`` (a checkpoint's model restored), ``run_summary`` (the
start-of-run table), ``curves`` and ``tracking`` (plots and TensorBoard).
""",
    "retrieval.training.study.tuning": """The hyperparameter search of a study: ``search`` (optuna TPE over
``search_space``, maximising the mean validation MAP@R over the ``folds``: k class-disjoint folds of the
training classes), ``study_config`` (the config of one loss in the study: its recipe, the budget options,
a trial's values) and ``feasibility`` (every loss can form its batches on every fold, checked before the
first trial).
""",
    "retrieval.training.study.backends": """How a study trains one fold: the whole network with the
``Trainer`` (``finetune_backend``) or, with ``--cached-features``, only the head and the loss on frozen
backbone features embedded once (``cached_features``, ``head_training``, ``cached_backend``); each hands
back a ``fold_result``.
""",
    "retrieval.training.study.reporting": """What a study reports: ``evaluation`` (each chosen model embeds the
test classes once: "separated" and "concatenated", float and binary), ``reference`` (the pretrained row),
``stats`` (the confidence intervals), ``report`` (the tables and plot) and ``summary`` (the text of
study.md: command, protocol, tables, search, time).
""",
    "retrieval.training.model.trunks": """The trunks an embedder is built on: ``backbones`` (the registry:
torchvision, EfficientNet-Lite0/1/2, DINOv2/CLIP/SigLIP vision transformers, any timm model through
``timm_trunks``), ``vit_trunks`` (a timm vision transformer made for the image size, returning its tokens,
and its stages), ``trunk_stages`` (a trunk as a sequence of stages, the first ones freezable),
``static_padding`` (TF-"same" pads fixed for a size), ``imagenet_weights`` and ``pretrained`` (ImageNet
weights found offline, or a file).
""",
    "retrieval.training.losses.native": """The losses written here in pytorch-metric-learning's interface
(registered in ``proxy_losses`` and ``pair_losses``): ``normalized_softmax``, ``npairs``, ``proxy_triplet``,
``prototypical``, ``facility_location`` and ``group_loss``.
""",
    "retrieval.indexing.store.files.segment_storage": """The files backend's segments on disk: ``segments``
(an immutable base + append-only deltas + tombstones), ``segment_files`` (each segment's three files),
``segment_set`` (the loaded segments, id -> row -> segment), ``segment_merge`` (the files of a compaction)
and ``compaction_plan`` (when and what to compact).
""",
    "retrieval.indexing.store.files.faiss_search": """Searching the files backend's segments with faiss:
``segment_searcher`` (one segment, one kind: tombstones, filters, GPU, exact fallback), ``filtered_search``
(faiss id selectors and exact search over stored vectors), ``faiss_kinds`` (the registry of float and
binary index kinds) and ``faiss_gpu`` (GPU copies when faiss sees a GPU).
""",
    "retrieval.indexing.store.shared.items": """The items of an index and the filter over them: ``items_db``
(``items.sqlite`` and ``Item``), ``item_paths`` (image paths inside the index stored relative to it),
``item_filter`` (item metadata and the search filter), ``filter_conditions`` (the filter language's
operators) and ``filter_sql`` (a filter as SQL).
""",
    "retrieval.indexing.store.shared.index_directory": """The index directory itself: ``manifest``
(``manifest.json``), ``file_checksums`` (the sha256 of every file, recorded in the manifest),
``compaction`` (its policy, and what a compaction did), ``write_lock`` (one writer per directory) and
``index_dir`` (writing a new directory: the checks, the model copy, the staged swap).
""",
}

LIMIT_TEST = '''

def test_no_package_holds_more_than_a_dozen_flat_modules() -> None:
    """Past about a dozen modules a folder is a heap: split it by concept into sub-packages, each with its map."""
    flat: dict[str, int] = {}
    for name, path in modules().items():
        if path.name != "__init__.py":
            parent = name.rsplit(".", 1)[0]
            flat[parent] = flat.get(parent, 0) + 1
    heaps = {package: count for package, count in flat.items() if count > MAX_FLAT_MODULES}
    assert not heaps, f"more than {MAX_FLAT_MODULES} flat modules: {heaps}"
'''
LIMIT_CONSTANT = "MAX_FLAT_MODULES = 12  # flat modules per package; more is a heap (../shared/style.md)\n"


def moves() -> dict[str, str]:
    """OLD_MODULE -> NEW_MODULE, dotted: the group moves, then the renames."""
    table = {}
    for package, names in GROUPS.items():
        parent = package.rsplit(".", 1)[0]
        for name in names:
            table[f"{parent}.{name}"] = f"{package}.{name}"
    table.update(RENAMES)
    for old in table:  # idempotence: a mapped name is mapped to itself (no cycle, nothing left to move)
        final = mapped(old, table)
        assert mapped(final, table) == final, (old, final)
    return table


def path_of(module: str, *, package: bool = False) -> str:
    """The repository path of a dotted module (``package``: its ``__init__.py``)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in FOLDERS:
            rel = "/".join([FOLDERS[".".join(parts[:i])], *parts[i:]])
            return f"{rel}/__init__.py" if package else f"{rel}.py"
    raise ValueError(module)


def module_of(path: str) -> str | None:
    """The dotted module of a repository path, or None outside the packages."""
    for package, folder in sorted(FOLDERS.items(), key=lambda item: -len(item[1])):
        if path.startswith(folder + "/") and path.endswith(".py"):
            rest = path[len(folder) + 1 : -3].split("/")
            if rest[-1] == "__init__":
                rest = rest[:-1]
            return ".".join([package, *rest])
    return None


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


# ----- 1. moving files -------------------------------------------------------------------------
def move_files(table: dict[str, str]) -> dict[str, str]:
    """Moves each module still at an old place to its new one (``git mv``; a renamed package file by file)
    and writes missing sub-package maps. Returns new path -> old module of the files moved now (their
    relative imports were written against the old place)."""
    moved = {}
    for package, text in MAPS.items():
        init = ROOT / path_of(mapped(package, table), package=True)
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(f'"""{text.rstrip()}\n"""\n', encoding="utf-8")
            git("add", str(init.relative_to(ROOT)))
    tracked = set(git("ls-files").split())
    for source in git("ls-files", "--cached", "--others", "--exclude-standard").split():
        module = module_of(source)
        if module is None or not (ROOT / source).is_file():
            continue
        target = path_of(mapped(module, table), package=source.endswith("__init__.py"))
        if target == source or (ROOT / target).exists():
            continue
        (ROOT / target).parent.mkdir(parents=True, exist_ok=True)
        if source in tracked:
            git("mv", source, target)
        else:
            (ROOT / source).rename(ROOT / target)
        moved[target] = module
    remove_empty_folders()
    return moved


def remove_empty_folders() -> None:
    """A package moved file by file leaves its folder behind with only ``__pycache__`` in it, which Python
    would import as an empty namespace package: removed."""
    for folder in FOLDERS.values():
        for path in sorted((ROOT / folder).rglob("*"), key=lambda p: -len(p.parts)):
            if path.is_dir() and path.name != "__pycache__":
                rest = [p for p in path.iterdir() if p.name != "__pycache__"]
                if not rest:
                    for cache in path.glob("__pycache__"):
                        for file in cache.iterdir():
                            file.unlink()
                        cache.rmdir()
                    path.rmdir()


# ----- 2. imports ------------------------------------------------------------------------------
def absolute(node: ast.ImportFrom, written_in: str, is_package: bool) -> str:
    """The absolute module of an ImportFrom, resolving a relative one against ``written_in``."""
    if node.level == 0:
        return node.module or ""
    base = written_in.split(".") if is_package else written_in.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def relative(target: str, importer: str, is_package: bool) -> tuple[int, str]:
    """(level, module) that spell ``target`` relatively from ``importer``."""
    here = importer.split(".") if is_package else importer.split(".")[:-1]
    there = target.split(".")
    common = 0
    while common < min(len(here), len(there)) and here[common] == there[common]:
        common += 1
    return len(here) - common + 1, ".".join(there[common:])


def mapped(name: str, table: dict[str, str]) -> str:
    """``name`` with its longest prefix that is a moved module replaced by the new module, again until
    nothing changes (a module moved into a sub-package and then renamed)."""
    for _ in range(len(table) + 1):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            head = ".".join(parts[:i])
            if head in table:
                name = ".".join([table[head], *parts[i:]])
                break
        else:
            return name
    raise ValueError(f"the table maps {name} in a cycle")


def rewrite_imports(text: str, module: str, written_in: str, is_package: bool, table: dict[str, str]) -> str:
    """Rewrites each ``from X import ...`` whose module or imported modules moved (relative ones kept
    relative, from the file's new place); plain dotted names are left to ``rewrite_dotted``."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    edits = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = absolute(node, written_in, is_package)
        if not source.startswith("retrieval"):
            continue
        imports_moved = any(f"{source}.{alias.name}" in table for alias in node.names)
        if node.level == 0 and not imports_moved:
            continue  # an absolute import of a moved module: rewrite_dotted keeps its formatting
        groups: dict[str, list[str]] = {}  # new from-module -> the names imported from it
        for alias in node.names:
            target = mapped(f"{source}.{alias.name}", table)
            base = target.rsplit(".", 1)[0] if f"{source}.{alias.name}" in table else mapped(source, table)
            local = alias.asname or alias.name  # the name the file uses stays (``usecases as api``)
            last = target.rsplit(".", 1)[1] if f"{source}.{alias.name}" in table else alias.name
            spelled = last if last == local else f"{last} as {local}"
            groups.setdefault(base, []).append(spelled)
        if node.level and list(groups) == [source] and written_in == module:
            continue  # a relative import that neither moved nor points at a moved module
        indent = " " * node.col_offset
        statements = []
        for base, names in groups.items():
            if node.level:
                level, rest = relative(base, module, is_package)
                head = "." * level + rest
            else:
                head = base
            statements.append(f"from {head} import {', '.join(names)}")
        start = offsets[node.lineno - 1] + node.col_offset
        end = offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        edits.append((start, end, f"\n{indent}".join(statements)))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


DOTTED = re.compile(r"\bretrieval(?:\.\w+)+")
SHORTHAND = re.compile(r"`(retrieval(?:\.\w+)+)`|`\.(\w+)`")


def expand_shorthand(text: str, table: dict[str, str]) -> str:
    """In docs, `` `.b` `` after `` `retrieval.a.x` `` on the same line means ``retrieval.a.b``: written out in
    full where ``b`` no longer sits beside the nearest full name written before it."""

    def line_of(line: str) -> str:
        package: str | None = None  # the package a shorthand was written against
        shown = ""  # the package of the nearest full name, as the line now reads

        def one(match: re.Match[str]) -> str:
            nonlocal package, shown
            if match.group(1):
                package, shown = match.group(1).rsplit(".", 1)[0], mapped(match.group(1), table).rsplit(".", 1)[0]
                return match.group(0)
            if package is None:
                return match.group(0)
            target = mapped(f"{package}.{match.group(2)}", table)
            exists = (ROOT / path_of(target)).exists() or (ROOT / path_of(target, package=True)).exists()
            if not exists or target.rsplit(".", 1)[0] == shown:
                return match.group(0)
            shown = target.rsplit(".", 1)[0]
            return f"`{target}`"

        return SHORTHAND.sub(one, line)

    return "".join(line_of(line) for line in text.splitlines(keepends=True))


def rewrite_dotted(text: str, table: dict[str, str]) -> str:
    return DOTTED.sub(lambda match: mapped(match.group(0), table), text)


FROM_IMPORT = re.compile(r"^([ \t]*)from (retrieval(?:\.\w+)*) import ([\w ,]+?)[ \t]*$", re.M)


def rewrite_import_lines(text: str, table: dict[str, str]) -> str:
    """``from retrieval.a import b`` written as text (code in a string run by a subprocess, a docs example),
    where ``b`` is a moved module: as ``rewrite_imports`` writes it (the local name kept); the module part
    is left to ``rewrite_dotted``."""

    def one(match: re.Match[str]) -> str:
        indent, source, names = match.groups()
        aliases = [name.split(" as ") for name in (part.strip() for part in names.split(","))]
        if not any(f"{source}.{alias[0].strip()}" in table for alias in aliases):
            return match.group(0)
        groups: dict[str, list[str]] = {}
        for alias in aliases:
            name, local = alias[0].strip(), alias[-1].strip()
            old = f"{source}.{name}"
            base, last = mapped(old, table).rsplit(".", 1) if old in table else (source, name)
            groups.setdefault(base, []).append(last if last == local else f"{last} as {local}")
        return "\n".join(f"{indent}from {base} import {', '.join(names)}" for base, names in groups.items())

    return FROM_IMPORT.sub(one, text)


# ----- 3. paths and maps -----------------------------------------------------------------------
def path_table(table: dict[str, str]) -> dict[str, str]:
    """Old path -> new path of each moved module, and of each renamed package's folder."""
    paths = {}
    for old in table:
        new = mapped(old, table)
        is_package = (ROOT / path_of(new, package=True)).exists() or (ROOT / path_of(old, package=True)).exists()
        if is_package:
            paths[path_of(old, package=True).removesuffix("/__init__.py")] = path_of(new, package=True).removesuffix(
                "/__init__.py"
            )
        else:
            paths[path_of(old)] = path_of(new)
    return paths


def rewrite_paths(text: str, paths: dict[str, str]) -> str:
    if not paths:
        return text
    alternatives = "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
    pattern = re.compile(r"(?<![\w.-])(" + alternatives + r")(?![\w])")
    return pattern.sub(lambda match: paths[match.group(1)], text)


def rewrite_parent_map(text: str, parent: str, table: dict[str, str]) -> str:
    """In a parent package's ``__init__`` docstring, ``module`` -> ``sub.module`` for each moved module."""
    docstring_end = text.find('"""', text.find('"""') + 3)
    if not text.lstrip().startswith('"""') or docstring_end < 0:
        return text
    doc = text[:docstring_end]
    for old, new in table.items():
        if old.rsplit(".", 1)[0] == parent:
            name, sub = old.rsplit(".", 1)[1], new.rsplit(".", 2)[1]
            doc = re.sub(rf"``{name}``", f"``{sub}.{name}``", doc)
    return doc + text[docstring_end:]


def rename_in_parent_map(text: str, parent: str, renames: dict[str, str]) -> str:
    """In a parent package's ``__init__`` docstring, ``old`` -> ``new`` for each module renamed in it."""
    docstring_end = text.find('"""', text.find('"""') + 3)
    if not text.lstrip().startswith('"""') or docstring_end < 0:
        return text
    doc = text[:docstring_end]
    for old, new in renames.items():
        if old.rsplit(".", 1)[0] == parent:
            doc = doc.replace(f"``{old.rsplit('.', 1)[1]}``", f"``{new.rsplit('.', 1)[1]}``")
    return doc + text[docstring_end:]


def rename_in_orders(text: str, renames: dict[str, str]) -> str:
    """``ORDERS`` of tests/test_package_layout.py names a package's parts by their short names: renamed."""
    for old, new in renames.items():
        parent, name = old.rsplit(".", 1)
        block = re.search(rf'\n    "{re.escape(parent)}": \[[^\[\]]*\],', text)  # its list: no brackets inside
        if block:
            fixed = block.group(0).replace(f'"{name}"', f'"{new.rsplit(".", 1)[1]}"')
            text = text[: block.start()] + fixed + text[block.end() :]
    return text


# ----- 4. packaging and the layout test --------------------------------------------------------
def add_packages(text: str) -> str:
    """Each new sub-package in pyproject.toml's ``packages`` list, right after its parent."""
    for package in sorted(GROUPS, reverse=True):
        if f'"{package}"' in text:
            continue
        parent = package.rsplit(".", 1)[0]
        text = re.sub(rf'(\n(\s*)"{re.escape(parent)}",\n)', rf'\1\2"{package}",\n', text, count=1)
        assert f'"{package}"' in text, f"pyproject.toml lists no package {parent}"
    return text


def add_limit_test(text: str) -> str:
    if "def test_no_package_holds_more_than_a_dozen_flat_modules" in text:
        return text
    text = text.replace("\nLAZY_IMPORTS = {", f"\n{LIMIT_CONSTANT}LAZY_IMPORTS = {{", 1)
    return text.rstrip("\n") + "\n" + LIMIT_TEST


# ----- 5. what is still a heap -----------------------------------------------------------------
def heaps() -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in git("ls-files", "--cached", "--others", "--exclude-standard").split():
        module = module_of(path)
        if module and not path.endswith("__init__.py") and (ROOT / path).exists():
            parent = module.rsplit(".", 1)[0]
            counts[parent] = counts.get(parent, 0) + 1
    return {package: count for package, count in sorted(counts.items()) if count > MAX_FLAT}


def main() -> int:
    table = moves()
    moved = move_files(table)
    paths = path_table(table)
    parents = {old.rsplit(".", 1)[0] for old in table}
    renames = {f"{mapped(o.rsplit('.', 1)[0], table)}.{o.rsplit('.', 1)[1]}": mapped(o, table) for o in RENAMES}
    renamed_in = {name.rsplit(".", 1)[0] for name in renames}  # the parents by their new names
    changed = []
    for path in git("ls-files", "--cached", "--others", "--exclude-standard").split():  # new files too
        file = ROOT / path
        if path in SKIP or not file.is_file() or (file.suffix not in TEXT_SUFFIXES and file.name != "Makefile"):
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = text
        module = module_of(path)
        if module is not None:
            is_package = path.endswith("__init__.py")
            new = rewrite_imports(new, module, moved.get(path, module), is_package, table)
            if is_package and module in parents:
                new = rewrite_parent_map(new, module, {o: n for o, n in table.items() if o not in RENAMES})
            if is_package and module in renamed_in:
                new = rename_in_parent_map(new, module, renames)
        elif path.endswith(".py"):  # tests, scripts, bench: absolute imports only
            new = rewrite_imports(new, path, path, False, table)
        if path.endswith(".md"):
            new = expand_shorthand(new, table)
        new = rewrite_paths(rewrite_dotted(rewrite_import_lines(new, table), table), paths)
        if path == "pyproject.toml":
            new = add_packages(new)
        if path == "tests/test_package_layout.py":
            new = rename_in_orders(add_limit_test(new), RENAMES)
        if new != text:
            file.write_text(new, encoding="utf-8")
            changed.append(path)
    python_files = [path for path in changed if path.endswith(".py")] + [
        path_of(package, package=True) for package in MAPS
    ]
    if python_files:
        subprocess.run([sys.executable, "-m", "ruff", "check", "-q", "--select", "I", "--fix", *python_files], cwd=ROOT)
        subprocess.run([sys.executable, "-m", "ruff", "format", "-q", *python_files], cwd=ROOT)
    print(f"moved {len(moved)} modules, rewrote {len(changed)} files")
    for package, count in heaps().items():
        print(f"still a heap: {package} has {count} flat modules (more than {MAX_FLAT})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
