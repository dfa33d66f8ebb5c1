"""XGBoost, broken twice: early stopping on the training rows; 300 rounds with no early stopping.

Run: trainmedic run -- python examples/breadth/xgboost_leaky.py
Expect: TRN009 (eval set = training data), TRN004 (best round long before the last), DAT009 info
(a 10% minority with no scale_pos_weight).
"""

import xgboost as xgb
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

X, y = make_classification(
    n_samples=3000, n_features=20, n_informative=5, flip_y=0.05, weights=[0.95], random_state=0
)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0)

# 1. "Validation" is the training set: early stopping never stops, the score is memorised.
leaky = xgb.XGBClassifier(n_estimators=80, max_depth=6, early_stopping_rounds=10, n_jobs=1)
leaky.fit(X_train, y_train, eval_set=[(X_train, y_train)], verbose=False)
print("best iteration on the training rows:", leaky.best_iteration)

# 2. A real validation set, but 300 deep rounds and no early stopping.
dtrain, dval = xgb.DMatrix(X_train, label=y_train), xgb.DMatrix(X_val, label=y_val)
params = {"objective": "binary:logistic", "max_depth": 8, "eta": 0.3, "nthread": 1}
booster = xgb.train(params, dtrain, 300, evals=[(dtrain, "train"), (dval, "val")], verbose_eval=False)
print("rounds trained:", booster.num_boosted_rounds())
