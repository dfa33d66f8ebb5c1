"""Knowledge distillation: a teacher trained first, then a small student taught by it
(the style of PyTorch's knowledge-distillation tutorial).

On scikit-learn's 8x8 digits: a teacher MLP with dropout is trained with its own Adam (freed
when its training ends), put in `eval()` and run under `torch.no_grad()`; a student a tenth
its size learns from the teacher's softened outputs (KL divergence at temperature 4, scaled
by T^2) mixed with the cross-entropy on the labels. Two trainings in one process: the
student's optimizer takes the training over from the teacher's.

Bug `student-eval`: the student is put in `eval()` with the teacher and trained so, its
dropout off: TOR002.
"""

from __future__ import annotations

import argparse

import torch.nn.functional as F
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["student-eval"], default=None)
args = parser.parse_args()
torch.manual_seed(0)
TEMPERATURE, SOFT_WEIGHT = 4.0, 0.75

digits = load_digits()
x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
y = torch.tensor(digits.target)
x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0)
loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)


def mlp(hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(0.2), nn.Linear(hidden, 10))


def accuracy(model: nn.Module) -> float:
    model.eval()
    with torch.no_grad():
        return (model(x_test).argmax(dim=1) == y_test).float().mean().item()


def train_teacher(teacher: nn.Module, epochs: int) -> None:
    optimizer = torch.optim.Adam(teacher.parameters(), lr=1e-3)
    for _ in range(epochs):
        teacher.train()
        for images, labels in loader:
            optimizer.zero_grad()
            F.cross_entropy(teacher(images), labels).backward()
            optimizer.step()


def distil(student: nn.Module, teacher: nn.Module, epochs: int) -> None:
    optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)
    teacher.eval()
    for epoch in range(epochs):
        student.train(args.bug != "student-eval")
        for images, labels in loader:
            with torch.no_grad():
                soft_targets = F.softmax(teacher(images) / TEMPERATURE, dim=1)
            logits = student(images)
            soft = F.kl_div(F.log_softmax(logits / TEMPERATURE, dim=1), soft_targets, reduction="batchmean")
            loss = SOFT_WEIGHT * TEMPERATURE**2 * soft + (1 - SOFT_WEIGHT) * F.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"student epoch {epoch}: loss {loss.item():.4f}, test accuracy {accuracy(student):.3f}")


teacher = mlp(256)
train_teacher(teacher, epochs=8)
print(f"teacher test accuracy {accuracy(teacher):.3f}")
student = mlp(24)
distil(student, teacher, epochs=12)
