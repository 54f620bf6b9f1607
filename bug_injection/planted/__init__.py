"""Planted bugs: the catalogue (``catalog``), the plants by kind (``gradient``, ``transformer``,
``training_loop``, ``init``, ``numerics``, ``data``, ``distributed``), the wrong formulas and
functions gradient bugs are made of, the patches that always put things back (``patching``), and
the snapshots that prove it (``state``)."""
