"""Which module defines each ``retrieval`` command, so a command's module, and what it imports (torch, FastAPI,
faiss, onnxruntime), loads only when that command runs.

``COMMANDS`` maps each top-level command to its module (one of ``retrieval.cli``, with ``register(app)``) and
the one-line summary ``retrieval --help`` lists without importing it; ``LazyCommandGroup`` is the top-level
group that resolves a command through the table when it is named. ``retrieval --help`` and an unknown command
(with its did-you-mean) import no command module; ``retrieval train --data /missing`` imports the train
module alone, which refuses a bad path, recipe, backbone or run directory before torch loads.
``INDEX_COMMANDS`` and ``LazyIndexGroup`` do the same one level down, for ``retrieval index NAME``.
``tests/test_package_layout.py`` reads the table as the imports it stands for, and
``tests/test_cli_startup.py`` checks that each summary is its command's own.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

import typer
from typer import _click as click
from typer.main import get_group

from retrieval.cli.help_display import UNLIMITED_WIDTH, FlagGroup, present


@dataclass(frozen=True)
class CommandSource:
    module: str  # a module of retrieval.cli whose register(app) adds the command
    summary: str  # its help's first sentence, as `retrieval --help` lists it


COMMANDS: dict[str, CommandSource] = {
    "train": CommandSource(
        "retrieval.cli.commands.train_commands",
        "Fit an embedder: class-disjoint split, validation MAP@R picks the best epoch, test metrics at the end.",
    ),
    "losses": CommandSource(
        "retrieval.cli.commands.train_commands",
        "List the registered losses with a one-line description each, and the recipes with what they set.",
    ),
    "backbones": CommandSource(
        "retrieval.cli.commands.backbone_commands",
        "List the registered backbones: their parameters, the image size their pretrained weights were trained at, "
        "the stages `--set model.frozen_stages=N` counts, their feature width, the embedding images/s measured on a "
        "2-core CPU (fp32 / INT8 ONNX, where measured), and where `--pretrained imagenet` finds their weights here "
        "(offline) or, when not here, where they would come from.",
    ),
    "study": CommandSource(
        "retrieval.cli.commands.study_commands",
        "Compare losses fairly, as 'A Metric Learning Reality Check' (Musgrave et al., ECCV 2020) does.",
    ),
    "export": CommandSource(
        "retrieval.cli.commands.export_commands",
        "Export a trained run to ONNX, check it against torch and write model.onnx + model.json.",
    ),
    "search": CommandSource(
        "retrieval.cli.commands.search_commands",
        "Find the items of an index most similar to each query image (or stored item, vector or text) and print them.",
    ),
    "embed": CommandSource(
        "retrieval.cli.commands.embed_commands",
        "Embed a dataset with an exported model (or read an index) and write the embeddings with their items.",
    ),
    "eval": CommandSource(
        "retrieval.cli.commands.eval_commands",
        "Measure float and binary (sign-bit) retrieval; write metrics.json and retrieval_grid.png.",
    ),
    "serve": CommandSource(
        "retrieval.cli.commands.serve_commands",
        "Serve searches over HTTP, with a web page at / and the API documented at /docs.",
    ),
    "data": CommandSource(
        "retrieval.cli.commands.data_commands",
        "Datasets: generate a synthetic one, show a dataset's layout and class-disjoint split, check its images.",
    ),
    "index": CommandSource(
        "retrieval.cli.index_group", "Build, inspect and update an index directory (float + binary faiss)."
    ),
}

INDEX_COMMANDS: dict[str, CommandSource] = {  # ``retrieval index NAME``: the group loads each module when named
    "build": CommandSource(
        "retrieval.cli.commands.index_commands",
        "Embed a dataset with an exported model (or take --vectors) and write a float + binary index directory.",
    ),
    "info": CommandSource("retrieval.cli.commands.index_commands", "Show what an index holds and how it was built."),
    "add": CommandSource(
        "retrieval.cli.commands.index_commands",
        "Embed more images with the index's own model and add them (new ids, old ids unchanged); a DBA index "
        "augments them as its build did.",
    ),
    "remove": CommandSource(
        "retrieval.cli.commands.index_commands",
        "Remove items by id (ids are never reused) or by key; an unknown id or key removes nothing and fails.",
    ),
    "compact": CommandSource(
        "retrieval.cli.commands.index_commands",
        "Merge the base, every delta segment and no removed item into one new base, atomically.",
    ),
    "duplicates": CommandSource(
        "retrieval.cli.commands.index_commands",
        "Find the groups of near-duplicate items of an index (connected components of the pairs above the copy "
        "threshold whose images' pixels agree), largest first, and write them as CSV, one row per item.",
    ),
    "audit": CommandSource(
        "retrieval.cli.commands.index_commands",
        "Rank the items of an index by how likely their label is wrong (from their stored embeddings, out of fold), "
        "as `retrieval data audit` does for a dataset; the same rows as GET /audit.",
    ),
    "merge": CommandSource(
        "retrieval.cli.commands.shard_commands",
        "Merge the N shard directories of `retrieval index build --shard I/N` into one index directory.",
    ),
    "snapshot": CommandSource(
        "retrieval.cli.commands.maintenance_commands",
        "Copy the index consistently, also while the service writes it (hard links where the file system allows).",
    ),
    "verify": CommandSource(
        "retrieval.cli.commands.maintenance_commands",
        "Check every file, id, vector and record of the index, and that its model copy fits its graph and is the "
        "one it was built with; exits non-zero with the first problem.",
    ),
    "rebuild": CommandSource(
        "retrieval.cli.commands.maintenance_commands",
        "Re-embed every stored image with a new model beside the live index, then switch to it atomically.",
    ),
    "switch": CommandSource(
        "retrieval.cli.commands.maintenance_commands",
        "Make the next generation (from `index rebuild --no-switch`, or a rolled-back one) live, atomically.",
    ),
    "rollback": CommandSource(
        "retrieval.cli.commands.maintenance_commands",
        "Make the generation the last switch replaced live again (with what was added since), atomically.",
    ),
}


class LazyCommandGroup(FlagGroup):
    """The ``retrieval`` group: its commands come from ``COMMANDS``, each module imported when first named."""

    table: ClassVar[dict[str, CommandSource]] = COMMANDS

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*self.table, *(name for name in super().list_commands(ctx) if name not in self.table)]

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> Any:
        if cmd_name in self.table and cmd_name not in self.commands:
            self._load(self.table[cmd_name].module)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The summaries of the table: listing the commands imports none of them."""
        rows = [(name, source.summary[:UNLIMITED_WIDTH]) for name, source in self.table.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _load(self, module_name: str) -> None:
        """Import ``module_name`` and add the commands its ``register`` declares (presented as every command is)."""
        stage = typer.Typer()
        importlib.import_module(module_name).register(stage)
        present(stage)
        for name, command in get_group(stage).commands.items():
            self.add_command(command, name)


class LazyIndexGroup(LazyCommandGroup):
    """The ``retrieval index`` group: ``retrieval index --help`` lists ``INDEX_COMMANDS`` without importing faiss."""

    table = INDEX_COMMANDS
