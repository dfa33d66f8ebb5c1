"""RUN: how a supervised run ended, one file a finding, decided from the events of `trainmedic run`.

Each attempt (a run with `--restarts` has several) is judged on its own; what the findings
share (the attempts, how each one ended, which worker died) is in `rules._helpers`.
"""

from __future__ import annotations

from trainmedic.rules.run import run001_oom_killed as run001
from trainmedic.rules.run import run002_accelerator_oom as run002
from trainmedic.rules.run import run003_eval_memory_spike as run003
from trainmedic.rules.run import run004_silent_early_exit as run004
from trainmedic.rules.run import run005_input_exhausted as run005
from trainmedic.rules.run import run006_launcher_stub as run006
from trainmedic.rules.run import run007_hang as run007
from trainmedic.rules.run import run008_killed_by_signal as run008
from trainmedic.rules.run import run009_crashed as run009
from trainmedic.rules.run import run010_orphan_processes as run010
from trainmedic.rules.run import run011_guard_check_failed as run011

#: The family table: one line a code, in catalogue order.
FAMILY = (run001, run002, run003, run004, run005, run006, run007, run008, run009, run010, run011)
