"""REINFORCE as PyTorch's reinforcement_learning example publishes it, on a CartPole-v1 task.

The same loop as `reinforce.py` with CartPole-v1's limits: episodes of up to 500 steps,
solved when the running reward passes 475 (the example's `env.spec.reward_threshold`),
log every 10 episodes. No gym: `Pole` integrates the textbook cart-pole equations in numpy.
The loss, -sum(log pi(a|s) x normalised discounted return) per episode, is small and mostly
positive on the short early episodes and scatters on both sides of zero once episodes are
long: a gradient surrogate, not a learning curve (the running reward goes 10 -> 475).
Healthy as written.
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
parser.add_argument("--gamma", type=float, default=0.99)
parser.add_argument("--episodes", type=int, default=1500)
args = parser.parse_args()
torch.manual_seed(543)
MAX_STEPS = 500
REWARD_THRESHOLD = 475.0


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
    if episode % 10 == 0:
        print(f"Episode {episode}\tLast reward: {episode_reward:.0f}\tAverage reward: {running_reward:.2f}")
    if running_reward > REWARD_THRESHOLD:
        print(f"Solved! Running reward is now {running_reward:.2f} after {episode} episodes")
        break
else:
    print(f"Not solved in {args.episodes} episodes: running reward {running_reward:.2f}")
