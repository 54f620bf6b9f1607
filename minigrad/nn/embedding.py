"""``Embedding``: a table of ``num_embeddings`` vectors, looked up by integer index."""
import numpy as np

from .. import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class Embedding(Module):
    """``weight`` of shape (num_embeddings, embedding_dim), drawn from N(0, 1) as in torch.

    The table can be shared with an output layer (weight tying): assign the same Parameter,
    ``head.weight = embedding.weight``; its gradient is the sum of both uses.
    """

    def __init__(self, num_embeddings, embedding_dim, dtype=np.float32):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(np.empty((num_embeddings, embedding_dim), dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        init.normal_(self.weight)

    def forward(self, input):
        return F.embedding(input, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"
