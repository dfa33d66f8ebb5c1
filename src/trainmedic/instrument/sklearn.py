"""Under `trainmedic run`: audit scikit-learn's splits where the user's code makes them.

Installed when `sklearn.model_selection` is imported. It wraps, in that module's
namespace (what `from sklearn.model_selection import ...` binds):
`cross_val_score`, `cross_validate`, `train_test_split`, and the `fit` of every
hyper-parameter search (`BaseSearchCV`: GridSearchCV, RandomizedSearchCV, ...).
Each wrapper runs `trainmedic.sklearn.audit` on the arguments, ships its findings
as events, and then calls the original unchanged. An audit that fails is one line
on stderr; the user's call always runs.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from trainmedic.events import FindingRaised
from trainmedic.findings import Finding
from trainmedic.instrument import channel

_ATTR = "__trainmedic_wrapped__"
_seen: set[tuple[str, str]] = set()


def install(model_selection: ModuleType) -> None:
    """Wrap the split and search entry points of `sklearn.model_selection` (idempotent)."""
    for name, wrapper in (
        ("cross_val_score", _wrap_cross_validation),
        ("cross_validate", _wrap_cross_validation),
        ("train_test_split", _wrap_train_test_split),
    ):
        original = getattr(model_selection, name, None)
        if original is not None and not getattr(original, _ATTR, False):
            setattr(model_selection, name, wrapper(original))
    from sklearn.model_selection._search import BaseSearchCV

    if not getattr(BaseSearchCV.fit, _ATTR, False):
        BaseSearchCV.fit = _wrap_search_fit(BaseSearchCV.fit)


def report(findings: list[Finding]) -> None:
    """Ship findings once per process (a search in a loop must not repeat them)."""
    for finding in findings:
        key = (finding.code, finding.message)
        if key in _seen:
            continue
        _seen.add(key)
        channel.emit(FindingRaised(finding=finding.to_dict()))


def _safely(what: str, audit: Callable[[], list[Finding]]) -> None:
    try:
        report(audit())
    except Exception as exc:  # the audit must never break the user's training
        sys.stderr.write(f"trainmedic: sklearn audit of {what} skipped: {exc!r}\n")


def _reusable_cv(cv: Any) -> Any:
    """A one-shot iterator of splits would be consumed by the audit: make it a list for both."""
    if hasattr(cv, "__next__"):
        return list(cv)
    return cv


def _wrap_cross_validation(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(estimator: Any, X: Any, y: Any = None, *args: Any, **kwargs: Any) -> Any:
        from trainmedic.sklearn import audit

        if "cv" in kwargs:
            kwargs["cv"] = _reusable_cv(kwargs["cv"])
        cv = kwargs.get("cv", 5)
        cv = 5 if cv is None else cv
        groups = kwargs.get("groups") or (kwargs.get("params") or {}).get("groups")
        _safely(
            original.__name__,
            lambda: audit(estimator, X, y, cv=cv, groups=groups, scoring=kwargs.get("scoring")),
        )
        return original(estimator, X, y, *args, **kwargs)

    setattr(wrapper, _ATTR, True)
    return wrapper


def _wrap_search_fit(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def fit(self: Any, X: Any, y: Any = None, **params: Any) -> Any:
        from trainmedic.sklearn import audit

        self.cv = _reusable_cv(self.cv)
        cv = 5 if self.cv is None else self.cv
        _safely(
            type(self).__name__,
            lambda: audit(self.estimator, X, y, cv=cv, groups=params.get("groups"), scoring=self.scoring),
        )
        return original(self, X, y, **params)

    setattr(fit, _ATTR, True)
    return fit


def _wrap_train_test_split(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*arrays: Any, **options: Any) -> Any:
        from trainmedic.sklearn import audit

        parts = original(*arrays, **options)
        if len(arrays) >= 1 and len(parts) >= 2:
            y_train, y_test = (parts[2], parts[3]) if len(parts) >= 4 else (None, None)
            _safely(
                "train_test_split",
                lambda: audit(None, parts[0], y_train, X_val=parts[1], y_val=y_test),
            )
        return parts

    setattr(wrapper, _ATTR, True)
    return wrapper
