"""The checks that apply to image datasets: exact and perceptual overlap, duplicates,
conflicting labels, imbalance, and colour modes that differ between splits."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TypeAlias

import numpy as np
import pandas as pd

from trainmedic.data import _leakage as leakage
from trainmedic.data import _quality as quality
from trainmedic.data._columns import Roles
from trainmedic.data._context import Dataset, Split
from trainmedic.data.images import LABEL_COLUMN, PATH_COLUMN, hamming_matches, read_images
from trainmedic.data.runner import DataReport
from trainmedic.data.summary import summarize
from trainmedic.findings import Finding, sort_findings
from trainmedic.rules.dat import dat002_near_duplicate_overlap as dat002
from trainmedic.rules.dat import dat010_schema_mismatch as dat010
from trainmedic.rules.dat.dat002_near_duplicate_overlap import NEAR_DUPLICATE_HAMMING

ImageSource: TypeAlias = "pd.DataFrame | str | Path"


def check_images_report(
    train: ImageSource,
    val: ImageSource | None = None,
    test: ImageSource | None = None,
    *,
    label: str | None = None,
    path_column: str = PATH_COLUMN,
    max_hamming: int = NEAR_DUPLICATE_HAMMING,
) -> DataReport:
    """Folders, CSVs of paths, or frames already made by `read_images`."""
    frames = [
        (
            name,
            src if isinstance(src, pd.DataFrame) else read_images(src, label=label, path_column=path_column),
        )
        for name, src in (("train", train), ("val", val), ("test", test))
        if src is not None
    ]
    labelled = all(f[LABEL_COLUMN].notna().any() for _, f in frames)
    roles = Roles(label=LABEL_COLUMN if labelled else None, id=PATH_COLUMN)
    data = Dataset(splits=[Split(name, frame, roles, ["pixels"]) for name, frame in frames], roles=roles)
    sizes = Counter(zip(data.train.frame["width"], data.train.frame["height"], strict=True))
    data.notes.append(
        "train image sizes: "
        + ", ".join(f"{w}x{h} ({n})" for (w, h), n in sizes.most_common(3))
        + (f" and {len(sizes) - 3} more" if len(sizes) > 3 else "")
    )
    findings: list[Finding] = []
    findings += leakage.split_overlap(data)
    findings += perceptual_overlap(data, max_hamming)
    findings += quality.conflicting_labels(data)
    findings += quality.duplicate_rows(data)
    findings += quality.missing_values(data)
    findings += quality.class_imbalance(data)
    findings += mode_mismatch(data)
    summary = replace(summarize(data), columns=1, features=1, dtypes={"image": 1})
    return DataReport(summary, sort_findings(findings))


def perceptual_overlap(data: Dataset, max_hamming: int) -> list[Finding]:
    """DAT002 for images: dHash within `max_hamming` bits, pixels not identical."""
    found = []
    for earlier, later in leakage.split_pairs(data):
        exact = leakage.in_other(later.feature_hash, earlier.feature_hash)
        near, nearest = hamming_matches(
            later.frame["dhash"].to_numpy(dtype=np.uint64),
            earlier.frame["dhash"].to_numpy(dtype=np.uint64),
            max_hamming,
        )
        near &= ~exact
        count = int(near.sum())
        if count == 0:
            continue
        positions = np.flatnonzero(near)[:10]
        pairs = [
            {
                later.name: str(later.frame[PATH_COLUMN].iloc[p]),
                earlier.name: str(earlier.frame[PATH_COLUMN].iloc[nearest[p]]),
            }
            for p in positions
        ]
        near_duplicates = dat002.ImageNearDuplicates(
            (earlier.name, later.name), count, len(later), max_hamming, pairs
        )
        found.extend(dat002.judge(near_duplicates))
    return found


def mode_mismatch(data: Dataset) -> list[Finding]:
    """DAT010 for images: a split holds colour modes (RGB, L, RGBA...) that train does not."""
    train_modes = set(data.train.frame["mode"])
    found = []
    for other in data.evaluation():
        counts = other.frame["mode"].value_counts()
        new = {str(m): int(n) for m, n in counts.items() if m not in train_modes}
        found.extend(dat010.judge(dat010.ImageModes(other.name, new, sorted(train_modes))))
    return found
