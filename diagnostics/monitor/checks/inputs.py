"""The model's input: scale far from zero mean and unit variance, NaN or inf.

The scale is judged as the first layer with weights sees it (``probes/inputs.py``): frames a
model divides by 255 itself are normalised data."""
import statistics

from ...findings import Finding
from ..probes.inputs import InputLayer


def unnormalized_input(view):
    records = [s.inputs for s in view.samples if s.inputs is not None and s.inputs.finite]
    if not records:
        return []
    rms = statistics.median(r.rms for r in records)
    thresholds = view.thresholds
    if thresholds.input_rms_low <= rms <= thresholds.input_rms_high or rms == 0:
        return []
    last = records[-1]
    layer = view.signal(InputLayer)
    layer = layer.name if layer is not None else None
    seen = ("the model's input" if layer is None
            else f"the input of layer {layer or '(model)'}, the first with weights,")
    return [Finding(
        "UNNORMALIZED_INPUT", "warning", "data",
        f"{seen} has mean {last.mean:.4g}, std {last.std:.4g} and range "
        f"[{last.minimum:.4g}, {last.maximum:.4g}] (root mean square {rms:.4g}): far from zero "
        f"mean and unit variance",
        f"standardize the inputs with the training set's statistics: x = (x - {last.mean:.4g}) "
        f"/ {last.std:.4g} (per feature or per channel); for images, divide by 255 then "
        f"normalize",
        {"mean": last.mean, "std": last.std, "min": last.minimum, "max": last.maximum,
         "rms": rms, "layer": layer})]


def data_nonfinite(view):
    for sample in view.samples:
        if sample.inputs is not None and not sample.inputs.finite:
            return [Finding(
                "DATA_NONFINITE", "error", "data",
                f"the model's input holds NaN or inf at step {sample.step}",
                "find the NaN in the data set (np.isnan(x).any() per example); fill or drop "
                "missing values; check divisions in preprocessing (std of a constant feature)",
                {"step": sample.step})]
    return []


CHECKS = (unnormalized_input, data_nonfinite)
