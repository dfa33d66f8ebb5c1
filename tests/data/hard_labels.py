"""Tables whose labels are hard, not wrong (synthetic, generated in the shape of public tables:
nothing can be downloaded at run time). Every label is drawn from a known conditional
distribution, so no label is an error; the overlap between classes is what makes them hard.

- `glass_like`: 214 rows, nine oxide-like measurements, six classes in the glass
  identification table's proportions; the three window-glass classes overlap heavily.
- `survival_like`: 418 rows, a three-class status (censored, transplant, dead) drawn from a
  hazard of a dozen clinical-style columns, a few of them categorical with gaps.
- `churn_like`: 5,000 rows (3,750 after a 25 % split), ~14 % churn: a few risk regions
  (heavy daytime use without a plan, many service calls, an international plan) churn
  often, everyone else now and then; most columns carry nothing.
- `votes_like`: 3,000 survey respondents (a national election study's shape): party
  identification, ideology, four issue attitudes, age, education, and the vote they report,
  drawn from a logistic model of their leaning: a strong model (accuracy ~0.88) that
  disagrees with a few percent of an outcome that is the truth by definition.

Their labels are healthy: `label-noise` (DAT012) must stay quiet. Other findings are true
ones: the glass shape's smallest class (6 training rows) and the survival shape's transplant
class are a handful of rows (DAT009), the survival shape has a trial's gaps (DAT008).

Shared by `tests/data/test_label_noise_yardstick.py`, `benchmarks/data_real_tables.py` and
`benchmarks/label_noise_yardstick.py`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

LABEL = "target"
GLASS_CLASSES = (70, 76, 17, 13, 9, 29)  # the glass identification table's six classes, 214 rows
OXIDES = ["RI", "Na", "Mg", "Al", "Si", "K", "Ca", "Ba", "Fe"]


def glass_like(seed: int = 0, counts: tuple[int, ...] = GLASS_CLASSES) -> pd.DataFrame:
    """Six classes of nine correlated measurements: classes 0-2 (window glass) share most of
    their range, 3-5 stand apart on one or two columns each."""
    rng = np.random.default_rng(seed)
    means = np.zeros((6, 9))
    means[1, [2, 3]] = [-1.1, 0.8]  # the window-glass classes: small shifts
    means[2, [0, 2]] = [0.9, 0.6]
    means[3, [3, 6]] = [2.4, 1.0]  # containers, tableware, headlamps: further apart
    means[4, [2, 1]] = [-2.6, 1.4]
    means[5, [7, 2]] = [3.0, -2.0]
    mixing = rng.normal(0, 0.35, (9, 9)) + np.eye(9)
    parts = []
    for k, n in enumerate(counts):
        x = means[k] + rng.normal(0, 1, (n, 9)) @ mixing * 0.8
        parts.append(pd.DataFrame(x, columns=OXIDES).assign(target=k))
    frame = pd.concat(parts, ignore_index=True).round(3)
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def survival_like(rows: int = 418, seed: int = 0) -> pd.DataFrame:
    """A three-class status drawn from a multinomial logit of clinical-style columns."""
    rng = np.random.default_rng(seed)
    age = rng.normal(50, 10, rows)
    bilirubin = np.exp(rng.normal(0.3, 1.0, rows))
    albumin = rng.normal(3.5, 0.4, rows)
    copper = np.exp(rng.normal(4.2, 0.8, rows))
    prothrombin = rng.normal(10.7, 1.0, rows)
    stage = rng.choice([1, 2, 3, 4], rows, p=[0.05, 0.22, 0.38, 0.35])
    edema = rng.choice(["N", "S", "Y"], rows, p=[0.85, 0.1, 0.05])
    drug = rng.choice(["placebo", "treated"], rows)
    sex = rng.choice(["F", "M"], rows, p=[0.9, 0.1])
    days = rng.uniform(100, 4500, rows)
    risk = (
        2.0 * np.log(bilirubin)
        - 2.6 * (albumin - 3.5)
        + 0.8 * np.log(copper / 70)
        + 0.6 * (prothrombin - 10.7)
        + 0.5 * (stage - 3)
        + 1.2 * (edema != "N")
        + 0.04 * (age - 50)
        - 0.001 * (days - 2000)
    )
    logits = np.column_stack([np.zeros(rows), risk - 0.3, -2.3 - 0.05 * (age - 50) + 0.2 * risk])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    status = np.array([rng.choice(["C", "D", "CL"], p=row) for row in p])
    frame = pd.DataFrame(
        {
            "N_Days": days.round(),
            "Drug": drug,
            "Age": (age * 365).round(),
            "Sex": sex,
            "Edema": edema,
            "Bilirubin": bilirubin.round(1),
            "Albumin": albumin.round(2),
            "Copper": copper.round(),
            "Prothrombin": prothrombin.round(1),
            "Stage": stage.astype(float),
            "Cholesterol": np.exp(rng.normal(5.7, 0.4, rows)).round(),  # carries nothing
            "Platelets": rng.normal(257, 95, rows).round(),
            LABEL: status,
        }
    )
    for column in ("Cholesterol", "Copper", "Drug"):  # a trial's gaps
        frame.loc[rng.random(rows) < 0.1, column] = np.nan
    return frame


def churn_like(rows: int = 5_000, seed: int = 0) -> pd.DataFrame:
    """Churn drawn from a few risk regions over a base rate, most columns irrelevant."""
    rng = np.random.default_rng(seed)
    day = rng.normal(180, 54, rows).clip(0, 350)
    evening = rng.normal(200, 50, rows).clip(0, 360)
    night = rng.normal(200, 50, rows).clip(0, 390)
    intl = rng.normal(10, 2.8, rows).clip(0, 20)
    intl_calls = rng.poisson(4.4, rows)
    calls = rng.poisson(1.55, rows)
    plan = rng.random(rows) < 0.09
    voicemail = rng.random(rows) < 0.26
    rate = np.full(rows, 0.02)
    rate = np.where((day > 245) & ~voicemail, 0.85, rate)
    rate = np.where((day + evening > 480) & ~voicemail, np.maximum(rate, 0.5), rate)
    rate = np.where((calls >= 4) & (day < 170), 0.8, rate)
    rate = np.where(plan & ((intl > 13) | (intl_calls < 3)), 0.95, rate)
    rate = np.where(plan & (rate < 0.1), 0.12, rate)
    churn = rng.random(rows) < rate
    return pd.DataFrame(
        {
            "state": rng.choice([f"S{k:02d}" for k in range(51)], rows),
            "account_length": rng.normal(101, 40, rows).clip(1, 243).round(),
            "area_code": rng.choice([408, 415, 510], rows, p=[0.25, 0.5, 0.25]),
            "international_plan": np.where(plan, "yes", "no"),
            "voice_mail_plan": np.where(voicemail, "yes", "no"),
            "number_vmail_messages": np.where(voicemail, rng.normal(29, 8, rows).clip(4, 51).round(), 0),
            "total_day_minutes": day.round(1),
            "total_day_calls": rng.normal(100, 20, rows).round(),
            "total_eve_minutes": evening.round(1),
            "total_night_minutes": night.round(1),
            "total_intl_minutes": intl.round(1),
            "total_intl_calls": intl_calls,
            "number_customer_service_calls": calls,
            LABEL: np.where(churn, "yes", "no"),
        }
    )


def votes_like(rows: int = 3_000, seed: int = 0) -> pd.DataFrame:
    """A self-reported vote drawn from a logistic model of party, ideology and issue attitudes."""
    rng = np.random.default_rng(seed)
    party = rng.integers(1, 8, rows)  # 7-point party identification
    ideology = np.clip(np.round((party - 4) * 0.6 + rng.normal(4, 1.2, rows)), 1, 7)
    issues = rng.normal(0, 1, (rows, 4)) + ((party - 4) / 3)[:, None] * 0.8
    leaning = 1.1 * (party - 4) + 0.4 * (ideology - 4) + 0.35 * issues.sum(axis=1)
    republican = rng.random(rows) < 1 / (1 + np.exp(-leaning))
    return pd.DataFrame(
        {
            "party_id": party,
            "ideology": ideology,
            **{f"issue_{i + 1}": np.round(issues[:, i], 2) for i in range(4)},
            "age": rng.integers(18, 90, rows),
            "education": rng.integers(1, 6, rows),
            LABEL: np.where(republican, "Republican", "Democrat"),
        }
    )


HARD_LABELS: dict[str, Callable[..., pd.DataFrame]] = {
    "glass_like": glass_like,
    "survival_like": survival_like,
    "churn_like": churn_like,
    "votes_like": votes_like,
}
