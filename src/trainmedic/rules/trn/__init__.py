"""TRN: training dynamics, from the metrics trainmedic sees (any framework), one file a finding.

TRN001-TRN004 are pure, noise-robust rules over the loss curves of a `RunRecord`
(`evidence/curves.py` says which metric is "the loss"), shared by `trainmedic run`, the
in-process guards and `trainmedic diagnose`; TRN005-TRN008 and TRN010 read what the
PyTorch guard measures on sampled steps, TRN011 what it counts of a gradient scaler; TRN014
what TRL's DPOTrainer logs and builds; TRN015-TRN017 what TRL's RL trainers log; TRN009 the
eval sets of the boosters, the HF Trainer and Spark MLlib. Every threshold is a named constant beside its rule.
"""
