"""A run that crashes with a traceback in the second epoch (shape bug in user code)."""

import argparse

import numpy as np


def forward(weights: np.ndarray, batch: np.ndarray) -> np.ndarray:
    return batch @ weights


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    weights = np.ones((8, 1))
    for epoch in range(1, args.epochs + 1):
        print(f"Epoch {epoch}/{args.epochs}")
        width = 8 if epoch == 1 else 9  # epoch 2 loads a batch with an extra column
        out = forward(weights, np.ones((4, width)))
        print(f"loss {float(out.mean()):.3f}")


if __name__ == "__main__":
    main()
