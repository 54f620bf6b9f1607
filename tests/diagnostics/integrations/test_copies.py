"""A model watched through ``gradhunt watch``, the Lightning callback or the Hugging Face callback
can be copied and saved whole from inside the user's step (a DQN's ``copy.deepcopy(online)``
refresh, a ``torch.save(model)`` checkpoint): nothing the watch attaches makes the copy fail, and
the copy carries only inert hooks (the watch is not copied with it)."""
import copy
import io
import logging
import pickle
import warnings

import pytest

torch = pytest.importorskip("torch")

from diagnostics.backends.hooks import INERT  # noqa: E402
from diagnostics.integrations import TrainingWatch  # noqa: E402


def _hooks(module):
    return [hook for m in module.modules()
            for hook in (*m._forward_pre_hooks.values(), *m._forward_hooks.values())]


def _copies(model):
    """The model deep-copied, pickled and torch.save'd: each a working, unwatched module."""
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    made = [copy.deepcopy(model), pickle.loads(pickle.dumps(model)),
            torch.load(buffer, weights_only=False)]
    for copied in made:
        assert all(hook is INERT for hook in _hooks(copied))
    return made


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=g)
    return x, (x @ torch.randn(8, 3, generator=g)).argmax(1)


def test_under_gradhunt_watch_a_copy_mid_step_works():
    torch.manual_seed(0)
    x, y = _data()
    model = _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with TrainingWatch(every=2) as watch:
        for _ in range(6):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            target = _copies(model)[0]                       # between backward and step
            copy.deepcopy(optimizer)
            optimizer.step()
            assert target(x).shape == (64, 3)
    [(_, report)] = watch.reports()
    assert report.steps == 5                                 # the copies were not watched


def test_the_lightning_callback_lets_training_step_copy_the_network():
    pl = pytest.importorskip("lightning.pytorch")
    from diagnostics.integrations import GradhuntCallback

    class Copying(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net, self.copied = _mlp(), 0

        def training_step(self, batch, batch_idx):
            x, y = batch
            _copies(self.net)
            self.copied += 1
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    module, callback = Copying(), GradhuntCallback(every=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = pl.Trainer(max_steps=6, accelerator="cpu", logger=False,
                             enable_progress_bar=False, enable_checkpointing=False,
                             enable_model_summary=False, callbacks=[callback])
        trainer.fit(module, torch.utils.data.DataLoader(
            torch.utils.data.TensorDataset(*_data()), batch_size=16))
    assert module.copied == 6 and callback.report.steps == 6


def test_the_hugging_face_callback_lets_a_callback_copy_the_model(tmp_path, monkeypatch):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from diagnostics.integrations import GradhuntTrainerCallback
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    class Copier(transformers.TrainerCallback):
        copied = 0

        def on_step_end(self, args, state, control, model=None, **kwargs):
            _copies(model)
            Copier.copied += 1

    class Images(torch.utils.data.Dataset):
        def __len__(self):
            return 32

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            return {"pixel_values": torch.randn(1, 16, 16, generator=g),
                    "labels": torch.tensor(i % 2)}

    torch.manual_seed(0)
    config = transformers.ResNetConfig(num_channels=1, embedding_size=8, hidden_sizes=[8],
                                       depths=[1], layer_type="basic", num_labels=2)
    model = transformers.ResNetForImageClassification(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=8, report_to=[],
        save_strategy="no", logging_strategy="no", use_cpu=True, seed=0)
    callback = GradhuntTrainerCallback(every=2)
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        transformers.Trainer(model=model, args=args, train_dataset=Images(),
                             callbacks=[callback, Copier()]).train()
    finally:
        transformers.logging.set_verbosity(verbosity)
    assert Copier.copied == 4 and callback.report.steps == 4
    assert _hooks(model) == []
