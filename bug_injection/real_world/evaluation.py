"""Real-world bugs in evaluation passes: dropout left on while evaluating, a metric summed
wrong."""
from .case import Case, batches, blobs, classifier, framework_module, mlp, tensors
from .entry import BACKENDS, DIAGNOSED, Entry, missed


def _loop_with_validation(model, framework, *, eval_mode, steps_per_epoch=8):
    """Train on 128 rows and run a validation pass under no_grad after every epoch."""
    fw = framework_module(framework)
    x, y = tensors(*blobs(rows=160, seed=21), framework=framework)
    train_x, train_y, val_x = x[:128], y[:128], x[128:]
    opt = fw.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = fw.nn.CrossEntropyLoss()

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
                with fw.no_grad():
                    model(val_x)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _no_eval(bug, framework):
    return _loop_with_validation(mlp(outputs=4, dropout=0.5, framework=framework), framework,
                                 eval_mode=not bug)


def _functional_dropout(bug, framework):
    fw = framework_module(framework)
    nn, F = fw.nn, fw.nn.functional

    class Scorer(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(8, 32)
            self.out = nn.Linear(32, 4)

        def forward(self, x):
            h = self.hidden(x).relu()
            h = F.dropout(h, p=0.5) if bug else F.dropout(h, p=0.5, training=self.training)
            return self.out(h)

    fw.manual_seed(0)
    return _loop_with_validation(Scorer(), framework, eval_mode=True)


def _own_flag(bug, framework):
    fw = framework_module(framework)
    nn = fw.nn

    class DropoutMLP(nn.Module):
        """d2l's from-scratch dropout, switched by its own flag."""

        def __init__(self):
            super().__init__()
            self.is_training = True            # set once, never flipped by model.eval()
            self.hidden = nn.Linear(8, 32)
            self.out = nn.Linear(32, 4)

        def forward(self, x):
            h = self.hidden(x).relu()
            if (self.is_training if bug else self.training):
                keep = (fw.rand(*h.shape) > 0.5).float()
                h = h * keep / 0.5
            return self.out(h)

    fw.manual_seed(0)
    return _loop_with_validation(DropoutMLP(), framework, eval_mode=True)


def _overwritten_total(bug, framework):
    """The text-classification tutorial's test(): a running loss over the test batches, its
    name reused for each batch's loss tensor."""
    fw, model, x, y, loss_fn = classifier(framework, seed=42)
    opt = fw.optim.Adam(model.parameters(), lr=3e-3)
    reported = []

    def test():
        model.eval()
        total = 0.0
        with fw.no_grad():
            for start in range(96, 128, 8):
                batch_loss = loss_fn(model(x[start:start + 8]), y[start:start + 8])
                if bug:
                    total = batch_loss           # the running total's name reused
                total += batch_loss.item()
        reported.append(total / 4)
        model.train()

    def train(after_step):
        for step, start, stop in batches(96):
            opt.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            opt.step()
            after_step(loss)
            if (step + 1) % 6 == 0:
                test()
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


ENTRIES = (
    Entry(name="validation_in_train_mode",
          source="udacity/deep-learning-v2-pytorch#3; wolny/pytorch-3dunet#53",
          category="evaluation passes",
          root_cause="the validation pass never calls model.eval(), so dropout is still on "
                     "while I measure validation loss and accuracy",
          reproduce=_no_eval,
          tool="monitor", codes=("TRAIN_MODE_AT_EVAL",),
          expected="TRAIN_MODE_AT_EVAL (Monitor)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="functional_dropout_ignores_eval",
          source="pytorch/pytorch#26338; rixwew/pytorch-fm#21",
          category="evaluation passes",
          root_cause="I call F.dropout(x, p) in forward without training=self.training, so "
                     "dropout stays on after model.eval()",
          reproduce=_functional_dropout,
          tool="monitor", codes=("DROPOUT_IGNORES_EVAL",),
          expected="DROPOUT_IGNORES_EVAL (Monitor: a validation pass replayed twice, "
                   "F.dropout's output zeroes different entries)",
          status=DIAGNOSED, backends=BACKENDS),
    Entry(name="own_training_flag_never_flipped",
          source="d2l-ai/d2l-en#1093",
          category="evaluation passes",
          root_cause="my from-scratch dropout is switched by my own is_training attribute, "
                     "which model.eval() does not change, so test accuracy is measured with "
                     "dropout",
          reproduce=_own_flag,
          tool="monitor", codes=("DROPOUT_IGNORES_EVAL",),
          expected="DROPOUT_IGNORES_EVAL (Monitor: a validation pass replayed twice, the "
                   "masked product zeroes different entries)",
          status=DIAGNOSED, backends=BACKENDS),
    Entry(name="validation_loss_total_overwritten",
          source="pytorch/tutorials#913",
          category="evaluation passes",
          root_cause="the evaluation code overwrites the running loss with each batch's loss "
                     "(loss = criterion(...); loss += loss.item()), so the reported test loss "
                     "is twice the last batch's loss divided by the data set's size: "
                     "unreasonably small",
          reproduce=_overwritten_total,
          tool="monitor", codes=(),
          expected="none yet: the wrong number is the user's metric, computed from correct "
                   "outputs after the evaluation pass",
          status=missed("the model, its modes and its outputs are right in the evaluation "
                        "pass; the error is in arithmetic on Python numbers that no hook "
                        "sees"),
          backends=BACKENDS),
)
