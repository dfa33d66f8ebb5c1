"""Experiment trackers (MLflow, Weights & Biases), both ways, one module per tracker
(`mlflow`, `wandb`): reading a run's metric histories and attaching the diagnosis to a run.

- Into the tracker: inside a supervised trainer, `learned` records which tracker
  run the script itself opened (`mlflow.start_run`, `MlflowClient.create_run`,
  `wandb.init`); after the run ends, `attach` puts the diagnosis (`payload`) on that run
  (tags or summary keys, findings.json and report.html, a killed run marked
  failed). Nothing is sent anywhere the script did not log to.
- From the tracker: `trainmedic diagnose mlflow://RUN_ID` and a W&B offline run
  folder read the metric histories through the trackers' own clients (the `diagnose`
  loader calls `read_mlflow_run`, `read_wandb_run`).

mlflow and wandb are optional extras, imported only where a run uses them.
"""
