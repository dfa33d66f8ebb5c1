"""LightGBM, broken twice: the "validation" rows are a copy of the training rows; no early stopping.

Run: trainmedic run -- python examples/breadth/lightgbm_leaky.py
Expect: TRN009 (eval set copies the training rows), TRN004 (best round long before the last).
"""

import lightgbm as lgb
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

X, y = make_classification(n_samples=3000, n_features=20, n_informative=5, flip_y=0.15, random_state=0)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0)

# 1. A copy of the training rows as the early-stopping set (LightGBM only notices the same object).
model = lgb.LGBMClassifier(n_estimators=100, n_jobs=1, verbose=-1)
model.fit(
    X_train,
    y_train,
    eval_X=(X_train.copy(),),
    eval_y=(y_train.copy(),),
    callbacks=[lgb.early_stopping(10, verbose=False)],
)
print("best iteration on copied training rows:", model.best_iteration_)

# 2. A real validation set, but 300 large trees and no early stopping.
params = {
    "objective": "binary",
    "num_leaves": 63,
    "learning_rate": 0.3,
    "min_child_samples": 2,
    "num_threads": 1,
    "verbose": -1,
}
train_set = lgb.Dataset(X_train, label=y_train)
booster = lgb.train(params, train_set, 300, valid_sets=[lgb.Dataset(X_val, label=y_val, reference=train_set)])
print("rounds trained:", booster.current_iteration())
