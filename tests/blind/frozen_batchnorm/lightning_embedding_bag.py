"""Bag-of-words text classifier (EmbeddingBag + BatchNorm1d), frozen encoder, Lightning fine-tune.

An encoder (``EmbeddingBag(mode="sum")`` - BatchNorm1d - Linear - BatchNorm1d - ReLU) and a
topic head are first trained on short product reviews (8 tokens). Then a LightningModule adds a
second head for a new task on long support tickets (160 tokens, so the summed bags are
much larger), keeps the old head for the reviews, and freezes the shared encoder with
``self.encoder.requires_grad_(False)``; RMSprop, batch 16. The bug: Lightning puts the whole
module in train mode, so the frozen encoder's two BatchNorm1d layers re-estimate their running
statistics from the tickets; in eval mode the old review head then sees badly scaled features
and its accuracy collapses. The fix: ``on_train_epoch_start`` puts the frozen encoder back in
eval mode (after Lightning's ``train()``).

Metric: mean held-out accuracy of the review task and the ticket task, eval mode.
Measured: buggy 0.652 (reviews 0.352, tickets 0.952), fixed 0.905 (reviews 0.856, tickets 0.954).
"""
import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = "FROZEN_BATCHNORM_DRIFTS"

VOCAB = 400
TOPICS = 4
EPOCHS = 4
BATCH = 16
TICKET_LENGTH = 160


def documents(n, length, word_sets, gen):
    y = torch.randint(0, TOPICS, (n,), generator=gen)
    topical = word_sets[y][torch.arange(n)[:, None],
                           torch.randint(0, word_sets.shape[1], (n, length), generator=gen)]
    background = torch.randint(0, VOCAB, (n, length), generator=gen)
    pick = torch.rand(n, length, generator=gen) < 0.3
    return torch.where(pick, topical, background), y


def make_encoder():
    return nn.Sequential(nn.EmbeddingBag(VOCAB, 32, mode="sum"), nn.BatchNorm1d(32),
                         nn.Linear(32, 32), nn.BatchNorm1d(32), nn.ReLU())


class TwoTaskClassifier(pl.LightningModule):
    def __init__(self, encoder, review_head, *, keep_encoder_eval: bool, lr: float):
        super().__init__()
        self.encoder = encoder
        self.review_head = review_head
        self.ticket_head = nn.Linear(32, TOPICS)
        self.encoder.requires_grad_(False)
        self.review_head.requires_grad_(False)
        self.keep_encoder_eval = keep_encoder_eval
        self.lr = lr

    def forward(self, tokens, task):
        z = self.encoder(tokens)
        return self.review_head(z) if task == "review" else self.ticket_head(z)

    def on_train_epoch_start(self):
        if self.keep_encoder_eval:
            self.encoder.eval()       # fix: the frozen encoder keeps its BatchNorm statistics

    def training_step(self, batch, batch_idx):
        tokens, y = batch
        return nn.functional.cross_entropy(self(tokens, "ticket"), y)

    def configure_optimizers(self):
        return torch.optim.RMSprop(self.ticket_head.parameters(), lr=self.lr)


def accuracy(module, x, y, task):
    module.eval()
    with torch.no_grad():
        return (module(x, task).argmax(1) == y).float().mean().item()


def run(*, fixed: bool, monitor: bool = True):
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(21)
    review_words = torch.randint(0, VOCAB, (TOPICS, 12), generator=gen)
    ticket_words = torch.randint(0, VOCAB, (TOPICS, 12), generator=gen)
    xr, yr = documents(2000, 8, review_words, gen)
    xr_test, yr_test = documents(500, 8, review_words, gen)
    xt, yt = documents(640, TICKET_LENGTH, ticket_words, gen)
    xt_test, yt_test = documents(500, TICKET_LENGTH, ticket_words, gen)

    # stage 1: the pretrained encoder + review head (plain loop, no gradhunt)
    encoder, review_head = make_encoder(), nn.Linear(32, TOPICS)
    pre_opt = torch.optim.Adam(list(encoder.parameters()) + list(review_head.parameters()),
                               lr=1e-2)
    encoder.train()
    for step in range(200):
        idx = torch.randint(0, len(xr), (64,), generator=gen)
        pre_opt.zero_grad()
        nn.functional.cross_entropy(review_head(encoder(xr[idx])), yr[idx]).backward()
        pre_opt.step()

    # stage 2: Lightning fine-tune of the ticket head on the frozen encoder
    module = TwoTaskClassifier(encoder, review_head, keep_encoder_eval=fixed, lr=3e-3)
    loader = DataLoader(TensorDataset(xt, yt), batch_size=BATCH, shuffle=True,
                        generator=torch.Generator().manual_seed(22))
    callbacks = []
    if monitor:
        from gradhunt.integrations import GradhuntCallback
        callbacks.append(GradhuntCallback(every=20, print_report=False))
    trainer = pl.Trainer(max_epochs=EPOCHS, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks)
    trainer.fit(module, loader)

    acc_review = accuracy(module, xr_test, yr_test, "review")
    acc_ticket = accuracy(module, xt_test, yt_test, "ticket")
    report = callbacks[0].report if monitor else None
    return {"report": report, "metric": (acc_review + acc_ticket) / 2, "higher_is_better": True,
            "acc_review": acc_review, "acc_ticket": acc_ticket}
