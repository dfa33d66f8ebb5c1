"""The TOR and step-level TRN rules as pure functions over handmade event streams."""

from __future__ import annotations

import math
import random

from trainmedic.events import GuardObservation, Step
from trainmedic.record import RunRecord
from trainmedic.registry import modules_for
from trainmedic.rules.trn import trn005_input_bound as trn005
from trainmedic.rules.trn import trn006_cannot_overfit_batch as trn006
from trainmedic.rules.trn import trn007_exploding_gradients as trn007
from trainmedic.rules.trn import trn008_vanishing_gradients as trn008
from trainmedic.rules.trn import trn010_clipping_saturated as trn010

CONFIG = GuardObservation(check="torch_guard", data={"every": 10})
TOR_RULES = tuple(
    rule for finding in modules_for("run events") if finding.SPEC.group == "TOR" for rule in finding.RULES
)


def timed(shares: list[float], step_s: float = 0.01, rank: int | None = None) -> list[Step]:
    return [
        Step(step=10 * (i + 1), duration_s=step_s, data_wait_s=share * step_s, rank=rank, t=float(i))
        for i, share in enumerate(shares)
    ]


def grad_steps(norms: list[float], rank: int | None = None) -> list[Step]:
    return [
        Step(step=10 * (i + 1), metrics={"grad_norm": n}, rank=rank, t=float(i)) for i, n in enumerate(norms)
    ]


def test_input_bound_reports_the_share_per_rank_and_skips_the_warm_up_window() -> None:
    record = RunRecord.of([CONFIG, *timed([0.1, 0.8, 0.75, 0.9, 0.7], rank=1), *timed([0.99, 0.1, 0.2, 0.1])])
    (finding,) = trn005.input_bound(record)
    assert finding.rank == 1
    assert finding.evidence["data_wait_share"] == 0.775
    assert "checked every 10 steps" in finding.evidence["sampling"]


def test_the_evidence_says_when_the_guard_widened_its_sampling() -> None:
    widened = GuardObservation(
        check="sampling", data={"every": 30, "base_every": 10, "from_step": 100, "budget": 0.005}, step=100
    )
    record = RunRecord.of([CONFIG, widened, *timed([0.1, 0.8, 0.75, 0.9, 0.7])])
    (finding,) = trn005.input_bound(record)
    assert "checked every 10 steps, every 30 from step 100 (kept under" in finding.evidence["sampling"]
    assert "under 0.5% of the step time" in finding.evidence["sampling"]


def test_input_bound_ignores_short_waits_and_noisy_healthy_runs() -> None:
    rng = random.Random(0)
    noisy = [min(0.6, max(0.0, rng.gauss(0.25, 0.15))) for _ in range(50)]
    assert trn005.input_bound(RunRecord.of(timed(noisy))) == []
    tiny = timed([0.9] * 10, step_s=0.0005)  # 0.45 ms waits: nothing worth winning
    assert trn005.input_bound(RunRecord.of(tiny)) == []


def test_exploding_gradients_jump_and_nonfinite() -> None:
    (jump,) = trn007.exploding_gradients(RunRecord.of(grad_steps([1.0, 0.9, 1.1, 1.0, 0.8, 450.0, 2.0])))
    assert jump.step == 60
    assert jump.evidence["factor"] > 100
    (nan,) = trn007.exploding_gradients(RunRecord.of(grad_steps([1.0, math.nan])))
    assert nan.step == 20
    assert nan.evidence["last_finite_grad_norm"] == 1.0


def test_exploding_gradients_quiet_on_noisy_decaying_norms() -> None:
    rng = random.Random(1)
    norms = [5.0 * math.exp(-i / 30) * rng.lognormvariate(0, 0.5) + 0.05 for i in range(200)]
    assert trn007.exploding_gradients(RunRecord.of(grad_steps(norms))) == []


def norms_obs(ratio: float, n: int = 5) -> list[GuardObservation]:
    return [
        GuardObservation(
            check="grad_norms",
            step=10 * i,
            t=float(i),
            data={"min": ratio, "min_param": "0.weight", "max": 1.0, "max_param": "9.weight"},
        )
        for i in range(n)
    ]


def test_vanishing_gradients_needs_most_checks_below_the_ratio() -> None:
    (finding,) = trn008.vanishing_gradients(RunRecord.of(norms_obs(1e-10)))
    assert finding.evidence["parameter"] == "0.weight"
    assert trn008.vanishing_gradients(RunRecord.of(norms_obs(1e-3))) == []
    assert trn008.vanishing_gradients(RunRecord.of(norms_obs(1e-10, n=2))) == []


def test_overfit_batch_verdict() -> None:
    passed = {"initial_loss": 1.4, "final_loss": 0.004, "steps": 100, "batch_size": 8}
    failed = {**passed, "final_loss": 1.1}
    record = RunRecord.of([GuardObservation(check="overfit_batch", data=d) for d in (passed, failed)])
    (finding,) = trn006.cannot_overfit_batch(record)
    assert finding.code == "TRN006"
    assert math.isclose(finding.evidence["target_loss"], 0.07)
    nonfinite = {**passed, "final_loss": math.nan}
    assert trn006.failed(nonfinite)


def test_torch_rules_merge_ranks_into_one_finding() -> None:
    data = {"iterations": 2, "epoch": 0, "num_replicas": 2}
    record = RunRecord.of(
        [GuardObservation(check="sampler_epoch_not_set", data=data, rank=r, t=float(r)) for r in (1, 0)]
    )
    found = [f for rule in TOR_RULES for f in rule(record)]
    assert len(found) == 1
    assert found[0].code == "TOR005"
    assert found[0].evidence["ranks"] == [0, 1]
    assert found[0].rank is None
    assert found[0].message.endswith("(ranks 0, 1)")


def test_every_torch_observation_maps_to_its_code_and_nothing_fires_without_one() -> None:
    expected = {
        "params_not_in_optimizer": "TOR001",
        "params_without_grad": "TOR001",
        "eval_mode_training": "TOR002",
        "grads_not_zeroed": "TOR003",
        "softmax_into_crossentropy": "TOR004",
        "sampler_epoch_not_set": "TOR005",
        "scheduler_before_optimizer": "TOR006",
        "decay_on_norm_bias": "TOR007",
        "unseeded": "TOR008",
        "single_class_softmax": "TOR009",
    }
    for check, code in expected.items():
        record = RunRecord.of([CONFIG, GuardObservation(check=check, data={}, rank=0)])
        found = [f for rule in TOR_RULES for f in rule(record)]
        assert [(f.code, f.rank) for f in found] == [(code, 0)], check
    healthy = RunRecord.of([CONFIG, *grad_steps([1.0] * 20), *timed([0.1] * 20)])
    step_rules = trn005.RULES + trn006.RULES + trn007.RULES + trn008.RULES
    assert [f for rule in TOR_RULES + step_rules for f in rule(healthy)] == []


def test_exploding_gradients_between_samples_reports_the_earliest_step_per_rank() -> None:
    explosion = GuardObservation(
        check="update_explosion",
        step=25,
        data={
            "step": 25,
            "loss": 978.0,
            "loss_median_before": 1.4,
            "param_norm": 295.0,
            "param_norm_before": 6.8,
            "param_norm_step": 1,
            "checked_step": 30,
            "every": 10,
        },
        rank=1,
    )
    # the sampled norm jumps at step 60 on rank 1: the explosion at step 25 came first
    record = RunRecord.of([CONFIG, explosion, *grad_steps([1.0, 0.9, 1.1, 1.0, 0.8, 450.0], rank=1)])
    (finding,) = trn007.exploding_gradients(record)
    assert (finding.rank, finding.step) == (1, 25)
    assert finding.evidence["detected_at_step"] == 30
    assert "between two sampled steps" in finding.message
    assert "6.8 at step 1 to 295" in finding.message
    # without it, the sampled jump alone is still reported
    (sampled,) = trn007.exploding_gradients(RunRecord.of(grad_steps([1.0, 0.9, 1.1, 1.0, 0.8, 450.0])))
    assert sampled.step == 60


def clip_reads(
    factors: list[float], engaged_share: float = 1.0, rank: int | None = None
) -> list[GuardObservation]:
    """One `clipping` observation per 10 steps, each with the given median clipping factor."""
    return [
        GuardObservation(
            check="clipping",
            step=10 * (i + 1),
            rank=rank,
            data={
                "kind": "norm",
                "threshold": 1.0,
                "calls": 10,
                "engaged": round(10 * (engaged_share if f > 1 else 0.0)),
                "first_step": 10 * i + 1,
                "last_step": 10 * (i + 1),
                "norm_median": f,
                "norm_max": 2 * f,
                "nonfinite": 0,
                "factor_median": f,
                "measured": "every call",
            },
        )
        for i, f in enumerate(factors)
    ]


def loss_steps(values: list[float]) -> list[Step]:
    """The guard's sampled training losses: step 1, then one per 10 steps."""
    return [Step(step=max(1, 10 * i), metrics={"loss": v}, t=float(i)) for i, v in enumerate(values)]


def test_saturated_clipping_whose_pre_clip_norm_grows_10x_is_reported_per_rank() -> None:
    growing = [20.0 * 1.5**i for i in range(10)]  # 20 -> 770: the blow-up compounds past the clip
    record = RunRecord.of([*clip_reads(growing, rank=1), *clip_reads([2.0] * 10, rank=0)])
    (finding,) = trn010.clipping_saturated(record)
    assert (finding.code, finding.rank) == ("TRN010", 1)
    assert finding.evidence["steps"] == [21, 100]  # steps 1-20 (the first 20 %) are warm-up
    assert finding.evidence["engaged_share"] == 1.0
    assert finding.evidence["shown_by"] == "pre-clip norm growth"
    assert finding.evidence["preclip_norm_growth"] >= 10
    assert "engaged on 80 of 80 steps after warm-up" in finding.message
    assert "the pre-clip norm grew" in finding.message


def test_saturated_clipping_with_a_loss_far_above_its_start_is_reported() -> None:
    """lr 10,000x too high: the norm steady at ~1,000x the threshold, the loss 4 -> 1.6e5."""
    losses = [4.06, 6.5e4, 1.6e5, 1.4e5, 1.7e5, 1.8e5, 1.6e5, 1.8e5, 1.6e5, 1.9e5, 1.5e5]
    (finding,) = trn010.clipping_saturated(RunRecord.of([*clip_reads([950.0] * 10), *loss_steps(losses)]))
    assert finding.evidence["shown_by"] == "loss"
    assert finding.evidence["start_loss"] == 4.06
    assert "the loss ended at" in finding.message


def test_clipping_as_the_normal_operating_mode_of_a_run_that_learns_is_not_reported() -> None:
    """PPO (max_grad_norm 0.5, value loss on raw returns: factor ~70, norm 16 -> 40 as returns
    grow, total loss 20 -> 31) and Lightning's Transformer LM (gradient_clip_val 0.25 with SGD:
    factor ~20 at every step, loss 4.36 -> 2.75). Both learn; both were reported before."""
    ppo_norms = [16.3, 20.7, 24.0, 26.0, 30.6, 28.6, 34.6, 34.8, 39.7, 37.7, 36.8, 40.4, 39.4]
    ppo_loss = [20.6, 19.8, 22.0, 25.1, 21.0, 23.8, 25.9, 29.1, 30.6, 34.7, 27.9, 32.8, 27.8, 31.5, 30.2]
    ppo_loss += [31.3, 31.1, 34.8, 28.2, 33.8, 37.7, 31.2, 27.3, 30.6, 29.8, 33.2, 34.9, 34.2, 31.1, 31.8]
    ppo = RunRecord.of([*clip_reads([n / 0.5 for n in ppo_norms]), *loss_steps(ppo_loss)])
    assert trn010.clipping_saturated(ppo) == []
    lm_loss = [4.36 - 0.054 * i for i in range(31)]
    lm = RunRecord.of([*clip_reads([22.0] * 30), *loss_steps(lm_loss)])
    assert trn010.clipping_saturated(lm) == []
    assert trn010.clipping_saturated(RunRecord.of(clip_reads([400.0] * 10))) == []  # no sign of a blow-up


def test_healthy_clipping_is_not_reported() -> None:
    warm_up_then_rare = [50.0, 30.0, 8.0, 1.0, 1.0, 1.5, 1.0, 1.0, 1.0, 1.0]
    assert trn010.clipping_saturated(RunRecord.of(clip_reads(warm_up_then_rare))) == []
    tight = [3.0] * 20  # a threshold set below the typical norm: clips every step, by a small factor
    assert trn010.clipping_saturated(RunRecord.of(clip_reads(tight))) == []
    spiky = clip_reads([100.0] * 20, engaged_share=0.5)  # large cuts, but on half of the steps
    assert trn010.clipping_saturated(RunRecord.of(spiky)) == []
    short = clip_reads([400.0])  # one read: nothing after warm-up to judge
    assert trn010.clipping_saturated(RunRecord.of(short)) == []


def test_exploding_gradients_between_samples_names_the_epoch_of_its_step() -> None:
    """The observation is sent when the guard checks, possibly an epoch later; the finding
    names the epoch of the step where the loss blew up, as TRN001 does for the same step."""
    steps = [Step(step=s, epoch=s // 64, metrics={"loss": 1.0}, rank=0, t=float(s)) for s in range(9, 99, 10)]
    explosion = GuardObservation(
        check="update_explosion",
        step=70,
        epoch=1,
        data={"step": 5, "loss": float("inf"), "param_norm": float("nan"), "param_norm_before": 3.4,
              "param_norm_step": 1, "checked_step": 10, "every": 10},
        rank=0,
    )  # fmt: skip
    (finding,) = trn007.exploding_gradients(RunRecord.of([CONFIG, *steps, explosion]))
    assert (finding.step, finding.epoch) == (5, 1)  # findings count epochs from 1
