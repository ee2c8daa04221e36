"""The PyTorch DQN tutorial (intermediate/reinforcement_q_learning.py), gym's CartPole swapped for
a tiny hand-written grid walk.  Exercises a namedtuple replay memory sampled with random.sample,
a policy and a target network synchronised by load_state_dict (hard copy) and by a soft update
over state_dict() items, epsilon-greedy action choice with torch.no_grad() and max(1).indices,
gather of the taken actions' Q values, a non-final mask with torch.tensor(dtype=torch.bool),
smooth_l1 (Huber) loss, AdamW with amsgrad and clip_grad_value_."""
import argparse
import math
import random
from collections import deque, namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--episodes', type=int, default=60)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
random.seed(args.seed)
torch.manual_seed(args.seed)


class GridWalk:
    """Positions 0..N-1 on a line, start at random; the goal is cell N-1 (reward +1, episode
    ends), every other step costs -0.05; 30 steps at most.  Observation: one-hot position plus
    a constant feature."""
    N = 8

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def _obs(self):
        o = np.zeros(self.N + 1, dtype=np.float32)
        o[self.pos] = 1.0
        o[-1] = 1.0
        return o

    def reset(self):
        self.pos = int(self.rng.integers(0, self.N - 2))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = min(max(self.pos + (1 if action == 1 else -1), 0), self.N - 1)
        if self.rng.random() < 0.1:                 # slippery
            self.pos = max(self.pos - 1, 0)
        self.t += 1
        terminated = self.pos == self.N - 1
        reward = 1.0 if terminated else -0.05
        return self._obs(), reward, terminated, self.t >= 30, {}


env = GridWalk(args.seed)

Transition = namedtuple('Transition', ('state', 'action', 'next_state', 'reward'))


class ReplayMemory(object):

    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        """Save a transition"""
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):

    def __init__(self, n_observations, n_actions):
        super(DQN, self).__init__()
        self.layer1 = nn.Linear(n_observations, 64)
        self.layer2 = nn.Linear(64, 64)
        self.layer3 = nn.Linear(64, n_actions)

    def forward(self, x):
        x = F.relu(self.layer1(x))
        x = F.relu(self.layer2(x))
        return self.layer3(x)


BATCH_SIZE = 32
GAMMA = 0.9
EPS_START = 0.9
EPS_END = 0.05
EPS_DECAY = 300
TAU = 0.01
LR = 3e-3

n_actions = 2
n_observations = GridWalk.N + 1

policy_net = DQN(n_observations, n_actions).to(device)
target_net = DQN(n_observations, n_actions).to(device)
target_net.load_state_dict(policy_net.state_dict())

optimizer = optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
memory = ReplayMemory(2000)

steps_done = 0


def select_action(state):
    global steps_done
    sample = random.random()
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1. * steps_done / EPS_DECAY)
    steps_done += 1
    if sample > eps_threshold:
        with torch.no_grad():
            # t.max(1) will return the largest column value of each row.
            return policy_net(state).max(1).indices.view(1, 1)
    else:
        return torch.tensor([[random.randrange(n_actions)]], device=device, dtype=torch.long)


losses = []


def optimize_model():
    if len(memory) < BATCH_SIZE:
        return
    transitions = memory.sample(BATCH_SIZE)
    batch = Transition(*zip(*transitions))

    non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)),
                                  device=device, dtype=torch.bool)
    non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
    state_batch = torch.cat(batch.state)
    action_batch = torch.cat(batch.action)
    reward_batch = torch.cat(batch.reward)

    state_action_values = policy_net(state_batch).gather(1, action_batch)

    next_state_values = torch.zeros(BATCH_SIZE, device=device)
    with torch.no_grad():
        next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch

    criterion = nn.SmoothL1Loss()
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
    losses.append(loss.item())

    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()


returns = []
for i_episode in range(args.episodes):
    state, info = env.reset()
    state = torch.tensor(state, dtype=torch.float32, device=device).unsqueeze(0)
    ep_return = 0.0
    for t in range(1000):
        action = select_action(state)
        observation, reward, terminated, truncated, _ = env.step(action.item())
        ep_return += reward
        reward = torch.tensor([reward], device=device)
        done = terminated or truncated
        if terminated:
            next_state = None
        else:
            next_state = torch.tensor(observation, dtype=torch.float32, device=device).unsqueeze(0)
        memory.push(state, action, next_state, reward)
        state = next_state
        optimize_model()

        # Soft update of the target network's weights
        # θ′ ← τ θ + (1 −τ )θ′
        target_net_state_dict = target_net.state_dict()
        policy_net_state_dict = policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[key] * (1 - TAU)
        target_net.load_state_dict(target_net_state_dict)
        if done:
            break
    returns.append(ep_return)
    if (i_episode + 1) % 20 == 0:
        print(f"episode {i_episode + 1}  return {ep_return:.2f}  mean loss {np.mean(losses[-50:]):.4f}")

# greedy evaluation: the Q-values of every start cell, argmax policy
policy_net.eval()
with torch.no_grad():
    total = 0.0
    for start in range(GridWalk.N - 1):
        env.pos, env.t = start, 0
        s, done, ret = env._obs(), False, 0.0
        while not done:
            a = torch.argmax(policy_net(torch.from_numpy(s).unsqueeze(0)), dim=1).item()
            s, r, term, trunc, _ = env.step(a)
            ret += r
            done = term or trunc
        total += ret
print(f"greedy mean return {total / (GridWalk.N - 1):.3f}")
# the reported loss: the mean TD (Huber) loss over the last 200 optimisation steps
print(f"final_loss: {float(np.mean(losses[-200:])):.6f}")
