"""The input contract: captured from training data, saved, loaded, and checked at inference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trainmedic import contract
from trainmedic.errors import UsageError
from trainmedic.findings import Severity

from .images import write_folder
from .synth import clean_table


def messages(findings: list[object]) -> list[str]:
    return [f.message for f in findings]  # type: ignore[attr-defined]


def test_table_contract_round_trips_and_accepts_the_same_data(tmp_path: Path) -> None:
    train = clean_table(500, 0)
    saved = contract.capture(train, label="y").save(tmp_path / "model" / "contract.json")
    loaded = contract.load(saved)
    assert [f["name"] for f in loaded.features] == [c for c in train.columns if c != "y"]
    assert contract.check(loaded, clean_table(200, 1).drop(columns="y")) == []
    assert list(tmp_path.joinpath("model").iterdir()) == [saved]  # no temp file left behind


def test_table_contract_reports_order_dtype_range_and_categories() -> None:
    trained = contract.capture(clean_table(500, 0), label="y")
    batch = clean_table(200, 1).drop(columns="y")
    batch = batch[["x1", "x0", *[c for c in batch.columns if c not in ("x0", "x1")]]]
    batch["count"] = batch["count"].astype(str)
    batch["x2"] = batch["x2"] * 1000  # served unscaled
    batch.loc[batch.index[:20], "city"] = "tokyo"
    found = contract.check(trained, batch.drop(columns="x5"))
    text = messages(found)
    assert "1 trained feature(s) are missing: ['x5']" in text
    assert "Features arrive in another order than in training" in text
    assert any(m.startswith("Feature 'count' is text") for m in text)
    x2 = next(f for f in found if f.evidence.get("feature") == "x2")
    assert x2.severity is Severity.ERROR
    city = next(f for f in found if f.evidence.get("feature") == "city")
    assert (city.severity, city.evidence["fraction"]) == (Severity.WARNING, 0.1)
    assert {f.code for f in found} == {"DAT013"}


def test_image_contract_size_channels_layout_and_scale() -> None:
    rng = np.random.default_rng(0)
    train = rng.integers(0, 256, size=(6, 40, 40, 3), dtype=np.uint8)
    trained = contract.capture(train)
    assert contract.check(trained, rng.integers(0, 256, size=(2, 40, 40, 3), dtype=np.uint8)) == []
    small = rng.integers(0, 256, size=(2, 22, 22, 3), dtype=np.uint8)
    assert messages(contract.check(trained, small)) == ["Inputs are 22x22, the model was trained at 40x40"]
    scaled = contract.check(trained, train / 255.0)
    assert len(scaled) == 1
    assert scaled[0].message.startswith("Input values are on another scale than in training")
    assert "laid out NCHW" in messages(contract.check(trained, train.transpose(0, 3, 1, 2)))[0]
    with pytest.raises(contract.ContractViolation, match="22x22"):
        contract.check(trained, small, raise_on_error=True)


def test_image_folder_contract_with_normalisation(tmp_path: Path) -> None:
    write_folder(tmp_path / "train", {"a": [1, 2, 3], "b": [4, 5]}, size=40)
    norm = {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225], "scale": 255}
    trained = contract.capture(tmp_path / "train", normalization=norm)
    assert (trained.image["width"], trained.image["height"], trained.image["mode"]) == (40, 40, "RGB")
    pixels = np.stack([np.asarray(Image_open(p)) for p in sorted((tmp_path / "train").rglob("*.png"))])
    normalised = (pixels / 255.0 - np.array(norm["mean"])) / np.array(norm["std"])
    assert contract.check(trained, normalised) == []
    raw = contract.check(trained, pixels)
    assert raw[0].message.startswith("Input values are on another scale")
    write_folder(tmp_path / "serve", {"a": [7]}, size=24)
    assert messages(contract.check(trained, tmp_path / "serve")) == [
        "1 of 1 images are 24x24, trained at 40x40"
    ]


def Image_open(path: Path) -> object:
    from PIL import Image

    with Image.open(path) as image:
        return image.convert("RGB")


def test_bad_contract_files(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope.json: no such contract file"):
        contract.load(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(UsageError, match=r"bad.json: not a JSON contract"):
        contract.load(tmp_path / "bad.json")
    (tmp_path / "kind.json").write_text(json.dumps({"kind": "audio"}))
    with pytest.raises(UsageError, match=r"kind.json: contract: expected 'kind'"):
        contract.load(tmp_path / "kind.json")
    trained = contract.capture(pd.DataFrame({"a": [1.0]}))
    with pytest.raises(UsageError, match="a table contract checks a pandas DataFrame"):
        contract.check(trained, np.zeros((2, 2)))
