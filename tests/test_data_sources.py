"""load_records on tiny replicas of every supported layout, and its error messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import CARS196  # ../shared/data/cars196 beside the repository
from PIL import Image
from scipy.io import savemat

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.sources import LAYOUTS, describe_layout, load_records


def _image(path: Path, value: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (value, value, value)).save(path, format="PNG")
    return path


def _by_name(records) -> dict[str, object]:
    return {record.path.name: record for record in records}


def test_imagefolder_reads_classes_and_extensions_case_insensitively(tmp_path: Path) -> None:
    _image(tmp_path / "cat" / "a.JPG")
    _image(tmp_path / "cat" / "nested" / "b.Png")
    _image(tmp_path / "dog" / "c.webp")
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    _image(tmp_path / "dog" / ".hidden.png")
    _image(tmp_path / ".cache" / "d.png")
    (tmp_path / "empty").mkdir()
    (tmp_path / "README.md").write_text("top-level files are ignored")

    records = load_records(tmp_path)
    assert describe_layout(tmp_path) == "ImageFolder"
    assert sorted((r.path.relative_to(tmp_path).as_posix(), r.label) for r in records) == [
        ("cat/a.JPG", "cat"),
        ("cat/nested/b.Png", "cat"),
        ("dog/c.webp", "dog"),
    ]
    assert all(r.split is None and r.is_query and r.is_gallery and r.path.is_absolute() for r in records)


def test_imagefolder_reads_each_real_file_once_through_a_symlink_loop_and_names_the_loop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for label in ("cat", "dog"):
        for n in range(3):
            _image(tmp_path / label / "sub" / f"{label}{n}.png", n)
    (tmp_path / "cat" / "sub" / "up").symlink_to(tmp_path / "cat", target_is_directory=True)  # back up: a loop
    (tmp_path / "dog" / "cats").symlink_to(tmp_path / "cat" / "sub", target_is_directory=True)  # a second link
    with caplog.at_level("WARNING"):
        records = load_records(tmp_path)
    assert len(records) == 6  # was 3 + 3 x ~40 nesting levels: the loop was followed until the OS refused
    assert len({record.path.resolve() for record in records}) == 6
    assert sorted(record.label for record in records) == ["cat"] * 3 + ["dog"] * 3
    assert str(tmp_path / "cat" / "sub" / "up") in caplog.text and "symlink loop" in caplog.text
    assert str(tmp_path / "dog" / "cats") in caplog.text


def test_csv_manifest_resolves_paths_and_reads_protocol_columns(tmp_path: Path) -> None:
    _image(tmp_path / "imgs" / "a.png")
    _image(tmp_path / "imgs" / "b.png")
    absolute = _image(tmp_path / "elsewhere" / "c.png")
    manifest = tmp_path / "data.csv"
    manifest.write_text(
        "path,label,split,is_query,is_gallery,source\n"
        "imgs/a.png,shoe,train,,,shop\n"
        "imgs/b.png,shoe,test,yes,0,street\n"
        f"{absolute},boot,test,FALSE,True,shop\n"
    )
    records = load_records(manifest)
    assert describe_layout(manifest) == "CSV manifest"
    a, b, c = records
    assert a.path == tmp_path / "imgs" / "a.png" and c.path == absolute
    assert [r.label for r in records] == ["shoe", "shoe", "boot"]
    assert [r.split for r in records] == ["train", "test", "test"]
    assert [(r.is_query, r.is_gallery) for r in records] == [(True, True), (True, False), (False, True)]
    assert b.metadata == {"source": "street"}
    # a folder holding manifest.csv is read the same way
    (tmp_path / "manifest.csv").write_text(manifest.read_text())
    assert load_records(tmp_path) == records


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("file,label\na.png,x\n", r"lacks the column\(s\) path"),
        ("path,category\na.png,x\n", r"lacks the column\(s\) label"),
        ("path,label,is_query\na.png,x,maybe\n", r"line 2: is_query 'maybe' is not a boolean"),
        ("path,label,split\na.png,x,validation\n", r"split 'validation' must be one of train, test"),
        ("path,label\na.png,\n", r"line 2 has an empty path or label"),
        ("path,label\na.png,x,extra\n", r"line 2 has more fields than the header"),
        ("path,label\n", r"lists no images"),
    ],
)
def test_csv_manifest_errors(tmp_path: Path, text: str, message: str) -> None:
    _image(tmp_path / "a.png")
    (tmp_path / "m.csv").write_text(text)
    with pytest.raises(DataError, match=message):
        load_records(tmp_path / "m.csv")


def test_csv_manifest_reports_missing_files_with_count_and_first_paths(tmp_path: Path) -> None:
    _image(tmp_path / "here.png")
    rows = "".join(f"gone{i}.png,x\n" for i in range(5))
    (tmp_path / "m.csv").write_text("path,label\nhere.png,x\n" + rows)
    with pytest.raises(
        DataError,
        match=r"5 of 6 images .* do not exist: .*gone0\.png, .*gone1\.png, .*gone2\.png "
        r"and 2 more",
    ):
        load_records(tmp_path / "m.csv")


def _write_cub(root: Path) -> None:
    classes = {1: "001.Albatross", 100: "100.Pelican", 101: "101.Sparrow", 200: "200.Wren"}
    images, labels = [], []
    for number, (class_id, name) in enumerate(sorted(classes.items()) * 2, start=1):
        relative = f"{name}/{name}_{number}.jpg"
        _image(root / "images" / relative)
        images.append(f"{number} {relative}")
        labels.append(f"{number} {class_id}")
    (root / "images.txt").write_text("\n".join(images) + "\n")
    (root / "image_class_labels.txt").write_text("\n".join(labels) + "\n")
    (root / "classes.txt").write_text("\n".join(f"{i} {n}" for i, n in classes.items()) + "\n")


def test_cub_uses_the_standard_class_split(tmp_path: Path) -> None:
    _write_cub(tmp_path / "CUB_200_2011")
    assert describe_layout(tmp_path) == "CUB-200-2011"
    records = load_records(tmp_path)
    assert len(records) == 8
    split_of = {r.label: r.split for r in records}
    assert split_of == {"001.Albatross": "train", "100.Pelican": "train", "101.Sparrow": "test", "200.Wren": "test"}
    assert all(r.path.is_file() and r.path.is_relative_to(tmp_path / "CUB_200_2011" / "images") for r in records)


def test_cub_missing_images_are_reported(tmp_path: Path) -> None:
    _write_cub(tmp_path)
    next((tmp_path / "images").rglob("*.jpg")).unlink()
    with pytest.raises(DataError, match=r"1 of 8 images listed by .*images\.txt do not exist"):
        load_records(tmp_path)


def _annotations(rows: list[tuple[str, int]]) -> np.ndarray:
    table = np.zeros((1, len(rows)), dtype=[("relative_im_path", "O"), ("class", "O"), ("test", "O")])
    for index, (path, class_id) in enumerate(rows):
        table[0, index] = (path, np.array([[class_id]], dtype=np.uint8), np.array([[0]], dtype=np.uint8))
    return table


def test_cars196_reads_the_mat_file_and_splits_at_class_98(tmp_path: Path) -> None:
    rows = [(f"car_ims/{i:06d}.jpg", class_id) for i, class_id in enumerate([1, 98, 99, 196, 1, 99], start=1)]
    for path, _ in rows:
        _image(tmp_path / path)
    names = np.array([f"Car {i}" for i in range(1, 197)], dtype=object).reshape(1, -1)
    savemat(tmp_path / "cars_annos.mat", {"annotations": _annotations(rows), "class_names": names})

    assert describe_layout(tmp_path) == "Cars196"
    records = load_records(tmp_path)
    assert [r.path for r in records] == [tmp_path / path for path, _ in rows]
    assert [r.label for r in records] == [
        "001.Car 1",
        "098.Car 98",
        "099.Car 99",
        "196.Car 196",
        "001.Car 1",
        "099.Car 99",
    ]
    assert [r.split for r in records] == ["train", "train", "test", "test", "train", "test"]


def test_cars196_single_annotation_without_class_names(tmp_path: Path) -> None:
    _image(tmp_path / "car_ims" / "000001.jpg")
    savemat(tmp_path / "cars_annos.mat", {"annotations": _annotations([("car_ims/000001.jpg", 150)])})
    (record,) = load_records(tmp_path)
    assert (record.label, record.split) == ("150", "test")


def test_stanford_online_products_follows_its_split_files(tmp_path: Path) -> None:
    root = tmp_path / "Stanford_Online_Products"
    train = ["1 1 1 bicycle_final/111_0.JPG", "2 1 1 bicycle_final/111_1.JPG", "3 12 2 chair_final/222_0.JPG"]
    test = ["4 11319 1 bicycle_final/333_0.JPG", "5 11319 1 bicycle_final/333_1.JPG"]
    header = "image_id class_id super_class_id path\n"
    (root).mkdir()
    (root / "Ebay_train.txt").write_text(header + "\n".join(train) + "\n")
    (root / "Ebay_test.txt").write_text(header + "\n".join(test) + "\n")
    for line in train + test:
        _image(root / line.split()[-1])

    assert describe_layout(tmp_path) == "Stanford Online Products"
    records = load_records(tmp_path)
    assert [(r.path.name, r.label, r.split) for r in records] == [
        ("111_0.JPG", "00001", "train"),
        ("111_1.JPG", "00001", "train"),
        ("222_0.JPG", "00012", "train"),
        ("333_0.JPG", "11319", "test"),
        ("333_1.JPG", "11319", "test"),
    ]
    assert records[2].metadata == {"image_id": 3, "super_class_id": 2}


def _write_inshop(root: Path, declared: int | None = None) -> None:
    rows = [
        ("img/WOMEN/Dresses/id_00000001/01_front.jpg", "id_00000001", "train"),
        ("img/WOMEN/Dresses/id_00000001/02_side.jpg", "id_00000001", "train"),
        ("img/MEN/Tees/id_00000007/01_front.jpg", "id_00000007", "query"),
        ("img/MEN/Tees/id_00000007/02_back.jpg", "id_00000007", "gallery"),
        ("img/MEN/Tees/id_00000007/03_full.jpg", "id_00000007", "gallery"),
    ]
    for name, _, _ in rows:
        _image(root / name)
    body = "\n".join(f"{name}   {item}   {status}" for name, item, status in rows)
    count = len(rows) if declared is None else declared
    (root / "list_eval_partition.txt").write_text(f"{count}\nimage_name item_id evaluation_status\n{body}\n")


def test_inshop_query_and_gallery_form_the_test_split(tmp_path: Path) -> None:
    _write_inshop(tmp_path)
    assert describe_layout(tmp_path) == "In-Shop"
    flags = {r.path.name + r.label: (r.split, r.is_query, r.is_gallery) for r in load_records(tmp_path)}
    assert flags == {
        "01_front.jpgid_00000001": ("train", True, True),
        "02_side.jpgid_00000001": ("train", True, True),
        "01_front.jpgid_00000007": ("test", True, False),
        "02_back.jpgid_00000007": ("test", False, True),
        "03_full.jpgid_00000007": ("test", False, True),
    }


def test_inshop_count_mismatch_is_an_error(tmp_path: Path) -> None:
    _write_inshop(tmp_path, declared=9)
    with pytest.raises(DataError, match="declares 9 images on line 1 but lists 5"):
        load_records(tmp_path)


def test_unknown_layout_names_every_layout_it_looked_for(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(DataError, match=f"^no images found in {tmp_path} "):  # a folder: what it lacks
        load_records(tmp_path)
    with pytest.raises(DataError, match="matches no known dataset layout") as caught:  # a file of no layout
        load_records(tmp_path / "notes.txt")
    for layout in LAYOUTS.entries():
        assert layout.name in str(caught.value)
    with pytest.raises(DataError, match="does not exist"):
        load_records(tmp_path / "missing")


def test_a_layout_can_be_forced_by_name(tmp_path: Path) -> None:
    _image(tmp_path / "a" / "x.png")
    assert len(load_records(tmp_path, layout="imagefolder")) == 1
    with pytest.raises(DataError, match="is not a CUB-200-2011 dataset: it needs images.txt"):
        load_records(tmp_path, layout="CUB-200-2011")
    with pytest.raises(DataError, match="unknown dataset layout 'coco'; known layouts: CUB-200-2011, Cars196"):
        load_records(tmp_path, layout="coco")


def test_cars196_reads_as_imagefolder() -> None:
    if not CARS196.is_dir():
        pytest.skip("the shared Cars-196 copy is not on this machine")
    records = load_records(CARS196)
    labels = sorted({r.label for r in records})
    assert len(labels) == 196 and labels[0] == "001.AM_General_Hummer_SUV_2000"
    assert labels[-1] == "196.smart_fortwo_Convertible_2012"
    assert len(records) == 8144 and all(r.path.suffix.lower() == ".jpg" for r in records)
