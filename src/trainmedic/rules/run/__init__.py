"""RUN: how a supervised run ended, one file a finding, decided from the events of `trainmedic run`.

Each attempt (a run with `--restarts` has several) is judged on its own; what the findings
share (the attempts, how each one ended, which worker died) is in `rules._helpers`.
"""
