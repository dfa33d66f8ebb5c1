"""scikit-learn, leaky: scaled before cross-validation, oversampled before the split, scored by accuracy.

Run: trainmedic run -- python examples/breadth/sklearn_leaky.py
Expect: DAT014 (scaler fitted on all rows), DAT001 (oversampling before the split), DAT009 (accuracy
on a 5% minority).
"""

import numpy as np
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score, train_test_split
from sklearn.preprocessing import StandardScaler

X, y = make_classification(n_samples=800, n_features=10, weights=[0.95], random_state=0)
X = X * 4 + 10  # raw features with their own scale

# 1. The scaler sees every row, then cross-validation splits the scaled rows.
X_scaled = StandardScaler().fit_transform(X)
scores = cross_val_score(LogisticRegression(), X_scaled, y, cv=5)  # default scoring: accuracy
print(f"accuracy {scores.mean():.3f}")

# 2. Oversample the minority class by repeating its rows, then split.
rng = np.random.default_rng(0)
minority = np.flatnonzero(y == 1)
extra = rng.choice(minority, size=(y == 0).sum() - minority.size)
X_over, y_over = np.vstack([X, X[extra]]), np.concatenate([y, y[extra]])
X_train, X_test, y_train, y_test = train_test_split(X_over, y_over, test_size=0.25, random_state=0)
search = GridSearchCV(LogisticRegression(max_iter=500), {"C": [0.1, 1.0]}, cv=3, scoring="f1")
search.fit(X_train, y_train)
print(f"test f1 {search.score(X_test, y_test):.3f}")
