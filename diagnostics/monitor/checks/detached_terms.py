"""TERM_DETACHED, read off what became of a loss term's gradient (``probes/detached_terms.py``)."""
from ...findings import Finding
from ..probes.detached_terms import DetachedTerms


def term_detached(view):
    terms = view.signal(DetachedTerms)
    if terms is None:
        return []
    verdicts = view.thresholds.detached_term_verdicts
    findings = []
    for term in terms.terms:
        if term.used or len(term.cleared) < verdicts:
            continue
        ordinal = _ordinal(term.position)
        findings.append(Finding(
            "TERM_DETACHED", "error", "loss",
            f"the {ordinal} of the loss's {term.terms} terms ({term.term}) sends no gradient to "
            f"the parameters this optimizer steps: its graph reaches {term.reached_count} "
            f"trainable tensors, none of them this optimizer's ({term.reached} among them), "
            f"while another term reaches this optimizer's; the gradient it leaves there was "
            f"cleared before any optimizer stepped on it, at each of the {len(term.cleared)} "
            f"sampled steps judged (from step {term.cleared[0]}): the term trains nothing, and "
            f"the network it was written for learns from the other terms alone",
            "the term is computed on a detached tensor (x.detach(), a value kept from an "
            "earlier no_grad pass or from the other network's step): compute it on the live "
            "output of the network this optimizer trains (a GAN generator's adversarial term "
            "on fake, not fake.detach())",
            {"term": term.term, "position": term.position, "terms": term.terms,
             "reached": term.reached, "reached_count": term.reached_count,
             "cleared_steps": list(term.cleared)}))
    return findings


def _ordinal(position):
    words = ("first", "second", "third", "fourth", "fifth")
    return words[position] if position < len(words) else f"term #{position + 1}"


CHECKS = (term_detached,)
