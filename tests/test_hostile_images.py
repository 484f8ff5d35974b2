"""Images small on the wire that used to cost gigabytes or a 500 between the bytes and the model's input:
extreme aspect ratios (a 117 KB PNG of 4,000,000 x 10 pixels resized to 102,400,000 x 256) and malformed
EXIF. Each is made here; peak memory is measured in a fresh interpreter (``VmHWM``, Pillow's C buffers
included), which runs under an address-space limit so that a regression fails instead of swapping."""

from __future__ import annotations

import io
import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from serving_fixtures import API_KEY, image_bytes, serving_client
from tall_images import tall_png

from retrieval.indexing.data.image_io import open_rgb_bytes
from retrieval.indexing.exported_model.model_manifest import Preprocessing
from retrieval.indexing.exported_model.preprocess import preprocess_image

# (10 x 3,000,000: a tall 40-megapixel one needs more than the 400 MB budget, row pointers counted)
ELONGATED = [(4_000_000, 10), (2_000_000, 20), (1_000_000, 40), (10, 3_000_000), (39_000_000, 1)]
RESIZE_SLACK = 48 << 20  # what resizing and cropping may add to the decode estimate: a few crop-sized images
ADDRESS_SPACE_LIMIT = 3 << 30  # before the fix the 4,000,000 x 10 PNG reached 10.3 GB

_MEASURE = r"""
import ctypes, io, json, re, resource, sys
from pathlib import Path
from PIL import Image
from retrieval.indexing.data.image_io import decode_estimate_of, open_rgb_bytes
from retrieval.indexing.exported_model.model_manifest import Preprocessing
from retrieval.indexing.exported_model.preprocess import preprocess_image

data = Path(sys.argv[1]).read_bytes()
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
with Image.open(io.BytesIO(data)) as header:
    estimate = decode_estimate_of(header)

def status(key):
    return int(re.search(key + r":\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024

ctypes.CDLL("libc.so.6").malloc_trim(0)
Path("/proc/self/clear_refs").write_text("5")  # the peak mark (VmHWM) restarts from the current RSS
base = status("VmRSS")
pixels = preprocess_image(open_rgb_bytes(data, max_pixels=10**9), Preprocessing())
peak = status("VmHWM") - base
print(json.dumps({"estimate": estimate, "peak": peak, "shape": list(pixels.shape)}))
"""


def _flat_png(size: tuple[int, int]) -> bytes:
    """A plain grey PNG of ``size``: about 117 KB for 4,000,000 x 10 pixels."""
    return image_bytes(Image.new("RGB", size, (120, 130, 140)))


def _peak_of_preprocessing(data: bytes, tmp_path: Path) -> dict:
    path = tmp_path / "image.png"
    path.write_bytes(data)
    run = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(ADDRESS_SPACE_LIMIT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


@pytest.mark.parametrize("size", ELONGATED, ids=lambda size: f"{size[0]}x{size[1]}")
def test_preprocessing_an_elongated_image_stays_within_the_decode_budget(size, tmp_path: Path) -> None:
    measured = _peak_of_preprocessing(_flat_png(size), tmp_path)
    assert measured["shape"] == [3, 224, 224]
    assert measured["peak"] <= measured["estimate"] + RESIZE_SLACK, measured


def test_an_elongated_image_is_preprocessed_like_the_whole_resize_then_crop() -> None:
    """Resizing only the cropped region gives the pixels of torchvision's resize-then-crop (to one level)."""
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 256, (12, 40_000, 3), dtype=np.uint8))
    prep = Preprocessing(resize=256, crop=224)
    whole = image.resize((int(256 * 40_000 / 12), 256), Image.Resampling.BILINEAR)  # 853,333 x 256
    left = int(round((whole.width - 224) / 2.0))
    expected = preprocess_image(whole.crop((left, 16, left + 224, 240)), Preprocessing(resize=224, crop=224))
    assert np.abs(preprocess_image(image, prep) - expected).max() <= 1.0 / 255 / min(prep.std) + 1e-6


def _tiff(entries: list[tuple[int, int, int, bytes]]) -> bytes:
    """A little-endian TIFF header and one IFD: (tag, type, count, value of at most 4 bytes) each."""
    ifd = b"".join(struct.pack("<HHI", tag, kind, count) + value.ljust(4, b"\0") for tag, kind, count, value in entries)
    return b"II*\0" + struct.pack("<IH", 8, len(entries)) + ifd + struct.pack("<I", 0)


def _jpeg_with_exif(tiff: bytes) -> bytes:
    """A 40 x 20 JPEG, left half red and right half blue, carrying ``tiff`` as its EXIF block."""
    pixels = np.zeros((20, 40, 3), np.uint8)
    pixels[:, :20] = (255, 0, 0)
    pixels[:, 20:] = (0, 0, 255)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95, exif=b"Exif\0\0" + tiff)
    return buffer.getvalue()


ORIENTATION_6 = (0x0112, 3, 1, struct.pack("<H", 6))
WHITE_POINT_AS_ASCII = (0x013E, 2, 4, b"abc\0")  # a RATIONAL tag stored as text: exif_transpose's TypeError


def _fuzzed_exif_jpegs(count: int) -> list[bytes]:
    """JPEGs whose EXIF (orientation 6 and two rational tags) has a few random bytes changed."""
    base = _tiff([ORIENTATION_6, (0x011A, 5, 1, struct.pack("<I", 8)), (0x013E, 5, 2, struct.pack("<I", 8))])
    rng = random.Random(0)
    made = []
    for _ in range(count):
        tiff = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            tiff[rng.randrange(8, len(tiff))] = rng.randrange(256)
        made.append(_jpeg_with_exif(bytes(tiff)))
    return made


def test_malformed_exif_is_ignored_not_an_error() -> None:
    image = open_rgb_bytes(_jpeg_with_exif(_tiff([ORIENTATION_6, WHITE_POINT_AS_ASCII])))
    assert image.size == (20, 40)  # the orientation could be read, so it was applied
    assert "exif" not in image.info  # and the EXIF that still says "rotate" is dropped
    for data in _fuzzed_exif_jpegs(400):
        assert open_rgb_bytes(data).size in {(40, 20), (20, 40)}


def test_hostile_images_are_answered_not_500(fresh_index: Path) -> None:
    uploads = [_flat_png(size) for size in ELONGATED] + [_jpeg_with_exif(_tiff([ORIENTATION_6, WHITE_POINT_AS_ASCII]))]
    uploads += _fuzzed_exif_jpegs(5)
    with serving_client(fresh_index) as client:
        for n, data in enumerate(uploads):
            files = {"image": (f"hostile-{n}", data, "image/png")}
            assert client.post("/search", files=files).status_code == 200
            assert client.post("/embed", files=files).status_code == 200
        added = client.post(
            "/items",
            files=[("images", (f"hostile-{n}", data, "image/png")) for n, data in enumerate(uploads[-3:])],
            data={"labels": "hostile"},
            headers={"X-API-Key": API_KEY},
        )
        assert added.status_code == 201, added.text


def test_a_tall_one_pixel_png_is_refused_from_its_header(fresh_index: Path, tmp_path: Path) -> None:
    """1 x 40,000,000 RGB (a few hundred KB) used to be decoded with 915 MB of peak (issue 44)."""
    tall_png(tmp_path / "tall.png", "RGB", (1, 40_000_000))
    with serving_client(fresh_index) as client:
        files = {"image": ("tall.png", (tmp_path / "tall.png").read_bytes(), "image/png")}
        answer = client.post("/search", files=files)
    assert answer.status_code == 400
    assert "would need about" in answer.json()["detail"] and "limit of 400 MB" in answer.json()["detail"]
