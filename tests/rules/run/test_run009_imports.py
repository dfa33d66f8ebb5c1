"""RUN009 on a failed import, from events: who ran the script is said only as far as it is known.

The end-to-end cases (another interpreter, trainmedic's own) run for real in
`tests/cli/test_run.py`; these are the records without the interpreter's own announcement (a
boot module that could not start in it, an older run folder)."""

from __future__ import annotations

from trainmedic.events import EnvironmentManifest, Event, ProcessSpawn
from trainmedic.record import RunRecord
from trainmedic.rules._helpers.run_examples import log_lines, supervised_run
from trainmedic.rules.run.run009_crashed import crashed

TRACEBACK = log_lines(
    "Traceback (most recent call last):",
    '  File "/home/u/train.py", line 1, in <module>',
    "    import datasets",
    "ModuleNotFoundError: No module named 'datasets'",
    stream="stderr",
)
OWN = {"python": {"executable": "/opt/tm/.venv/bin/python"}, "packages": {"datasets": "5.2.0"}}


def crash(*extra: Event) -> dict[str, object]:
    [finding] = crashed(RunRecord.of(supervised_run(*extra, *TRACEBACK, exit_code=1)))
    return {"message": finding.message, "fix": finding.fix, **finding.evidence}


def test_without_the_announcement_only_the_commands_word_is_named() -> None:
    spawn = ProcessSpawn(t=0.1, pid=101, ppid=100, cmdline=["python3", "train.py"], role="trainer")
    found = crash(spawn, EnvironmentManifest(t=0.0, pid=0, manifest=OWN))
    # not "python3, which has datasets": nothing says which python3 ran, nor what it has
    assert str(found["message"]).endswith(
        "; the command's interpreter is 'python3'; trainmedic's environment (/opt/tm/.venv/bin/python) "
        "has datasets 5.2.0"
    )
    assert "python3 -m pip install datasets" in str(found["fix"])


def test_a_module_the_project_may_own_is_not_only_a_pip_install() -> None:
    announced = ProcessSpawn(
        t=0.1, pid=101, ppid=100, cmdline=["python", "train.py"], role="python", source="announce",
        executable="/opt/tm/.venv/bin/python",
    )  # fmt: skip
    manifest = EnvironmentManifest(t=0.0, pid=0, manifest={**OWN, "packages": {"numpy": "2.4.6"}})
    found = crash(announced, manifest)
    assert str(found["message"]).endswith(
        "; the script ran under /opt/tm/.venv/bin/python (trainmedic's own interpreter)"
    )
    assert "the project's own module" in str(found["fix"])
    assert found["interpreter"] == {
        "module": "datasets",
        "script_python": "/opt/tm/.venv/bin/python",
        "trainmedic_python": "/opt/tm/.venv/bin/python",
        "trainmedic_has": None,
    }
