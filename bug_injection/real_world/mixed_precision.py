"""Real-world bugs in mixed-precision training: scaled gradients, fp16 optimizer state."""
from .case import Case, batches, blobs, mlp, tensors, torch_module
from .entry import DIAGNOSED, Entry


def _clipping(bug):
    torch = torch_module()
    model = mlp(outputs=4)
    x, y = tensors(*blobs(seed=24))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train(after_step):
        for _, start, stop in batches(len(x)):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(model(x[start:stop]), y[start:stop])
            scaler.scale(loss).backward()
            if not bug:
                scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            scaler.step(opt)
            scaler.update()
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train, scaler=scaler)


def _half_adam(bug):
    torch = torch_module()
    model = mlp(outputs=4).half()
    x, y = tensors(*blobs(seed=25))
    x = x.half()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-8 if bug else 1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train(after_step):
        for _, start, stop in batches(len(x)):
            opt.zero_grad()
            loss = loss_fn(model(x[start:stop]).float(), y[start:stop])
            loss.backward()
            opt.step()
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _bf16_path(bug):
    torch = torch_module()
    model = mlp(outputs=4)
    x, y = tensors(*blobs(seed=26))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    bfloat_enable = True

    def train(after_step):
        for _, start, stop in batches(len(x)):
            if not bfloat_enable or not bug:
                opt.zero_grad()            # only on the fp32 path in the buggy version
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat_enable):
                loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            opt.step()
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


ENTRIES = (
    Entry(name="clip_before_unscale",
          source="pytorch/pytorch#40907; rwth-i6/returnn#1590",
          category="mixed precision",
          root_cause="I clip with clip_grad_norm_ before scaler.unscale_, so the threshold "
                     "applies to gradients scaled by 65536 and the loss stops decreasing",
          reproduce=lambda bug, _: _clipping(bug),
          tool="monitor", codes=("CLIP_BEFORE_UNSCALE",),
          expected="CLIP_BEFORE_UNSCALE (Monitor given the scaler)", status=DIAGNOSED,
          location="optimizer"),
    Entry(name="adam_eps_underflows_in_half",
          source="afiaka87/glide-finetune#5; pytorch/pytorch#8860",
          category="mixed precision",
          root_cause="I train a model.half() with Adam's default eps=1e-8, which is 0 in "
                     "float16, so the update divides by zero and the loss turns NaN",
          reproduce=lambda bug, _: _half_adam(bug),
          tool="monitor", codes=("EPS_UNDERFLOWS",),
          expected="EPS_UNDERFLOWS (Monitor, at the first step, before the NaN)",
          status=DIAGNOSED, location="optimizer"),
    Entry(name="bf16_path_skips_zero_grad",
          source="facebookresearch/nwm#16",
          category="mixed precision",
          root_cause="opt.zero_grad() sits in the branch for bfloat16 disabled, so with "
                     "bfloat16 enabled gradients accumulate silently",
          reproduce=lambda bug, _: _bf16_path(bug),
          tool="monitor", codes=("STALE_GRADIENTS",),
          expected="STALE_GRADIENTS (Monitor)", status=DIAGNOSED),
)
