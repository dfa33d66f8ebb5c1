"""PPO with GAE on a pole-balancing task, in the style of CleanRL's `ppo.py`.

As published: four vectorised environments, 128 steps each per rollout, GAE (gamma 0.99,
lambda 0.95), 4 epochs of 4 minibatches, normalised advantages, clipped surrogate,
`loss = pg_loss - ent_coef * entropy + vf_coef * v_loss` with the value loss on raw
returns, Adam (eps 1e-5) with the learning rate annealed linearly, and
`nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm=0.5)` before every step.
The value loss on raw returns has gradients of norm ~10-100, so clipping at 0.5 engages on
nearly every step by a large factor: clipping as the algorithm's normal operating mode,
while the episodic return climbs.

No gym: `CartPole` integrates the textbook cart-pole equations in numpy (500 steps at most,
as CartPole-v1), reset automatically as gym's vector environments do.

Healthy as written.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from torch.distributions.categorical import Categorical

import torch
from torch import nn, optim

parser = argparse.ArgumentParser()
parser.add_argument("--total-timesteps", type=int, default=20_000)
args = parser.parse_args()

SEED, NUM_ENVS, NUM_STEPS, LR = 1, 4, 128, 2.5e-4
GAMMA, GAE_LAMBDA, MINIBATCHES, UPDATE_EPOCHS = 0.99, 0.95, 4, 4
CLIP_COEF, ENT_COEF, VF_COEF, MAX_GRAD_NORM = 0.2, 0.01, 0.5, 0.5
BATCH = NUM_ENVS * NUM_STEPS
MINIBATCH = BATCH // MINIBATCHES
ITERATIONS = args.total_timesteps // BATCH


class CartPole:
    """Cart and pole, Euler steps of 20 ms; ends beyond 12 degrees, 2.4 units off centre or 500 steps."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> np.ndarray:
        self.state, self.t, self.ret = self.rng.uniform(-0.05, 0.05, size=4), 0, 0.0
        return self.state.astype(np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, float | None]:
        gravity, cart, pole, half_length, dt = 9.8, 1.0, 0.1, 0.5, 0.02
        x, velocity, angle, spin = self.state
        push = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(angle), math.sin(angle)
        mass = cart + pole
        lean = (push + pole * half_length * spin**2 * sin) / mass
        spin_acc = (gravity * sin - cos * lean) / (half_length * (4 / 3 - pole * cos**2 / mass))
        acc = lean - pole * half_length * spin_acc * cos / mass
        self.state = np.array(
            [x + dt * velocity, velocity + dt * acc, angle + dt * spin, spin + dt * spin_acc]
        )
        self.t, self.ret = self.t + 1, self.ret + 1.0
        done = abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * math.pi / 180 or self.t >= 500
        if done:  # auto-reset, as gym's vector environments do; report the episode's return
            finished = self.ret
            return self.reset(), 1.0, True, finished
        return self.state.astype(np.float32), 1.0, False, None


def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(4, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )  # fmt: skip
        self.actor = nn.Sequential(
            layer_init(nn.Linear(4, 64)), nn.Tanh(), layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 2), std=0.01),
        )  # fmt: skip

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


np.random.seed(SEED)
torch.manual_seed(SEED)
envs = [CartPole(SEED + i) for i in range(NUM_ENVS)]
agent = Agent()
optimizer = optim.Adam(agent.parameters(), lr=LR, eps=1e-5)

obs = torch.zeros((NUM_STEPS, NUM_ENVS, 4))
actions = torch.zeros((NUM_STEPS, NUM_ENVS))
logprobs = torch.zeros((NUM_STEPS, NUM_ENVS))
rewards = torch.zeros((NUM_STEPS, NUM_ENVS))
dones = torch.zeros((NUM_STEPS, NUM_ENVS))
values = torch.zeros((NUM_STEPS, NUM_ENVS))

next_obs = torch.tensor(np.stack([e.reset() for e in envs]))
next_done = torch.zeros(NUM_ENVS)
episodic: list[float] = []
for iteration in range(1, ITERATIONS + 1):
    optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / ITERATIONS) * LR  # annealing
    for step in range(NUM_STEPS):
        obs[step], dones[step] = next_obs, next_done
        with torch.no_grad():
            action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step] = value.flatten()
        actions[step], logprobs[step] = action, logprob
        results = [env.step(int(a)) for env, a in zip(envs, action, strict=True)]
        next_obs = torch.tensor(np.stack([r[0] for r in results]))
        rewards[step] = torch.tensor([r[1] for r in results])
        next_done = torch.tensor([float(r[2]) for r in results])
        episodic += [r[3] for r in results if r[3] is not None]

    with torch.no_grad():  # bootstrap value if not done; GAE
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        lastgaelam = torch.zeros(NUM_ENVS)
        for t in reversed(range(NUM_STEPS)):
            if t == NUM_STEPS - 1:
                nextnonterminal, nextvalues = 1.0 - next_done, next_value
            else:
                nextnonterminal, nextvalues = 1.0 - dones[t + 1], values[t + 1]
            delta = rewards[t] + GAMMA * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + GAMMA * GAE_LAMBDA * nextnonterminal * lastgaelam
        returns = advantages + values

    b_obs, b_logprobs, b_actions = obs.reshape(-1, 4), logprobs.reshape(-1), actions.reshape(-1)
    b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
    b_inds = np.arange(BATCH)
    for _epoch in range(UPDATE_EPOCHS):
        np.random.shuffle(b_inds)
        for start in range(0, BATCH, MINIBATCH):
            mb = b_inds[start : start + MINIBATCH]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions.long()[mb])
            ratio = (newlogprob - b_logprobs[mb]).exp()
            mb_adv = b_advantages[mb]
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
            pg_loss = torch.max(
                -mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - CLIP_COEF, 1 + CLIP_COEF)
            ).mean()
            v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb]) ** 2).mean()
            loss = pg_loss - ENT_COEF * entropy.mean() + v_loss * VF_COEF
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), MAX_GRAD_NORM)
            optimizer.step()
    recent = episodic[-20:]
    print(f"iteration {iteration} episodic_return {np.mean(recent) if recent else float('nan'):.1f}")
