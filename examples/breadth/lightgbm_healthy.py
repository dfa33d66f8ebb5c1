"""LightGBM, healthy: held-out validation set and early stopping on it.

Run: trainmedic run -- python examples/breadth/lightgbm_healthy.py   (expect no finding)
"""

import lightgbm as lgb
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

X, y = make_classification(n_samples=3000, n_features=20, n_informative=5, flip_y=0.15, random_state=0)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0)
model = lgb.LGBMClassifier(n_estimators=300, learning_rate=0.05, num_leaves=15, n_jobs=1, verbose=-1)
model.fit(
    X_train,
    y_train,
    eval_X=(X_val,),
    eval_y=(y_val,),
    callbacks=[lgb.early_stopping(20, verbose=False)],
)
print("best iteration:", model.best_iteration_)
