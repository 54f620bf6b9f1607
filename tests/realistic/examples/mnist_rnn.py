"""An RNN classifier as pytorch/examples' mnist_rnn: an LSTM reads each image row by row (8
rows of 8 pixels), a Linear on its last hidden state gives 10 log-probabilities, trained with
``F.nll_loss`` and Adadelta under a StepLR schedule. On the glyphs. The metric: held-out
accuracy against the 10% of chance."""
import torch
import torch.nn.functional as F
from torch import nn

try:
    from .glyphs import glyphs
except ImportError:
    from glyphs import glyphs


class RowLSTM(nn.Module):

    def __init__(self, hidden=32):
        super().__init__()
        self.rnn = nn.LSTM(input_size=8, hidden_size=hidden, batch_first=True)
        self.fc = nn.Linear(hidden, 10)

    def forward(self, x):
        output, _ = self.rnn(x.view(-1, 8, 8))
        return F.log_softmax(self.fc(output[:, -1]), dim=1)


def main(seed=0, epochs=4, batch=32):
    torch.manual_seed(seed)
    data = torch.Generator().manual_seed(seed)
    train_x, train_y = glyphs(2048, data)
    test_x, test_y = glyphs(512, data)
    model = RowLSTM()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)

    def accuracy():
        model.eval()
        with torch.no_grad():
            correct = (model(test_x).argmax(1) == test_y).float().mean().item()
        model.train()
        return correct

    for _ in range(epochs):
        for start in range(0, len(train_y), batch):
            optimizer.zero_grad()
            loss = F.nll_loss(model(train_x[start:start + batch]), train_y[start:start + batch])
            loss.backward()
            optimizer.step()
        scheduler.step()
    return {"accuracy": accuracy(), "chance": 0.1}


def healthy(metrics):
    return metrics["accuracy"] > 0.5


if __name__ == "__main__":
    print(main())
