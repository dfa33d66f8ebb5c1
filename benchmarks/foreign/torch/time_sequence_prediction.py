"""Sine-wave prediction with stacked `nn.LSTMCell`s trained by L-BFGS, in the style of the
PyTorch time_sequence_prediction example: double precision, the closure zeroes the gradients,
computes the MSE over the whole sequence and calls backward; a test prediction follows
every step.

Healthy as written. `--bug no-zero-grad` drops `optimizer.zero_grad()` from the closure: each
of L-BFGS's function evaluations adds its gradient to the previous ones (TOR003
grads-not-zeroed).

Data: 20 sine waves of length 100 with random phase shifts.
"""

import argparse

import numpy as np

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-zero-grad"], default=None)
parser.add_argument("--steps", type=int, default=12)
args = parser.parse_args()

np.random.seed(2)
T, L, N = 20, 100, 20
x = np.empty((N, L), np.int64)
x[:] = np.arange(L) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
waves = np.sin(x / 1.0 / T).astype("float64")


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 32)
        self.lstm2 = nn.LSTMCell(32, 32)
        self.linear = nn.Linear(32, 1)

    def forward(self, inputs, future=0):
        outputs = []
        h_t = c_t = torch.zeros(inputs.size(0), 32, dtype=torch.double)
        h_t2 = c_t2 = torch.zeros(inputs.size(0), 32, dtype=torch.double)
        output = None
        for input_t in inputs.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs.append(output)
        for _ in range(future):  # predict the future from its own output
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs.append(output)
        return torch.cat(outputs, dim=1)


torch.manual_seed(0)
data = torch.from_numpy(waves)
inputs, target = data[3:, :-1], data[3:, 1:]
test_input, test_target = data[:3, :-1], data[:3, 1:]
seq = Sequence().double()
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=10)
for i in range(args.steps):

    def closure():
        if args.bug != "no-zero-grad":
            optimizer.zero_grad()
        loss = criterion(seq(inputs), target)
        loss.backward()
        return loss

    loss = optimizer.step(closure)
    with torch.no_grad():
        future = 50
        pred = seq(test_input, future=future)
        test_loss = criterion(pred[:, :-future], test_target)
    print(f"step {i}: train loss {loss.item():.5f}, test loss {test_loss.item():.5f}")
