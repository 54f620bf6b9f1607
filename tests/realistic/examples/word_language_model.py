"""The word language model of pytorch/examples, at small CPU scale: an embedding, a 2-layer
LSTM and a decoder trained by truncated back-propagation through time with no optimizer. Each
batch: ``model.zero_grad()``, forward with the hidden state detached, backward,
``clip_grad_norm_``, then every parameter is moved by hand, ``p.data.add_(p.grad,
alpha=-lr)``; the learning rate is divided by 4 when the validation loss stops improving.
The corpus is drawn from a small order-1 Markov chain, so the loss has a known floor. The
metric: validation perplexity before and after.

``update="no_grad"`` writes the step as ``with torch.no_grad(): p -= lr * p.grad``;
``zero_grad=False`` is the bug: ``.grad`` accumulates over every batch."""
import math

import torch
from torch import nn


def markov_corpus(generator, *, vocabulary=24, length=6000, branching=3):
    """A token stream where each token is followed by one of ``branching`` successors."""
    successors = torch.stack([torch.randperm(vocabulary, generator=generator)[:branching]
                              for _ in range(vocabulary)])
    tokens = [0]
    choices = torch.randint(0, branching, (length,), generator=generator)
    for choice in choices.tolist():
        tokens.append(int(successors[tokens[-1], choice]))
    return torch.tensor(tokens)


def batchify(data, batch_size):
    columns = data.numel() // batch_size
    return data[:columns * batch_size].view(batch_size, columns).t().contiguous()


class RNNModel(nn.Module):

    def __init__(self, vocabulary, embedding=32, hidden=48, layers=2, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocabulary, embedding)
        self.rnn = nn.LSTM(embedding, hidden, layers, dropout=dropout)
        self.decoder = nn.Linear(hidden, vocabulary)
        self.layers, self.hidden = layers, hidden
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(tokens)), hidden)
        return self.decoder(self.drop(output)).view(-1, self.decoder.out_features), hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        return (weight.new_zeros(self.layers, batch_size, self.hidden),
                weight.new_zeros(self.layers, batch_size, self.hidden))


def repackage_hidden(hidden):
    return tuple(h.detach() for h in hidden)


def main(seed=0, epochs=6, bptt=12, batch_size=16, lr=10.0, clip=0.25, update="data",
         zero_grad=True):
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    corpus = markov_corpus(generator)
    split = int(0.85 * corpus.numel())
    train, valid = batchify(corpus[:split], batch_size), batchify(corpus[split:], 8)
    vocabulary = int(corpus.max()) + 1
    model = RNNModel(vocabulary)
    criterion = nn.CrossEntropyLoss()

    def evaluate(data):
        model.eval()
        total, hidden = 0.0, model.init_hidden(data.size(1))
        with torch.no_grad():
            for i in range(0, data.size(0) - 1, bptt):
                inputs, targets = data[i:i + bptt], data[i + 1:i + 1 + bptt].reshape(-1)
                inputs = inputs[:targets.numel() // data.size(1)]
                output, hidden = model(inputs, hidden)
                total += inputs.numel() * criterion(output, targets).item()
        return math.exp(total / (data.size(0) - 1) / data.size(1))

    before, best, iterations = evaluate(valid), None, 0
    for _ in range(epochs):
        model.train()
        hidden = model.init_hidden(batch_size)
        for i in range(0, train.size(0) - 1 - bptt, bptt):
            inputs, targets = train[i:i + bptt], train[i + 1:i + 1 + bptt].reshape(-1)
            hidden = repackage_hidden(hidden)
            if zero_grad:
                model.zero_grad()
            output, hidden = model(inputs, hidden)
            loss = criterion(output, targets)
            loss.backward()
            iterations += 1
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            if update == "data":
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-lr)
            else:
                with torch.no_grad():
                    for p in model.parameters():
                        p -= lr * p.grad
        perplexity = evaluate(valid)
        if best is None or perplexity < best:
            best = perplexity
        else:
            lr /= 4.0
    return {"valid_before": before, "valid_after": evaluate(valid), "iterations": iterations}


def healthy(metrics):
    # a uniform guess over 24 words scores 24; the chain's floor is 3
    return metrics["valid_after"] < min(6.0, 0.3 * metrics["valid_before"])


if __name__ == "__main__":
    print(main())
