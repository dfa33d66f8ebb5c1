"""Image datasets: exact and perceptual overlap, duplicates, conflicting labels, modes, bad files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from trainmedic.data import check_images, read_images
from trainmedic.data.images import dhash, hamming_matches
from trainmedic.errors import UsageError

from .images import smooth_image, write_folder


def codes(report: object) -> dict[str, list[object]]:
    out: dict[str, list[object]] = {}
    for f in report.findings:  # type: ignore[attr-defined]
        out.setdefault(f.code, []).append(f)
    return out


def test_clean_image_splits_give_nothing(tmp_path: Path) -> None:
    write_folder(tmp_path / "train", {"cat": list(range(0, 30)), "dog": list(range(30, 60))})
    write_folder(tmp_path / "val", {"cat": list(range(100, 110)), "dog": list(range(110, 120))})
    report = check_images(tmp_path / "train", tmp_path / "val")
    assert report.findings == []
    assert report.summary.rows == {"train": 60, "val": 20}
    assert report.summary.label_distribution["fractions"] == {"cat": 0.5, "dog": 0.5}


def test_exact_and_perceptual_overlap_are_counted_apart(tmp_path: Path) -> None:
    write_folder(tmp_path / "train", {"cat": list(range(0, 30)), "dog": list(range(30, 60))})
    write_folder(tmp_path / "val", {"cat": [1, 2, 3, 100, 101], "dog": list(range(110, 120))})
    for seed in (40, 41):  # resized copies of training images: same picture, other pixels
        smooth_image(seed, size=48).save(tmp_path / "val" / "dog" / f"resized{seed}.png")
    found = codes(check_images(tmp_path / "train", tmp_path / "val"))
    assert found["DAT001"][0].evidence["rows"] == 3
    near = found["DAT002"][0]
    assert near.evidence["rows"] == 2
    assert {Path(p["train"]).name for p in near.evidence["example_pairs"]} == {"40.png", "41.png"}


def test_duplicates_conflicts_and_modes(tmp_path: Path) -> None:
    write_folder(tmp_path / "train", {"cat": [1, 2, 3, 4, 5, 6], "dog": [3, 7, 8, 9, 10, 11]})
    smooth_image(5).save(tmp_path / "train" / "cat" / "copy5.png")
    write_folder(tmp_path / "val", {"cat": [20, 21], "dog": [22]}, mode="L")
    found = codes(check_images(tmp_path / "train", tmp_path / "val"))
    assert found["DAT006"][0].evidence["rows"] == 2  # image 3 is both cat and dog
    assert found["DAT007"][0].evidence["duplicate_rows"] == 1
    assert found["DAT010"][0].evidence["new_modes"] == {"L": 3}


def test_csv_of_paths_and_undecodable_image(tmp_path: Path) -> None:
    write_folder(tmp_path / "imgs", {"x": [1, 2]})
    (tmp_path / "train.csv").write_text("file,target\nimgs/x/1.png,a\nimgs/x/2.png,b\n")
    frame = read_images(tmp_path / "train.csv", label="target", path_column="file")
    assert frame["label"].tolist() == ["a", "b"]
    assert frame["width"].tolist() == [32, 32]
    (tmp_path / "imgs" / "x" / "broken.png").write_bytes(b"not a png")
    with pytest.raises(UsageError, match=r"broken.png: cannot decode the image"):
        read_images(tmp_path / "imgs")
    with pytest.raises(
        UsageError, match=r"--path-column 'path' is not a column .*; columns: \['file', 'target'\]"
    ):
        read_images(tmp_path / "train.csv", label="target")


def test_dhash_is_stable_under_resize_and_hamming_search_finds_the_nearest() -> None:
    image = smooth_image(7, size=64)
    resized = image.resize((37, 37), Image.Resampling.BILINEAR)
    distance = bin(dhash(image) ^ dhash(resized)).count("1")
    assert distance <= 4
    earlier = np.array([dhash(smooth_image(s)) for s in range(50)], dtype=np.uint64)
    later = np.array([dhash(smooth_image(17, size=40)), dhash(smooth_image(999))], dtype=np.uint64)
    found, nearest = hamming_matches(later, earlier, 4)
    assert found.tolist() == [True, False]
    assert nearest[0] == 17
