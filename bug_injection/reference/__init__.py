"""The reference models a planted bug goes into: minigrad/torch twins with the same weights
(``models``, ``gpt``), small synthetic data (``datasets``, ``text``), the plain training loop
(``loop``) and the ``Bench`` that holds one setup on one backend (``bench``)."""
