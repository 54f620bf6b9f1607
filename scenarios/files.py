"""Where scenarios write their files."""
import tempfile
from pathlib import Path


def output_dir(out_dir):
    """``out_dir`` (created if missing), or a fresh temporary folder when it is None."""
    if out_dir is None:
        return Path(tempfile.mkdtemp(prefix="gradhunt-"))
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
