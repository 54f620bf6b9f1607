"""``GradhuntTrainerCallback`` on real ``transformers.Trainer`` runs of a tiny ResNet built from
a config (CPU, offline, no download)."""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from diagnostics import DiagnosticsError  # noqa: E402
from diagnostics.integrations import GradhuntTrainerCallback  # noqa: E402


@pytest.fixture(autouse=True)
def _offline_and_quiet(monkeypatch):
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(verbosity)


class Images(torch.utils.data.Dataset):
    """Grey 16x16 'photos' (pixel values 0-255) whose class is a brighter top half; the
    healthy pipeline scales them to [0, 1] and standardizes, the buggy one forgets to."""

    def __init__(self, *, normalize):
        g = torch.Generator().manual_seed(0)
        self.labels = torch.randint(0, 2, (256,), generator=g)
        pixels = torch.randint(0, 200, (256, 1, 16, 16), generator=g).float()
        pixels[:, :, :8] += 55 * self.labels.view(-1, 1, 1, 1)
        self.pixels = (pixels / 255 - 0.45) / 0.25 if normalize else pixels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"pixel_values": self.pixels[i], "labels": self.labels[i]}


class PoisonedImages(Images):
    """One example holds a NaN pixel: the step whose batch holds it gets NaN gradients."""

    def __getitem__(self, i):
        item = super().__getitem__(i)
        if i == 37:
            item = {**item, "pixel_values": item["pixel_values"].clone()}
            item["pixel_values"][0, 3, 3] = float("nan")
        return item


def _train(tmp_path, callback, *, normalize=True, dataset=None):
    torch.manual_seed(0)
    config = transformers.ResNetConfig(num_channels=1, embedding_size=8, hidden_sizes=[8, 16],
                                       depths=[1, 1], layer_type="basic", num_labels=2)
    model = transformers.ResNetForImageClassification(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=40, per_device_train_batch_size=16,
        gradient_accumulation_steps=2, learning_rate=1e-3, max_grad_norm=1.0, seed=0,
        report_to="none", save_strategy="no", logging_strategy="no", use_cpu=True,
        disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args,
                                   train_dataset=dataset or Images(normalize=normalize),
                                   callbacks=[callback])
    with callback:
        trainer.train()
    return trainer


def _hooks_left(model):
    return [name for name, m in model.named_modules()
            if m._forward_hooks or m._forward_pre_hooks or m._backward_hooks]


def test_a_healthy_run_with_accumulation_and_clipping_has_no_finding(tmp_path, capsys):
    callback = GradhuntTrainerCallback(every=5)
    trainer = _train(tmp_path, callback)
    report = callback.report
    assert report.steps == 40                      # one iteration per optimizer step
    assert report.loss["first"] == pytest.approx(0.69, abs=0.2)   # the model's own loss
    assert report.findings == []
    assert "no findings: nothing looked wrong in 40 steps" in capsys.readouterr().out
    assert _hooks_left(trainer.model) == []


def test_images_fed_unscaled_are_found_and_logged(tmp_path):
    callback = GradhuntTrainerCallback(every=5, print_report=False)
    trainer = _train(tmp_path, callback, normalize=False)
    finding = next(f for f in callback.report.findings if f.code == "UNNORMALIZED_INPUT")
    assert finding.severity == "warning" and finding.evidence["mean"] > 100
    logged = [entry for entry in trainer.state.log_history
              if "gradhunt/UNNORMALIZED_INPUT" in entry]
    assert logged and logged[0]["gradhunt/UNNORMALIZED_INPUT"] == 2      # 2 = warning
    assert _hooks_left(trainer.model) == []


def test_the_context_manager_closes_the_monitor_when_train_raises(tmp_path):
    callback = GradhuntTrainerCallback(every=2, print_report=False)

    class Broken(Images):
        def __getitem__(self, i):
            if i == 255:
                raise OSError("unreadable image")
            return super().__getitem__(i)

    torch.manual_seed(0)
    config = transformers.ResNetConfig(num_channels=1, embedding_size=8, hidden_sizes=[8],
                                       depths=[1], layer_type="basic", num_labels=2)
    model = transformers.ResNetForImageClassification(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=40, per_device_train_batch_size=16, seed=0,
        report_to="none", save_strategy="no", logging_strategy="no", use_cpu=True,
        disable_tqdm=True, dataloader_num_workers=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Broken(normalize=True),
                                   callbacks=[callback])
    with pytest.raises(OSError, match="unreadable image"), callback:
        trainer.train()
    assert _hooks_left(model) == []
    assert callback.report is not None and 0 < callback.report.steps < 40


def test_a_bad_argument_is_refused_when_the_callback_is_built():
    with pytest.raises(DiagnosticsError, match="every"):
        GradhuntTrainerCallback(every=-1)



@pytest.mark.parametrize("guard", [None, "skip"])
def test_the_guard_skips_the_step_of_a_poisoned_example(tmp_path, guard):
    """The Trainer accumulates two micro-batches and clips before its step: the guard reads the
    gradient the step is about to apply and keeps a NaN one from being applied."""
    callback = GradhuntTrainerCallback(every=5, guard=guard)
    trainer = _train(tmp_path, callback, dataset=PoisonedImages(normalize=True))
    finite = all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())
    codes = [f.code for f in callback.report.findings]
    if guard is None:
        assert not finite                           # the harm is real
        assert "STEPS_SKIPPED" not in codes
    else:
        assert finite
        assert "STEPS_SKIPPED" in codes and "DATA_NONFINITE" in codes
    assert _hooks_left(trainer.model) == []
