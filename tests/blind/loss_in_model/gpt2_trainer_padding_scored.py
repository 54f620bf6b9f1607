"""A tiny transformers GPT-2 trained by ``transformers.Trainer`` on padded batches whose labels
are the input ids, padding included.

``GPT2LMHeadModel(GPT2Config(...))`` (built from a config, no weights downloaded) computes its
loss inside forward from ``labels`` and shifts them itself. The collate function pads every
sequence to 32 tokens with the end-of-text token (GPT-2 has no pad token; ``pad_token =
eos_token`` is the usual recipe) and sets ``labels = input_ids.clone()``. The bug: the labels
at padding are not set to -100, so the model's mean loss is taken over padding too: three
quarters of the scored tokens are "end-of-text follows end-of-text", the real tokens' share of
the gradient shrinks with the padding, and the SGD learning rate chosen for the real tokens is
in effect a fraction of itself. The fixed collate sets ``labels[attention_mask == 0] = -100``.

Loop idiom: ``transformers.Trainer`` with a tiny ``TrainingArguments`` (report_to=[], output_dir
in a temporary directory, no saving) and the optimizer handed in (``optimizers=(sgd, None)``),
watched by gradhunt's ``GradhuntTrainerCallback``. Data: sequences of 3-12 tokens from a Markov
chain over 60 tokens (a fixed successor with probability 0.9), then end-of-text. Metric:
held-out next-token accuracy on the real tokens; measured without gradhunt,
buggy 0.135 -> fixed 0.777.
"""
import tempfile

import torch

EXPECTED = "PADDING_SCORED"
CAUSAL = True

VOCAB, EOS, LENGTH, BATCH, STEPS = 64, 63, 32, 16, 120


def _config():
    from transformers import GPT2Config

    return GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=LENGTH,
                      bos_token_id=EOS, eos_token_id=EOS, pad_token_id=EOS)


def _model():
    from transformers import GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(_config())


def loss_fn(output, labels):
    """What a user hands gradhunt's tools: the loss the model computed."""
    return output.loss


def _examples(n, generator):
    successor = torch.randperm(60, generator=torch.Generator().manual_seed(5))
    examples = []
    for _ in range(n):
        size = int(torch.randint(3, 13, (), generator=generator))
        tokens = [int(torch.randint(0, 60, (), generator=generator))]
        for _ in range(size - 1):
            follow = torch.rand((), generator=generator) < 0.9
            tokens.append(int(successor[tokens[-1]]) if follow
                          else int(torch.randint(0, 60, (), generator=generator)))
        examples.append(tokens + [EOS])
    return examples


def _collate(examples, *, fixed):
    input_ids = torch.full((len(examples), LENGTH), EOS, dtype=torch.long)
    attention_mask = torch.zeros(len(examples), LENGTH, dtype=torch.long)
    for row, tokens in enumerate(examples):
        input_ids[row, :len(tokens)] = torch.tensor(tokens)
        attention_mask[row, :len(tokens)] = 1
    labels = input_ids.clone()
    if fixed:
        labels[attention_mask == 0] = -100
    # bug (fixed=False): the padding's labels stay end-of-text and are scored
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def make(fixed=False):
    model = _model()
    return model, _collate(_examples(BATCH, torch.Generator().manual_seed(1)), fixed=fixed)


def _accuracy(model, examples):
    batch = _collate(examples, fixed=True)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"],
                       attention_mask=batch["attention_mask"]).logits
    predicted, targets = logits[:, :-1].argmax(-1), batch["labels"][:, 1:]
    scored = targets != -100
    return (predicted[scored] == targets[scored]).float().mean().item()


def run(fixed=False, monitor=False):
    from transformers import Trainer, TrainingArguments

    from gradhunt.integrations import GradhuntTrainerCallback

    generator = torch.Generator().manual_seed(1)
    train = _examples(BATCH * STEPS, generator)
    held_out = _examples(256, generator)
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    callbacks = [GradhuntTrainerCallback(every=20, print_report=False)] if monitor else []
    with tempfile.TemporaryDirectory() as out_dir:
        args = TrainingArguments(
            output_dir=out_dir, report_to=[], save_strategy="no", logging_strategy="no",
            per_device_train_batch_size=BATCH, max_steps=STEPS, use_cpu=True,
            disable_tqdm=True, seed=0, data_seed=0, dataloader_num_workers=0)
        trainer = Trainer(model=model, args=args, train_dataset=train,
                          data_collator=lambda rows: _collate(rows, fixed=fixed),
                          optimizers=(optimizer, None), callbacks=callbacks)
        try:
            trainer.train()
        finally:
            for callback in callbacks:
                callback.close()
    report = callbacks[0].report if monitor else None
    return {"report": report, "metric": _accuracy(model, held_out), "higher_is_better": True}
