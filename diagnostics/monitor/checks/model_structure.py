"""MODULE_REUSED and BATCHNORM_MOMENTUM_INVERTED, from the module tree the probe read."""
from ...model_structure import momentum_findings, reused_finding
from ..probes.model_structure import ModelStructure


def module_reused(view):
    structure = view.signal(ModelStructure)
    return [] if structure is None else [reused_finding(r) for r in structure.reused]


def batchnorm_momentum_inverted(view):
    structure = view.signal(ModelStructure)
    return [] if structure is None else momentum_findings(structure.inverted_momenta)


CHECKS = (module_reused, batchnorm_momentum_inverted)
