"""Stand-in for MNIST: 8x8 grey images of ten fixed random glyphs, each drawn with noise and a
one-pixel jitter, pixel values in [0, 1] as ``ToTensor`` gives them, mostly 0 (dark
background)."""
import torch


def glyphs(n, generator, classes=10):
    """``(images (n, 1, 8, 8) in [0, 1], labels (n,))``."""
    prototypes = (torch.rand(classes, 8, 8, generator=torch.Generator().manual_seed(1234))
                  < 0.25).float()
    labels = torch.randint(0, classes, (n,), generator=generator)
    shifts = torch.randint(-1, 2, (n, 2), generator=generator)
    images = torch.stack([torch.roll(prototypes[int(c)], (int(dy), int(dx)), (0, 1))
                          for c, (dy, dx) in zip(labels, shifts)])
    images = (images * (0.7 + 0.3 * torch.rand(n, 8, 8, generator=generator))).clamp(0, 1)
    return images.unsqueeze(1), labels
