"""Small images written by Pillow (not by dew) and the pixels Pillow decodes from them, so dew's reader
(src/dew/data/images/image_file.cpp, stb_image) is checked against a second implementation.

Writes under tests/fixtures/images/:
  palette.png   7x5, palette (mode P) PNG: decoded through the palette to RGB
  rgba.png      6x4 RGBA PNG
  gray16.png    5x3 16-bit gray PNG (mode I;16): 8-bit readers keep the high byte (value >> 8)
  gray.jpg      8x8 gray baseline JPEG, quality 95
  expected.json {name: {"shape": [C, H, W], "pixels": flat uint8 list in C, H, W order}} from Pillow
                (.convert("RGB") for the palette, the high byte for gray16, Pillow's libjpeg decode for gray.jpg)

    ~/.cache/dew/venv-bench/bin/pip install -r tools/reference/requirements.txt   # the pinned versions, once
    ~/.cache/dew/venv-bench/bin/python tools/reference/make_image_fixtures.py
Deterministic (fixed numpy seed); nothing is downloaded.
"""
import json
import pathlib

import numpy as np
from PIL import Image

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "images"


def planar(array):
    """[H, W] or [H, W, C] -> ([C, H, W], flat list)"""
    if array.ndim == 2:
        array = array[:, :, None]
    chw = np.ascontiguousarray(array.transpose(2, 0, 1)).astype(np.uint8)
    return {"shape": list(chw.shape), "pixels": chw.reshape(-1).tolist()}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261203)
    expected = {}

    palette = Image.fromarray(rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)).quantize(colors=6)
    palette.save(OUT / "palette.png")
    expected["palette.png"] = planar(np.asarray(Image.open(OUT / "palette.png").convert("RGB")))

    rgba = rng.integers(0, 256, (4, 6, 4), dtype=np.uint8)
    Image.fromarray(rgba).save(OUT / "rgba.png")
    expected["rgba.png"] = planar(np.asarray(Image.open(OUT / "rgba.png")))

    wide = rng.integers(0, 65536, (3, 5), dtype=np.uint16)
    Image.fromarray(wide).save(OUT / "gray16.png")
    reread = np.asarray(Image.open(OUT / "gray16.png")).astype(np.uint16)
    assert (reread == wide).all()
    expected["gray16.png"] = planar((wide >> 8).astype(np.uint8))

    ramp = (np.add.outer(np.arange(8), np.arange(8)) * 16).clip(0, 255).astype(np.uint8)
    Image.fromarray(ramp).save(OUT / "gray.jpg", quality=95)
    expected["gray.jpg"] = planar(np.asarray(Image.open(OUT / "gray.jpg")))

    (OUT / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
