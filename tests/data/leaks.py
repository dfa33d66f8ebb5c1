"""Tables with a target leak a data scientist sees at a glance, and their healthy twins.

Three shapes, each as it is met in public tables (nothing can be downloaded, so the
rest-of-table is either a real scikit-learn table or generated with the published
table's columns and rough relations, said per builder):

- a label defined as a threshold of a feature (birth weight < 2,500 g => `low`);
- a code that implies the outcome (injury severity 4 = killed => `dead`);
- two features whose mean is the regression label (minimum and maximum price => price).

Shared by `tests/data/test_target_leaks.py` and `benchmarks/data_real_tables.py`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .real import LABEL, table

SPEEDS = ("1-9km/h", "10-24", "25-39", "40-54", "55+")


def birthweight_like(rows: int = 189, seed: int = 0) -> pd.DataFrame:
    """Synthetic, in the shape of Hosmer & Lemeshow's birth-weight table (189 births): mother's
    age, weight (lb), race, smoking, previous premature labours, hypertension, uterine
    irritability, physician visits, the birth weight `bwt` in grams, and `low` = bwt < 2,500 g
    (in `target`). The rest of the table predicts `low` weakly, as in the published table."""
    rng = np.random.default_rng(seed)
    age = np.clip(np.round(rng.normal(23, 5.3, rows)), 14, 45).astype(int)
    lwt = np.clip(np.round(rng.normal(130, 30, rows)), 80, 250).astype(int)
    race = rng.choice([1, 2, 3], rows, p=[0.51, 0.14, 0.35])
    smoke = (rng.random(rows) < 0.39).astype(int)
    ptl = rng.choice([0, 1, 2, 3], rows, p=[0.84, 0.12, 0.03, 0.01])
    ht = (rng.random(rows) < 0.06).astype(int)
    ui = (rng.random(rows) < 0.15).astype(int)
    ftv = rng.choice([0, 1, 2, 3, 4, 6], rows, p=[0.53, 0.25, 0.16, 0.04, 0.015, 0.005])
    mean = 2700 + 6 * (lwt - 130) - 300 * smoke - 350 * (race != 1) - 500 * ui - 600 * ht - 300 * (ptl > 0)
    bwt = np.clip(np.round(mean + 540 + rng.normal(0, 600, rows)), 709, 4990).astype(int)
    return pd.DataFrame(
        {
            "age": age,
            "lwt": lwt,
            "race": race,
            "smoke": smoke,
            "ptl": ptl,
            "ht": ht,
            "ui": ui,
            "ftv": ftv,
            "bwt": bwt,
            LABEL: np.where(bwt < 2500, "low", "normal"),
        }
    )


def diabetes_obese() -> pd.DataFrame:
    """Real rows (scikit-learn's diabetes table in its own units) with the label `obese` =
    bmi >= 30 kg/m², and `bmi` left among the features; the disease progression is a feature."""
    frame = table("diabetes").rename(columns={LABEL: "progression"})
    frame[LABEL] = np.where(frame["bmi"] >= 30, "obese", "not obese")
    return frame


def crashes_like(rows: int = 26_217, seed: int = 0, *, with_severity: bool = True) -> pd.DataFrame:
    """Synthetic, in the shape of the US NASS crash table (26,217 occupants in towaway crashes,
    4.5 % killed): speed band, belt, airbag, frontal impact, sex, age, survey weight, years,
    a case id, and the police injury severity code `injSeverity` (0 none ... 3 incapacitating,
    4 killed, 5 unknown, 6 prior death; a few missing), with `dead`/`alive` in `target`.
    Speed, belt, age and impact predict death well (AUC ~0.85) but far from perfectly;
    severity 4 is the outcome, recorded with it, and right on all but a few percent of rows."""
    rng = np.random.default_rng(seed)
    speed = rng.choice(5, rows, p=[0.08, 0.5, 0.28, 0.1, 0.04])
    belted = rng.random(rows) < 0.66
    airbag = rng.random(rows) < 0.57
    frontal = rng.random(rows) < 0.65
    sex = rng.choice(["f", "m"], rows, p=[0.46, 0.54])
    age = np.clip(np.round(rng.gamma(4.5, 8, rows) + 12), 16, 97).astype(int)
    risk = -4.85 + 1.15 * speed - 1.1 * belted - 0.3 * airbag - 0.5 * frontal + 0.035 * (age - 35)
    dead = rng.random(rows) < 1 / (1 + np.exp(-risk))
    alive_code = np.clip(np.round(rng.normal(1.3 + 0.45 * speed + 0.2 * ~belted, 1.0, rows)), 0, 3)
    alive_code = np.where(rng.random(rows) < 0.015, 5, alive_code)
    dead_code = rng.choice([4, 6, 3, 5], rows, p=[0.86, 0.02, 0.08, 0.04])
    severity = np.where(dead, dead_code, alive_code).astype(float)
    severity[rng.random(rows) < 0.006] = np.nan
    frame = pd.DataFrame(
        {
            "dvcat": np.asarray(SPEEDS)[speed],
            "weight": np.round(rng.lognormal(4.5, 1.6, rows), 3),
            "airbag": np.where(airbag, "airbag", "none"),
            "seatbelt": np.where(belted, "belted", "none"),
            "frontal": frontal.astype(int),
            "sex": sex,
            "ageOFocc": age,
            "yearacc": rng.choice(np.arange(1997, 2003), rows),
            "yearVeh": np.clip(np.round(rng.normal(1992, 5, rows)), 1953, 2003),
            "occRole": rng.choice(["driver", "pass"], rows, p=[0.79, 0.21]),
            "caseid": [f"{rng.integers(1, 80)}:{rng.integers(1, 200)}:{i % 3 + 1}" for i in range(rows)],
            "injSeverity": severity,
            LABEL: np.where(dead, "dead", "alive"),
        }
    )
    return frame if with_severity else frame.drop(columns="injSeverity")


def cars_like(rows: int = 93, seed: int = 0, *, with_range: bool = True) -> pd.DataFrame:
    """Synthetic, in the shape of Lock's 1993 car table (93 models): type, origin, engine size,
    horsepower, rpm, fuel consumption, weight..., the price (in $1,000, `target`) and the
    minimum and maximum price across trims, whose mean is the price (to the rounding of the
    table, $100). Without the range, the rest predicts the price with R² ~0.7."""
    rng = np.random.default_rng(seed)
    kind = rng.choice(["Small", "Compact", "Midsize", "Large", "Sporty", "Van"], rows)
    engine = np.round(np.clip(rng.normal(2.7, 1.0, rows), 1.0, 5.7), 1)
    horsepower = np.round(np.clip(40 * engine + rng.normal(35, 25, rows), 55, 300))
    weight = np.round(2000 + 420 * engine + rng.normal(0, 250, rows), -1)
    foreign = rng.random(rows) < 0.48
    price = np.round(np.clip(0.14 * horsepower + 3 * foreign + rng.normal(0, 5, rows), 7.4, 61.9), 1)
    spread = price * rng.uniform(0.0, 0.6, rows)
    low = np.round(price - spread / 2, 1)
    frame = pd.DataFrame(
        {
            "Type": kind,
            "Origin": np.where(foreign, "non-USA", "USA"),
            "EngineSize": engine,
            "Horsepower": horsepower,
            "RPM": np.round(rng.normal(5300, 600, rows), -1),
            "MPG.city": np.round(np.clip(46 - 6 * engine + rng.normal(0, 2.5, rows), 15, 46)),
            "Weight": weight,
            "Passengers": rng.choice([4, 5, 6, 7], rows),
            "Min.Price": low,
            "Max.Price": np.round(2 * price - low, 1),
            LABEL: price,
        }
    )
    return frame if with_range else frame.drop(columns=["Min.Price", "Max.Price"])


def diabetes_range(seed: int = 0) -> pd.DataFrame:
    """Real rows (scikit-learn's diabetes table, its progression as `target`) with a planted
    range `progression_low`/`progression_high` around it whose midpoint is the label (the range
    width is random, up to 150 points of a 25-346 scale)."""
    frame = table("diabetes")
    rng = np.random.default_rng(seed)
    half = rng.uniform(0, 75, len(frame))
    frame["progression_low"] = frame[LABEL] - half
    frame["progression_high"] = frame[LABEL] + half
    return frame


def credit_cards_like(rows: int = 1319, seed: int = 0, *, with_spending: bool = True) -> pd.DataFrame:
    """Synthetic, in the shape of the credit-card applications table (AER `CreditCard`: 1,319
    applications, 78 % accepted): derogatory reports, age, income ($10,000s), home owner,
    self-employed, dependents, months at the address, major cards held, active accounts, and
    two columns recorded after the decision: `expenditure`, the average monthly card spending,
    0 for every refused application (and for 2 % of accepted ones, who did not use the card),
    and `share`, spending over income (12 x (expenditure + 1) / income: small for no spending,
    varying with income). The label is `card` (yes/no) in `target`; the applicant's columns
    predict it far from perfectly (derogatory reports most)."""
    rng = np.random.default_rng(seed)
    reports = rng.choice(np.arange(8), rows, p=[0.8, 0.1, 0.04, 0.025, 0.015, 0.01, 0.006, 0.004])
    age = np.clip(np.round(rng.gamma(6, 5.5, rows) + 1, 2), 18, 83)
    income = np.round(np.clip(rng.lognormal(1.1, 0.45, rows), 1.5, 13.5), 4)
    active = rng.poisson(7, rows)
    majorcards = (rng.random(rows) < 0.82).astype(int)
    logit = 1.7 - 1.5 * reports + 0.2 * (income - 3.4) + 0.06 * (active - 7) + 0.5 * majorcards
    accepted = rng.random(rows) < 1 / (1 + np.exp(-logit))
    spending = np.round(rng.lognormal(4.7, 1.1, rows), 2) * (rng.random(rows) >= 0.02)
    expenditure = np.where(accepted, spending, 0.0)
    frame = pd.DataFrame(
        {
            "reports": reports,
            "age": age,
            "income": income,
            "share": np.round(12 * (expenditure + 1) / (10_000 * income), 6),
            "expenditure": expenditure,
            "owner": np.where(rng.random(rows) < 0.44, "yes", "no"),
            "selfemp": np.where(rng.random(rows) < 0.07, "yes", "no"),
            "dependents": rng.choice(np.arange(7), rows, p=[0.45, 0.2, 0.18, 0.11, 0.04, 0.015, 0.005]),
            "months": np.round(rng.gamma(1.2, 45, rows)).astype(int),
            "majorcards": majorcards,
            "active": active,
            LABEL: np.where(accepted, "yes", "no"),
        }
    )
    return frame if with_spending else frame.drop(columns=["expenditure", "share"])


def lab_tests_like(rows: int = 3000, seed: int = 0, *, with_ct: bool = True) -> pd.DataFrame:
    """Synthetic PCR test results (positive 15 %, negative 80 %, invalid 5 %): age, sex,
    fever, cough, a known contact, days since onset, sample volume, and `ct_value`, the cycle
    threshold, which is 45 (no amplification) for 99 % of negative and invalid tests and below
    45 (about 26 +- 5) for 99 % of positive ones: it separates positives from the rest, not
    negatives from invalids. Symptoms and contacts predict a positive weakly; a small sample
    volume an invalid one."""
    rng = np.random.default_rng(seed)
    fever = rng.random(rows) < 0.3
    cough = rng.random(rows) < 0.4
    contact = rng.random(rows) < 0.2
    volume = np.round(rng.normal(1.0, 0.25, rows), 2)
    logit_pos = -2.4 + 0.9 * fever + 0.5 * cough + 1.0 * contact
    logit_inv = -3.0 - 3.0 * (volume - 1.0)
    odds = np.column_stack([np.exp(logit_pos), np.ones(rows), np.exp(logit_inv)])
    cumulative = np.cumsum(odds / odds.sum(axis=1, keepdims=True), axis=1)
    drawn = (rng.random(rows)[:, None] > cumulative).sum(axis=1)
    result = np.asarray(["positive", "negative", "invalid"])[drawn]
    amplified = np.where(result == "positive", rng.random(rows) < 0.99, rng.random(rows) < 0.01)
    ct = np.where(amplified, np.round(np.clip(rng.normal(26, 5, rows), 12, 44.9), 1), 45.0)
    frame = pd.DataFrame(
        {
            "age": rng.integers(1, 95, rows),
            "sex": rng.choice(["f", "m"], rows),
            "fever": fever.astype(int),
            "cough": cough.astype(int),
            "contact": contact.astype(int),
            "days_since_onset": rng.integers(0, 14, rows),
            "sample_volume_ml": volume,
            "ct_value": ct,
            LABEL: result,
        }
    )
    return frame if with_ct else frame.drop(columns="ct_value")
