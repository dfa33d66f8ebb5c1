"""ENV: environment and reproducibility (`trainmedic env`, `trainmedic diff`), one file a finding.

The manifest reaches ENV002 as an `EnvironmentManifest` event; ENV001 compares two
manifests handed over as dicts by `trainmedic diff`.
"""
