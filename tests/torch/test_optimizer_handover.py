"""Another optimizer takes the training over: the steps it trains are observed and numbered.

Layer-wise training (each Forward-Forward layer with its own Adam) and a second stage with
its own optimizer stop the first optimizer for good while another trains on. The run's steps
go on by the new one's updates, an `optimizer_handover` observation says from which step,
and the loss rules judge the new training from there. Optimizers that alternate (a GAN's)
keep their numbering.
"""

from __future__ import annotations

import pytest

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.findings import Severity
from trainmedic.torch._stepplan import HANDOVER_STEPS

torch.set_num_threads(1)


def data() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    return x, (x[:, 0] + x[:, 1] > 0).long()


def stage(model: nn.Module, optimizer: torch.optim.Optimizer, steps: int, zero: bool = True) -> None:
    x, y = data()
    for i in range(steps):
        batch = slice(64 * (i % 8), 64 * (i % 8 + 1))
        if zero:
            optimizer.zero_grad()
        nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
        optimizer.step()


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))


def warnings_of(guard: tm.Guard) -> list[str]:
    return [f.code for f in guard.findings() if f.severity.at_least(Severity.WARNING)]


def handovers(guard: tm.Guard) -> list[tuple[int | None, dict]]:
    return [(e.step, e.data) for e in guard.events if e.kind == "guard" and e.check == "optimizer_handover"]


def test_a_second_stage_with_its_own_optimizer_is_observed_to_its_last_step() -> None:
    """The transfer-learning recipe: the head alone with the body frozen, then everything."""
    net = model()
    head_first = torch.optim.Adam(net[2].parameters(), lr=1e-2)
    everything = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    with tm.guard(every=10) as guard:
        net[0].requires_grad_(False)
        stage(net, head_first, 150)
        net[0].requires_grad_(True)
        stage(net, everything, 150)
    assert handovers(guard) == [
        (150 + HANDOVER_STEPS, {"optimizer": "SGD", "previous": "Adam", "previous_freed": False})
    ]
    assert [e.step for e in guard.events if e.kind == "step"][-1] == 300
    assert warnings_of(guard) == []


def test_zero_grad_left_out_of_the_second_stage_is_found() -> None:
    net = model()
    head_first = torch.optim.Adam(net[2].parameters(), lr=1e-2)
    everything = torch.optim.SGD(net.parameters(), lr=0.01)
    with tm.guard(every=10) as guard:
        net[0].requires_grad_(False)
        stage(net, head_first, 100)
        net[0].requires_grad_(True)
        stage(net, everything, 200, zero=False)
    assert "TOR003" in warnings_of(guard)


def test_an_optimizer_made_anew_for_the_next_stage_takes_over_at_its_first_step() -> None:
    net = model()
    with tm.guard(every=10) as guard:
        stage(net, torch.optim.Adam(net.parameters(), lr=1e-2), 60)  # freed when the stage ends
        stage(net, torch.optim.Adam(net.parameters(), lr=1e-3), 60)
    assert handovers(guard) == [(61, {"optimizer": "Adam", "previous": None, "previous_freed": True})]
    assert [e.step for e in guard.events if e.kind == "step"][-1] == 120


def test_optimizers_that_alternate_five_to_one_keep_their_numbering() -> None:
    """A WGAN-style loop: the critic steps five times for each generator step."""
    torch.manual_seed(0)
    generator, critic = nn.Linear(4, 8), nn.Linear(8, 1)
    g_opt = torch.optim.Adam(generator.parameters(), lr=1e-4)
    c_opt = torch.optim.Adam(critic.parameters(), lr=1e-4)
    real = torch.randn(256, 8) + 2
    with tm.guard(every=10) as guard:
        for i in range(60):
            for _ in range(5):
                c_opt.zero_grad()
                fake = generator(torch.randn(32, 4)).detach()
                (critic(fake).mean() - critic(real[32 * (i % 8) : 32 * (i % 8 + 1)]).mean()).backward()
                c_opt.step()
            g_opt.zero_grad()
            (-critic(generator(torch.randn(32, 4))).mean()).backward()
            g_opt.step()
    assert handovers(guard) == []
    assert [e.step for e in guard.events if e.kind == "step"][-1] == 300  # the critic's steps


def test_a_student_distilled_from_a_teacher_trained_before_is_judged_on_its_own_model() -> None:
    """The teacher's optimizer is freed after its training, the student's takes over: the
    teacher (alive, run under no_grad) is no part of the student's model, and a student left
    in eval() mode is found in its own training."""

    def distil(student_eval: bool) -> tm.Guard:
        x, y = data()
        teacher = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 2))
        student = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))
        with tm.guard(every=10) as guard:
            stage(teacher, torch.optim.Adam(teacher.parameters(), lr=1e-2), 100)
            teacher.eval()
            optimizer = torch.optim.Adam(student.parameters(), lr=1e-2)
            student.train(not student_eval)
            for i in range(150):
                batch = slice(64 * (i % 8), 64 * (i % 8 + 1))
                with torch.no_grad():
                    soft = nn.functional.softmax(teacher(x[batch]) / 2.0, dim=1)
                logits = student(x[batch])
                kl = nn.functional.kl_div(
                    nn.functional.log_softmax(logits / 2.0, dim=1), soft, reduction="batchmean"
                )
                optimizer.zero_grad()
                (4.0 * kl + nn.functional.cross_entropy(logits, y[batch])).backward()
                optimizer.step()
        return guard

    assert warnings_of(distil(student_eval=False)) == []
    assert warnings_of(distil(student_eval=True)) == ["TOR002"]


@pytest.mark.parametrize("added", [True, False])
def test_a_backbone_unfrozen_later_must_join_the_optimizer(added: bool) -> None:
    """Gradual unfreezing: the body gets requires_grad back at step 100, after the checks that
    look for parameters in no optimizer; one left out of the optimizer is found at the end."""
    net = model()
    net[0].requires_grad_(False)
    optimizer = torch.optim.Adam(net[2].parameters(), lr=1e-2)
    with tm.guard(every=10) as guard:
        stage(net, optimizer, 100)
        net[0].requires_grad_(True)
        if added:
            optimizer.add_param_group({"params": net[0].parameters(), "lr": 1e-3})
        stage(net, optimizer, 100)
    assert warnings_of(guard) == ([] if added else ["TOR001"])
