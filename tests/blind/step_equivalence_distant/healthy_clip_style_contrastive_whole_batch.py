"""HEALTHY: CLIP-style symmetric contrastive model (image tower: MLP on float features; text
tower: EmbeddingBag; a learnable logit scale) with in-batch negatives; ``train_step``
computes the symmetric InfoNCE on the whole batch exactly as ``loss_fn`` does; SGD momentum.

Keyword inputs ``{"image", "text"}``, targets ``arange(B)``. The in-batch objective couples the
rows (not decomposable over rows), but one whole-batch forward and backward is exactly its
gradient.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N, F_IMG, V, L, D = 40, 20, 60, 8, 24


class TinyCLIP(nn.Module):
    def __init__(self):
        super().__init__()
        self.img = nn.Sequential(nn.Linear(F_IMG, 48), nn.GELU(), nn.Linear(48, D))
        self.txt = nn.EmbeddingBag(V, D, mode="mean")
        self.txt_proj = nn.Linear(D, D)
        self.logit_scale = nn.Parameter(torch.tensor(2.0))

    def forward(self, image, text):
        a = F.normalize(self.img(image), dim=-1)
        b = F.normalize(self.txt_proj(self.txt(text)), dim=-1)
        return a, b, self.logit_scale.exp()


def clip_loss(out, positives):
    a, b, scale = out
    logits = scale * a @ b.T
    return (F.cross_entropy(logits, positives) + F.cross_entropy(logits.T, positives)) / 2


def make_batch(gen, n=N):
    concept = torch.randint(0, 12, (n,), generator=gen)
    proto = torch.randn(12, F_IMG, generator=torch.Generator().manual_seed(77))
    image = proto[concept] + 0.5 * torch.randn(n, F_IMG, generator=gen)
    text = (concept[:, None] * 5 + torch.randint(0, 5, (n, L), generator=gen)) % V
    return {"image": image, "text": text}, torch.arange(n)


def train_step(model, batch, optimizer):
    inputs, positives = batch
    optimizer.zero_grad()
    loss = clip_loss(model(**inputs), positives)
    loss.backward()
    optimizer.step()
    return loss.item()


def build(fixed: bool = True) -> dict:
    torch.manual_seed(0)
    model = TinyCLIP()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    inputs, positives = make_batch(torch.Generator().manual_seed(13))
    return {"model": model, "loss_fn": clip_loss, "inputs": inputs, "targets": positives,
            "train_step": train_step, "optimizer": optimizer}
