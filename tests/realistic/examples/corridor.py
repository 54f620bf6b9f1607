"""A corridor world in NumPy for the policy-gradient examples (no gym).

The agent starts in a random cell of the left half of a corridor and moves left or right;
reaching the right end pays 1 and ends the episode (no other reward); an episode lasts at most
``max_steps`` moves. The observation is the one-hot cell. A random policy wanders; a good one
walks right, so its return rises towards 1.
"""
import numpy as np


class Corridor:

    def __init__(self, cells=10, max_steps=15, seed=0):
        self.cells, self.max_steps = cells, max_steps
        self.rng = np.random.default_rng(seed)
        self.position, self.steps = 0, 0

    def reset(self):
        self.position, self.steps = int(self.rng.integers(0, self.cells // 2)), 0
        return self._observe()

    def step(self, action):
        self.position = int(np.clip(self.position + (1 if action == 1 else -1), 0,
                                    self.cells - 1))
        self.steps += 1
        arrived = self.position == self.cells - 1
        reward = 1.0 if arrived else 0.0
        return self._observe(), reward, arrived or self.steps >= self.max_steps

    def _observe(self):
        observation = np.zeros(self.cells, dtype=np.float32)
        observation[self.position] = 1.0
        return observation
