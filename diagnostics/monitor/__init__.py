"""Training-time monitoring: statistics, loss health and findings for torch and minigrad loops."""
from .guard import BadStep, GuardStopped
from .monitor import Monitor
from .report import LayerSummary, MonitorReport, ParameterSummary
from .settings import DEFAULT_EVERY, DEFAULT_WINDOW, Thresholds
from .sinks import CSVSink, JSONLSink, Sink, TensorBoardSink, WandbSink

__all__ = ["Monitor", "GuardStopped", "BadStep", "MonitorReport", "LayerSummary",
           "ParameterSummary", "Thresholds",
           "DEFAULT_EVERY", "DEFAULT_WINDOW", "Sink", "CSVSink", "JSONLSink", "TensorBoardSink",
           "WandbSink"]
