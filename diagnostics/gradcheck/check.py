"""``check_gradients``: compare analytic gradients with finite differences and name the culprit.

The check runs on a float64 copy of the model (the user's model is left as it was, also when
something raises). One backward pass gives the analytic gradients of every parameter and of
every point at a module boundary; random directional derivatives, two loss evaluations each,
say which of them are wrong; the first module where a right gradient turns wrong is the
culprit. Single elements are checked only in tensors that fail (or in every parameter, with
``mode="full"``), and the culprit's wrong gradient is matched against known patterns.
"""
import contextlib

import numpy as np

from ..backends import get_backend
from ..batch import Batch
from ..errors import require
from ..findings import Finding
from ..progress import progress_bar
from .declared import (check_declared, declared_modules, function_hosts, is_declared,
                       surrogate_exempt, surrogates)
from .evaluator import Evaluator
from .localize import INTERNAL, LOSS, locate
from .patterns import classify, zeroed_rows_text
from .points import INPUT, OUTPUT, Instrument
from .probing import CONFIRM, Prober, Target
from .report import (MISMATCH, NOT_DIFFERENTIATED, OK, UNCHECKED, Culprit, GradientReport,
                     TensorCheck)
from .settings import Settings


def check_gradients(model, loss_fn, inputs, targets, *, mode="auto", eps=1e-6, rtol=1e-4,
                    atol=1e-8, probes=3, max_elements=32, seed=0, output=None, declared=()):
    """Check ``model``'s gradients of ``loss_fn(model(*inputs), targets)``; a ``GradientReport``.

    ``model``: a torch or minigrad module. ``loss_fn(output, targets)``: any callable of the
    model's framework returning a scalar (an ``nn`` loss module or a function); it gets the
    model's whole output (a tensor, tuple, dict or dataclass). ``inputs``: tensors of the
    model's framework or NumPy arrays, alone, in a tuple (positional) or in a dict (keyword
    arguments). ``targets``: the same, alone or in a tuple; integer targets stay integer.
    Tensor targets must fit the logits (``diagnostics.outputs`` says which output that is;
    ``output=`` names it): the logits' shape (float), or class indices for ``(N, C, ...)`` or
    ``(N, ..., C)`` logits. ``declared``: modules (names or classes) and autograd Function
    classes whose backward is on purpose not the derivative (gradient reversal, straight-through
    estimators); a wrong gradient born there is reported as declared (info), not as a bug.
    See ``Settings`` for the other options.
    """
    settings = Settings(mode=mode, eps=eps, rtol=rtol, atol=atol, probes=probes,
                        max_elements=max_elements, seed=seed)
    backend = get_backend(model)
    require(any(p.requires_grad for _, p in backend.named_parameters()), "model",
            "a module with parameters that require grad", "none")
    declared = check_declared(backend, declared)
    batch = Batch.prepare(backend, loss_fn, inputs, targets, output=output, float64=True,
                          targets_required=False)
    with backend.preserved():
        return run_check(backend, batch, settings, declared=declared)


def run_check(backend, batch, settings, *, declared=(set(), (), ())):
    """The check of a prepared float64 ``batch`` on a float64 copy of ``backend``'s model (the
    caller restores the global RNG states); ``declared`` as ``check_declared`` returns it."""
    names, module_classes, functions = declared
    copy = backend.clone(dtype=np.float64)
    hosts = set()
    with Instrument(copy) as instrument, function_hosts(functions, instrument, hosts), \
            copy.float64_casts():
        check = _GradientCheck(copy, instrument, batch, settings)
        check.declared = lambda: declared_modules(copy, names, module_classes, hosts)
        return check.run()


class _GradientCheck:
    def __init__(self, backend, instrument, batch, settings):
        self.backend, self.batch, self.settings = backend, batch, settings
        self.evaluator = Evaluator(backend, instrument, batch)
        self.declared = set

    def run(self):
        analytic = self.evaluator.analytic()
        loss_0 = self.evaluator.check_deterministic(analytic.loss)
        self._use_surrogates(analytic)
        self.prober = Prober(self.evaluator, self.settings, loss_0)
        self.points = analytic.points
        self.unreached = analytic.unreached
        self.targets = {name: Target(name, grad, parameter=name)
                        for name, grad in analytic.parameters.items()}
        self.targets_parameters = set(analytic.parameters)
        self.targets.update({p.key: Target(p.label, analytic.point_gradients[p.key], point=p)
                             for p in self.points})
        self.probings, self.elements, self.patterns = {}, {}, {}
        self.supports = {}   # point key -> flat indices probed instead of all (_smooth_support)
        self.aliases = self._judged_alike(_aliases(self.evaluator.instrument.aliases,
                                                   analytic))
        # a bar on a terminal once a large check runs two seconds; quiet otherwise
        with progress_bar(len(analytic.parameters) + len(self.points),
                          desc="check_gradients") as bar:
            for name in analytic.parameters:
                self._check_parameter(name)
                bar.update()
            for point in self.points:
                if point.key not in self.aliases:
                    self._check_point(point, analytic.point_values[point.key])
                bar.update()
        self._confirm_pending()
        births = locate(self.points, {p.key: self._flow_status(p.key) for p in self.points},
                        {name: self._status(name) for name in analytic.parameters})
        self.values = analytic.point_values
        births = self._without_consequences(births, analytic)
        evidence = {birth.evidence for birth in births} if births else set(analytic.parameters)
        for name in analytic.parameters:
            if self._status(name) != MISMATCH or name in self.elements:
                continue
            if name in evidence:
                self.elements[name] = self._suspect_elements(name)
            elif not self._fed_wrong(name):
                self.elements[name] = self.prober.consequence_elements(self.targets[name])
        for birth in births:
            self._explain(birth)
        return self._report(list(analytic.parameters), births)

    def _use_surrogates(self, analytic):
        """Judge what lies upstream of a declared module against its declared backward
        (``declared.surrogates``); the declared Functions' hosts are known once recorded."""
        ids = {name: id(param) for name, param in self.backend.named_parameters()}
        found = surrogates(self.evaluator.instrument, analytic.points, analytic,
                           self.declared(), ids)
        self.evaluator.instrument.surrogates = found
        self.evaluator.surrogate_modules = tuple(sorted({s.module for s in found.values()}))

    def _without_consequences(self, births, analytic):
        """``births`` less those wrong only through a culprit nearer the loss: a point that
        feeds both a right branch and a culprit's input (the features a gradient reversal
        reads) looks born wrong between it and the right branch. Measured again with the
        culprit standing in for its surrogate (``declared.surrogates``: its output as
        recorded, its backward's linear map of its inputs), such a point agrees with finite
        differences; a second bug there still does not."""
        instrument = self.evaluator.instrument
        ids = {name: id(param) for name, param in self.backend.named_parameters()}
        kept = list(births)
        for birth in births:             # nearest the loss first
            if birth not in kept or birth.path != INPUT or birth.module == LOSS:
                continue
            fed = instrument.upstream(birth.evidence) - {birth.evidence}
            later = [b for b in kept if b is not birth and (
                b.evidence in fed or self._owner_output_in(b.evidence, fed))]
            found = surrogates(instrument, self.points, analytic, {birth.module}, ids) \
                if later else {}
            if not found:
                continue
            with self._surrogates_added(found):
                prober = Prober(self.evaluator, self.settings, self.prober.loss_0)
                for other in later:
                    probing = prober.probe(self.targets[other.evidence],
                                           support=self.supports.get(other.evidence))
                    if probing.status == OK:
                        kept.remove(other)
        return kept

    @contextlib.contextmanager
    def _surrogates_added(self, found):
        instrument, evaluator = self.evaluator.instrument, self.evaluator
        saved = instrument.surrogates, evaluator.surrogate_modules
        instrument.surrogates = {**saved[0], **found}
        evaluator.surrogate_modules = tuple(sorted(set(saved[1]) | {s.module
                                                                   for s in found.values()}))
        try:
            yield
        finally:
            instrument.surrogates, evaluator.surrogate_modules = saved

    def _judged_alike(self, aliases):
        """The aliases whose two points are measured against the same loss: a declared
        module's input is measured on the model as it is, the point just before it, outside
        the module, on the surrogate (``surrogate_exempt``)."""
        modules = self.evaluator.surrogate_modules
        by_key = {p.key: p for p in self.points}

        def exempt(key):
            return surrogate_exempt(modules, point=by_key[key])
        return {key: later for key, later in aliases.items() if exempt(key) == exempt(later)}

    # ------------------------------------------------------------------ checks
    def _check_parameter(self, name):
        if name in self.unreached:    # no_grad or detach in forward: nothing to compare
            return
        target = self.targets[name]
        if self.settings.mode == "full":
            self.elements[name] = self.prober.elements(target, np.arange(target.analytic.size))
            return
        probing = self.prober.probe(target, defer=True)
        if probing.status == UNCHECKED:
            probing.extend(self.prober.probe_chunks(target))
        self.probings[name] = probing

    def _check_point(self, point, value):
        """Random directions over the elements away from kinks (see ``_smooth_support``);
        where those still land on kinks, one round per chunk."""
        if point.key in self.unreached:   # detached after this point: nothing to compare
            return
        target, support = self.targets[point.key], _smooth_support(value)
        if support is not None:
            self.supports[point.key] = support
        probing = self.prober.probe(target, support=support, defer=True)
        if probing.status == UNCHECKED:
            probing.extend(self.prober.probe_chunks(target, support))
        self.probings[point.key] = probing

    def _confirm_pending(self):
        """Takes the deferred probes that showed a mismatch on to ``CONFIRM`` directions, last
        point first, except where the gradient comes from a point already confirmed wrong:
        one mismatching direction whose one-sided slopes agree is enough there, as for any
        detail of a tensor known to be wrong, since the wrong gradient reaching it is
        established (the points the confirmed one was computed from, and the parameters of
        modules whose output is among them)."""
        fed = set()
        keys = [p.key for p in reversed(self.points)] + list(self.targets)
        for key in dict.fromkeys(keys):
            probing = self.probings.get(key)
            if probing is None or probing.status != MISMATCH or len(probing.rounds) != 1:
                continue
            if key in fed or self._owner_output_in(key, fed):
                continue
            if _mismatches(probing) < CONFIRM:
                self.probings[key] = self.prober.confirm_round(self.targets[key], probing,
                                                               self.supports.get(key))
            if self.probings[key].status == MISMATCH and key not in self.targets_parameters:
                fed |= self.evaluator.instrument.upstream(key)

    def _owner_output_in(self, parameter, keys):
        if parameter not in self.targets_parameters:
            return False
        owner = parameter.rpartition(".")[0]
        return any(p.module == owner and p.kind == OUTPUT and p.key in keys
                   for p in self.points)

    def _status(self, key):
        if key in self.unreached:
            return NOT_DIFFERENTIATED
        key = self.aliases.get(key, key)
        statuses = set()
        if key in self.probings:
            statuses.add(self.probings[key].status)
        if key in self.elements:
            elements = self.elements[key]
            if elements.mismatched.any():
                statuses.add(MISMATCH)
            elif elements.kinks < len(elements.indices):
                statuses.add(OK)
        if MISMATCH in statuses:
            return MISMATCH
        return OK if OK in statuses else UNCHECKED

    def _fed_wrong(self, parameter):
        """Whether the gradient reaching ``parameter``'s module (at one of its outputs) is
        known wrong: the directional probes already show the parameter wrong as a consequence,
        so single elements would add cost, not evidence."""
        owner = parameter.rpartition(".")[0]
        return any(p.module == owner and p.kind == OUTPUT and self._status(p.key) == MISMATCH
                   for p in self.points)

    def _flow_status(self, key):
        """A point's status for localization: a right gradient that is zero (no gradient
        reaches the point, an unused output) says nothing about where errors are born."""
        status = self._status(key)
        if status == OK and not np.any(self.targets[key].analytic):
            return UNCHECKED
        return status

    def _suspect_elements(self, key):
        """Single elements of the tensor that shows a culprit (``Prober.suspect_elements``).
        A tensor larger than ``max_elements`` stops at half of them disagreeing: they make the
        evidence (the pattern is read from directional probes then, not from the elements); a
        smaller one is checked whole, which lets ``_explain`` read the exact gradient off it."""
        target, support = self.targets[key], self.supports.get(key)
        cap = self.prober.settings.max_elements
        enough = max(1, cap // 2) if target.analytic.size > cap else None
        return self.prober.suspect_elements(target, support, enough=enough)

    def _explain(self, birth):
        """Single elements and the pattern of the gradient that shows a culprit; the pattern
        starts from the directions its probes measured already (``Prober.along_support``)."""
        key = birth.evidence
        if key not in self.elements:
            self.elements[key] = self._suspect_elements(key)
        if key in self.patterns:
            return
        target, elements = self.targets[key], self.elements[key]
        support = self.supports.get(key)
        analytic = target.analytic if support is None else target.analytic.reshape(-1)[support]
        complete = (support is None and len(elements.indices) == target.analytic.size
                    and elements.kinks == 0)
        if complete:
            numerical = np.empty(target.analytic.size)
            numerical[elements.indices] = elements.numerical
            true_slope, measured = _exact_slope(numerical.reshape(target.shape)), ()
        else:
            true_slope = self.prober.true_slope(target, support)
            measured = self.prober.along_support(target, support)
        jacobian = self._jacobian_product(target.point) if birth.path == INPUT else None
        if jacobian is not None and support is not None:
            jacobian = jacobian.reshape(-1)[support]
        self.patterns[key] = classify(analytic, true_slope, rng=self.prober.rng,
                                      batch_size=self.batch.batch_size,
                                      jacobian_product=jacobian, measured=measured)

    def _jacobian_product(self, point):
        """``J @ grad_output`` of ``point``'s module call, when it maps one tensor to one of the
        same shape; measured by moving the input along the output's gradient."""
        if point is None or point.kind != INPUT:
            return None
        same_call = [p for p in self.points if p.module == point.module and p.call == point.call]
        outputs = [p for p in same_call if p.kind == OUTPUT]
        if len(same_call) != 2 or len(outputs) != 1 or outputs[0].shape != point.shape:
            return None
        grad_output = self.targets[outputs[0].key].analytic
        norm = float(np.linalg.norm(grad_output))
        if norm == 0.0:
            return None
        step = self.settings.eps * grad_output / norm
        values = [self.evaluator.output_of(outputs[0], point=point, delta=sign * step)
                  for sign in (1.0, -1.0)]
        if any(v is None for v in values):
            return None
        return (values[0] - values[1]) / (2 * self.settings.eps) * norm

    # ------------------------------------------------------------------ report
    def _tensor_check(self, key, name, shape):
        measured = self.aliases.get(key, key)
        probing, elements = self.probings.get(measured), self.elements.get(measured)
        errors, worst = [0.0], {}
        kinks = directions = 0
        if probing is not None:
            kinks, directions = probing.kinks, probing.directions
            slope = probing.worst()
            if slope is not None:
                errors.append(slope.relative_error())
                worst = {"numerical": slope.value, "analytical": slope.analytic}
        if elements is not None and len(elements.indices):
            kinks += elements.kinks
            errors.append(float(elements.relative_errors().max()))
            position = elements.worst()
            worst = {"worst_index": tuple(int(i) for i in np.unravel_index(
                         elements.indices[position], shape)),
                     "numerical": _number(elements.numerical[position]),
                     "analytical": float(elements.analytical[position])}
        return TensorCheck(
            name=name, shape=tuple(shape), status=self._status(key), directions=directions,
            kinks=kinks, max_rel_error=max(errors),
            elements_checked=0 if elements is None else len(elements.indices) - elements.kinks,
            elements_mismatched=0 if elements is None else int(elements.mismatched.sum()),
            pattern=self.patterns.get(key), **worst)

    def _report(self, parameter_names, births):
        parameters = {name: self._tensor_check(name, name, self.targets[name].shape)
                      for name in parameter_names}
        points = [self._tensor_check(p.key, p.label, p.shape) for p in self.points]
        checks = dict(parameters)
        checks.update({p.key: c for p, c in zip(self.points, points)})
        declared = self.declared()
        intended = [b for b in births if is_declared(b.module, declared)]
        padded = {b: pad for b in births if b not in intended
                  for pad in [self._padding_row(b, checks[b.evidence])] if pad is not None}
        upstream = {b.evidence for b in padded}
        judged = self.evaluator.surrogate_modules
        unjudged = set()
        for birth in intended:
            keys = self.evaluator.instrument.upstream(birth.evidence) | {birth.evidence}
            holder = next((name for name in judged if is_declared(birth.module, {name})), None)
            if holder is None:
                unjudged.add(birth.module)
            else:   # judged against the declared backward upstream: only its own part is
                keys = {k for k in keys if not isinstance(k, tuple) or is_declared(k[0], {holder})}
            upstream |= keys
        owners = {p.module for p in self.points if p.kind == OUTPUT and p.key in upstream}

        def explained(key):
            """Wrong only because a declared module's backward feeds it, or the padding row
            an embedding leaves without a gradient by design."""
            return key in upstream or (key in parameters and key.rpartition(".")[0] in owners)

        births = [b for b in births if b not in intended and not explained(b.evidence)]
        mismatched = [k for k, c in checks.items() if c.status == MISMATCH]
        consequences = [n for n in parameter_names
                        if parameters[n].status == MISMATCH and explained(n)]
        faulty = sorted((n for n, c in parameters.items()
                         if c.status == MISMATCH and n not in consequences),
                        key=lambda n: -parameters[n].max_rel_error)
        evidence = {b.evidence for b in births}
        labels = {p.key: p.label for p in self.points}
        causes = []
        for birth in births:
            affected = tuple(n for n in faulty if n not in evidence
                             and self._first_position(n) < birth.position)
            causes.append(Culprit(
                module=birth.module, module_type=self._module_type(birth.module),
                path=birth.path, check=checks[birth.evidence], right=labels.get(birth.right),
                affected=affected))
        culprits = list(dict.fromkeys(c.module for c in causes))
        findings = [_finding(c, identity=self._identity_forward(c)) for c in causes]
        if faulty and not causes:
            findings.append(_unlocated_finding(parameters[faulty[0]], faulty))
        findings += [_declared_finding(b, self._module_type(b.module), checks[b.evidence],
                                       consequences) for b in intended]
        findings += [_padding_finding(b, self._module_type(b.module), checks[b.evidence], pad)
                     for b, pad in padded.items()]
        failed = bool(births) or any(not explained(k) for k in mismatched)
        unreached = [name for name in parameter_names if name in self.unreached]
        if unreached:
            findings.append(_not_differentiated_finding(unreached))
        notes = _notes([c for k, c in checks.items() if k not in self.aliases])
        if unjudged:
            notes.append("gradients upstream of a declared module whose output depends on more "
                         "than its inputs are changed on purpose and are not judged: "
                         + ", ".join(sorted(unjudged)))
        if judged:
            notes.append("gradients upstream of a declared module are judged against its "
                         "declared backward: " + ", ".join(judged))
        return GradientReport(
            passed=not failed, faulty=faulty, culprits=culprits, findings=findings,
            parameters=parameters, points=points, causes=causes,
            forward_evaluations=self.evaluator.forward_evaluations,
            backward_passes=self.evaluator.backward_passes, backend=self.backend.name,
            mode=self.settings.mode, notes=notes)

    def _identity_forward(self, cause):
        """Whether ``cause`` is an input-path culprit whose every call returned its input as
        it was: a module that only reverses (or scales) the gradient on purpose, like a
        gradient reversal layer, rather than one whose derivative is computed wrong."""
        if cause.path != INPUT or cause.module in (LOSS, ""):
            return False
        calls = {}
        for p in self.points:
            if p.module == cause.module:
                calls.setdefault(p.call, {})[p.kind, p.index] = self.values.get(p.key)
        return bool(calls) and all(
            len(call) == 2 and (INPUT, 0) in call and (OUTPUT, 0) in call
            and call[INPUT, 0].shape == call[OUTPUT, 0].shape
            and np.array_equal(call[INPUT, 0], call[OUTPUT, 0]) for call in calls.values())

    def _first_position(self, parameter):
        owner = parameter.rpartition(".")[0]
        return next((i for i, p in enumerate(self.points) if p.module == owner), -1)

    def _padding_row(self, birth, check):
        """The ``padding_idx`` of an embedding whose weight gradient is wrong only in that row,
        zeroed: nn.Embedding gives its padding row no gradient by design, so the gradient is
        what the module defines; the numerical one says the output reads that row."""
        if birth.path != "weight" or not birth.module or check.pattern is None:
            return None
        pad = getattr(self.backend.module(birth.module), "padding_idx", None)
        if not isinstance(pad, int) or check.pattern.kind != "zeroed" or not check.shape:
            return None
        pad %= check.shape[0]
        return pad if check.pattern.detail == zeroed_rows_text([pad], check.shape[0]) else None

    def _module_type(self, name):
        if name == LOSS:
            return "loss"
        return type(self.backend.module(name)).__name__


def _mismatches(probing):
    return sum(s.status == MISMATCH for s in probing.slopes)


def _aliases(found, analytic):
    """Point key -> the later point key it is measured as (``Instrument.aliases``, followed
    to the end of a chain), kept only where both got the same gradient array."""
    aliases = {}
    for key in found:
        later = key
        while later in found:
            later = found[later]
        gradients = analytic.point_gradients
        if ((key in analytic.unreached) == (later in analytic.unreached)
                and np.array_equal(gradients[key], gradients[later])):
            aliases[key] = later
    return aliases


def _smooth_support(value):
    """Flat indices of ``value`` that are neither exactly zero nor exactly equal to another
    element: exact zeros are where ReLU and abs bend, exact ties where max-pool switches (the
    zeros of a ReLU tie in its pooling windows). None when that is every element, or none."""
    flat = value.reshape(-1)
    values, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
    keep = (flat != 0) & (counts[inverse.reshape(-1)] == 1)
    if keep.all() or not keep.any():
        return None
    return np.flatnonzero(keep)


def _exact_slope(numerical):
    return lambda w: float(np.vdot(numerical, w))


def _number(value):
    return None if np.isnan(value) else float(value)


def _finding(cause, *, identity=False):
    """GRADIENT_MISMATCH for a culprit; an exact factor -1 says how to declare a gradient
    reversal, and leads with it (a warning) where the module's forward is the identity."""
    check, pattern = cause.check, cause.pattern
    reversal = pattern is not None and pattern.kind == "sign flip"
    path = {INPUT: "its input", INTERNAL: "its own code between its sub-modules"}.get(
        cause.path, f"its {cause.path}")
    if cause.module == LOSS:
        what = "the gradient the loss sends back to the model's output is wrong"
    elif cause.path in (INPUT, INTERNAL):
        what = f"{cause.where} passes a wrong gradient back through {path}"
    else:
        what = f"{cause.where} computes a wrong gradient for its {cause.path}"
    message = what
    if pattern is not None:
        message += f": {pattern}"
    if cause.right:
        message += f", while the gradient at {cause.right} is right"
    if check.worst_index is not None:
        message += (f". Worst element {check.name}{list(check.worst_index)}: numerical "
                    f"{_sci(check.numerical)}, analytical {_sci(check.analytical)}")
    if cause.affected:
        message += f". Wrong as a consequence: {', '.join(cause.affected)}"
    where = "loss_fn's backward" if cause.module == LOSS else (
        f"the backward of {cause.module_type} (or of the autograd Function it calls)")
    suggestion = f"in {where}, look for {pattern.hint}" if pattern is not None else ""
    severity = "error"
    if reversal:
        declare = (f"check_gradients(model, loss_fn, inputs, targets, "
                   f"declared=[{cause.module!r}])")
        if identity:
            severity = "warning"
            message = (f"{cause.where} returns its input unchanged and passes back minus the "
                       f"gradient (factor -1): likely a gradient reversal layer (as in DANN), "
                       f"which does this on purpose. " + message[0].upper() + message[1:])
            suggestion = (f"if the reversal is intended, declare it: {declare}, which also "
                          f"judges the layers before it against the reversed gradient; "
                          f"otherwise, {suggestion}")
        else:
            suggestion += (f"; if the reversal is intended (a gradient reversal layer), "
                           f"declare it: {declare}")
    evidence = {"module": cause.module, "module_type": cause.module_type, "path": cause.path,
                "pattern": None if pattern is None else pattern.to_dict(),
                "check": check.to_dict(), "right": cause.right,
                "affected": list(cause.affected)}
    evidence["likely_reversal"] = bool(reversal and identity)
    return Finding("GRADIENT_MISMATCH", severity, cause.module, message + ".", suggestion,
                   evidence)


def _padding_finding(birth, module_type, check, pad):
    """Info, not an alarm: a model may read its padding on purpose (a CNN over padded text);
    an attention mask that lets the pads in reads it by mistake."""
    return Finding(
        "GRADIENT_MISMATCH", "info", birth.module,
        f"'{birth.module}' ({module_type}) gives its padding row (padding_idx={pad}) no "
        f"gradient, as it does by design, but the model's output depends on that row "
        f"(numerical gradient {_sci(check.numerical)} at {check.name}"
        f"{list(check.worst_index) if check.worst_index is not None else ''}): padding tokens "
        f"reach the output. An attention mask that does not mask them (key_padding_mask must "
        f"be True at the pads: attention_mask == 0), or a pooling that counts them, lets "
        f"padding change the predictions",
        "mask the padding wherever it is read (key_padding_mask=(attention_mask == 0) in "
        "attention; pooled sums divided by the number of real tokens); if reading the padding "
        "embedding is intended (a CNN over padded text), nothing to fix",
        {"module": birth.module, "module_type": module_type, "padding_idx": pad,
         "check": check.to_dict()})


def _declared_finding(birth, module_type, check, consequences):
    where = f"'{birth.module}' ({module_type})" if birth.module else f"the model ({module_type})"
    return Finding(
        "GRADIENT_MISMATCH", "info", birth.module,
        f"{where} sends back a gradient that is not the derivative of its forward (max "
        f"relative error {check.max_rel_error:.2g} at {check.name}), as declared"
        + (f"; {', '.join(consequences)} differ from finite differences as a consequence"
           if consequences else ""),
        "nothing to fix if the custom backward is intended (gradient reversal, a "
        "straight-through estimator); drop it from declared= to check it again",
        {"declared": True, "module": birth.module, "module_type": module_type,
         "check": check.to_dict(),
         "consequences": list(consequences)})


def _not_differentiated_finding(names):
    return Finding(
        "NO_GRADIENT", "info", names[0],
        f"not differentiated by design (no_grad/detach in forward): the loss's graph does not "
        f"reach {', '.join(names)}, so backward gives them no gradient and they were not "
        f"compared with finite differences",
        "nothing to fix for a frozen part; if these parameters should learn, remove the "
        "torch.no_grad()/.detach() around the code that uses them",
        {"parameters": list(names)})


def _unlocated_finding(check, faulty):
    return Finding(
        "GRADIENT_MISMATCH", "error", check.name,
        f"gradients of {', '.join(faulty)} disagree with finite differences (max relative "
        f"error {check.max_rel_error:.2g}); the module where they go wrong could not be "
        f"pinned down (the gradients at the module boundaries around them could not be "
        f"checked).",
        "check the backward of the modules that use these parameters",
        {"faulty": faulty, "check": check.to_dict()})


def _notes(checks):
    notes = []
    kinks = sum(c.kinks for c in checks)
    if kinks:
        notes.append(f"{kinks} probe(s) landed on non-differentiable points (ReLU at 0, "
                     f"max-pool ties, abs) and were replaced or left out")
    unchecked = [c.name for c in checks if c.status == UNCHECKED]
    if unchecked:
        notes.append(f"not checked, every probe on a non-differentiable point: "
                     f"{', '.join(unchecked)}")
    return notes


def _sci(value):
    return "n/a" if value is None else f"{value:.4e}"
