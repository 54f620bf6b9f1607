"""VANISHING_GRADIENTS means the gradient fades on its way to the input: a tiny BERT, whose
attention query/key get tiny gradients at init while its embeddings learn, stays quiet; a deep
sigmoid stack is still found."""
import pytest
import torch

from diagnostics import Monitor
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _vanishing(model, batch_of, steps, lr):
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    with Monitor(model, optimizer, every=5) as monitor:
        for step in range(steps):
            optimizer.zero_grad()
            loss = batch_of(model, step)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return [f for f in monitor.report().findings if f.code == "VANISHING_GRADIENTS"]


def test_a_healthy_tiny_bert_classifier_is_quiet():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=100,
                                     max_position_embeddings=32, num_labels=3)
    model = transformers.BertForSequenceClassification(config)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 100, (64, 12), generator=generator)
    labels = tokens[:, 0] % 3

    def batch_of(model, step):
        rows = slice((step % 4) * 16, (step % 4) * 16 + 16)
        return model(tokens[rows], labels=labels[rows]).loss
    assert _vanishing(model, batch_of, steps=30, lr=1e-3) == []


def _sigmoid_stack(depth, width=32):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.Sigmoid()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 4))


def test_a_deep_sigmoid_stack_is_still_found_at_its_first_layer():
    torch.manual_seed(0)
    model = _sigmoid_stack(12)
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    found = _vanishing(model, lambda m, step: torch.nn.functional.cross_entropy(m(x), y),
                       steps=10, lr=1e-3)
    assert len(found) == 1 and found[0].location == "0"
    assert found[0].evidence["starved_layers"][0] == "0"


def test_a_starved_layer_behind_a_learning_first_layer_is_not_vanishing():
    """The first layer's own input path skips the starved branch: the gradient reaches the
    input, only one branch gets little (as attention's query/key at init)."""
    class Branches(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.Linear(16, 16)
            self.quiet = torch.nn.Linear(16, 16)
            self.head = torch.nn.Linear(16, 4)

        def forward(self, x):
            h = torch.relu(self.first(x))
            return self.head(h + 1e-7 * self.quiet(h))

    torch.manual_seed(0)
    x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
    found = _vanishing(Branches(), lambda m, step: torch.nn.functional.cross_entropy(m(x), y),
                       steps=10, lr=1e-3)
    assert found == []
