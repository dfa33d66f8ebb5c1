"""What several findings' files share, and no finding owns: curves, spikes, log text, workers.

Private to `trainmedic.rules`: a finding's file imports from here. Pure like the rules: no
I/O, no framework import. The few classifiers that a collector must apply while it gathers
(which log lines may matter, which processes are Ray's or Spark's helpers) are imported from
here too, so the patterns live in one place; no collector words or decides a finding.
"""
