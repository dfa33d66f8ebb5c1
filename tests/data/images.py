"""Small synthetic images written with Pillow: smooth random fields, so a resized copy keeps
its perceptual hash while independent images differ in about half of its bits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def smooth_image(seed: int, size: int = 32, mode: str = "RGB") -> Image.Image:
    rng = np.random.default_rng(seed)
    base = (rng.random((4, 4, 3)) * 255).astype(np.uint8)
    image = Image.fromarray(base, "RGB").resize((size, size), Image.Resampling.BICUBIC)
    return image.convert(mode)


def write_folder(root: Path, seeds_by_class: dict[str, list[int]], size: int = 32, mode: str = "RGB") -> None:
    for label, seeds in seeds_by_class.items():
        (root / label).mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            smooth_image(seed, size, mode).save(root / label / f"{seed}.png")
