"""open_rgb / open_rgb_bytes / scan_images on real encoded files made in the test."""

from __future__ import annotations

import io
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFile

from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.bad_images import scan_images
from retrieval.indexing.data.image_io import open_rgb, open_rgb_bytes
from retrieval.indexing.data.records import ImageRecord


def _encode(image: Image.Image, fmt: str, **params) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def _halves(width: int = 40, height: int = 20) -> Image.Image:
    """Left half red, right half blue."""
    pixels = np.zeros((height, width, 3), np.uint8)
    pixels[:, : width // 2] = (255, 0, 0)
    pixels[:, width // 2 :] = (0, 0, 255)
    return Image.fromarray(pixels)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _png_header_only(width: int, height: int) -> bytes:
    """A tiny PNG whose IHDR claims ``width x height``, with almost no pixel data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 16)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    path = tmp_path / "rotated.jpg"
    path.write_bytes(_encode(_halves(), "JPEG", exif=exif, quality=95))
    image = open_rgb(path)
    assert image.mode == "RGB"
    assert image.size == (20, 40)  # width and height swapped
    top, bottom = np.asarray(image)[2, 10], np.asarray(image)[-3, 10]
    assert top[0] > 200 and top[2] < 60  # the red left half is now on top
    assert bottom[2] > 200 and bottom[0] < 60


def test_greyscale_palette_and_rgba_become_rgb(tmp_path: Path) -> None:
    grey = Image.new("L", (4, 4), 100)
    assert open_rgb_bytes(_encode(grey, "PNG")).getpixel((0, 0)) == (100, 100, 100)

    palette = _halves(8, 4).convert("P")
    converted = open_rgb_bytes(_encode(palette, "PNG"))
    assert converted.mode == "RGB"
    assert converted.getpixel((0, 0)) == (255, 0, 0) and converted.getpixel((7, 0)) == (0, 0, 255)

    rgba = np.zeros((1, 3, 4), np.uint8)
    rgba[0, 0] = (255, 0, 0, 0)  # fully transparent -> white
    rgba[0, 1] = (0, 0, 255, 255)  # opaque blue stays blue
    rgba[0, 2] = (255, 0, 0, 128)  # half red over white
    image = open_rgb_bytes(_encode(Image.fromarray(rgba, "RGBA"), "PNG"))
    assert image.getpixel((0, 0)) == (255, 255, 255)
    assert image.getpixel((1, 0)) == (0, 0, 255)
    red, green, blue = image.getpixel((2, 0))
    assert red == 255 and abs(green - 127) <= 1 and abs(blue - 127) <= 1


def test_palette_transparency_composites_on_white() -> None:
    palette = Image.new("P", (2, 1), 0)
    palette.putpalette([0, 0, 0, 10, 200, 10] + [0] * 762)
    palette.putpixel((1, 0), 1)
    data = _encode(palette, "PNG", transparency=0)
    image = open_rgb_bytes(data)
    assert image.getpixel((0, 0)) == (255, 255, 255)
    assert image.getpixel((1, 0)) == (10, 200, 10)


def test_cmyk_and_16_bit_are_converted() -> None:
    cmyk = Image.new("CMYK", (4, 4), (0, 255, 255, 0))  # pure red ink
    red = open_rgb_bytes(_encode(cmyk, "JPEG", quality=95)).getpixel((1, 1))
    assert red[0] > 200 and red[1] < 60 and red[2] < 60

    deep = np.array([[0, 32896, 65535]], dtype=np.uint16)
    image = open_rgb_bytes(_encode(Image.fromarray(deep), "PNG"))
    assert [image.getpixel((x, 0)) for x in range(3)] == [(0, 0, 0), (128, 128, 128), (255, 255, 255)]


def test_pixels_are_loaded_before_returning(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    path.write_bytes(_encode(_halves(), "PNG"))
    image = open_rgb(path)
    path.unlink()
    assert image.getpixel((39, 0)) == (0, 0, 255)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (_encode(_halves(200, 200), "JPEG")[:400], "truncated"),
        (np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes(), "not a recognised image"),
        (b"", "not a recognised image"),
    ],
    ids=["truncated-jpeg", "random-bytes", "empty"],
)
def test_unreadable_files_raise_data_error(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "bad.jpg"
    path.write_bytes(data)
    with pytest.raises(DataError, match=rf"cannot read image .*bad\.jpg: .*{reason}"):
        open_rgb(path)
    with pytest.raises(DataError, match=reason):
        open_rgb_bytes(data, name="upload.jpg")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found"):
        open_rgb(tmp_path / "nope.png")
    with pytest.raises(DataError, match="directory"):
        open_rgb(tmp_path)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")  # Pillow's own, before ours
@pytest.mark.parametrize("side", [10_000, 100_000], ids=["above-limit", "far-above-pillow-limit"])
def test_decompression_bomb_is_refused_from_the_header(side: int) -> None:
    started = time.perf_counter()
    with pytest.raises(DataError, match="pixels"):
        open_rgb_bytes(_png_header_only(side, side))
    assert time.perf_counter() - started < 1.0  # nothing was decoded or allocated


def test_max_pixels_is_respected() -> None:
    data = _encode(_halves(40, 20), "PNG")
    assert open_rgb_bytes(data, max_pixels=800).size == (40, 20)
    with pytest.raises(DataError, match="800 pixels exceeds the limit of 799"):
        open_rgb_bytes(data, max_pixels=799)


def test_global_pil_state_is_untouched() -> None:
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False
    assert Image.MAX_IMAGE_PIXELS == 89_478_485


def test_scan_images_lists_each_bad_file_with_its_reason(tmp_path: Path) -> None:
    good = tmp_path / "good.jpg"
    good.write_bytes(_encode(_halves(64, 64), "JPEG"))
    truncated = tmp_path / "cut.jpg"
    truncated.write_bytes(_encode(_halves(200, 200), "JPEG")[:500])
    junk = tmp_path / "junk.png"
    junk.write_bytes(b"this is not an image")
    missing = tmp_path / "missing.png"
    records = [ImageRecord(path=p, label="x") for p in (good, truncated, junk, missing)]
    report = scan_images(records, progress=False)
    assert report.checked == 4 and not report.ok
    assert [path for path, _ in report.bad] == [truncated, junk, missing]
    reasons = dict(report.bad)
    assert "truncated" in reasons[truncated]
    assert reasons[junk] == "not a recognised image format"
    assert reasons[missing] == "file not found"
    assert "3 of 4 images cannot be read" in report.summary()
    assert scan_images(records[:1], progress=False).ok


def test_uploads_reach_only_the_accepted_decoders() -> None:
    """A format Pillow can read but the service does not accept (here PPM; EPS would run Ghostscript)
    is refused by content, not by the declared type; files on disk keep every decoder."""
    import io

    from retrieval.indexing.data.image_io import open_rgb_bytes

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(buffer, format="PPM")
    with pytest.raises(DataError, match="not a recognised image format"):
        open_rgb_bytes(buffer.getvalue())
    png = io.BytesIO()
    Image.new("RGB", (8, 8), (10, 20, 30)).save(png, format="PNG")
    assert open_rgb_bytes(png.getvalue()).getpixel((0, 0)) == (10, 20, 30)


def test_high_depth_conversion_in_strips_equals_the_whole_image_reference(tmp_path) -> None:
    """16-bit images are scaled to 8 bits strip by strip (bounded memory); values equal a one-shot reference."""
    import numpy as np

    from retrieval.indexing.data.image_io import open_rgb

    rng = np.random.default_rng(0)
    values = rng.integers(0, 65536, (1300, 70), dtype=np.uint16)  # more rows than one strip
    path = tmp_path / "deep.png"
    Image.fromarray(values).save(path)
    expected = np.clip(values / 257.0, 0, 255).round().astype(np.uint8)
    decoded = np.asarray(open_rgb(path))
    assert np.array_equal(decoded[..., 0], expected) and np.array_equal(decoded[..., 2], expected)


def test_uploads_whose_decoding_would_exceed_the_memory_budget_are_refused_from_the_header() -> None:
    import io

    from retrieval.indexing.data.image_io import decode_bytes_estimate, open_rgb_bytes

    buffer = io.BytesIO()
    Image.new("I;16", (2000, 1500)).save(buffer, format="PNG")  # a few KB on the wire
    data = buffer.getvalue()
    needed = decode_bytes_estimate("I;16", (2000, 1500), image_format="PNG")  # tests/test_decode_budget.py
    with pytest.raises(DataError, match=r"2000x1500 I;16 image would need about \d+ MB, over the limit of 16 MB"):
        open_rgb_bytes(data, max_decode_bytes=16 << 20)
    assert open_rgb_bytes(data, max_decode_bytes=needed).size == (2000, 1500)
