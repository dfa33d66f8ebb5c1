"""XGBoost, healthy: held-out validation set, early stopping on it, scale_pos_weight for imbalance.

Run: trainmedic run -- python examples/breadth/xgboost_healthy.py   (expect no finding)
"""

import xgboost as xgb
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

X, y = make_classification(
    n_samples=3000, n_features=20, n_informative=5, flip_y=0.05, weights=[0.95], random_state=0
)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
ratio = (y_train == 0).sum() / (y_train == 1).sum()
model = xgb.XGBClassifier(
    n_estimators=300,
    max_depth=3,
    learning_rate=0.1,
    scale_pos_weight=ratio,
    eval_metric="aucpr",
    early_stopping_rounds=20,
    n_jobs=1,
)
model.fit(X_train, y_train, eval_set=[(X_train, y_train), (X_val, y_val)], verbose=False)
print("best iteration:", model.best_iteration)
