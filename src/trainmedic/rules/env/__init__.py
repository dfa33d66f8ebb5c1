"""ENV: environment and reproducibility (`trainmedic env`, `trainmedic diff`), one file a finding.

The manifest reaches ENV002 as an `EnvironmentManifest` event; ENV001 compares two
manifests handed over as dicts by `trainmedic diff`.
"""

from __future__ import annotations

from trainmedic.rules.env import env001_env_drift as env001
from trainmedic.rules.env import env002_dirty_worktree as env002

#: The family table: one line a code, in catalogue order.
FAMILY = (env001, env002)
