"""CatBoost, broken twice: the eval set is the training data; use_best_model off and no early stopping.

Run: trainmedic run -- python examples/breadth/catboost_leaky.py
Expect: TRN009 (eval set = training data), TRN004 (best iteration long before the last), DAT009 info
(a 5% minority with no class weights).
"""

from catboost import CatBoostClassifier
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

X, y = make_classification(
    n_samples=2000, n_features=20, n_informative=5, flip_y=0.05, weights=[0.95], random_state=0
)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, random_state=0)
common = {"verbose": False, "thread_count": 1, "allow_writing_files": False}

# 1. Early stopping on the training rows: it never stops, and the "best" score is memorised.
leaky = CatBoostClassifier(iterations=60, early_stopping_rounds=10, **common)
leaky.fit(X_train, y_train, eval_set=(X_train, y_train))
print("best iteration on the training rows:", leaky.get_best_iteration())

# 2. A real validation set, but deep trees, a high learning rate, and the last iteration kept.
deep = CatBoostClassifier(iterations=100, depth=6, learning_rate=0.5, l2_leaf_reg=0.1, **common)
deep.fit(X_train, y_train, eval_set=(X_val, y_val), use_best_model=False)
print("iterations kept:", deep.tree_count_)
