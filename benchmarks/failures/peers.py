"""The same cases through the tools a user would pick today, each mapped to our codes.

Installed from PyPI by this module into venvs of their own (gitignored):
- benchmarks/.peers-logs-venv: runmedic 0.1.1, trainproof 0.22.0, guarftrain 0.3.0;
- benchmarks/.peers-venv: deepchecks 0.19.1 with the old pins it needs (shared with
  benchmarks/data_check.py).

A peer gets what it reads: runmedic and trainproof the run's stdout (output.log) or the
framework logs a `diagnose` case reads; guarftrain runs the command itself
(`guarftrain watch -- CMD`, with a contract that declares no resume flags); deepchecks
the CSV splits of the DAT cases (data_integrity on train, train_test_validation of train
against each other split). Where a peer
cannot read a case's input it is "n/a", never a miss. The mapping from their check
names to our codes is in the tables below and in docs/failure-benchmark.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .runner import REPO, Outcome, child_env, substitute

BENCH = Path(__file__).resolve().parents[1]
LOGS_VENV = BENCH / ".peers-logs-venv"
DEEPCHECKS_VENV = BENCH / ".peers-venv"
LOGS_PINS = ["runmedic==0.1.1", "trainproof==0.22.0", "guarftrain==0.3.0"]
DEEPCHECKS_PINS = [
    "deepchecks==0.19.1",
    "setuptools<70",
    "scikit-learn==1.6.1",
    "pandas==2.2.3",
    "numpy==1.26.4",
]

# runmedic check (or "log:<pattern id>") -> our codes
RUNMEDIC = {
    "non_finite": "TRN001",
    "log:anomaly_nan": "TRN001",
    "divergence": "TRN002",
    "loss_spikes": "TRN002",
    "no_learning": "TRN003",
    "constant_lr_plateau": "TRN003",
    "overfitting": "TRN004",
    "input_bound": "TRN005",
    "grad_spikes": "TRN007",
    "log:amp_overflow": "TRN007",
    "log:cuda_oom": "RUN002",
    "log:dataloader_killed": "RUN001",
    "log:unused_params": "TOR001",
}
# trainproof finding id -> our codes (levels FAIL and WARN count)
TRAINPROOF = {
    "TP-NAN": "TRN001",
    "TP-NAN-GRAD": "TRN001",
    "TP-DIVERGE": "TRN002",
    "TP-FLAT": "TRN003",
    "TP-DEAD-RUN": "TRN003",
    "TP-ZERO-LR": "TRN003",
    "TP-OVERFIT": "TRN004",
    "TP-LOADER-BOUND": "TRN005",
    "TP-GRAD-SPIKE": "TRN007",
    "TP-ZERO-GRAD": "TRN008",
}
# guarftrain's crash kinds (guardian/watchdog.py: RECOVERABLE_PATTERNS, SIGNAL_EXIT_CODES) -> our codes.
# Its `oom` is an allocator error in the trainer's stderr ("CUDA out of memory",
# "DefaultCPUAllocator: can't allocate memory"): the framework's own OOM (RUN002), not the
# kernel's OOM kill, which it sees as `sigkill` (exit -9/137) like any other SIGKILL. So it has
# no equivalent of RUN001.
GUARFTRAIN = {
    "oom": "RUN002",
    "sigkill": "RUN008",
    "sigterm": "RUN008",
    "no_progress": "RUN007",
    "nan": "TRN001",
}
GUARFTRAIN_FAILED = "RUN009"  # any other classified failure: it saw the run crash
# deepchecks check names (`check.name()`, as its suites list them) -> our codes. Read in
# deepchecks/tabular/suites/default_suites.py (the checks of data_integrity and
# train_test_validation and their default conditions) and each check's module.
DEEPCHECKS = {
    "Is Single Value": None,
    "Special Characters": None,
    "Mixed Nulls": "DAT008",
    "Mixed Data Types": "DAT010",
    "String Mismatch": None,
    "Data Duplicates": "DAT007",
    "String Length Out Of Bounds": None,
    "Conflicting Labels": "DAT006",
    "Outlier Sample Detection": None,
    "Feature Label Correlation": "DAT005",
    "Feature Feature Correlation": None,
    "Identifier Label Correlation": "DAT005",
    "Datasets Size Comparison": None,
    "New Label Train Test": None,
    "New Category Train Test": "DAT010",
    "String Mismatch Comparison": None,
    "Date Train Test Leakage Duplicates": "DAT004",
    "Date Train Test Leakage Overlap": "DAT004",
    "Index Train Test Leakage": "DAT003",  # the case's group column is given as its index column
    "Train Test Samples Mix": "DAT001",
    "Feature Label Correlation Change": "DAT005",
    "Feature Drift": "DAT011",
    "Label Drift": "DAT011",
    "Multivariate Drift": "DAT011",
    "Percent Of Nulls": "DAT008",  # not in data_integrity: added with its default condition (5 %)
}
# deepchecks/tabular/context.py: train_test_validation stops with this DatasetValidationError when
# the splits' columns differ; the user is told the cause, so it counts as finding DAT010.
SCHEMA_REFUSAL = "train and test requires to share the same features columns"
# Not used: its Class Imbalance check (not in the default suites) warns, with its default
# condition `add_condition_class_ratio_less_than(0.1)`, when the least/most frequent label ratio
# is *at least* 0.1 (balanced labels) and passes a 2 % minority: DAT009 is n/a for deepchecks.

# What each peer can find at all: a required code outside its set is "n/a" for it, not a miss.
CAN_FIND = {
    "runmedic": frozenset(RUNMEDIC.values()),
    "trainproof": frozenset(TRAINPROOF.values()),
    "guarftrain": frozenset({*GUARFTRAIN.values(), GUARFTRAIN_FAILED}),
    "deepchecks": frozenset(code for code in DEEPCHECKS.values() if code),
}

REUSE_TRANSCRIPTS = False  # set by run_peers(reuse=True): guarftrain verdicts re-read from its transcripts
GUARFTRAIN_CONTRACT = """script_contract:
  metrics_channel:
    type: log_file
    path: ../logs/train.log
    log_pattern: 'loss[ =:]+([-+\\d.eE]+|nan|inf)'
  launcher: python
  batch_semantics: null
"""
GUARFTRAIN_PROJECT = """model:
  entry: ''
  task_type: classification
paths:
  contract_path: configs/contract.yaml
  extra_sys_paths: []
project:
  ckpt_dir: ./checkpoints
  data_dir: ./data
  log_dir: ./logs
  name: failbench
"""

DEEPCHECKS_CHILD = r"""
import json, sys, warnings
warnings.filterwarnings("ignore")
import pandas as pd
from deepchecks.tabular import Dataset
from deepchecks.tabular.checks import PercentOfNulls
from deepchecks.tabular.suites import data_integrity, train_test_validation
folder, label, extra = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
from pathlib import Path
# a column named `count` crashes Conflicting Labels and Data Duplicates in 0.19.1 (pandas: "'count'
# is both an index level and a column label"): renamed, so deepchecks is judged on its checks
read = lambda path: pd.read_csv(path).rename(columns={"count": "count_"})
train = read(Path(folder) / "train.csv")
others = [Path(folder) / f"{n}.csv" for n in ("val", "test", "serving")]
others = [path for path in others if path.exists()]
def dataset(frame):
    has_label = label in frame.columns
    skip = (label, extra.get("datetime_name"), extra.get("index_name"))
    cat = [c for c in frame.columns if frame[c].dtype == object and c not in skip]
    kwargs = {k: v for k, v in extra.items() if v in frame.columns}
    return Dataset(frame, label=label if has_label else None, cat_features=cat, **kwargs)
failed = []
# the data_integrity suite, plus the missing-values check it leaves out, with its default condition
nulls = PercentOfNulls().add_condition_percent_of_nulls_not_greater_than()
results = [data_integrity().add(nulls).run(dataset(train))]
for other in others:  # the suite takes two datasets: train against each other split
    results.append(train_test_validation().run(dataset(train), dataset(read(other))))
for suite in results:
    for result in suite.get_not_passed_checks():
        failed.append(result.check.name())
print(json.dumps({"failed": sorted(set(failed))}))
"""


def ensure_venv(path: Path, pins: list[str]) -> Path | None:
    """The venv's python, created and installed on first use; None (with the reason printed) if that fails."""
    python = path / "bin" / "python"
    stamp = path / ".installed"
    if stamp.exists():
        return python
    try:
        if not python.exists():
            subprocess.run(
                [sys.executable, "-m", "venv", str(path)], check=True, capture_output=True, timeout=600
            )
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *pins], check=True, capture_output=True, timeout=1800
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        print(f"peers: installing {' '.join(pins)} into {path} failed: {error}", file=sys.stderr)
        return None
    stamp.touch()
    return python


def _verdict(
    outcome: Outcome,
    peer: str,
    codes: Iterable[str],
    flagged: bool,
    raw: object,
    unread: Iterable[str] = (),
) -> dict[str, object]:
    """Scored per required finding: hit, miss, or n/a where the peer has no equivalent of it.
    The case's verdict: detected (every applicable code hit), partial, missed, or n/a (none applies)."""
    mapped = sorted(set(codes))
    if outcome.case.control:
        return {"verdict": "false-positive" if flagged else "clean", "mapped": mapped, "raw": raw}
    can_find = CAN_FIND[peer] - set(unread)  # `unread`: codes whose input this run did not give it
    per_code = {
        code: ("hit" if code in mapped else "miss") if code in can_find else "n/a"
        for code in outcome.case.must
    }
    applicable = [v for v in per_code.values() if v != "n/a"]
    hits = applicable.count("hit")
    if not applicable:
        verdict = "n/a"
    elif hits == len(applicable):
        verdict = "detected"
    else:
        verdict = "partial" if hits else "missed"
    result: dict[str, object] = {"verdict": verdict, "codes": per_code, "mapped": mapped, "raw": raw}
    if verdict == "n/a":
        result["reason"] = f"{peer} has no equivalent of {', '.join(outcome.case.must)}"
    return result


def NA(reason: str) -> dict[str, object]:
    return {"verdict": "n/a", "reason": reason}


def log_input(outcome: Outcome) -> Path | None:
    """What a log-reading peer gets: the run's stdout, or the framework logs `diagnose` read."""
    spec = outcome.case.peers
    if spec is None or outcome.work is None:
        return None
    if spec == "stdout":
        path = outcome.work / "run" / "output.log"
    else:
        prepared = outcome.work.parents[1] / "prepared" / (outcome.case.prepare or "")
        path = Path(substitute([spec], {"prepared": str(prepared)})[0])
    return path if path.exists() else None


def runmedic(outcome: Outcome, bin_dir: Path) -> dict[str, object]:
    path = log_input(outcome)
    if path is None:
        return NA("no training log to read (data or config case)")
    done = subprocess.run(
        [str(bin_dir / "runmedic"), "diagnose", "--json", str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        runs = json.loads(done.stdout)
    except ValueError:
        return NA(f"runmedic could not read it (exit {done.returncode}): {done.stderr.strip()[-200:]}")
    if not runs:
        return NA("runmedic found no run in it")
    findings = [f for run in runs for f in run.get("findings", [])]
    checks = [str(f["check"]) for f in findings]
    codes = [RUNMEDIC[c] for c in checks if c in RUNMEDIC]
    flagged = any(f.get("severity") in ("critical", "warning") for f in findings)
    return _verdict(outcome, "runmedic", codes, flagged, checks)


def _trainproof_ids(node: object) -> Iterable[tuple[str, str]]:
    if isinstance(node, dict):
        if isinstance(node.get("id"), str) and str(node["id"]).startswith("TP-") and "level" in node:
            yield str(node["id"]), str(node["level"])
        for value in node.values():
            yield from _trainproof_ids(value)
    elif isinstance(node, list):
        for value in node:
            yield from _trainproof_ids(value)


def trainproof(outcome: Outcome, bin_dir: Path) -> dict[str, object]:
    path = log_input(outcome)
    if path is None:
        return NA("no training log to read (data or config case)")
    done = subprocess.run(
        [str(bin_dir / "trainproof"), "doctor", "--json", str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return NA(f"trainproof could not read it (exit {done.returncode})")
    not_judged = report.get("not_judged") or {}
    if not report.get("reports") or not_judged.get("judged", 1) == 0:
        return NA(f"trainproof judged nothing: {report.get('worst_verdict')} with not_judged {not_judged}")
    found = [(i, level) for i, level in _trainproof_ids(report.get("reports")) if level in ("FAIL", "WARN")]
    codes = [TRAINPROOF[i] for i, _ in found if i in TRAINPROOF]
    return _verdict(outcome, "trainproof", codes, bool(found), sorted({f"{i}:{level}" for i, level in found}))


def guarftrain(outcome: Outcome, bin_dir: Path) -> dict[str, object]:
    case = outcome.case
    if case.kind != "run" or outcome.work is None:
        return NA("guarftrain watches a training command; this case has none")
    folder = outcome.work.parents[1] / "peers" / case.id  # apart from the case folder a rerun of it clears
    project = folder / "guarftrain"
    (project / "configs").mkdir(parents=True, exist_ok=True)
    (project / "logs").mkdir(exist_ok=True)
    (project / "configs" / "contract.yaml").write_text(GUARFTRAIN_CONTRACT)
    (project / ".guardian-project.yaml").write_text(GUARFTRAIN_PROJECT)
    # absolute paths: guarftrain runs in its own project folder (it writes logs/ into its working directory)
    command = [
        re.sub(r"(?<![\w/.])(examples|benchmarks)/", f"{REPO}/\\1/", arg)
        for arg in substitute(case.command, {"python": sys.executable, "work": str(outcome.work)})
    ]
    watch = [str(bin_dir / "guarftrain"), "--project-dir", str(project), "watch", "--", *command]
    if "--memory-limit" in case.run_args:
        # the same memory limit as the trainmedic run: guarftrain and its trainer inside one cgroup
        # (trainmedic run only provides the cgroup here: --no-instrument, its own findings unused)
        limit = case.run_args[case.run_args.index("--memory-limit") + 1]
        cgroup = [
            sys.executable,
            "-m",
            "trainmedic",
            "run",
            "--quiet",
            "--no-instrument",
            "--memory-limit",
            limit,
        ]
        watch = [*cgroup, "--out", str(folder / "guarftrain-cgroup"), "--", *watch]
    transcript = folder / "guarftrain.txt"
    if REUSE_TRANSCRIPTS and transcript.exists():  # an earlier run of this case (--reuse): read, not rerun
        return _guarftrain_verdict(outcome, transcript.read_text(errors="replace"), None, project)
    env = child_env(case.env)
    timeout = case.timeout
    if "--hang-timeout" in case.run_args:
        # the case's hang timeout, as trainmedic gets it (guardian/config.py: watchdog.no_progress_timeout,
        # default 1800 s, set through its GUARDIAN_WATCHDOG__* environment overrides). It only warns
        # (no_progress_kill_after unset): the run ends at the case's timeout, its transcript is read then.
        hang = float(case.run_args[case.run_args.index("--hang-timeout") + 1])
        env["GUARDIAN_WATCHDOG__NO_PROGRESS_TIMEOUT"] = str(hang)
        timeout = min(timeout, 60 + 6 * hang)
    # its own session: at the timeout the whole tree (guarftrain and the trainer it started) is ended
    proc = subprocess.Popen(
        watch,
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        returncode: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        returncode = None  # ended by the benchmark, not by itself
    text = stdout + stderr
    if "--memory-limit" in case.run_args:  # guarftrain's own output, not the cgroup wrapper's diagnosis
        text = (folder / "guarftrain-cgroup" / "output.log").read_text(errors="replace")
    transcript.write_text(text)
    return _guarftrain_verdict(outcome, text, returncode, project)


def _guarftrain_verdict(
    outcome: Outcome, text: str, returncode: int | None, project: Path
) -> dict[str, object]:
    kinds = set(re.findall(r"kind=(\w+)", text)) | set(re.findall(r"失败原因: (\w+)", text))
    if "疑似无进展" in text:
        kinds.add("no_progress")
    if "NaN/Inf" in text:  # its monitor's alert, when the metrics channel reads a non-finite loss
        kinds.add("nan")
    codes = [GUARFTRAIN.get(kind, GUARFTRAIN_FAILED) for kind in kinds]
    flagged = bool(kinds) or "状态: 失败" in text or returncode not in (0, None)  # "status: failed"
    # Its NaN alert reads the metrics log file of its contract; `watch` does not write the trainer's
    # output there (guardian/cli.py writes logs/train.log only when attaching to a PID): without
    # that file it had no metric to read, and TRN001 is n/a for it, not a miss.
    unread = () if (project / "logs" / "train.log").exists() else ("TRN001",)
    raw = {"exit": returncode, "kinds": sorted(kinds)}
    return _verdict(outcome, "guarftrain", codes, flagged, raw, unread)


def deepchecks(outcome: Outcome, python: Path) -> dict[str, object]:
    case = outcome.case
    if case.prepare != "data" or case.args[:2] != ("check", "data") or outcome.work is None:
        return NA("deepchecks checks tabular data sets; this case has none")
    args = list(case.args)
    folder = Path(
        substitute([args[2]], {"prepared": str(outcome.work.parents[1] / "prepared" / "data")})[0]
    ).parent
    extra = {}
    if "--time" in args:
        extra["datetime_name"] = args[args.index("--time") + 1]
    if "--group" in args:  # deepchecks has no group notion: its index leakage check on the group column
        extra["index_name"] = args[args.index("--group") + 1]
    done = subprocess.run(
        [str(python), "-c", DEEPCHECKS_CHILD, str(folder), "y", json.dumps(extra)],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    try:
        failed = json.loads(done.stdout.strip().splitlines()[-1])["failed"]
    except (ValueError, IndexError, KeyError):
        if SCHEMA_REFUSAL in done.stderr:  # it refuses splits whose columns differ, and says so
            return _verdict(outcome, "deepchecks", ["DAT010"], True, [f"refused: {SCHEMA_REFUSAL}"])
        return NA(f"deepchecks failed to run (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    codes = [code for name in failed if (code := DEEPCHECKS.get(name))]
    return _verdict(outcome, "deepchecks", codes, bool(failed), failed)


def _has_transcript(name: str, outcome: Outcome) -> bool:
    if not name.startswith("guarftrain") or outcome.work is None:
        return False
    return (
        outcome.work.parents[1] / "peers" / outcome.case.id / "guarftrain" / ".." / "guarftrain.txt"
    ).exists()


def run_peers(
    outcomes: list[Outcome],
    out: Path,
    workers: int = 2,
    reuse: bool = False,
    only: Iterable[str] = (),
    cached_only: Iterable[str] = (),
) -> dict[str, dict[str, dict[str, object]]]:
    """Every peer on every case (n/a where it cannot read the case); the verdicts by peer and case id.

    With `reuse`, verdicts already in out/peers.json are kept (a peer is slow to rerun: guarftrain
    runs every training command again); `only` limits the run to peers whose name starts so;
    peers named in `cached_only` are not run again: a case without an earlier verdict is "not run".
    """
    global REUSE_TRANSCRIPTS
    REUSE_TRANSCRIPTS = reuse
    saved = out / "peers.json"
    cached: dict[str, dict[str, dict[str, object]]] = json.loads(saved.read_text()) if saved.exists() else {}
    results: dict[str, dict[str, dict[str, object]]] = dict(cached)
    wanted = lambda name: not only or any(name.startswith(prefix) for prefix in only)  # noqa: E731
    logs_wanted = any(wanted(name) for name in ("runmedic", "trainproof", "guarftrain"))
    logs_python = ensure_venv(LOGS_VENV, LOGS_PINS) if logs_wanted else None
    deep_python = ensure_venv(DEEPCHECKS_VENV, DEEPCHECKS_PINS) if wanted("deepchecks") else None
    tools: dict[str, Callable[[Outcome], dict[str, object]]] = {}
    if logs_python is not None:
        bin_dir = logs_python.parent
        tools["runmedic 0.1.1"] = lambda o: runmedic(o, bin_dir)
        tools["trainproof 0.22.0"] = lambda o: trainproof(o, bin_dir)
        tools["guarftrain 0.3.0"] = lambda o: guarftrain(o, bin_dir)
    if deep_python is not None:
        tools["deepchecks 0.19.1"] = lambda o: deepchecks(o, deep_python)
    for name, tool in tools.items():
        if not wanted(name):
            continue
        print(f"peer {name} ...", file=sys.stderr, flush=True)
        earlier = cached.get(name, {}) if reuse else {}

        def safe(
            outcome: Outcome,
            tool: Callable[[Outcome], dict[str, object]] = tool,
            earlier: dict[str, dict[str, object]] = earlier,
            name: str = name,
        ) -> dict[str, object]:
            if outcome.case.id in earlier:
                return earlier[outcome.case.id]
            if name.split(maxsplit=1)[0] in cached_only and not _has_transcript(name, outcome):
                return {"verdict": "not run", "reason": "left out of this run for time (--peers-cached-only)"}
            try:
                return tool(outcome)
            except Exception as error:  # a peer's crash is its verdict on that case, not the benchmark's
                return NA(f"{type(error).__name__}: {error}")

        with ThreadPoolExecutor(max_workers=workers) as pool:
            verdicts = dict(zip([o.case.id for o in outcomes], pool.map(safe, outcomes), strict=True))
        results[name] = {**results.get(name, {}), **verdicts}
        on_disk = (
            json.loads(saved.read_text()) if saved.exists() else {}
        )  # another process may have added a peer
        saved.write_text(json.dumps({**on_disk, name: results[name]}, indent=2, ensure_ascii=False))
    chosen = {o.case.id for o in outcomes}
    return {name: {i: v for i, v in verdicts.items() if i in chosen} for name, verdicts in results.items()}
