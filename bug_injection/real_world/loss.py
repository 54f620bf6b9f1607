"""Real-world bugs in the loss: probabilities where logits belong, shapes that broadcast,
reinforcement-learning targets that the gradient flows through.

minigrad has no ``nn.Softmax``, ``nn.LogSoftmax`` or ``nn.NLLLoss``; the minigrad twins of
the softmax entries use the one-line module and loss function a minigrad user writes instead.
"""
import numpy as np

from .case import (Case, batches, blobs, framework_module, loop_case, mlp, nll_loss, tensors,
                   torch_module)
from .entry import BACKENDS, DIAGNOSED, Entry, missed


def _classifier(framework, *, head, loss, optimizer="adam", seed=11):
    """An MLP classifier with ``head`` applied to its logits, trained with ``loss``."""
    fw = framework_module(framework)
    nn = fw.nn
    body = mlp(outputs=4, seed=0, framework=framework)
    model = nn.Sequential(body, head) if head is not None else body
    x, y = tensors(*blobs(seed=seed), framework=framework)
    opt = (fw.optim.Adam(model.parameters(), lr=3e-3) if optimizer == "adam"
           else fw.optim.SGD(model.parameters(), lr=0.1))
    return loop_case(model, opt, loss, x, y)


VOCAB, POSITIONS = 16, 12


def _token_lm(framework, *, labels, loss_shifts):
    """A tiny language model (embedding, tanh, head: each position's logits from its own
    token, causal by construction) on sequences where token t + 1 follows from token t
    (t + 1 = 3 t + 1 mod 16, no fixed point), so next-token prediction is learnable. ``labels``
    is ``"inputs"`` (labels = input_ids, the Hugging Face convention) or ``"shifted"`` (the
    next tokens, shifted in preprocessing); ``loss_shifts``: the loss scores logits[:, :-1]
    against labels[:, 1:] (as GPT-2's and Llama's heads do) rather than position by position
    (as BartForCausalLM's did)."""
    fw = framework_module(framework)
    nn, F = fw.nn, fw.nn.functional
    fw.manual_seed(0)
    model = nn.Sequential(nn.Embedding(VOCAB, 32), nn.Tanh(), nn.Linear(32, VOCAB))
    rng = np.random.default_rng(5)
    sequences = np.empty((64, POSITIONS + 1), dtype=np.int64)
    sequences[:, 0] = rng.integers(0, VOCAB, 64)
    for t in range(POSITIONS):
        sequences[:, t + 1] = (3 * sequences[:, t] + 1) % VOCAB
    ids = sequences[:, :-1]
    targets = ids if labels == "inputs" else sequences[:, 1:]
    x, y = tensors(ids, targets, framework=framework)

    def loss(logits, labels):
        if loss_shifts:
            logits, labels = logits[:, :-1], labels[:, 1:]
        return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))

    opt = fw.optim.Adam(model.parameters(), lr=1e-2)
    return loop_case(model, opt, loss, x, y, causal=True)


def _softmax(framework, *, log=False):
    """``nn.Softmax(dim=1)`` (``nn.LogSoftmax``), or on minigrad the module a user writes."""
    nn = framework_module(framework).nn
    if framework == "torch":
        return nn.LogSoftmax(dim=1) if log else nn.Softmax(dim=1)

    class Softmax(nn.Module):
        def forward(self, x):
            return x.log_softmax(dim=1) if log else x.softmax(dim=1)

    return Softmax()


def _softmax_ce(bug, framework):
    return _classifier(framework, head=_softmax(framework) if bug else None,
                       loss=framework_module(framework).nn.CrossEntropyLoss())


def _softmax_nll(bug, framework):
    loss = framework_module(framework).nn.NLLLoss() if framework == "torch" else nll_loss
    return _classifier(framework, head=_softmax(framework, log=not bug), loss=loss)


def _double_sigmoid(bug, framework):
    fw = framework_module(framework)
    nn = fw.nn
    x, y = blobs(classes=2, seed=12)
    x, y = tensors(x, y.astype("float32")[:, None], framework=framework)
    fw.manual_seed(0)
    layers = [nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)]
    model = nn.Sequential(*layers, nn.Sigmoid()) if bug else nn.Sequential(*layers)
    opt = fw.optim.Adam(model.parameters(), lr=3e-3)
    loss = nn.BCEWithLogitsLoss()
    return loop_case(model, opt, loss, x, y)


def _regression(bug, framework):
    fw = framework_module(framework)
    nn = fw.nn
    x, _ = blobs(seed=13)
    target = x[:, :3].sum(1)
    x, t = tensors(x, target if bug else target[:, None], framework=framework)
    fw.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = fw.optim.Adam(model.parameters(), lr=3e-3)
    loss = nn.MSELoss()
    return loop_case(model, opt, loss, x, t)


def _bandit(seed):
    """A contextual bandit: states from 4-class blobs, reward 1 for the action equal to the
    state's class; ``(torch, states, classes, generator)`` with a seeded generator for the
    actions sampled."""
    torch = torch_module()
    states, classes = tensors(*blobs(seed=seed))
    return torch, states, classes, torch.Generator().manual_seed(seed)


def _actor_critic(bug):
    """encode-attend-navigate's actor and critic, one loss (policy + critic), one optimizer:
    the policy loss weights the log-probability of the action taken by reward - critic."""
    torch, states, classes, generator = _bandit(36)
    nn, F = torch.nn, torch.nn.functional

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.actor = mlp(outputs=4, seed=0)
            self.critic = mlp(outputs=1, seed=1)

    model = ActorCritic()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train(after_step):
        for _, start, stop in batches(len(states)):
            s, c = states[start:stop], classes[start:stop]
            log_probs = F.log_softmax(model.actor(s), dim=1)
            actions = torch.multinomial(log_probs.exp().detach(), 1, generator=generator)
            reward = (actions[:, 0] == c).float()
            value = model.critic(s)[:, 0]
            advantage = reward - (value if bug else value.detach())
            policy_loss = -(advantage * log_probs.gather(1, actions)[:, 0]).mean()
            loss = policy_loss + F.mse_loss(value, reward)
            opt.zero_grad()
            loss.backward()
            opt.step()
            after_step(loss)
    return Case(model=model, optimizer=opt, train=train)


def _td_target(bug, gamma=0.9):
    """easy-rl's DQN update on replayed transitions (state, action, reward, next state, done):
    Q(s, a) regressed on r + gamma max_a' Q(s', a') (1 - done), the Q network's own estimate."""
    torch, states, classes, generator = _bandit(37)
    F = torch.nn.functional
    q_net = mlp(outputs=4, seed=0)
    actions = torch.randint(0, 4, (len(states), 1), generator=generator)
    rewards = (actions[:, 0] == classes).float()
    next_states = states.roll(-1, 0)
    done = (torch.rand(len(states), generator=generator) < 0.1).float()
    opt = torch.optim.Adam(q_net.parameters(), lr=3e-3)

    def train(after_step):
        for _, start, stop in batches(len(states)):
            part = slice(start, stop)
            q_taken = q_net(states[part]).gather(1, actions[part])[:, 0]
            q_next = q_net(next_states[part]).max(1)[0]
            target = rewards[part] + gamma * q_next * (1 - done[part])
            loss = F.mse_loss(q_taken, target if bug else target.detach())
            opt.zero_grad()
            loss.backward()
            opt.step()
            after_step(loss)
    return Case(model=q_net, optimizer=opt, train=train)


ENTRIES = (
    Entry(name="softmax_before_cross_entropy",
          source="https://discuss.pytorch.org/t/cross-entropy-loss-is-not-decreasing/43814/16",
          category="loss",
          root_cause="I put a softmax at the end of the model and fed its probabilities to "
                     "nn.CrossEntropyLoss, which applies log-softmax itself",
          reproduce=_softmax_ce,
          tool="monitor", codes=("PROBABILITIES_AS_LOGITS",),
          expected="PROBABILITIES_AS_LOGITS at the Softmax module (Monitor): the output rows "
                   "are probabilities and the loss's gradient on them is cross-entropy's",
          location="1", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="sigmoid_before_bce_with_logits",
          source="yudi-mars/daisyRec#15; Turoad/lanedet#32",
          category="loss",
          root_cause="my model ends in a sigmoid and I train it with BCEWithLogitsLoss, so the "
                     "sigmoid is applied twice and the loss does not converge",
          reproduce=_double_sigmoid,
          tool="monitor", codes=("PROBABILITIES_AS_LOGITS",),
          expected="PROBABILITIES_AS_LOGITS at the Sigmoid module (Monitor): the loss's "
                   "autograd graph feeds SigmoidBackward0 to "
                   "BinaryCrossEntropyWithLogitsBackward0",
          location="3", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="softmax_into_nll_loss",
          source="AnubhavGupta3377/Text-Classification-Models-Pytorch#9; clvrai/ACGAN-PyTorch#4",
          category="loss",
          root_cause="my model ends in softmax, not log_softmax, and I train it with NLLLoss, so "
                     "the loss is negative and pushes probabilities instead of log-probabilities",
          reproduce=_softmax_nll,
          tool="monitor", codes=("PROBABILITIES_AS_LOGITS",),
          expected="PROBABILITIES_AS_LOGITS at the Softmax module (Monitor): probability rows, "
                   "a gradient that picks the target's entry as NLLLoss does, a negative loss",
          location="1", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="lm_labels_not_shifted",
          source="huggingface/transformers#27517; macrocosm-os/pretraining#64",
          category="loss",
          root_cause="I pass labels = input_ids, as for GPT-2, but my causal LM's loss does not "
                     "shift them, so each position is trained to output its own input token: "
                     "the model copies its input and the training loss goes to almost zero",
          reproduce=lambda bug, framework: _token_lm(framework, labels="inputs",
                                                     loss_shifts=not bug),
          tool="preflight", codes=("TARGETS_MISALIGNED",),
          expected="TARGETS_MISALIGNED (preflight, causal=True): the loss's gradient on the "
                   "logits pulls position t towards input token t itself",
          location="loss", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="lm_labels_shifted_twice",
          source="huggingface/transformers#562; huggingface/transformers#44642",
          category="loss",
          root_cause="I shifted the labels by one in preprocessing, and the model's loss shifts "
                     "them again, so it learns to predict the token after next",
          reproduce=lambda bug, framework: _token_lm(
              framework, labels="shifted" if bug else "inputs", loss_shifts=True),
          tool="preflight", codes=("TARGETS_MISALIGNED",),
          expected="TARGETS_MISALIGNED (preflight, causal=True): position t is pulled towards "
                   "input token t + 2",
          location="loss", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="regression_target_broadcast",
          source="deepset-ai/FARM#229; Photon-AI-Research/NeuralSolvers#20",
          category="loss",
          root_cause="my regression head outputs (N, 1) and the targets are (N,), so MSELoss "
                     "broadcasts to (N, N) and compares every output with every target",
          reproduce=_regression,
          tool="preflight", codes=("SHAPE_BROADCAST",),
          expected="SHAPE_BROADCAST (preflight)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="critic_not_detached_in_policy_loss",
          source="astariul/encode-attend-navigate-pytorch#2",
          category="loss",
          root_cause="the policy loss uses the critic to compute the TD error without stopping "
                     "its gradient, so the critic is backpropagated from both the policy loss "
                     "and the critic loss and training is unstable",
          reproduce=lambda bug, _: _actor_critic(bug),
          tool="monitor", codes=(),
          expected="none yet: a check that a quantity used as a constant weight in a loss "
                   "(an advantage, a TD target) carries no gradient",
          status=missed("the advantage is a factor of a hand-written product, not a loss "
                        "function's target; a product of two factors that carry gradient is "
                        "also the form of objectives meant to train both (an entropy bonus, a "
                        "heteroscedastic weight): nothing in the graph tells a baseline meant "
                        "as a constant from a factor meant to be trained")),
    Entry(name="dqn_td_target_not_detached",
          source="datawhalechina/easy-rl#117",
          category="loss",
          root_cause="the TD target of my DQN has no detach(), which is not the semi-gradient "
                     "method: the loss also moves Q(s', a') towards Q(s, a)",
          reproduce=lambda bug, _: _td_target(bug),
          tool="monitor", codes=("TARGET_CARRIES_GRADIENT",),
          expected="TARGET_CARRIES_GRADIENT (Monitor): the TD target's own computation (a second "
                   "pass of the Q network) reaches the parameters the prediction reaches",
          location="loss", status=DIAGNOSED),
)
