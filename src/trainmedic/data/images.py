"""Image datasets: a class-per-folder tree or a CSV of paths + labels, read into a table.

Each image is decoded once (Pillow, in a few threads: decoding releases the GIL)
into one row: its path, label, size, colour mode, a digest of its pixels (exact
duplicates) and a 64-bit dHash (near-duplicates: resized, recompressed or
slightly edited copies differ by a few bits). A file that does not decode is a
usage error naming the file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.data._columns import require_column
from trainmedic.data.readers import read_table
from trainmedic.errors import UsageError

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm", ".pgm"}
PATH_COLUMN = "path"
LABEL_COLUMN = "label"
_THREADS = 4
_HASH_SIZE = 8


@dataclass(frozen=True, slots=True)
class ImageInfo:
    """What one decoded image is: size, mode, a pixel digest and a perceptual hash for near duplicates."""

    width: int
    height: int
    mode: str
    channels: int
    pixels: str  # hex digest of the decoded pixels
    dhash: int
    mean: tuple[float, ...]
    std: tuple[float, ...]


def read_images(
    source: str | Path, *, label: str | None = None, path_column: str = PATH_COLUMN
) -> pd.DataFrame:
    """A class-per-folder tree, or a table of paths (relative to the table's folder)."""
    source = Path(source)
    if not source.exists():
        raise UsageError(f"{source}: no such file or directory")
    if source.is_dir():
        listing = list_image_folder(source)
    else:
        table = read_table(source)
        require_column(table, path_column, option="--path-column", split=str(source))
        if label is not None:
            require_column(table, label, option="--label", split=str(source))
        paths = [
            p if Path(p).is_absolute() else str(source.parent / p) for p in table[path_column].astype(str)
        ]
        listing = pd.DataFrame({PATH_COLUMN: paths, LABEL_COLUMN: table[label].to_numpy() if label else None})
    if listing.empty:
        raise UsageError(f"{source}: holds no images; expected files ending in {sorted(IMAGE_SUFFIXES)}")
    infos = describe_images(listing[PATH_COLUMN].tolist())
    return pd.concat([listing.reset_index(drop=True), info_frame(infos)], axis=1)


def list_image_folder(root: Path) -> pd.DataFrame:
    """root/<class>/<image>: the folder name is the label; images directly in root have none."""
    rows = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES:
            parent = path.parent
            rows.append((str(path), parent.name if parent != root else None))
    return pd.DataFrame(rows, columns=[PATH_COLUMN, LABEL_COLUMN])


def describe_images(paths: Sequence[str]) -> list[ImageInfo]:
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        return list(pool.map(describe_image, paths))


def describe_image(path: str) -> ImageInfo:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image.load()
            return image_info(image)
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such image file") from exc
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise UsageError(f"{path}: cannot decode the image ({exc})") from exc


def image_info(image: object) -> ImageInfo:
    """Size, mode, pixel digest, dHash and per-channel mean/std of a decoded PIL image."""
    from PIL import Image

    assert isinstance(image, Image.Image)
    array = np.asarray(image)
    pixels = hashlib.blake2b(array.tobytes(), digest_size=8, person=image.mode.encode()[:16]).hexdigest()
    channels = 1 if array.ndim == 2 else int(array.shape[2])
    flat = array.reshape(-1, channels).astype(np.float64)
    return ImageInfo(
        width=image.width,
        height=image.height,
        mode=image.mode,
        channels=channels,
        pixels=pixels,
        dhash=dhash(image),
        mean=tuple(float(v) for v in flat.mean(axis=0)),
        std=tuple(float(v) for v in flat.std(axis=0)),
    )


def dhash(image: object) -> int:
    """Difference hash: 8 rows x 8 comparisons of neighbouring pixels of a 9x8 grey thumbnail."""
    from PIL import Image

    assert isinstance(image, Image.Image)
    small = image.convert("L").resize((_HASH_SIZE + 1, _HASH_SIZE), Image.Resampling.LANCZOS)
    grey = np.asarray(small, dtype=np.int16)
    bits = (grey[:, 1:] > grey[:, :-1]).flatten()
    return int.from_bytes(np.packbits(bits).tobytes(), "big")


def info_frame(infos: Sequence[ImageInfo]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "width": [i.width for i in infos],
            "height": [i.height for i in infos],
            "mode": [i.mode for i in infos],
            "channels": [i.channels for i in infos],
            "pixels": [i.pixels for i in infos],
            "dhash": np.array([i.dhash for i in infos], dtype=np.uint64),
            "mean": [i.mean for i in infos],
            "std": [i.std for i in infos],
        }
    )


def hamming_matches(
    later: npt.NDArray[np.uint64], earlier: npt.NDArray[np.uint64], max_distance: int
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
    """For each later hash: is some earlier hash within `max_distance` bits, and which (nearest)."""
    found = np.zeros(len(later), dtype=bool)
    nearest = np.full(len(later), -1, dtype=np.intp)
    if len(earlier) == 0:
        return found, nearest
    block = max(1, 4_000_000 // len(earlier))
    for start in range(0, len(later), block):
        xor = later[start : start + block, None] ^ earlier[None, :]
        distance = popcount(xor)
        best = np.argmin(distance, axis=1)
        best_distance = distance[np.arange(len(best)), best]
        found[start : start + block] = best_distance <= max_distance
        nearest[start : start + block] = best
    return found, nearest


def popcount(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    counter = getattr(np, "bitwise_count", None)
    if counter is not None:  # numpy >= 2.0
        return np.asarray(counter(values), dtype=np.uint8)
    as_bytes = values.view(np.uint8).reshape(*values.shape, 8)
    return np.asarray(_BYTE_BITS[as_bytes].sum(axis=-1), dtype=np.uint8)


_BYTE_BITS = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
