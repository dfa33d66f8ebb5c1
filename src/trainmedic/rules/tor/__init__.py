"""TOR: the classic PyTorch loop bugs, one file a finding.

The in-process guard (`trainmedic.torch`, auto-installed under `run`) measures and
sends observations; each finding's file decides and words its own.
"""
