"""Real-world bugs in the training loop: gradients, graphs and modes across steps."""
from .case import BATCH, Case, batches, blobs, classifier, framework_module, mlp, tensors
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
)
