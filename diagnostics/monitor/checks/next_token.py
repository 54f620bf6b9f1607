"""TARGETS_MISALIGNED and CAUSALITY_LEAK of a model trained as a language model, from the
reads of ``probes.next_token``: which input token the loss scores each position against, and
whether the model is causal. Only a causal model's targets are judged (a model that sees the
whole sequence may be meant to reconstruct it), and only a model trained on the next token is
held to causality."""
import dataclasses

from ...tools.next_token import judge
from ..probes.next_token import LanguageModelReads


def language_model_targets(view):
    reads = view.signal(LanguageModelReads)
    if reads is None or reads.causal.findings is None:
        return []
    codes = {f.code for f in reads.causal.findings}
    if "BATCH_MIXING" in codes:   # the causal check did not run: causality unknown
        return []
    targets = reads.targets
    _, _, misaligned = judge(targets.scored, targets.tokens, inside_model=targets.inside_model)
    if misaligned:
        return [] if "CAUSALITY_LEAK" in codes else [_seen(f, targets.step)
                                                      for f in misaligned]
    return [_seen(f, reads.causal.step) for f in reads.causal.findings
            if f.code == "CAUSALITY_LEAK"]


def _seen(finding, step):
    """The finding, saying where the Monitor read it: the training call of a sampled step."""
    return dataclasses.replace(
        finding, message=f"{finding.message} (read at step {step}, on the training batch)",
        evidence={**finding.evidence, "step": step})


CHECKS = (language_model_targets,)
