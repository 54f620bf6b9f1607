"""The reference training loop: the plain minibatch loop a user writes, run on a ``Bench``.

Its settings (``bench.loop``) and everything it uses (model, loss, optimizer, data) come from
the bench, so a training-loop bug is planted by changing the bench, never this code.
"""


def train(bench, *, after_step=None):
    """Train ``bench.model`` for ``bench.loop.steps`` minibatch steps; return the last loss.

    ``after_step(loss)`` is called after every ``optimizer.step()`` (a Monitor's ``step``).
    Every ``eval_every`` steps an evaluation pass runs on the test set without gradients.
    """
    loop, model, optimizer = bench.loop, bench.model, bench.optimizer
    rows = bench.train_x.shape[0]
    loss = None
    for step in range(loop.steps):
        start = (step * loop.batch_size) % rows
        x = bench.train_x[start:start + loop.batch_size]
        y = bench.train_y[start:start + loop.batch_size]
        if loop.zero_grad:
            optimizer.zero_grad()
        loss = bench.loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if after_step is not None:
            after_step(loss)
        if (step + 1) % loop.eval_every == 0:
            evaluate(bench)
    return loss


def evaluate(bench):
    """The test-set loss, without gradients; in eval mode unless the loop forgets it."""
    if bench.loop.eval_mode:
        bench.model.eval()
    try:
        with bench.no_grad():
            return bench.loss_fn(bench.model(bench.test_x), bench.test_y)
    finally:
        bench.model.train()
