"""Real-world bugs in the loss: probabilities where logits belong, shapes that broadcast.

minigrad has no ``nn.Softmax``, ``nn.LogSoftmax`` or ``nn.NLLLoss``; the minigrad twins of
the softmax entries use the one-line module and loss function a minigrad user writes instead.
"""
from functools import partial

from .case import Case, blobs, framework_module, mlp, nll_loss, simple_loop, tensors
from .entry import BACKENDS, Entry


def _classifier(framework, *, head, loss, optimizer="adam", seed=11):
    """An MLP classifier with ``head`` applied to its logits, trained with ``loss``."""
    fw = framework_module(framework)
    nn = fw.nn
    body = mlp(outputs=4, seed=0, framework=framework)
    model = nn.Sequential(body, head) if head is not None else body
    x, y = tensors(*blobs(seed=seed), framework=framework)
    opt = (fw.optim.Adam(model.parameters(), lr=3e-3) if optimizer == "adam"
           else fw.optim.SGD(model.parameters(), lr=0.1))
    return Case(model=model, optimizer=opt, loss_fn=loss, inputs=x[:16], targets=y[:16],
                train=simple_loop(model, opt, loss, x, y))


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
    return Case(model=model, optimizer=opt, loss_fn=loss, inputs=x[:16], targets=y[:16],
                train=simple_loop(model, opt, loss, x, y))


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
    return Case(model=model, optimizer=opt, loss_fn=loss, inputs=x[:16], targets=t[:16],
                train=simple_loop(model, opt, loss, x, t))


ENTRIES = (
    Entry(name="softmax_before_cross_entropy",
          source="https://discuss.pytorch.org/t/cross-entropy-loss-is-not-decreasing/43814/16",
          category="loss",
          root_cause="I put a softmax at the end of the model and fed its probabilities to "
                     "nn.CrossEntropyLoss, which applies log-softmax itself",
          buggy=partial(_softmax_ce, True), fixed=partial(_softmax_ce, False),
          tool="monitor", codes=("PROBABILITIES_AS_LOGITS",),
          expected="PROBABILITIES_AS_LOGITS at the Softmax module (Monitor): the output rows "
                   "are probabilities and the loss's gradient on them is cross-entropy's",
          location="1", status="diagnosed", backends=BACKENDS),
    Entry(name="sigmoid_before_bce_with_logits",
          source="yudi-mars/daisyRec#15; Turoad/lanedet#32",
          category="loss",
          root_cause="my model ends in a sigmoid and I train it with BCEWithLogitsLoss, so the "
                     "sigmoid is applied twice and the loss does not converge",
          buggy=partial(_double_sigmoid, True), fixed=partial(_double_sigmoid, False),
          tool="monitor", codes=("PROBABILITIES_AS_LOGITS",),
          expected="PROBABILITIES_AS_LOGITS at the Sigmoid module (Monitor): the loss's "
                   "autograd graph feeds SigmoidBackward0 to "
                   "BinaryCrossEntropyWithLogitsBackward0",
          location="3", status="diagnosed", backends=BACKENDS),
    Entry(name="softmax_into_nll_loss",
          source="AnubhavGupta3377/Text-Classification-Models-Pytorch#9; clvrai/ACGAN-PyTorch#4",
          category="loss",
          root_cause="my model ends in softmax, not log_softmax, and I train it with NLLLoss, so "
                     "the loss is negative and pushes probabilities instead of log-probabilities",
          buggy=partial(_softmax_nll, True), fixed=partial(_softmax_nll, False),
          tool="monitor", codes=("PROBABILITIES_AS_LOGITS",),
          expected="PROBABILITIES_AS_LOGITS at the Softmax module (Monitor): probability rows, "
                   "a gradient that picks the target's entry as NLLLoss does, a negative loss",
          location="1", status="diagnosed", backends=BACKENDS),
    Entry(name="regression_target_broadcast",
          source="deepset-ai/FARM#229; Photon-AI-Research/NeuralSolvers#20",
          category="loss",
          root_cause="my regression head outputs (N, 1) and the targets are (N,), so MSELoss "
                     "broadcasts to (N, N) and compares every output with every target",
          buggy=partial(_regression, True), fixed=partial(_regression, False),
          tool="preflight", codes=("SHAPE_BROADCAST",),
          expected="SHAPE_BROADCAST (preflight)", status="diagnosed", backends=BACKENDS),
)
