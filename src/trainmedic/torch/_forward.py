"""Module forward hooks, switched on only for the forward passes of sampled steps.

Any global forward hook sends every module call down PyTorch's slow path, so
the hooks are registered after the step before a checked one and removed when
that checked step's gradients are ready. While on, they learn:

- the root modules (outermost calls with grad enabled): the model, even when
  the user never passed it to trainmedic;
- whether every dropout/batch-norm layer ran in eval() mode in a training step, in a
  model in eval() mode (TOR002; partial eval(), or layers put in eval() in a model in
  train() mode, is deliberate freezing and not reported);
- whether CrossEntropyLoss got probabilities or log-probabilities (TOR004), from
  the values `nn.CrossEntropyLoss` receives, or, for every form of the loss
  (`F.cross_entropy`, the module, a sum of losses), from the autograd graph of
  the checked step's loss: `SoftmaxBackward0` feeding the loss's own
  `LogSoftmaxBackward0`. Reading the graph costs no tensor op and no host read,
  and no loss function is wrapped: calls between checks pay nothing;
- whether the loss takes a log-softmax over a dimension of size 1 (TOR009): a
  cross-entropy over a one-column output is identically 0 and sends no
  gradient back. Read from the saved output of the graph's `LogSoftmaxBackward0`
  just before backward frees it, on watched steps only;
- how many classes a cross-entropy loss has (the `loss_function` observation that
  gives TRN003 its chance level ln K): read from the same log-softmax, when the
  loss passed to backward() is the mean cross-entropy itself (an NLL loss right
  on it), and only while every loss of every watched step agrees: a loss summed
  with others, scaled or smoothed is not at ln K when the model knows nothing.
  The same holds for the mean over rows of -sum(target x log_softmax) whose targets
  are one-hot rows (`nn.CrossEntropyLoss` given `to_categorical` labels, Keras'
  `CategoricalCrossentropy(from_logits=True)` and `SparseCategoricalCrossentropy`
  under the torch backend): the targets are read once on each of the first watched
  steps (a host read until the class count is settled). Soft targets (a teacher's
  probabilities, smoothed or mixed labels) are not one-hot: the least such a loss
  reaches is their entropy, which may lie near ln K, so they state no classes.
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING, Any

from torch.nn.modules.batchnorm import _BatchNorm
from torch.nn.modules.dropout import _DropoutNd

import torch
from torch import nn
from trainmedic.rules.tor import tor002_eval_mode_training as tor002
from trainmedic.rules.tor import tor004_softmax_into_crossentropy as tor004
from trainmedic.rules.tor import tor009_single_class_cross_entropy as tor009
from trainmedic.rules.trn.trn003_not_learning import LOSS_FUNCTION_OBSERVATION
from trainmedic.torch import _save_inputs as save_inputs
from trainmedic.torch import _watchers
from trainmedic.torch._safety import check_failed

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

_MODE_SENSITIVE = (_DropoutNd, _BatchNorm)
_REPORT_AFTER = 2  # checked steps that must agree before an observation is sent
_GRAPH_CLEAN_WINDOWS = 5  # the loss's structure is the code's: 5 clean graphs settle it


class ForwardWatch:
    def __init__(self, monitor: MonitorLike) -> None:
        self.monitor = monitor
        self.roots: weakref.WeakSet[nn.Module] = weakref.WeakSet()
        self._handles: list[Any] = []
        self.is_open = False  # read on every backward: a plain attribute, not a property
        self._depth = 0
        self._train = 0  # mode-sensitive layers in train() mode, or in a model in train() mode
        self._root_training = True  # the outermost module of the current forward pass
        self._eval: set[str] = set()
        self._eval_steps: list[int] = []
        self._ce: dict[str, Any] | None = None
        self._ce_steps: list[int] = []
        self._ce_windows = 0  # windows in which the loss input was examined
        self._ce_seen = False
        self._graph_clean = 0  # watched windows in a row whose loss graph held no softmax
        self._single: dict[str, Any] | None = None  # a log-softmax over one class in this window
        self._single_steps: list[int] = []
        # The classes of this window's cross-entropy losses: None before one, _MIXED when they
        # disagree (or a loss is no plain cross-entropy); the windows that agreed so far.
        self._classes: int | None = None
        self._classes_steps: list[int] = []
        self._classes_settled = False  # sent, or a mixed window seen: never looked at again

    def open(self) -> None:
        if self._handles:
            return
        self._depth, self._train, self._ce, self._ce_seen = 0, 0, None, False
        self._single = None
        self._classes = None
        self._eval = set()
        pre = nn.modules.module.register_module_forward_pre_hook(self._pre)
        post = nn.modules.module.register_module_forward_hook(self._post, with_kwargs=True, always_call=True)
        self._handles = [pre, post]
        self.is_open = True
        self.monitor.plain_backward = False
        self.monitor.quiet_until = 0  # the next step's hook recomputes what it arms

    def close(self, step: int | None, losses: list[Any] | None = None) -> None:
        """End of a watched window; `losses` are the checked step's (their graphs are read)."""
        if not self._handles:
            return
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.is_open = False
        if step is None:
            return
        reported = tor004.OBSERVATION in self.monitor.reported
        if self._ce is None and losses and self._graph_clean < _GRAPH_CLEAN_WINDOWS and not reported:
            self._ce = _softmax_in_graph(losses)
            self._graph_clean = 0 if self._ce is not None else self._graph_clean + 1
        if self._eval and not self._train:
            self._eval_steps.append(step)
            if len(self._eval_steps) >= _REPORT_AFTER:
                self.monitor.observe(
                    tor002.OBSERVATION,
                    {"modules": sorted(self._eval), "checked_steps": list(self._eval_steps)},
                    step=step,
                )
        if self._single is not None:
            self._single_steps.append(step)
            if len(self._single_steps) >= _REPORT_AFTER:
                self.monitor.observe(
                    tor009.OBSERVATION,
                    {**self._single, "checked_steps": list(self._single_steps)},
                    step=step,
                )
        self._judge_classes(step)
        if self._ce_seen:
            self._ce_windows += 1
        if self._ce is not None:
            self._ce_steps.append(step)
            if len(self._ce_steps) >= _REPORT_AFTER:
                self.monitor.observe(
                    tor004.OBSERVATION,
                    {**self._ce, "checked_steps": list(self._ce_steps)},
                    step=step,
                )

    def note_loss(self, loss: Any) -> None:
        """Just before backward on a watched step: read what only the live graph still holds."""
        if self._single is None and tor009.OBSERVATION not in self.monitor.reported:
            self._single = _single_class_log_softmax(loss)
        if not self._classes_settled and self._classes != _MIXED:
            classes = _cross_entropy_classes(loss)
            if classes is None or self._classes not in (None, classes):
                self._classes = _MIXED
            else:
                self._classes = classes

    def _judge_classes(self, step: int) -> None:
        """Windows whose losses all were one K-class cross-entropy: after `_REPORT_AFTER`, say K."""
        if self._classes_settled or self._classes is None:
            return
        if self._classes == _MIXED:
            self._classes_settled = True
            return
        self._classes_steps.append(step)
        if len(self._classes_steps) >= _REPORT_AFTER:
            self._classes_settled = True
            self.monitor.observe(
                LOSS_FUNCTION_OBSERVATION,
                {
                    "classes": self._classes,
                    "loss": "cross_entropy",
                    "source": f"autograd graph: cross-entropy over a log-softmax of width {self._classes}",
                    "checked_steps": list(self._classes_steps),
                },
                step=step,
            )

    def _pre(self, module: nn.Module, args: Any) -> None:
        # Grad mode is per thread: a no_grad forward (an evaluation, the save checks' probe run
        # on its copy of the model in a thread of its own) neither counts depth nor is learned.
        if not torch.is_grad_enabled():
            return
        depth = self._depth
        self._depth = depth + 1
        if self.monitor.broken:
            return
        try:
            self._learn(module, args, depth)
        except Exception as exc:  # costs this watch, never the user's forward nor the guard
            check_failed(self.monitor, "forward_watch", exc)

    def _learn(self, module: nn.Module, args: Any, depth: int) -> None:
        if depth == 0:
            if module not in self.roots:
                self.roots.add(module)
                _watchers.model_met(module, self.monitor)  # e.g. a language model: the fine-tuning watches
            self._root_training = module.training
        if isinstance(module, _MODE_SENSITIVE):
            # A layer in eval() inside a model in train() was put there on purpose (batch norm
            # frozen for small-batch fine-tuning); a forgotten train() leaves the model in eval.
            if module.training or self._root_training:
                self._train += 1
            else:
                self._eval.add(type(module).__name__)
        elif isinstance(module, nn.CrossEntropyLoss) and args and self._ce is None and self._ce_wanted():
            self._ce_seen = True
            self._ce = _probability_like(args[0])

    def _ce_wanted(self) -> bool:
        """The loss input is the model's output type: three logit verdicts settle it (a host sync each)."""
        return self._ce_windows - len(self._ce_steps) < 3 and len(self._ce_steps) < _REPORT_AFTER

    def _post(self, module: nn.Module, args: Any, *kwargs_output: Any) -> None:
        """`(args, kwargs, output)` after a forward; `(args, output)` when the forward raised:
        PyTorch's `Module._call_impl` calls the global `always_call` hooks without the kwargs
        on that path, whatever `with_kwargs` says (torch 2.13)."""
        if torch.is_grad_enabled():  # as in `_pre`: a call's grad mode is the same at both ends
            self._depth = max(0, self._depth - 1)
            if not self._depth and len(kwargs_output) == 2:
                # an outermost forward that returned: its batch, by reference, for a save's probe
                save_inputs.keep(module, args, kwargs_output[0], self.monitor.step)


def _probability_like(logits: Any) -> dict[str, Any] | None:
    """Rows that already sum to one (or whose exp does): the input was softmax-ed before the loss."""
    if not isinstance(logits, torch.Tensor) or logits.dim() < 2 or not logits.is_floating_point():
        return None
    with torch.no_grad():
        x = logits.detach().float()
        lowest, highest = x.min(), x.max()
        prob_err = (x.sum(dim=1) - 1).abs().max()
        logprob_err = torch.logsumexp(x, dim=1).abs().max()
        low, high, perr, lerr = torch.stack([lowest, highest, prob_err, logprob_err]).tolist()
    if low >= 0 and high <= 1 and perr < 1e-3:
        return {"input_kind": "probabilities", "min": low, "max": high, "row_sum_error": perr}
    if high <= 0 and lerr < 1e-3:
        return {"input_kind": "log-probabilities", "min": low, "max": high, "row_sum_error": lerr}
    return None


_NLL = ("NllLossBackward0", "NllLoss2DBackward0", "NllLossNdBackward0")
# Nodes that only move or reshape values: a softmax stays a softmax through them.
_SHAPE_ONLY = frozenset(
    {
        "ViewBackward0",
        "UnsafeViewBackward0",
        "ReshapeAliasBackward0",
        "TransposeBackward0",
        "TransposeBackward1",
        "PermuteBackward0",
        "SqueezeBackward0",
        "SqueezeBackward1",
        "UnsqueezeBackward0",
        "CloneBackward0",
        "ToCopyBackward0",
        "TBackward0",
    }
)
_KINDS = {"SoftmaxBackward0": "probabilities", "LogSoftmaxBackward0": "log-probabilities"}
_SOURCE = {"probabilities": "softmax", "log-probabilities": "log_softmax"}
_GRAPH_NODES = 64  # nodes read from the loss down: the cross entropy sits near the top
_MEAN = 1  # an NLL loss node's `_saved_reduction` for reduction="mean"
_MIXED = 0  # `ForwardWatch._classes` when a window's losses are not all one K-class cross-entropy


def _softmax_in_graph(losses: list[Any]) -> dict[str, Any] | None:
    """A softmax (or log-softmax) output that went into cross-entropy's own log-softmax.

    `F.cross_entropy` is `nll_loss(log_softmax(x))`: its graph node is an NLL loss over a
    `LogSoftmaxBackward0`. Logits reach that log-softmax from a linear layer or the like;
    probabilities from a `SoftmaxBackward0`. Graph nodes outlive backward() (their saved
    tensors do not), so the kept losses can be read after the step.
    """
    for loss in losses:
        seen = 0
        todo = [getattr(loss, "grad_fn", None)]
        while todo and seen < _GRAPH_NODES:
            node = todo.pop()
            if node is None:
                continue
            seen += 1
            if node.name() in _NLL:
                kind = _fed_by_softmax(node)
                if kind is not None:
                    return {
                        "input_kind": kind,
                        "how": "autograd graph: a softmax output went into cross_entropy",
                        "graph": f"{_SOURCE[kind]} -> log_softmax -> {node.name().removesuffix('Backward0')}",
                    }
            todo.extend(child for child, _ in node.next_functions)
    return None


def _fed_by_softmax(nll: Any) -> str | None:
    log_softmax = _log_softmax_of(nll)
    if log_softmax is None:
        return None
    source = _through_shape_only(log_softmax)
    if source is None:
        return None
    return _KINDS.get(source.name())


def _log_softmax_of(nll: Any) -> Any:
    """The `LogSoftmaxBackward0` an NLL loss node takes its input from (`F.cross_entropy`'s
    own), through nodes that only reshape; None when its input is anything else."""
    node = _through_shape_only(nll)
    return node if node is not None and node.name() == "LogSoftmaxBackward0" else None


def _through_shape_only(node: Any) -> Any:
    for _ in range(8):
        inputs = [child for child, _ in node.next_functions if child is not None]
        if not inputs:
            return None
        node = inputs[0]
        if node.name() not in _SHAPE_ONLY:
            return node
    return None


def _cross_entropy_classes(loss: Any) -> int | None:
    """K when `loss` is a mean cross-entropy over K >= 2 classes: the loss's own node is a
    mean NLL loss, right on a log-softmax over K (F.cross_entropy, nn.CrossEntropyLoss, or
    log_softmax + nll_loss); None for anything else (sums, scalings, label smoothing)."""
    node = _past_unit_scaling(getattr(loss, "grad_fn", None))
    if node is not None and node.name() in ("WhereBackward0", "DivBackward0", "DivBackward1"):
        return _one_hot_cross_entropy_classes(node)
    if node is None or node.name() not in _NLL or getattr(node, "_saved_reduction", None) != _MEAN:
        return None
    log_softmax = _log_softmax_of(node)
    if log_softmax is None:
        return None
    width = _log_softmax_width(log_softmax)
    return width[0][width[1]] if width is not None and width[0][width[1]] >= 2 else None


def _past_unit_scaling(node: Any) -> Any:
    """The node under divisions and products by 1: Accelerate's `backward` divides every loss
    by its accumulation steps, 1 without accumulation, which leaves the loss as it was. (The
    1 is a CPU scalar autograd keeps: reading it is no device sync.)"""
    while node is not None and node.name() in ("DivBackward0", "MulBackward0"):
        try:
            factor = node._saved_other
        except RuntimeError:
            return None
        one = isinstance(factor, torch.Tensor) and factor.dim() == 0 and factor.device.type == "cpu"
        if not one or float(factor) != 1.0:
            return node
        node = node.next_functions[0][0]
    return node


def _log_softmax_width(node: Any) -> tuple[list[int], int] | None:
    """(shape, dim) of a live `LogSoftmaxBackward0`'s output; None once backward freed it."""
    try:
        output, dim = node._saved_result, int(node._saved_dim)
    except RuntimeError:  # already freed (a second backward through a retained graph)
        return None
    if dim >= 2**63:  # autograd keeps a negative dim (dim=-1) as an unsigned 64-bit value
        dim -= 2**64
    if not -output.dim() <= dim < output.dim():
        return None
    return list(output.shape), dim % output.dim()


def _single_class_log_softmax(loss: Any) -> dict[str, Any] | None:
    """A log-softmax near the top of the loss's graph taken over a dimension of size 1.

    log_softmax over one entry is identically 0 (softmax of one class is 1), so a
    cross-entropy built on it is 0 whatever the model outputs, and its gradient is 0.
    """
    if not isinstance(loss, torch.Tensor):
        return None
    seen = 0
    todo = [loss.grad_fn]
    while todo and seen < _GRAPH_NODES:
        node = todo.pop()
        if node is None:
            continue
        seen += 1
        if node.name() == "LogSoftmaxBackward0":
            width = _log_softmax_width(node)
            if width is not None and width[0][width[1]] == 1:
                return {
                    "shape": width[0],
                    "dim": width[1],
                    "how": "autograd graph: log_softmax over a dimension of size 1 feeds the loss",
                }
            return None
        todo.extend(child for child, _ in node.next_functions)
    return None


_SUMS = frozenset({"NegBackward0", "SumBackward0", "SumBackward1"})
_NONE = 0  # an NLL loss node's `_saved_reduction` for reduction="none"


def _one_hot_cross_entropy_classes(node: Any) -> int | None:
    """K when the loss is sum(-target x log_softmax(logits)) / rows over one-hot target rows
    (or per-row NLL losses summed and divided by the rows): Keras' `where(count > 0, sum /
    count, 0)`, torch's cross-entropy with probability targets. None for anything else."""
    if node.name() == "WhereBackward0":
        node = _first_input(node)
    if node is None or node.name() not in ("DivBackward0", "DivBackward1"):
        return None
    divisor = _scalar(node)
    node = _first_input(node)
    for _ in range(4):
        if node is None or node.name() not in _SUMS:
            break
        node = _first_input(node)
    if node is None:
        return None
    if node.name() in _NLL:
        if getattr(node, "_saved_reduction", None) != _NONE:
            return None
        log_softmax, target = _log_softmax_of(node), None
    elif node.name() == "MulBackward0":
        log_softmax, target = _log_softmax_times_target(node)
    else:
        return None
    width = _log_softmax_width(log_softmax) if log_softmax is not None else None
    if width is None:
        return None
    shape, dim = width
    classes, rows = shape[dim], math.prod(shape) // max(shape[dim], 1)
    if classes < 2 or divisor != rows or (target is not None and not _one_hot(target, dim)):
        return None
    return classes


def _first_input(node: Any) -> Any:
    inputs = [child for child, _ in node.next_functions if child is not None]
    return inputs[0] if inputs else None


def _scalar(div: Any) -> float | None:
    """The divisor of a division node: a Python number, or a one-element CPU tensor."""
    try:
        other = div._saved_other
    except RuntimeError:
        return None
    if isinstance(other, torch.Tensor):
        return float(other) if other.numel() == 1 and other.device.type == "cpu" else None
    return float(other) if isinstance(other, (int, float)) else None


def _log_softmax_times_target(mul: Any) -> tuple[Any, Any]:
    """(the log-softmax node, the target tensor) of `target * log_softmax(x)`; Nones otherwise."""
    children = [child for child, _ in mul.next_functions]
    try:
        operands = (mul._saved_self, mul._saved_other)
    except RuntimeError:
        return None, None
    for child, target in ((children[0], operands[1]), (children[-1], operands[0])):
        log_softmax = child if child is not None and child.name() == "LogSoftmaxBackward0" else None
        if log_softmax is not None and isinstance(target, torch.Tensor) and not target.requires_grad:
            return log_softmax, target
    return None, None


def _one_hot(target: Any, dim: int) -> bool:
    """Every row a 0/1 vector with a single 1 along `dim` (one host read)."""
    if target.dim() <= dim or not target.is_floating_point():
        return False
    with torch.no_grad():
        binary = ((target == 0) | (target == 1)).all()
        single = (target.sum(dim) == 1).all()
        return bool(binary & single)
