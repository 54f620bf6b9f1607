"""Real-world bugs in the optimizer and the scheduler.

minigrad has no ``lr_scheduler``; the minigrad twins of the scheduler entries use the few lines
of a step-decay scheduler a minigrad user writes instead.
"""
import numpy as np

from .case import (STEPS, Case, batches, blobs, classifier, framework_module, mlp, simple_loop,
                   tensors, torch_module)
from .entry import BACKENDS, DIAGNOSED, Entry

EPOCH = 8     # batches per epoch in these reproductions


def _step_lr(framework, optimizer, *, step_size=1, gamma):
    """torch's ``StepLR`` (``ExponentialLR`` when ``step_size`` is 1), or on minigrad the
    hand-written one: every ``step_size`` calls of ``step()``, each group's lr *= gamma."""
    if framework == "torch":
        schedulers = framework_module(framework).optim.lr_scheduler
        return (schedulers.ExponentialLR(optimizer, gamma=gamma) if step_size == 1
                else schedulers.StepLR(optimizer, step_size=step_size, gamma=gamma))

    class StepLR:
        calls = 0

        def step(self):
            self.calls += 1
            if self.calls % step_size == 0:
                for group in optimizer.param_groups:
                    group["lr"] *= gamma

    return StepLR()


def _scheduler(per_batch, framework):
    fw, model, x, y, loss_fn = classifier(framework, seed=14)
    opt = fw.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scheduler = _step_lr(framework, opt, step_size=2, gamma=0.5)  # meant per epoch

    def train(after_step):
        for step, start, stop in batches(len(x)):
            opt.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            opt.step()
            after_step(loss)
            if per_batch or (step + 1) % EPOCH == 0:
                scheduler.step()
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _two_instances(bug, framework):
    fw = framework_module(framework)
    first = mlp(outputs=4, seed=0, framework=framework)
    opt = fw.optim.SGD(first.parameters(), lr=0.05)
    model = mlp(outputs=4, seed=1, framework=framework)  # instantiated again further down
    if not bug:
        opt = fw.optim.SGD(model.parameters(), lr=0.05)
    x, y = tensors(*blobs(seed=15), framework=framework)
    loss_fn = fw.nn.CrossEntropyLoss()
    return Case(model=model, optimizer=opt, loss_fn=loss_fn,
                train=simple_loop(model, opt, loss_fn, x, y))


def _scheduler_only(bug, framework):
    fw, model, x, y, loss_fn = classifier(framework, seed=16)
    opt = fw.optim.SGD(model.parameters(), lr=0.05)
    scheduler = _step_lr(framework, opt, gamma=0.99)

    def train(after_step):
        for _, start, stop in batches(len(x), steps=STEPS):
            opt.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            if not bug:
                opt.step()
            scheduler.step()
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _resized_embeddings(bug, vocab=16, added=4):
    """run_lm_finetuning: new tokens are added to the tokenizer and the model's token
    embedding is resized to the new vocabulary (a new Embedding holding the old rows, as
    resize_token_embeddings does); a token tagger fine-tuned on text that uses them."""
    torch = torch_module()
    nn = torch.nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, 16)
            self.head = nn.Linear(16, 4)

        def forward(self, ids):
            return self.head(torch.tanh(self.embed(ids)))

    def resize(model):
        old = model.embed
        model.embed = nn.Embedding(vocab + added, 16)
        with torch.no_grad():
            model.embed.weight[:vocab] = old.weight

    torch.manual_seed(0)
    model = Tagger()
    if not bug:
        resize(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    if bug:
        resize(model)                         # after the optimizer took the parameters
    ids = np.random.default_rng(38).integers(0, vocab + added, (64, 6))
    x, y = tensors(ids, ids % 4)
    loss_fn = nn.CrossEntropyLoss()

    def tag_loss(logits, tags):
        return loss_fn(logits.reshape(-1, 4), tags.reshape(-1))
    return Case(model=model, optimizer=opt, loss_fn=tag_loss,
                train=simple_loop(model, opt, tag_loss, x, y))


ENTRIES = (
    Entry(name="scheduler_stepped_every_batch",
          source="ivadomed/ivadomed#55",
          category="optimizer and scheduler",
          root_cause="the scheduler was stepped in the batch loop instead of the epoch loop, so "
                     "the learning rate decays after every batch instead of every epoch",
          reproduce=_scheduler,
          tool="monitor", codes=("LR_SCHEDULE_TOO_FAST",),
          expected="LR_SCHEDULE_TOO_FAST (Monitor)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="optimizer_on_first_model_instance",
          source="spro/practical-pytorch#9",
          category="optimizer and scheduler",
          root_cause="I instantiated the model twice and built the optimizer on the first "
                     "instance, so the model I train never changes",
          reproduce=_two_instances,
          tool="monitor", codes=("PARAMS_NOT_UPDATING",),
          expected="PARAMS_NOT_UPDATING (Monitor)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="scheduler_step_without_optimizer_step",
          source="pytorch/pytorch#3814",
          category="optimizer and scheduler",
          root_cause="I called scheduler.step() thinking it also steps the optimizer, so the "
                     "weights never changed",
          reproduce=_scheduler_only,
          tool="monitor", codes=("PARAMS_NOT_UPDATING",),
          expected="PARAMS_NOT_UPDATING (Monitor)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="embeddings_resized_after_optimizer",
          source="huggingface/transformers#3532",
          category="optimizer and scheduler",
          root_cause="the token embeddings are resized for the added tokens after the "
                     "parameters were passed to the optimizer, so the optimizer holds the old "
                     "embedding table and my token embeddings are never updated",
          reproduce=lambda bug, _: _resized_embeddings(bug),
          tool="monitor", codes=("PARAMS_NOT_IN_OPTIMIZER",),
          expected="PARAMS_NOT_IN_OPTIMIZER at 'embed' (Monitor given the optimizer)",
          location="embed", status=DIAGNOSED),
)
