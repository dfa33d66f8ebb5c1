"""What the collectors and the findings' files both know about the facts of a run.

A collector applies these while it gathers (which log lines may matter, which processes are
Ray's or Spark's helpers, the shape of a training config or of an MLlib plan, the names of
the observations it sends); a finding's file reads the same facts with them (curves and their
statistics, a log's errors, chance's yardstick for identical rows). One module a job:

- `logtext`: what training logs say (progress, errors, tracebacks), over lines of text;
- `ray`, `spark`: which processes of a tree are Ray's or Spark's own, and Spark's executor losses;
- `curves`: which series is the loss, and robust statistics of a curve;
- `chance`: how many identical rows chance alone gives;
- `config_model`: a training config file in one vocabulary (`TrainingConfig`);
- `mllib`: Spark MLlib's fits, evaluations and splits as plans;
- `examples`: where fine-tuning examples are in their file;
- `observations`: names of guard observations a collector sends and the rules read.

Public, and pure like the rules: the standard library and core types (`events`, `record`)
only; no framework, no I/O (`tests/test_architecture.py`). What only the findings share is
`rules/_helpers`, private to `rules/`.
"""
