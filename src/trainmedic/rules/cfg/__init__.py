"""CFG: training configuration that cannot be right as written, one file a finding.

Collectors (`trainmedic check config`, and `trainmedic run` for the config files a
command names) turn each recognised file into a `TrainingConfig`
(`evidence/config_model.py`) and ship it as a
`GuardObservation(check="training_config")`; each finding's file reads only that plain
data, reproducing the arithmetic DeepSpeed and Hugging Face do at start-up so a wrong
config is caught before it queues for hours.
"""
