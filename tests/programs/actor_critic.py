"""The official PyTorch REINFORCE / actor-critic examples (examples/reinforcement_learning/
reinforce.py and actor_critic.py), gym's CartPole swapped for a tiny hand-written environment:
a one-dimensional balancing task (stay inside a corridor against random gusts).  Exercises
torch.distributions.Categorical (sample, log_prob, entropy), returns normalisation with
finfo eps, smooth_l1_loss for the critic, a two-headed policy net, and per-step tiny forwards."""
import argparse
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

parser = argparse.ArgumentParser(description='PyTorch actor-critic example')
parser.add_argument('--gamma', type=float, default=0.95, metavar='G',
                    help='discount factor (default: 0.95)')
parser.add_argument('--seed', type=int, default=543, metavar='N',
                    help='random seed (default: 543)')
parser.add_argument('--algo', default='actor_critic', choices=['actor_critic', 'reinforce'])
parser.add_argument('--episodes', type=int, default=100)
parser.add_argument('--log-interval', type=int, default=25, metavar='N',
                    help='interval between training status logs (default: 25)')
args = parser.parse_args()


class Corridor:
    """A CartPole-like balancing task: positions 0..L-1, start in the middle; each step the
    agent pushes left or right and, with probability 0.4, a gust pushes one more cell either way.
    Reward +1 for every step still inside (0 < pos < L-1), at most 50 steps."""
    L = 11

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def _obs(self):
        o = np.zeros(self.L, dtype=np.float32)
        o[self.pos] = 1.0
        return o

    def reset(self):
        self.pos = self.L // 2 + int(self.rng.integers(-1, 2))
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.pos += 1 if action == 1 else -1
        if self.rng.random() < 0.4:
            self.pos += 1 if self.rng.random() < 0.5 else -1
        self.pos = min(max(self.pos, 0), self.L - 1)
        self.t += 1
        done = self.pos in (0, self.L - 1)
        return self._obs(), 1.0, done, self.t >= 50, {}


env = Corridor(args.seed)
torch.manual_seed(args.seed)

SavedAction = namedtuple('SavedAction', ['log_prob', 'value', 'entropy'])


class Policy(nn.Module):
    """implements both actor and critic in one model"""

    def __init__(self):
        super(Policy, self).__init__()
        self.affine1 = nn.Linear(Corridor.L, 32)
        self.action_head = nn.Linear(32, 2)      # actor's layer
        self.value_head = nn.Linear(32, 1)       # critic's layer
        self.saved_actions = []
        self.rewards = []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


model = Policy()
optimizer = optim.Adam(model.parameters(), lr=2e-2)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value, m.entropy()))
    return action.item()


def finish_episode():
    R = 0
    saved_actions = model.saved_actions
    policy_losses = []
    value_losses = []
    returns = []
    for r in model.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    if len(returns) > 1:
        returns = (returns - returns.mean()) / (returns.std() + eps)
    for (log_prob, value, entropy), R in zip(saved_actions, returns):
        if args.algo == 'reinforce':
            policy_losses.append(-log_prob * R - 0.01 * entropy)
        else:
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage - 0.01 * entropy)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum()
    if value_losses:
        loss = loss + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    del model.rewards[:]
    del model.saved_actions[:]


def main():
    running_reward = 0.0
    history = []
    for i_episode in range(1, args.episodes + 1):
        state, _ = env.reset()
        ep_reward = 0
        for t in range(1, 10000):
            action = select_action(state)
            state, reward, done, truncated, _ = env.step(action)
            model.rewards.append(reward)
            ep_reward += reward
            if done or truncated:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        history.append(ep_reward)
        finish_episode()
        if i_episode % args.log_interval == 0:
            print('Episode {}\tLast reward: {:.2f}\tAverage reward: {:.2f}'.format(
                i_episode, ep_reward, running_reward))
    # greedy evaluation of the final policy from three start positions, twice
    with torch.no_grad():
        total = 0.0
        for rep in range(2):
            for start in (4, 5, 6):
                env.pos, env.t = start, 0
                state, done, truncated, ret = env._obs(), False, False, 0.0
                while not (done or truncated):
                    probs, _ = model(torch.from_numpy(state))
                    state, r, done, truncated, _ = env.step(int(probs.argmax()))
                    ret += r
                total += ret
    print(f"greedy return: {total / 6:.3f}  mean of last 50 episodes: {np.mean(history[-50:]):.3f}")
    # the reported "loss": 50 minus the mean training return of the last 50 episodes
    print(f"final_loss: {50 - float(np.mean(history[-50:])):.6f}")


if __name__ == '__main__':
    main()
