"""What several findings' files share, and no finding owns: spikes, windows, attempts, workers.

Private to `trainmedic.rules`: only a finding's file (or another helper here) imports from
here; `tests/test_architecture.py` checks it. Pure like the rules: no I/O, no framework
import. What a collector must apply while it gathers (log text, process classifiers, curve
statistics, observation names) is the public `trainmedic.evidence`, which both import.
"""
