"""Small transformer encoder classifying token sequences, a Trainer class, AdamW, decay groups.

The class of a sequence is the token at a fixed position (position 5 of 12): the model has to
know where each token is. The Trainer splits the parameters into weight-decay groups by name,
as many GPT/ViT codebases do: ``decay`` gets every ``*.weight`` of a Linear-like layer,
``no_decay`` every ``*.bias`` and the LayerNorm weights. The buggy filters test the name's
suffix only, so the ViT-style ``pos_embed`` and ``cls_token`` parameters (plain
``nn.Parameter``s, neither "weight" nor "bias") fall through both lists: they get a gradient
every step and stay at their 0.02-std init, too small next to the token embedding for the model
to tell positions apart. The loop clears with ``self.optimizer.zero_grad()``. The fixed twin
puts every parameter that is not a matrix weight into ``no_decay``.

Measured (held-out accuracy, higher is better, chance 0.125): buggy 0.28, fixed 1.00.
"""
import torch
from torch import nn

EXPECTED = "PARAMS_NOT_IN_OPTIMIZER"

VOCAB = 8
SEQ = 12
TARGET_POSITION = 5
DIM = 32


class SequenceClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embed = nn.Embedding(VOCAB, DIM)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos_embed = nn.Parameter(torch.zeros(1, SEQ + 1, DIM))
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        layer = nn.TransformerEncoderLayer(DIM, nhead=4, dim_feedforward=64, dropout=0.0,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.tok_embed(tokens)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], 1) + self.pos_embed
        return self.head(self.norm(self.encoder(x))[:, 0])


def parameter_groups(model, *, weight_decay, fixed):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if name.endswith("weight") and param.dim() >= 2:
            decay.append(param)
        elif name.endswith("bias") or "norm" in name:
            no_decay.append(param)
        elif fixed:
            no_decay.append(param)   # fix: everything else (pos_embed, cls_token) too
        # bug (buggy twin): pos_embed and cls_token match neither filter and are left out
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


class Trainer:
    def __init__(self, model, *, lr, weight_decay, fixed):
        self.model = model
        self.optimizer = torch.optim.AdamW(
            parameter_groups(model, weight_decay=weight_decay, fixed=fixed), lr=lr)
        self.loss_fn = nn.CrossEntropyLoss()

    def fit(self, tokens, labels, *, steps, batch, gen, monitor=None):
        self.model.train()
        for _ in range(steps):
            idx = torch.randint(0, len(tokens), (batch,), generator=gen)
            self.optimizer.zero_grad()
            loss = self.loss_fn(self.model(tokens[idx]), labels[idx])
            loss.backward()
            self.optimizer.step()
            if monitor is not None:
                monitor.step(loss)

    @torch.no_grad()
    def accuracy(self, tokens, labels):
        self.model.eval()
        return (self.model(tokens).argmax(1) == labels).float().mean().item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(13)
    x_train = torch.randint(0, VOCAB, (4096, SEQ), generator=gen)
    x_test = torch.randint(0, VOCAB, (1024, SEQ), generator=gen)
    y_train, y_test = x_train[:, TARGET_POSITION], x_test[:, TARGET_POSITION]

    model = SequenceClassifier()
    trainer = Trainer(model, lr=2e-3, weight_decay=0.05, fixed=fixed)

    mon = None
    if monitor:
        from gradhunt import Monitor
        mon = Monitor(model, optimizer=trainer.optimizer)
    trainer.fit(x_train, y_train, steps=200, batch=64, gen=gen, monitor=mon)

    accuracy = trainer.accuracy(x_test, y_test)
    report = None
    if mon is not None:
        report = mon.report()
        mon.close()
    return {"report": report, "metric": accuracy, "higher_is_better": True}
