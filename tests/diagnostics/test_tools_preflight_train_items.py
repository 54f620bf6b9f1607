"""preflight's items for the user's train_step and data pipeline: "step equivalence" (given
train_step) and "data pipeline" (given data=, test_data=)."""
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from diagnostics import DiagnosticsError  # noqa: E402

N, D, C = 24, 5, 3


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(D, 12), torch.nn.Tanh(), torch.nn.Linear(12, C))


def _batch():
    generator = torch.Generator().manual_seed(1)
    return torch.randn(N, D, generator=generator), torch.randint(0, C, (N,), generator=generator)


def _accumulate(parts, scale=lambda k: 1 / k):
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for x, y in zip(inputs.chunk(parts), targets.chunk(parts)):
            (F.cross_entropy(model(x), y) * scale(parts)).backward()
        optimizer.step()
    return step
def test_preflight_runs_the_check_on_the_users_train_step():
    from diagnostics import preflight
    inputs, targets = _batch()
    good = preflight(_mlp(), F.cross_entropy, inputs, targets, train_step=_accumulate(4))
    healthy = good.item("step equivalence")
    assert healthy.status == "PASS" and healthy.findings == [], str(good)
    assert "gradient of loss_fn on the whole batch (relative difference" in healthy.summary
    assert "STEP_NOT_OBJECTIVE" not in [f.code for f in good.findings]
    bad = preflight(_mlp(), F.cross_entropy, inputs, targets,
                    train_step=_accumulate(4, scale=lambda k: 1.0))
    item = bad.item("step equivalence")
    assert item.status == "FAIL" and item.summary == "STEP_NOT_OBJECTIVE at train_step"
    assert [f.code for f in item.findings] == ["STEP_NOT_OBJECTIVE"]
    assert "scaled by 4" in item.findings[0].message
    plain = preflight(_mlp(), F.cross_entropy, inputs, targets)
    assert "step equivalence" not in [i.name for i in plain.items]


def test_preflight_validates_the_data_pipeline_when_given():
    from torch.utils.data import DataLoader, Dataset, TensorDataset

    from diagnostics import preflight

    class HalfRead(Dataset):          # __getitem__ reads idx // 2: half the rows never come
        def __init__(self, inputs, targets):
            self.inputs, self.targets = inputs, targets

        def __len__(self):
            return len(self.inputs)

        def __getitem__(self, index):
            return self.inputs[index // 2], self.targets[index // 2]

    generator = torch.Generator().manual_seed(5)
    inputs, targets = torch.randn(400, D, generator=generator), torch.randint(0, C, (400,))
    healthy = DataLoader(TensorDataset(inputs, targets), batch_size=32, shuffle=True)
    batch = _batch()
    leaky = preflight(_mlp(), F.cross_entropy, *batch, data=healthy,
                      test_data=TensorDataset(inputs[:50].clone(), targets[:50]))
    assert "DATA_LEAKAGE" in leaky.item("data pipeline").summary, str(leaky)
    clean = preflight(_mlp(), F.cross_entropy, *batch, data=healthy)
    assert clean.item("data pipeline").status == "PASS", str(clean)
    bad = preflight(_mlp(), F.cross_entropy, *batch,
                    data=DataLoader(HalfRead(inputs, targets), batch_size=32, shuffle=True))
    item = bad.item("data pipeline")
    assert item.status == "FAIL" and "PIPELINE_ROWS_MISSING" in item.summary, str(bad)
    with pytest.raises(DiagnosticsError, match="test_data"):
        preflight(_mlp(), F.cross_entropy, *batch, test_data=healthy)


def test_a_factory_may_hand_preflight_its_data_and_train_step(tmp_path):
    from diagnostics.tools.preflight.command import load_factory
    source = tmp_path / "job.py"
    source.write_text(
        "import torch\n"
        "from torch.utils.data import TensorDataset\n"
        "def factory():\n"
        "    model = torch.nn.Linear(3, 2)\n"
        "    x, y = torch.randn(8, 3), torch.randint(0, 2, (8,))\n"
        "    def step(model, batch, optimizer):\n"
        "        optimizer.zero_grad()\n"
        "        torch.nn.functional.cross_entropy(model(batch[0]), batch[1]).backward()\n"
        "        optimizer.step()\n"
        "    return dict(model=model, loss_fn=torch.nn.functional.cross_entropy, inputs=x,\n"
        "                targets=y, train_step=step, data=TensorDataset(x, y))\n")
    arguments = load_factory(f"{source}:factory")
    assert set(arguments) >= {"train_step", "data"}
    from diagnostics import preflight
    report = preflight(**arguments)
    assert report.item("step equivalence").status == "PASS"
    item = report.item("data pipeline")
    assert "raised" not in item.summary and item.status != "SKIP", str(item)


def test_a_loop_bug_is_named_by_the_step_item_before_training_items_show_its_symptoms():
    from diagnostics import preflight

    def step(model, batch, optimizer):
        inputs, targets = batch
        for x, y in zip(inputs.chunk(4), targets.chunk(4)):
            optimizer.zero_grad()                       # inside the accumulation loop
            (F.cross_entropy(model(x), y) / 4).backward()
        optimizer.step()
    report = preflight(_mlp(), F.cross_entropy, *_batch(), train_step=step)
    failed = [item for item in report.items if item.status == "FAIL"]
    assert failed and failed[0].name == "step equivalence", str(report)
    assert "zero_grad" in failed[0].findings[0].message
