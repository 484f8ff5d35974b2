"""The decode budget is an upper bound: for every mode an upload may decode to, the peak RSS that
``open_rgb_bytes`` adds (Pillow's C buffers included, which tracemalloc does not see) stays within the
estimate made from the header, and the estimate is not so loose that it refuses images that would fit.

Each file is decoded in a fresh interpreter, which resets the kernel's peak-RSS mark
(``/proc/self/clear_refs``) just before and reads the new peak (``VmHWM``) just after.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tall_images import tall_png

SIZE = (2000, 1500)
LOOSEST = 1.6  # estimate / measured peak: looser would refuse images that fit the budget
CASES = {
    # name: (mode made, format, save options)
    "png_L": ("L", "PNG", {}),
    "png_1": ("1", "PNG", {}),
    "png_P": ("P", "PNG", {}),
    "png_P_transparency": ("P", "PNG", {"transparency": 0}),
    "png_LA": ("LA", "PNG", {}),
    "png_RGB": ("RGB", "PNG", {}),
    "png_RGBA": ("RGBA", "PNG", {}),
    "png_I16": ("I;16", "PNG", {}),
    "gif_P": ("P", "GIF", {}),
    "bmp_RGB": ("RGB", "BMP", {}),
    "jpeg_L": ("L", "JPEG", {}),
    "jpeg_RGB": ("RGB", "JPEG", {}),
    "jpeg_CMYK": ("CMYK", "JPEG", {}),
    "webp_lossy_RGB": ("RGB", "WEBP", {"quality": 80}),
    "webp_lossless_RGB": ("RGB", "WEBP", {"lossless": True}),
    "webp_lossless_RGBA": ("RGBA", "WEBP", {"lossless": True}),
    "tiff_F": ("F", "TIFF", {}),
    "tiff_I": ("I", "TIFF", {}),
    "tiff_I16": ("I;16", "TIFF", {}),
    "tiff_LA": ("LA", "TIFF", {}),
    "tiff_RGBA": ("RGBA", "TIFF", {}),
    "tiff_CMYK": ("CMYK", "TIFF", {}),
    "tiff_YCbCr": ("YCbCr", "TIFF", {}),
    "tiff_LAB": ("LAB", "TIFF", {}),
}

_MEASURE = r"""
import ctypes, io, json, re, sys
from pathlib import Path
from PIL import Image
from retrieval.indexing.data.image_io import decode_estimate_of, open_rgb_bytes

data = Path(sys.argv[1]).read_bytes()
with Image.open(io.BytesIO(data)) as header:
    estimate, opened = decode_estimate_of(header), header.mode

def status(key):
    return int(re.search(key + r":\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024

ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap pages would otherwise hide new allocations
Path("/proc/self/clear_refs").write_text("5")  # the peak mark (VmHWM) restarts from the current RSS
base = status("VmRSS")
rgb = open_rgb_bytes(data, max_pixels=10**9)
peak = status("VmHWM") - base
print(json.dumps({"estimate": estimate, "peak": peak, "opened": opened, "size": list(rgb.size)}))
"""


def _made(mode: str) -> Image.Image:
    """A ``SIZE`` image of ``mode``: a ramp with a little noise (quick to encode, not a flat colour)."""
    width, height = SIZE
    ramp = np.add.outer(np.arange(height) * 7, np.arange(width) * 3) % 251
    grey = (ramp + np.random.default_rng(0).integers(0, 5, (height, width))).astype(np.uint8)
    if mode in ("I;16", "I", "F"):
        values = {"I;16": grey.astype(np.uint16) * 257, "I": grey.astype(np.int32) * 1000, "F": grey / np.float32(255)}
        return Image.fromarray(values[mode])
    if mode in ("1", "P", "L"):
        return Image.fromarray(grey).convert(mode)
    return Image.merge(mode, [Image.fromarray(grey)] * len(Image.new(mode, (1, 1)).getbands()))


def _clear_refs_works() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _clear_refs_works(), reason="needs /proc/self/clear_refs (Linux) to measure a peak")
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_decode_estimate_bounds_the_measured_peak(case: str, tmp_path: Path) -> None:
    mode, fmt, options = CASES[case]
    encoded = tmp_path / f"{case}.{fmt.lower()}"
    _made(mode).save(encoded, format=fmt, **options)
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(encoded)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["size"] == list(SIZE)
    estimate, peak = found["estimate"], found["peak"]
    shown = f"{case} (opens as {found['opened']}): peak {peak / 2**20:.1f} MB, estimate {estimate / 2**20:.1f} MB"
    assert peak <= estimate, shown
    assert estimate <= LOOSEST * peak, shown


# Tall, narrow images (issue 44): Pillow keeps a row pointer (8 bytes) per row of every image, which a
# 1 x 40,000,000 RGB PNG (a few hundred KB) turns into 320 MB per copy: 915 MB of peak before the estimate
# counted rows, for a budget of 400 MB.
TALL = {"rgb_1_wide": ("RGB", 1), "l_1_wide": ("L", 1), "rgba_1_wide": ("RGBA", 1), "rgb_2_wide": ("RGB", 2)}
BUDGET_MB, SLOTS = 400, 2  # the service's defaults: max_decode_mb, max_concurrent_decodes

_MEASURE_BUDGETED = r"""
import ctypes, json, re, sys, threading
from pathlib import Path
from retrieval.indexing.common.errors import DataError
from retrieval.indexing.data.image_io import open_rgb_bytes

data, budget, slots = Path(sys.argv[1]).read_bytes(), int(sys.argv[2]) << 20, threading.Semaphore(int(sys.argv[3]))

def status(key):
    return int(re.search(key + r":\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024

def decode(answers):
    with slots:  # as the service's decode slots (max_concurrent_decodes)
        try:
            answers.append(open_rgb_bytes(data, max_pixels=10**9, max_decode_bytes=budget).size)
        except DataError as error:
            answers.append(str(error))

def peak_of(decodes):
    answers = []
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")
    base = status("VmRSS")
    threads = [threading.Thread(target=decode, args=(answers,)) for _ in range(decodes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"peak": status("VmHWM") - base, "answers": [str(answer) for answer in answers]}

print(json.dumps({"one": peak_of(1), "four": peak_of(4)}))
"""


def _run(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.skipif(not _clear_refs_works(), reason="needs /proc/self/clear_refs (Linux) to measure a peak")
@pytest.mark.parametrize("case", sorted(TALL))
def test_the_decode_estimate_bounds_the_peak_of_a_tall_image(case: str, tmp_path: Path) -> None:
    mode, width = TALL[case]
    size = (width, 3_000_000 // width)
    tall_png(tmp_path / "tall.png", mode, size)
    found = _run(_MEASURE, str(tmp_path / "tall.png"))
    assert found["size"] == list(size)
    shown = f"{case}: peak {found['peak'] / 2**20:.1f} MB, estimate {found['estimate'] / 2**20:.1f} MB"
    assert found["peak"] <= found["estimate"] <= LOOSEST * found["peak"], shown


@pytest.mark.skipif(not _clear_refs_works(), reason="needs /proc/self/clear_refs (Linux) to measure a peak")
@pytest.mark.parametrize("case", sorted(TALL))
def test_a_40_megapixel_tall_png_stays_within_the_budget_alone_and_four_at_once(case: str, tmp_path: Path) -> None:
    """One decode within ``max_decode_mb``, four (in the service's two slots) within two budgets; the
    image is refused from its header, with the sentence the service answers as a 400."""
    mode, width = TALL[case]
    tall_png(tmp_path / "tall.png", mode, (width, 40_000_000 // width))
    found = _run(_MEASURE_BUDGETED, str(tmp_path / "tall.png"), str(BUDGET_MB), str(SLOTS))
    one, four = found["one"], found["four"]
    assert one["peak"] <= BUDGET_MB << 20, f"one decode: {one['peak'] >> 20} MB"
    assert four["peak"] <= (SLOTS * BUDGET_MB) << 20, f"four at once: {four['peak'] >> 20} MB"
    assert all(f"over the limit of {BUDGET_MB} MB" in answer for answer in one["answers"] + four["answers"])
