"""Gradient checks that name the culprit module, on torch and minigrad models alike."""
from .check import check_gradients
from .compare import CompareReport, compare_gradients
from .patterns import Pattern, classify, classify_arrays
from .report import Culprit, GradientReport, TensorCheck

__all__ = ["check_gradients", "compare_gradients", "GradientReport", "CompareReport",
           "TensorCheck", "Culprit", "Pattern", "classify", "classify_arrays"]
