"""Turn report values (NumPy scalars and arrays, tuples, nested dicts) into JSON-ready Python."""
import math

import numpy as np


def to_jsonable(value):
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_jsonable(value.tolist())
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN or Infinity
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
