"""The checklist, in order: one row per item. A new item is a check function in the file of its
group (``check(run) -> Outcome``, reading ``run.facts``) and one row here; its name lives only
in this table."""
from __future__ import annotations

from types import MappingProxyType

from . import gradients, loss, monitored, one_batch, structure, targets, training
from .facts import Fact
from .runner import MODEL_OR_LOSS, Item

FORWARD_FAILED = "the forward pass failed"

ITEMS: tuple[Item, ...] = (
    Item("parameters", structure.parameters),
    Item("model structure", structure.model_structure),
    Item("forward", structure.forward, raiser="forward",
         unknown_if_it_raises=MappingProxyType(
             {fact: FORWARD_FAILED
              for fact in (Fact.OUTPUT, Fact.LOGITS, Fact.LOSS, Fact.WATCHED)})),
    Item("label dtype", targets.label_dtype, needs=(Fact.LOGITS,)),
    Item("shapes", targets.shapes, needs=(Fact.LOGITS,)),
    Item("loss at init", loss.loss_at_init, needs=(Fact.OUTPUT,), raiser="loss_fn"),
    Item("step equivalence", training.step_equivalence, needs=(Fact.LOSS,),
         raiser="train_step", applies=lambda run: run.train_step is not None),
    Item("overfit one batch", training.overfit, needs=(Fact.LOSS, Fact.OPTIMIZER)),
    Item("training steps", training.training_steps, needs=(Fact.LOSS, Fact.OPTIMIZER),
         unknown_if_it_raises=MappingProxyType({Fact.WATCHED: "the training steps failed"})),
    Item("activations", monitored.activations, needs=(Fact.WATCHED,)),
    Item("gradient flow", monitored.gradient_flow, needs=(Fact.WATCHED,)),
    Item("stale gradients", monitored.stale_gradients, needs=(Fact.WATCHED,)),
    Item("training mode", monitored.training_mode, needs=(Fact.WATCHED,),
         applies=lambda run: run.train_step is not None),
    Item("parameters update", monitored.parameters_update, needs=(Fact.WATCHED,)),
    Item("gradient check", gradients.gradient_check, needs=(Fact.LOSS,), raiser=MODEL_OR_LOSS),
    Item("batch independence", one_batch.batch_independence, needs=(Fact.OUTPUT,)),
    Item("next-token targets", one_batch.next_token, needs=(Fact.LOGITS,),
         applies=lambda run: run.causal),
    Item("reshapes", structure.reshapes, needs=(Fact.OUTPUT,)),
    Item("label range", one_batch.label_range, needs=(Fact.LOGITS,)),
    Item("label order", one_batch.label_order, needs=(Fact.LOGITS,)),
    Item("data pipeline", one_batch.data_pipeline, raiser="data",
         applies=lambda run: run.data is not None),
)
