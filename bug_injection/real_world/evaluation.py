"""Real-world bugs in evaluation passes: dropout left on while evaluating."""
from .case import Case, batches, blobs, mlp, tensors, torch_module
from .entry import Entry


def _loop_with_validation(model, *, eval_mode, steps_per_epoch=8):
    """Train on 128 rows and run a validation pass under no_grad after every epoch."""
    torch = torch_module()
    x, y = tensors(*blobs(rows=160, seed=21))
    train_x, train_y, val_x = x[:128], y[:128], x[128:]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train(after_step):
        for step, start, stop in batches(len(train_x)):
            model.train()
            opt.zero_grad()
            loss = loss_fn(model(train_x[start:stop]), train_y[start:stop])
            loss.backward()
            opt.step()
            after_step(loss)
            if (step + 1) % steps_per_epoch == 0:
                if eval_mode:
                    model.eval()
                with torch.no_grad():
                    model(val_x)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _no_eval(bug):
    return _loop_with_validation(mlp(outputs=4, dropout=0.5), eval_mode=not bug)


def _functional_dropout(bug):
    torch = torch_module()
    nn, F = torch.nn, torch.nn.functional

    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(8, 32)
            self.out = nn.Linear(32, 4)

        def forward(self, x):
            h = torch.relu(self.hidden(x))
            h = F.dropout(h, p=0.5) if bug else F.dropout(h, p=0.5, training=self.training)
            return self.out(h)

    torch.manual_seed(0)
    return _loop_with_validation(Scorer(), eval_mode=True)


def _own_flag(bug):
    torch = torch_module()
    nn = torch.nn

    class DropoutMLP(nn.Module):
        """d2l's from-scratch dropout, switched by its own flag."""

        def __init__(self):
            super().__init__()
            self.is_training = True            # set once, never flipped by model.eval()
            self.hidden = nn.Linear(8, 32)
            self.out = nn.Linear(32, 4)

        def forward(self, x):
            h = torch.relu(self.hidden(x))
            if (self.is_training if bug else self.training):
                keep = (torch.rand_like(h) > 0.5).float()
                h = h * keep / 0.5
            return self.out(h)

    torch.manual_seed(0)
    return _loop_with_validation(DropoutMLP(), eval_mode=True)


ENTRIES = (
    Entry(name="validation_in_train_mode",
          source="udacity/deep-learning-v2-pytorch#3; wolny/pytorch-3dunet#53",
          category="evaluation passes",
          root_cause="the validation pass never calls model.eval(), so dropout is still on "
                     "while I measure validation loss and accuracy",
          buggy=lambda: _no_eval(True), fixed=lambda: _no_eval(False),
          tool="monitor", codes=("TRAIN_MODE_AT_EVAL",),
          expected="TRAIN_MODE_AT_EVAL (Monitor)", status="diagnosed"),
    Entry(name="functional_dropout_ignores_eval",
          source="pytorch/pytorch#26338; rixwew/pytorch-fm#21",
          category="evaluation passes",
          root_cause="I call F.dropout(x, p) in forward without training=self.training, so "
                     "dropout stays on after model.eval()",
          buggy=lambda: _functional_dropout(True), fixed=lambda: _functional_dropout(False),
          tool="monitor", codes=("DROPOUT_IGNORES_EVAL",),
          expected="DROPOUT_IGNORES_EVAL (Monitor: a validation pass replayed twice, "
                   "F.dropout's output zeroes different entries)",
          status="diagnosed"),
    Entry(name="own_training_flag_never_flipped",
          source="d2l-ai/d2l-en#1093",
          category="evaluation passes",
          root_cause="my from-scratch dropout is switched by my own is_training attribute, "
                     "which model.eval() does not change, so test accuracy is measured with "
                     "dropout",
          buggy=lambda: _own_flag(True), fixed=lambda: _own_flag(False),
          tool="monitor", codes=("DROPOUT_IGNORES_EVAL",),
          expected="DROPOUT_IGNORES_EVAL (Monitor: a validation pass replayed twice, the "
                   "masked product zeroes different entries)",
          status="diagnosed"),
)
