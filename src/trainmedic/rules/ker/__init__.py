"""KER: Keras / TensorFlow input pipeline and fit bookkeeping, one file a finding.

The Keras integration (auto-instrumentation under `trainmedic run`, or
`trainmedic.keras.Guard`) describes every `fit` call with observations (see
`rules/_helpers/keras.py`); each finding's file decides and words its own. The
in-process guard calls KER002's `judge` to stop a run before an OOM.
"""
