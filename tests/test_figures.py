"""The figures a person reads: retrieval_grid.png (full labels, scores, legend) and curves.png (best epoch)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from index_fixtures import make_image
from PIL import Image

from retrieval.indexing.data.records import ImageRecord
from retrieval.indexing.duplicates.dataset_copies import CopyPair, DatasetCopies
from retrieval.indexing.eval.evaluation import EvalData, grid_rows
from retrieval.indexing.eval.retrieval_grid import (
    HIT,
    MISS,
    QUERY,
    GridRow,
    font,
    render_grid,
    row_captions,
    wrap_label,
)
from retrieval.training.run.outputs.curves import curves_figure


def test_wrap_label_keeps_the_whole_label_within_the_width() -> None:
    face = font()
    for label in ("001.Black_footed_Albatross", "x" * 60, "a label with spaces", "short"):
        lines = wrap_label(label, 60, face)
        assert "".join(lines) == label  # nothing cut
        assert all(face.getlength(line) <= 60 for line in lines)
    lines = wrap_label("001.Black_footed_Albatross", 60, face)
    assert len(lines) > 1 and all(line[-1] in "._" for line in lines[:-1])  # breaks where the label has joints


def test_captions_hold_rank_score_and_full_label() -> None:
    label = "002.Laysan_Albatross_with_a_long_name"
    row = GridRow(Path("q.png"), "a", [(Path("1.png"), "a"), (Path("2.png"), label)], scores=[0.9314, 0.5])
    query, first, second = row_captions(row, 100, font())
    assert query[0] == "query" and first[0] == "1. 0.931" and second[0] == "2. 0.500"
    assert "".join(second[1:]) == label
    unscored = GridRow(Path("q.png"), "a", [(Path("1.png"), "a")])
    assert row_captions(unscored, 100, font())[1][0] == "1."


def _grid(tmp_path: Path, label: str) -> np.ndarray:
    paths = []
    for n in range(3):
        paths.append(tmp_path / f"{n}.png")
        make_image(n, 0).save(paths[-1])
    row = GridRow(paths[0], "a", [(paths[1], "a"), (paths[2], label)], scores=[0.9, 0.4])
    return np.asarray(render_grid([row], thumb=40))


def test_grid_grows_for_long_labels_and_has_a_legend(tmp_path: Path) -> None:
    short, long = _grid(tmp_path, "b"), _grid(tmp_path, "b_label_long_enough_to_need_several_lines")
    assert long.shape[1] == short.shape[1] and long.shape[0] > short.shape[0]  # taller cells, not cut labels
    for grid in (short, long):
        below_frames = grid[6 + 40 + 2 * 4 :]  # captions (black text) and the legend
        for colour in (QUERY, HIT, MISS):  # one 12 x 12 swatch per frame colour
            assert (below_frames == colour).all(axis=2).sum() >= 100, colour
        assert tuple(grid[8, 6 + 2 * (40 + 8 + 6) + 1]) == MISS  # the frames stay where they were


def test_grid_rows_score_neighbours_by_cosine() -> None:
    embeddings = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 2.0], [-3.0, 0.0]], dtype=np.float32)
    data = EvalData(
        embeddings, np.array(["a", "a", "b", "c"]), ["0", "1", "2", "3"], np.ones(4, bool), np.ones(4, bool)
    )
    (row,) = grid_rows(data, np.array([1]), np.array([[2, 0, -1]]))
    assert [label for _, label in row.neighbors] == ["b", "a"]
    np.testing.assert_allclose(row.scores, [0.8, 0.6], atol=1e-6)  # cos with (0, 2) and (1, 0)


def _rows(epochs: int, maps: list[float]) -> list[dict]:
    rows = [{"epoch": 0, "train_loss": None, "val": {"map_at_r": 0.1, "r_precision": 0.1, "precision_at_1": 0.2}}]
    for epoch, value in zip(range(1, epochs + 1), maps):
        val = {"map_at_r": value, "r_precision": value, "precision_at_1": value + 0.1}
        rows.append({"epoch": epoch, "train_loss": 2.0 / epoch, "val": val})
    return rows


def _vertical_lines(axes) -> list[float]:
    return [
        line.get_xdata()[0]
        for line in axes.get_lines()
        if len(set(line.get_xdata())) == 1 and len(line.get_xdata()) == 2
    ]


def test_curves_mark_the_best_epoch_on_both_panels() -> None:
    figure = curves_figure(_rows(3, [0.3, 0.5, 0.45]), best_epoch=2)
    loss_axes, val_axes = figure.axes
    for axes in (loss_axes, val_axes):
        assert _vertical_lines(axes) == [2]
        assert "best epoch 2 (MAP@R 0.500)" in [text.get_text() for text in axes.get_legend().get_texts()]
    stars = [line for line in val_axes.get_lines() if line.get_marker() == "*"]
    assert len(stars) == 1 and list(stars[0].get_xydata()[0]) == pytest.approx([2, 0.5])
    unmarked = curves_figure(_rows(3, [0.3, 0.5, 0.45]))
    assert all(_vertical_lines(axes) == [] for axes in unmarked.axes)
    assert [t.get_text() for t in unmarked.axes[1].get_legend().get_texts()] == ["MAP@R", "R-precision", "P@1"]


@pytest.mark.parametrize("epochs", [1, 2, 3, 40])
def test_curves_have_whole_epoch_ticks(epochs: int) -> None:
    figure = curves_figure(_rows(epochs, list(np.linspace(0.2, 0.6, epochs))), best_epoch=epochs)
    figure.canvas.draw()
    for axes in figure.axes:
        low, high = axes.get_xlim()
        ticks = [tick for tick in axes.get_xticks() if low <= tick <= high]
        assert len(ticks) >= 1 and all(float(tick).is_integer() for tick in ticks), ticks


@pytest.mark.parametrize(("width", "height"), [(32, 32), (20, 40), (600, 300)])
def test_grid_tiles_are_filled_by_small_and_large_images_alike(tmp_path: Path, width: int, height: int) -> None:
    """An image is scaled to its tile, up or down, aspect kept: a 32 px image is not a speck in a 96 px tile."""
    from retrieval.indexing.eval.retrieval_grid import thumbnail

    path = tmp_path / "red.png"
    Image.new("RGB", (width, height), (255, 0, 0)).save(path)
    tile = np.asarray(thumbnail(path, 96)).astype(int)
    red = (tile[..., 0] > 200) & (tile[..., 1] < 60)
    rows, columns = np.nonzero(red)
    scale = min(96 / width, 96 / height)
    assert columns.max() - columns.min() + 1 == pytest.approx(width * scale, abs=2)
    assert rows.max() - rows.min() + 1 == pytest.approx(height * scale, abs=2)
    assert max(np.ptp(columns), np.ptp(rows)) + 1 >= 95  # the longer side fills the tile


def test_duplicates_grid_calls_its_first_image_an_image_not_a_query(tmp_path: Path) -> None:
    records = [ImageRecord(path=tmp_path / f"{n}.png", label=f"c{n}") for n in range(2)]
    copies = DatasetCopies(records, [CopyPair(0, 1, 0.99, "near", "train", "train")], None)
    (row,) = copies._grid_rows()
    captions = row_captions(row, 100, font())
    assert captions[0][0] == "image" and captions[1][0] == "1. 0.990"  # was "query": nothing was searched
    for n in range(2):
        make_image(n, 0).save(records[n].path)
    assert render_grid([row], thumb=40).size[0] > 0
