"""MODULE_REUSED, BATCHNORM_MOMENTUM_INVERTED and MODULE_BACKWARD_IGNORED, from the module
tree the probe read."""
from ...model_structure import ignored_backward_finding, momentum_findings, reused_finding
from ..probes.model_structure import ModelStructure


def module_reused(view):
    structure = view.signal(ModelStructure)
    return [] if structure is None else [reused_finding(r) for r in structure.reused]


def batchnorm_momentum_inverted(view):
    structure = view.signal(ModelStructure)
    return [] if structure is None else momentum_findings(structure.inverted_momenta)


def module_backward_ignored(view):
    structure = view.signal(ModelStructure)
    return [] if structure is None else [ignored_backward_finding(i)
                                         for i in structure.ignored_backwards]


CHECKS = (module_reused, batchnorm_momentum_inverted, module_backward_ignored)
