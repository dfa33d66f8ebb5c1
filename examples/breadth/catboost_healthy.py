"""CatBoost, healthy: held-out eval set, early stopping, balanced class weights.

Run: trainmedic run -- python examples/breadth/catboost_healthy.py   (expect no finding)
"""

from catboost import CatBoostClassifier
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

X, y = make_classification(
    n_samples=2000, n_features=20, n_informative=5, flip_y=0.05, weights=[0.95], random_state=0
)
X_train, X_val, y_train, y_val = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
model = CatBoostClassifier(
    iterations=300,
    auto_class_weights="Balanced",
    early_stopping_rounds=20,
    verbose=False,
    thread_count=1,
    allow_writing_files=False,
)
model.fit(X_train, y_train, eval_set=(X_val, y_val))
print("best iteration:", model.get_best_iteration())
