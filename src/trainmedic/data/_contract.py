"""The train/inference input contract: capture what the model was trained on, check what it gets.

`capture(train_df)` or `capture(image_folder_or_array, normalization=...)` records
the input the model learned from: feature names, order, dtype families, numeric
ranges and categories for tables; size, channels, colour mode, layout and the
value statistics (after normalisation) for images. `save` writes it as JSON next
to the checkpoint; at inference `check(contract, batch)` reports DAT013
preprocessing-mismatch (trained at 400x400, served at 224x224; features
reordered; raw 0-255 pixels into a model trained on normalised ones), or raises
`ContractViolation` with `raise_on_error=True`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from trainmedic.atomicfile import write_text_atomic
from trainmedic.errors import TrainmedicError, UsageError
from trainmedic.findings import Finding, Severity
from trainmedic.rules.dat import dat013_preprocessing_mismatch as dat013

__all__ = ["Contract", "ContractViolation", "capture", "check", "load"]

VERSION = 1
CATEGORY_MAX_LEVELS = 1000
_CHANNEL_COUNTS = (1, 3, 4)


class ContractViolation(TrainmedicError):
    """Raised by `check(..., raise_on_error=True)`; `findings` holds the DAT013 findings."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__("; ".join(f.message for f in findings))
        self.findings = list(findings)


@dataclass(frozen=True, slots=True)
class Contract:
    """What the model's input looked like in training. `kind` is 'table' or 'image'."""

    kind: str
    features: list[dict[str, Any]] = field(default_factory=list)
    image: dict[str, Any] = field(default_factory=dict)
    version: int = VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | Path) -> Path:
        """Write atomically (temp file + rename): a crash never leaves half a contract."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, json.dumps(self.to_dict(), indent=2, allow_nan=False))
        return target

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Contract:
        if data.get("kind") not in ("table", "image"):
            raise UsageError("contract: expected 'kind' to be 'table' or 'image'")
        return cls(
            kind=str(data["kind"]),
            features=list(data.get("features", [])),
            image=dict(data.get("image", {})),
            version=int(data.get("version", VERSION)),
        )


def load(path: str | Path) -> Contract:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such contract file") from exc
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not a JSON contract ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a JSON contract (expected an object)")
    try:
        return Contract.from_dict(data)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc.message}") from exc


# ---------------------------------------------------------------- capture


def capture(
    data: Any,
    *,
    label: str | None = None,
    ignore: Sequence[str] = (),
    normalization: Mapping[str, Any] | None = None,
    layout: str | None = None,
) -> Contract:
    """A contract from training data: a DataFrame, a table file, an image folder, or an image array.

    For images, `normalization={"mean": [...], "std": [...], "scale": 255}` says how the
    pixels were normalised before the model (x / scale - mean) / std; the contract then
    expects normalised inputs. `layout` ('NHWC'/'NCHW') overrides the guess for arrays.
    """
    if isinstance(data, pd.DataFrame):
        return _capture_table(data, label=label, ignore=ignore)
    if isinstance(data, (str, Path)):
        path = Path(data)
        if path.is_dir() or _is_image_file(path):
            return _capture_image_files(path, normalization)
        from trainmedic.data.readers import read_table

        return _capture_table(read_table(path), label=label, ignore=ignore)
    array = _as_image_array(data)
    stats = _array_stats(array, layout)
    return Contract(kind="image", image={**stats, "normalization": dict(normalization or {})})


def _capture_table(frame: pd.DataFrame, *, label: str | None, ignore: Sequence[str]) -> Contract:
    skip = {label, *ignore}
    features = []
    for column in frame.columns:
        if column in skip:
            continue
        series = frame[column]
        entry: dict[str, Any] = {"name": str(column), "kind": _kind(series), "dtype": str(series.dtype)}
        if entry["kind"] == "number":
            values = series.to_numpy(dtype=np.float64, na_value=np.nan)
            finite = values[np.isfinite(values)]
            entry["min"] = float(finite.min()) if finite.size else None
            entry["max"] = float(finite.max()) if finite.size else None
        elif entry["kind"] in ("text", "category"):
            levels = series.dropna().unique()
            if len(levels) <= CATEGORY_MAX_LEVELS:
                entry["categories"] = sorted(str(v) for v in levels)
        entry["nullable"] = bool(series.isna().any())
        features.append(entry)
    return Contract(kind="table", features=features)


def _capture_image_files(path: Path, normalization: Mapping[str, Any] | None) -> Contract:
    from trainmedic.data.images import read_images

    images = read_images(path)
    width, height = _most_common(zip(images["width"], images["height"], strict=True))
    mode = _most_common(images["mode"])
    channels = int(_most_common(images["channels"]))
    weights = (images["width"] * images["height"]).to_numpy(dtype=np.float64)
    mean = np.average(np.vstack(images["mean"].to_numpy()), axis=0, weights=weights)
    std = np.sqrt(np.average(np.vstack(images["std"].to_numpy()) ** 2, axis=0, weights=weights))
    raw = {"mean": mean.tolist(), "std": std.tolist(), "min": 0.0, "max": 255.0}
    values = _normalised(raw, normalization) if normalization else raw
    return Contract(
        kind="image",
        image={
            "height": int(height),
            "width": int(width),
            "channels": channels,
            "mode": str(mode),
            "layout": "NHWC",
            "dtype": "uint8" if not normalization else "float32",
            "values": values,
            "normalization": dict(normalization or {}),
        },
    )


def _normalised(raw: dict[str, Any], normalization: Mapping[str, Any]) -> dict[str, Any]:
    scale = float(normalization.get("scale", 255.0))
    mean = np.asarray(normalization.get("mean", 0.0), dtype=np.float64)
    std = np.asarray(normalization.get("std", 1.0), dtype=np.float64)
    raw_mean = np.asarray(raw["mean"], dtype=np.float64)
    raw_std = np.asarray(raw["std"], dtype=np.float64)
    return {
        "mean": ((raw_mean / scale - mean) / std).tolist(),
        "std": (raw_std / scale / std).tolist(),
        "min": float(np.min((0.0 - mean) / std)),
        "max": float(np.max((255.0 / scale - mean) / std)),
    }


def _array_stats(array: npt.NDArray[Any], layout: str | None) -> dict[str, Any]:
    nhwc, chosen = _to_nhwc(array, layout)
    flat = nhwc.reshape(-1, nhwc.shape[-1]).astype(np.float64)
    return {
        "height": int(nhwc.shape[1]),
        "width": int(nhwc.shape[2]),
        "channels": int(nhwc.shape[3]),
        "mode": {1: "L", 3: "RGB", 4: "RGBA"}.get(int(nhwc.shape[3]), "?"),
        "layout": chosen,
        "dtype": str(array.dtype),
        "values": {
            "mean": flat.mean(axis=0).tolist(),
            "std": flat.std(axis=0).tolist(),
            "min": float(flat.min()),
            "max": float(flat.max()),
        },
    }


# ---------------------------------------------------------------- check


def check(contract: Contract, batch: Any, *, raise_on_error: bool = False) -> list[Finding]:
    """DAT013 findings for an inference batch; with `raise_on_error`, raise on any error finding."""
    if contract.kind == "table":
        if isinstance(batch, (str, Path)):
            from trainmedic.data.readers import read_table

            batch = read_table(batch)
        if not isinstance(batch, pd.DataFrame):
            raise UsageError(f"a table contract checks a pandas DataFrame, got {type(batch).__name__}")
        findings = _check_table(contract, batch)
    elif isinstance(batch, (str, Path)):
        findings = _check_image_files(contract, Path(batch))
    else:
        findings = _check_image_array(contract, _as_image_array(batch))
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if raise_on_error and errors:
        raise ContractViolation(errors)
    return findings


def _check_table(contract: Contract, frame: pd.DataFrame) -> list[Finding]:
    expected = [f["name"] for f in contract.features]
    found = dat013.judge(dat013.FeatureNames(expected, [str(c) for c in frame.columns]))
    for spec in contract.features:
        name = spec["name"]
        if name not in frame.columns:
            continue
        found.extend(_check_feature(spec, frame[name]))
    return found


def _check_feature(spec: Mapping[str, Any], series: pd.Series) -> list[Finding]:
    """The first problem of one feature: its dtype family, else its range, else its categories."""
    name = spec["name"]
    kind = _kind(series)
    wrong_kind = dat013.judge(dat013.FeatureKind(name, kind, str(series.dtype), spec["kind"], spec["dtype"]))
    if wrong_kind:
        return wrong_kind
    if kind == "number" and spec.get("min") is not None:
        low, high = float(spec["min"]), float(spec["max"])
        margin = dat013.RANGE_MARGIN * max(high - low, abs(high), 1e-12)
        values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        outside = (values < low - margin) | (values > high + margin)
        # the batch's own range, needed only when a value lies outside (then one is finite)
        received = (float(np.nanmin(values)), float(np.nanmax(values))) if outside.any() else (np.nan, np.nan)
        out_of_range = dat013.judge(dat013.OutOfRange(name, float(outside.mean()), low, high, received))
        if out_of_range:
            return out_of_range
    if "categories" in spec:
        unseen = series.notna() & ~series.astype(str).isin(spec["categories"])
        examples = [str(v) for v in pd.unique(series[unseen])[:5]]
        return dat013.judge(dat013.UnseenCategories(name, float(unseen.mean()), examples))
    return []


def _check_image_array(contract: Contract, array: npt.NDArray[Any]) -> list[Finding]:
    stats = _array_stats(array, None)
    expected = contract.image
    found = dat013.judge(dat013.Layout(expected.get("layout"), stats["layout"], list(array.shape)))
    geometry = dat013.Geometry(stats["height"], stats["width"], stats["channels"], len(array), expected)
    found += dat013.judge(geometry)
    found.extend(_check_values(expected, stats["values"]))
    return found


def _check_image_files(contract: Contract, path: Path) -> list[Finding]:
    from trainmedic.data.images import read_images

    images = read_images(path)
    expected = contract.image
    found = []
    wrong_size = (images["height"] != expected["height"]) | (images["width"] != expected["width"])
    if wrong_size.any():
        sizes = images.loc[wrong_size, ["width", "height"]].value_counts().head(3)
        found += dat013.judge(
            dat013.FileSizes(
                images=int(wrong_size.sum()),
                total=len(images),
                expected=(expected["width"], expected["height"]),
                sizes=[(int(w), int(h)) for (w, h) in sizes.index],
                example_files=images.loc[wrong_size, "path"].head(5).tolist(),
            )
        )
    wrong_mode = images["mode"] != expected["mode"]
    if wrong_mode.any():
        found += dat013.judge(
            dat013.FileModes(
                images=int(wrong_mode.sum()),
                modes=sorted(set(images.loc[wrong_mode, "mode"])),
                expected=expected["mode"],
                example_files=images.loc[wrong_mode, "path"].head(5).tolist(),
            )
        )
    return found


def _check_values(expected: Mapping[str, Any], received: Mapping[str, Any]) -> list[Finding]:
    """Scale or normalisation differs: the batch mean is far from training, in training stds."""
    values = expected.get("values") or {}
    if not values:
        return []
    exp_mean = np.asarray(values["mean"], dtype=np.float64)
    exp_std = np.maximum(np.asarray(values["std"], dtype=np.float64), 1e-12)
    got_mean = np.asarray(received["mean"], dtype=np.float64)
    got_std = np.asarray(received["std"], dtype=np.float64)
    if exp_mean.shape != got_mean.shape:
        return []
    shift = float(np.max(np.abs(got_mean - exp_mean) / exp_std))
    ratio = float(np.max(np.maximum(got_std / exp_std, exp_std / np.maximum(got_std, 1e-12))))
    return dat013.judge(dat013.ValueScale(shift, ratio, values, received, expected.get("normalization", {})))


# ---------------------------------------------------------------- helpers


def _kind(series: pd.Series) -> str:
    from trainmedic.data._parity import kind

    return kind(series)


def _is_image_file(path: Path) -> bool:
    from trainmedic.data.images import IMAGE_SUFFIXES

    return path.suffix.lower() in IMAGE_SUFFIXES


def _as_image_array(batch: Any) -> npt.NDArray[Any]:
    """numpy arrays, CPU tensors (anything with __array__), PIL images or lists of them."""
    if isinstance(batch, (list, tuple)):
        return np.stack([np.asarray(item) for item in batch])
    detach = getattr(batch, "detach", None)
    if callable(detach):  # a torch tensor, without importing torch
        batch = detach().cpu().numpy()
    array = np.asarray(batch)
    if array.dtype == object or array.ndim < 2:
        raise UsageError(f"expected an image or a batch of images as an array, got shape {array.shape}")
    return array


def _to_nhwc(array: npt.NDArray[Any], layout: str | None) -> tuple[npt.NDArray[Any], str]:
    if array.ndim == 2:  # one grey image
        return array[None, :, :, None], "NHWC"
    if array.ndim == 3:
        if layout == "NCHW" or (
            layout is None and array.shape[0] in _CHANNEL_COUNTS and array.shape[2] not in _CHANNEL_COUNTS
        ):
            return array[None].transpose(0, 2, 3, 1), "NCHW"
        if array.shape[2] in _CHANNEL_COUNTS:
            return array[None], "NHWC"
        return array[:, :, :, None], "NHWC"  # a batch of grey images
    if array.ndim == 4:
        if layout == "NCHW" or (
            layout is None and array.shape[1] in _CHANNEL_COUNTS and array.shape[3] not in _CHANNEL_COUNTS
        ):
            return array.transpose(0, 2, 3, 1), "NCHW"
        return array, "NHWC"
    raise UsageError(f"expected an image batch with 2 to 4 dimensions, got shape {array.shape}")


def _most_common(values: Any) -> Any:
    return pd.Series(list(values)).value_counts().index[0]
