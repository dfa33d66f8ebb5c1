"""scikit-learn, healthy: split first, preprocessing inside a Pipeline, a metric fit for imbalance.

Run: trainmedic run -- python examples/breadth/sklearn_healthy.py   (expect no finding)
"""

from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

X, y = make_classification(n_samples=800, n_features=10, weights=[0.95], random_state=0)
X = X * 4 + 10
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)

model = make_pipeline(StandardScaler(), LogisticRegression(class_weight="balanced"))
scores = cross_val_score(model, X_train, y_train, cv=5, scoring="average_precision")
print(f"PR-AUC {scores.mean():.3f}")
search = GridSearchCV(model, {"logisticregression__C": [0.1, 1.0]}, cv=3, scoring="balanced_accuracy")
search.fit(X_train, y_train)
print(f"test balanced accuracy {search.score(X_test, y_test):.3f}")
