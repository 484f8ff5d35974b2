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
