"""Real-world bugs in the training loop: gradients, graphs and modes across steps, the order
of clipping, clearing and stepping, and the two players of a GAN."""
from .case import (BATCH, Case, batches, blobs, classifier, framework_module, mlp, tensors,
                   torch_module)
from .entry import BACKENDS, DIAGNOSED, Entry


def _zero_grad(bug, framework):
    fw, model, x, y, loss_fn = classifier(framework, seed=17)
    opt = fw.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    def train(after_step):
        for _, start, stop in batches(len(x)):
            if not bug:
                opt.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            opt.step()
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _loss_total(bug, framework):
    fw, model, x, y, loss_fn = classifier(framework, seed=18)
    opt = fw.optim.Adam(model.parameters(), lr=3e-3)

    def train(after_step):
        total = 0.0
        for _, start, stop in batches(len(x)):
            opt.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            opt.step()
            total = total + (loss if bug else loss.item())   # the running loss for the log
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _accumulation(bug, framework, micro=4):
    fw, model, x, y, loss_fn = classifier(framework, seed=19)
    opt = fw.optim.SGD(model.parameters(), lr=0.05)

    def train(after_step):
        opt.zero_grad()
        for step, start, stop in batches(len(x), size=BATCH // micro, steps=40 * micro):
            if bug:
                opt.zero_grad()           # inside the micro-batch loop
            loss = loss_fn(model(x[start:stop]), y[start:stop]) / micro
            loss.backward()
            if (step + 1) % micro == 0:
                opt.step()
                opt.zero_grad()
                after_step(loss * micro)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _epoch_start_zero_grad(bug, framework, micro=4, per_epoch=10):
    fw = framework_module(framework)
    model = mlp(outputs=4, framework=framework)
    x, y = tensors(*blobs(rows=per_epoch * 4, seed=28), framework=framework)
    opt = fw.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = fw.nn.CrossEntropyLoss()

    def train(after_step):
        seen = last_step = 0
        for _ in range(4):                        # epochs
            if bug:
                opt.zero_grad()                   # also here: drops the unfinished window
            for i in range(per_epoch):
                start = i * 4
                loss = loss_fn(model(x[start:start + 4]), y[start:start + 4]) / micro
                loss.backward()
                seen += 1
                if seen - last_step >= micro:
                    opt.step()
                    opt.zero_grad()
                    last_step = seen
                    after_step(loss * micro)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _validation_mode(bug, framework):
    fw = framework_module(framework)
    model = mlp(outputs=4, dropout=0.5, framework=framework)
    x, y = tensors(*blobs(rows=160, seed=20), framework=framework)
    train_x, train_y, val_x = x[:128], y[:128], x[128:]
    opt = fw.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = fw.nn.CrossEntropyLoss()

    def train(after_step):
        model.train()                         # once, before the epoch loop
        for step, start, stop in batches(len(train_x)):
            opt.zero_grad()
            loss = loss_fn(model(train_x[start:stop]), train_y[start:stop])
            loss.backward()
            opt.step()
            after_step(loss)
            if (step + 1) % 8 == 0:           # validate every "epoch"
                model.eval()
                with fw.no_grad():
                    model(val_x)
                if not bug:
                    model.train()
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _frozen_backbone(bug):
    """virtex's linear evaluation: a pretrained backbone frozen with requires_grad_(False),
    a new linear head trained on its features, model.train() at every epoch."""
    torch = torch_module()
    nn = torch.nn
    torch.manual_seed(0)
    backbone = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU())
    backbone.requires_grad_(False)
    model = nn.Sequential(backbone, nn.Linear(32, 4))
    x, y = tensors(*blobs(seed=30))
    opt = torch.optim.SGD(model[1].parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def train(after_step):
        for step, start, stop in batches(len(x)):
            if step % 8 == 0:                 # each epoch
                model.train()
                if not bug:
                    backbone.eval()           # frozen means its running statistics too
            opt.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            opt.step()
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _clip_order(bug):
    torch = torch_module()
    _, model, x, y, loss_fn = classifier("torch", seed=31)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train(after_step):
        for _, start, stop in batches(len(x)):
            opt.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            if not bug:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            if bug:                           # after the step: the update was not clipped
                torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _cleared_before_step(bug, framework):
    fw, model, x, y, loss_fn = classifier(framework, seed=32)
    opt = fw.optim.Adam(model.parameters(), lr=3e-3)

    def train(after_step):
        for _, start, stop in batches(len(x)):
            if not bug:
                opt.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            if bug:
                opt.zero_grad()               # right before the step
            opt.step()
            after_step(loss)
    return Case(model=model, optimizer=opt, loss_fn=loss_fn, train=train)


def _gan_generator_step(bug):
    """image2reverb's conditional GAN: G maps a condition to an output, trained with an
    adversarial term (D scoring G's output as real) plus an L1 term against the paired target;
    D scores real pairs against G's outputs."""
    torch = torch_module()
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    generator = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 8))
    discriminator = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    x, _ = tensors(*blobs(seed=33))
    real = torch.tanh(x @ torch.randn(8, 8) / 3)          # the paired targets
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))

    def train(after_step):
        for _, start, stop in batches(len(x)):
            cond, target = x[start:stop], real[start:stop]
            fake = generator(cond)
            opt_d.zero_grad()
            d_real = discriminator(torch.cat([cond, target], 1))
            d_fake = discriminator(torch.cat([cond, fake.detach()], 1))
            d_loss = (F.mse_loss(d_real, torch.ones_like(d_real))
                      + F.mse_loss(d_fake, torch.zeros_like(d_fake)))
            d_loss.backward()
            opt_d.step()
            opt_g.zero_grad()
            scored = fake.detach() if bug else fake       # the generator's adversarial term
            d_scored = discriminator(torch.cat([cond, scored], 1))
            g_loss = (F.mse_loss(d_scored, torch.ones_like(d_scored))
                      + 10 * F.l1_loss(fake, target))
            g_loss.backward()
            opt_g.step()
            after_step(g_loss)
    return Case(model=generator, optimizer=opt_g, train=train)


ENTRIES = (
    Entry(name="zero_grad_missing",
          source="wenet-e2e/wekws#73; Hsintien-Ng/idinvert_pytorch-reproduced#1",
          category="training loop",
          root_cause="optimizer.zero_grad() is never called, so every step applies the sum of "
                     "all gradients so far",
          reproduce=_zero_grad,
          tool="monitor", codes=("STALE_GRADIENTS",),
          expected="STALE_GRADIENTS (Monitor)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="running_loss_keeps_graph",
          source="thuml/AutoTimes#21; deepspeedai/DeepSpeedExamples#824",
          category="training loop",
          root_cause="I accumulate loss_val += loss as a tensor for logging, which keeps every "
                     "step's graph alive until memory runs out",
          reproduce=_loss_total,
          tool="monitor", codes=("GRAPH_RETAINED",),
          expected="GRAPH_RETAINED (Monitor)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="zero_grad_every_microbatch",
          source="bytetriper/RAE#67",
          category="training loop",
          root_cause="zero_grad is called inside the micro-batch loop, so gradient accumulation "
                     "keeps only the last micro-batch",
          reproduce=_accumulation,
          tool="monitor", codes=("ACCUMULATION_DISCARDED",),
          expected="ACCUMULATION_DISCARDED (Monitor)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="epoch_start_zero_grad_drops_accumulation",
          source="ultralytics/ultralytics#11217",
          category="training loop",
          root_cause="zero_grad is called at the start of every epoch as well as after each "
                     "optimizer step, so with gradient accumulation the batches at the end of "
                     "an epoch that did not fill a window are thrown away",
          reproduce=_epoch_start_zero_grad,
          tool="monitor", codes=("ACCUMULATION_DISCARDED",),
          expected="ACCUMULATION_DISCARDED (Monitor)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="train_mode_not_restored_after_validation",
          source="fartashf/vsepp#4",
          category="training loop",
          root_cause="validation calls model.eval() but model.train() is only called before "
                     "the epoch loop, so dropout and batch norm stay off after the first "
                     "validation",
          reproduce=_validation_mode,
          tool="monitor", codes=("TRAINING_IN_EVAL_MODE",),
          expected="TRAINING_IN_EVAL_MODE (Monitor): model.eval() at the validation of step 8, "
                   "dropout off for the 32 training steps after it",
          status=DIAGNOSED, backends=BACKENDS),
    Entry(name="frozen_backbone_batchnorm_in_train_mode",
          source="kdexd/virtex#16",
          category="training loop",
          root_cause="the backbone is frozen except for the fc layer, but .train() puts its batch "
                     "norms in train mode, so linear evaluation keeps updating their running "
                     "statistics instead of using the pretrained ones",
          reproduce=lambda bug, _: _frozen_backbone(bug),
          tool="monitor", codes=("FROZEN_BATCHNORM_DRIFTS",),
          expected="FROZEN_BATCHNORM_DRIFTS at '0.1', the backbone's BatchNorm1d (Monitor)",
          location="0.1", status=DIAGNOSED),
    Entry(name="clip_after_optimizer_step",
          source="VGraphRNN/VGRNN#4; awslabs/graphstorm#1366",
          category="training loop",
          root_cause="clip_grad_norm_ is called after opt.step(), so it isn't doing anything: "
                     "the update already used the unclipped gradients",
          reproduce=lambda bug, _: _clip_order(bug),
          tool="monitor", codes=("CLIP_HAS_NO_EFFECT",),
          expected="CLIP_HAS_NO_EFFECT (Monitor): the clip runs after optimizer.step()",
          location="optimizer", status=DIAGNOSED),
    Entry(name="zero_grad_right_before_step",
          source="lucidrains/byol-pytorch#93",
          category="training loop",
          root_cause="the trainer sets the gradients to zero right before stepping the optimizer, "
                     "so every step applies no gradient at all",
          reproduce=_cleared_before_step,
          tool="monitor", codes=("GRADIENTS_CLEARED_BEFORE_STEP",),
          expected="GRADIENTS_CLEARED_BEFORE_STEP (Monitor)", location="optimizer",
          status=DIAGNOSED),
    Entry(name="gan_generator_adversarial_term_detached",
          source="nikhilsinghmus/image2reverb#37",
          category="training loop",
          root_cause="in the generator step fake_spec.detach() is passed to the discriminator, "
                     "so the adversarial loss sends no gradient to the generator and only the "
                     "L1 term trains it; the discriminator dominates early",
          reproduce=lambda bug, _: _gan_generator_step(bug),
          tool="monitor", codes=("TERM_DETACHED",),
          expected="TERM_DETACHED (Monitor): the adversarial term reaches only the "
                   "discriminator's parameters, whose gradient from it is cleared unused",
          location="loss", status=DIAGNOSED),
)
