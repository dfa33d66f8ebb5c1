"""REINFORCE on a pole-balancing task (the style of PyTorch's reinforcement_learning example).

No gym: `Pole` integrates the textbook cart-pole equations in numpy (4-d state, push left
or right, +1 a step until the pole falls, the cart leaves the track or 200 steps pass). The
policy keeps each step's log-probability; at the end of an episode the loss is
-sum(log pi(a|s) x normalised discounted return), one Adam step an episode, until the
running reward reaches 95 % of the maximum. That loss is a gradient surrogate centred on
zero: it changes sign from episode to episode and grows with the episodes' length as the
policy gets better, so its level is not a measure of the fit.

Bug `no-zero-grad`: `optimizer.zero_grad()` is left out, so every update applies the sum
of all past episodes' gradients: TOR003.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch.nn.functional as F
from torch.distributions import Categorical

import torch
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-zero-grad"], default=None)
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--episodes", type=int, default=600)
args = parser.parse_args()
torch.manual_seed(543)
MAX_STEPS = 200


class Pole:
    """Cart and pole, Euler steps of 20 ms; fails beyond 12 degrees or 2.4 units off centre."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.state = np.zeros(4)
        self.t = 0

    def reset(self) -> np.ndarray:
        self.state, self.t = self.rng.uniform(-0.05, 0.05, size=4), 0
        return self.state.astype(np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool]:
        gravity, cart, pole, half_length, dt = 9.8, 1.0, 0.1, 0.5, 0.02
        x, velocity, angle, spin = self.state
        push = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(angle), math.sin(angle)
        mass = cart + pole
        lean = (push + pole * half_length * spin**2 * sin) / mass
        spin_acc = (gravity * sin - cos * lean) / (half_length * (4 / 3 - pole * cos**2 / mass))
        acc = lean - pole * half_length * spin_acc * cos / mass
        x, velocity = x + dt * velocity, velocity + dt * acc
        angle, spin = angle + dt * spin, spin + dt * spin_acc
        self.state = np.array([x, velocity, angle, spin])
        self.t += 1
        fell = abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * math.pi / 180
        return self.state.astype(np.float32), 1.0, fell or self.t >= MAX_STEPS


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(128, 2)
        self.saved_log_probs: list[torch.Tensor] = []
        self.rewards: list[float] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softmax(self.affine2(F.relu(self.dropout(self.affine1(x)))), dim=1)


env = Pole(seed=543)
policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=1e-2)
eps = float(np.finfo(np.float32).eps)


def select_action(state: np.ndarray) -> int:
    probs = policy(torch.from_numpy(state).unsqueeze(0))
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return int(action.item())


def finish_episode() -> None:
    discounted, returns = 0.0, []
    for reward in reversed(policy.rewards):
        discounted = reward + args.gamma * discounted
        returns.insert(0, discounted)
    normalised = torch.tensor(returns)
    normalised = (normalised - normalised.mean()) / (normalised.std() + eps)
    if args.bug != "no-zero-grad":
        optimizer.zero_grad()
    terms = [-log_prob * ret for log_prob, ret in zip(policy.saved_log_probs, normalised, strict=True)]
    loss = torch.cat(terms).sum()
    loss.backward()
    optimizer.step()
    del policy.rewards[:], policy.saved_log_probs[:]


running_reward = 10.0
for episode in range(1, args.episodes + 1):
    state, episode_reward, done = env.reset(), 0.0, False
    while not done:
        state, reward, done = env.step(select_action(state))
        policy.rewards.append(reward)
        episode_reward += reward
    running_reward = 0.05 * episode_reward + 0.95 * running_reward
    finish_episode()
    if episode % 50 == 0:
        print(f"Episode {episode}\tLast reward: {episode_reward:.0f}\tAverage reward: {running_reward:.2f}")
    if running_reward > 0.95 * MAX_STEPS:
        print(f"Solved! Running reward is now {running_reward:.2f} after {episode} episodes")
        break
else:
    print(f"Not solved in {args.episodes} episodes: running reward {running_reward:.2f}")
