"""A small text that ships with Python, as next-character sequences: the Zen of Python.

``this.s`` holds it ROT13-encoded; importing ``this`` prints it, so the import is silenced.
Each line (with its newline) is cut into windows of ``length + 1`` characters: inputs are the
first ``length``, targets the next character at each position. The last window of a line is
padded: input positions with the newline's id, target positions with ``IGNORE_INDEX``, which
the loss leaves out (``ignore_index``), as a language model's padding is.
"""
import codecs
import contextlib
import functools
import io

import numpy as np

IGNORE_INDEX = -100


@functools.cache
def zen():
    """The Zen of Python, decoded."""
    with contextlib.redirect_stdout(io.StringIO()):
        import this
    return codecs.decode(this.s, "rot13")


@functools.cache
def vocabulary():
    """The characters of the text, the newline first (id 0, also the padding input)."""
    return "\n" + "".join(sorted(set(zen()) - {"\n"}))


def encode(text):
    ids = {char: index for index, char in enumerate(vocabulary())}
    return np.array([ids[char] for char in text], dtype=np.int64)


def decode(ids):
    return "".join(vocabulary()[int(i)] for i in ids)


def sequences(*, length=16):
    """(inputs, targets): int64 arrays of shape (windows, length), padded as described above."""
    inputs, targets = [], []
    for line in zen().splitlines():
        ids = encode(line.strip() + "\n")
        for start in range(0, len(ids) - 1, length):
            window = ids[start:start + length + 1]
            x = np.zeros(length, dtype=np.int64)
            y = np.full(length, IGNORE_INDEX, dtype=np.int64)
            x[:len(window) - 1], y[:len(window) - 1] = window[:-1], window[1:]
            inputs.append(x)
            targets.append(y)
    return np.stack(inputs), np.stack(targets)
