"""Real-world bugs in the model definition: axes, masks, registration, cut graphs."""
import numpy as np

from .case import Case, blobs, framework_module, simple_loop, tensors, torch_module
from .entry import BACKENDS, DIAGNOSED, Entry


def _sequences(rows=24, steps=6, features=5, *, seed=5):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, steps, features)).astype(np.float32)
    y = (x[:, :, 0].sum(1) > 0).astype(np.int64)
    return tensors(x, y)


def _crnn(batch_first_changed):
    """CRNN: a per-step encoder gives (seq, batch, feat) for the LSTM, as in crnn.pytorch."""
    torch = torch_module()
    nn = torch.nn

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(5, 8)
            self.rnn = nn.LSTM(8, 8, batch_first=batch_first_changed)
            self.head = nn.Linear(8, 2)

        def forward(self, x):                       # x: (batch, seq, features)
            seq = self.encoder(x).permute(1, 0, 2)  # (seq, batch, feat), as the LSTM expects
            out, _ = self.rnn(seq)
            return self.head(out[-1])

    torch.manual_seed(0)
    x, y = _sequences()
    return Case(model=CRNN(), inputs=x[:8], targets=y[:8])


def _attention(batch_first):
    torch = torch_module()
    nn = torch.nn

    class WindowAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(5, 8)
            self.attn = nn.MultiheadAttention(8, 2, batch_first=batch_first)
            self.head = nn.Linear(8, 2)

        def forward(self, x):                       # x: (batch, tokens, features)
            h = self.embed(x)
            h, _ = self.attn(h, h, h)
            return self.head(h.mean(1))

    torch.manual_seed(0)
    x, y = _sequences()
    return Case(model=WindowAttention(), inputs=x[:8], targets=y[:8])


def _queries(transpose):
    torch = torch_module()
    nn = torch.nn

    class QueryHead(nn.Module):
        """DETR-style: per-query features come out (queries, batch, dim)."""

        def __init__(self):
            super().__init__()
            self.queries = nn.Parameter(torch.randn(3, 8))
            self.proj = nn.Linear(8, 8)
            self.cls = nn.Linear(8, 4)

        def forward(self, x):                       # x: (batch, 8)
            h = self.queries[:, None, :] * self.proj(x)[None]      # (queries, batch, dim)
            h = h.transpose(0, 1) if transpose else h.view(x.shape[0], 3, 8)
            return self.cls(h)                      # (batch, queries, classes)

    torch.manual_seed(0)
    x, y = tensors(*blobs(rows=16, features=8, seed=6))
    return Case(model=QueryHead(), inputs=x[:6])


def _causal_lm(masked):
    torch = torch_module()
    nn = torch.nn

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(16, 16)
            self.positions = nn.Embedding(12, 16)
            layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)
            self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(16, 16)

        def forward(self, ids):                     # ids: (batch, positions)
            steps = ids.shape[1]
            h = self.tokens(ids) + self.positions(torch.arange(steps))
            mask = nn.Transformer.generate_square_subsequent_mask(steps) if masked else None
            return self.head(self.blocks(h, mask=mask, is_causal=masked))

    torch.manual_seed(0)
    ids = torch.from_numpy(np.random.default_rng(7).integers(0, 16, (4, 10)))
    return Case(model=TinyLM(), inputs=ids, causal=True)


def _weak_mask(masked_value):
    torch = torch_module()
    nn = torch.nn

    class SelfAttention(nn.Module):
        """GPT-2 style: masked scores are replaced by ``masked_value``."""

        def __init__(self):
            super().__init__()
            self.q = nn.Linear(8, 8, bias=False)
            self.k = nn.Linear(8, 8, bias=False)
            self.v = nn.Linear(8, 8, bias=False)

        def forward(self, h):                       # h: (batch, positions, 8)
            steps = h.shape[1]
            scores = self.q(h) @ self.k(h).transpose(1, 2) / 8 ** 0.5
            visible = torch.ones(steps, steps, dtype=torch.bool).tril()
            scores = scores.masked_fill(~visible, masked_value)
            return torch.softmax(scores, dim=-1) @ self.v(h)

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(16, 8)
            self.attn = SelfAttention()
            self.head = nn.Linear(8, 16)

        def forward(self, ids):
            h = torch.relu(self.tokens(ids)) + 0.1  # positive features
            return self.head(self.attn(h))

    torch.manual_seed(0)
    model = TinyGPT()
    with torch.no_grad():  # the weights a run reached: every visible score far below -1e4
        model.attn.q.weight.copy_(model.attn.q.weight.abs() * 300)
        model.attn.k.weight.copy_(-model.attn.q.weight)
    ids = torch.from_numpy(np.random.default_rng(27).integers(0, 16, (3, 8)))
    return Case(model=model, inputs=ids, causal=True)


def _python_list(registered, framework):
    fw = framework_module(framework)
    nn = fw.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            hidden = [nn.Linear(8, 32), nn.Linear(32, 32)]
            self.hidden = nn.ModuleList(hidden) if registered else hidden
            self.head = nn.Linear(32, 4)

        def forward(self, x):
            for layer in self.hidden:
                x = layer(x).relu()
            return self.head(x)

    fw.manual_seed(0)
    model = Net()
    x, y = tensors(*blobs(seed=8), framework=framework)
    optimizer = fw.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    return Case(model=model, optimizer=optimizer, loss_fn=loss_fn,
                train=simple_loop(model, optimizer, loss_fn, x, y))


def _flattened_features(permuted):
    torch = torch_module()
    nn = torch.nn

    class Captioner(nn.Module):
        """Conv features (batch, channels, h, w) become (batch, pixels, channels)."""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3, padding=1)
            self.score = nn.Linear(6, 1)
            self.head = nn.Linear(6, 4)

        def forward(self, images):
            f = self.conv(images)
            b, c, h, w = f.shape
            pixels = (f.permute(0, 2, 3, 1).reshape(b, h * w, c) if permuted
                      else f.view(b, h * w, c))
            weights = torch.softmax(self.score(pixels), dim=1)
            return self.head((weights * pixels).sum(1))

    torch.manual_seed(0)
    images = torch.from_numpy(np.random.default_rng(9).standard_normal((8, 3, 4, 4))
                              .astype(np.float32))
    labels = torch.arange(8) % 4
    return Case(model=Captioner(), loss_fn=nn.CrossEntropyLoss(), inputs=images,
                targets=labels)


def _detached_adjacency(detached, framework):
    fw = framework_module(framework)
    nn = fw.nn

    class GraphHead(nn.Module):
        """A-GCN: an adjacency between label nodes, built by W_theta and W_phi from the label
        embeddings, mixes them before they score the image features."""

        def __init__(self):
            super().__init__()
            self.labels = nn.Parameter(fw.randn(4, 8))
            self.theta = nn.Linear(8, 6)
            self.phi = nn.Linear(8, 6)
            self.features = nn.Linear(8, 8)

        def forward(self, x):
            adj = (self.theta(self.labels) @ self.phi(self.labels).T).softmax(dim=1)
            if detached:
                adj = adj.detach()
            return self.features(x) @ (adj @ self.labels + self.labels).T

    fw.manual_seed(0)
    model = GraphHead()
    x, y = tensors(*blobs(seed=10), framework=framework)
    optimizer = fw.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    return Case(model=model, optimizer=optimizer, loss_fn=loss_fn,
                train=simple_loop(model, optimizer, loss_fn, x, y))


def _images(rows=8, *, seed):
    """Small 3-channel images, as the framework's float tensor."""
    return tensors(np.random.default_rng(seed).standard_normal((rows, 3, 8, 8))
                   .astype(np.float32))[0]


def _deep_supervision(fresh):
    """U-Net v2's SDI stage: four feature levels, each refined by its own 3x3 conv and scored
    by its own 1x1 segmentation head; the heads' maps are averaged."""
    torch = torch_module()
    nn = torch.nn

    def per_level(make):
        return nn.ModuleList([make() for _ in range(4)] if fresh else [make()] * 4)

    class SegNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.convs = per_level(lambda: nn.Conv2d(8, 8, 3, padding=1))
            self.seg_outs = per_level(lambda: nn.Conv2d(8, 3, 1))

        def forward(self, images):
            h = torch.relu(self.stem(images))
            maps = [head(torch.relu(conv(h) + h))
                    for conv, head in zip(self.convs, self.seg_outs)]
            return torch.stack(maps).mean(0)

    torch.manual_seed(0)
    images = _images(seed=34)
    masks = (images[:, 0] > 0).long() + (images[:, 1] > 0.5).long()   # 3 classes per pixel
    model = SegNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    return Case(model=model, loss_fn=loss_fn, optimizer=optimizer,
                train=simple_loop(model, optimizer, loss_fn, images, masks, steps=20, size=4))


def _block_momentum(momentum):
    """MaxViT's MBConv stem: conv, BatchNorm2d with the momentum given, GELU."""
    torch = torch_module()
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8, momentum=momentum),
                          nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))
    return Case(model=model, loss_fn=nn.CrossEntropyLoss(), inputs=_images(seed=35),
                targets=torch.arange(8) % 4,
                optimizer=torch.optim.SGD(model.parameters(), lr=0.05))


ENTRIES = (
    Entry(name="lstm_batch_first_flipped",
          source="https://discuss.pytorch.org/t/lstm-change-batch-first-true-loss-does-not-"
                 "decrease/62364",
          category="model definition",
          root_cause="I set batch_first=True on the CRNN's LSTM for deployment but still feed "
                     "it (seq, batch, features), so it runs along the batch",
          reproduce=lambda bug, _: _crnn(bug),
          tool="batch_independence", codes=("BATCH_MIXING",),
          expected="BATCH_MIXING (check_batch_independence; no module named: the LSTM's "
                   "input is not batch-first, so the mixing is located only to the model)",
          status=DIAGNOSED),
    Entry(name="attention_without_batch_first",
          source="aipixel/AEMatter#3; om-ai-lab/OmDet#19",
          category="model definition",
          root_cause="the tokens are prepared batch-first but nn.MultiheadAttention was built "
                     "with the default batch_first=False, so it attends across the batch",
          reproduce=lambda bug, _: _attention(not bug),
          tool="batch_independence", codes=("BATCH_MIXING",),
          expected="BATCH_MIXING at 'attn' (check_batch_independence)",
          location="attn", status=DIAGNOSED),
    Entry(name="view_swaps_batch_and_queries",
          source="Jingkang50/OpenPSG#56",
          category="model definition",
          root_cause="I used view to turn (queries, batch, dim) into (batch, queries, dim), "
                     "which reshuffles queries of different images instead of transposing",
          reproduce=lambda bug, _: _queries(not bug),
          tool="batch_independence", codes=("BATCH_MIXING",),
          expected="BATCH_MIXING (check_batch_independence)", status=DIAGNOSED),
    Entry(name="causal_mask_missing",
          source="huggingface/transformers#48745; karpathy/nanoGPT#331",
          category="model definition",
          root_cause="my decoder is not causal: each position sees the tokens after it, so "
                     "the language-model loss collapses to almost zero",
          reproduce=lambda bug, _: _causal_lm(not bug),
          tool="batch_independence", codes=("CAUSALITY_LEAK",),
          expected="CAUSALITY_LEAK at the last self-attention layer (check_batch_independence, "
                   "causal=True)",
          location="blocks.layers.1.self_attn",
          status=DIAGNOSED),
    Entry(name="causal_mask_value_too_weak",
          source="karpathy/minGPT#75; huggingface/transformers#17121",
          category="model definition",
          root_cause="the causal mask sets future scores to -1e4 instead of -inf; training drove "
                     "the real scores below -1e4, so attention goes to the future tokens and "
                     "training loss is near zero while generation fails",
          reproduce=lambda bug, _: _weak_mask(-1e4 if bug else float("-inf")),
          tool="batch_independence", codes=("CAUSALITY_LEAK",),
          expected="CAUSALITY_LEAK at 'attn' (check_batch_independence, causal=True)",
          location="attn",
          status=DIAGNOSED),
    Entry(name="layers_in_python_list",
          source="pytorch/pytorch#715; ikostrikov/pytorch-meta-optimizer#11",
          category="model definition",
          root_cause="I kept the hidden layers in a plain Python list instead of nn.ModuleList, "
                     "so model.parameters() misses them and the optimizer never trains them",
          reproduce=lambda bug, framework: _python_list(not bug, framework),
          tool="monitor", codes=("UNREGISTERED_PARAMETERS",),
          expected="UNREGISTERED_PARAMETERS (Monitor)", status=DIAGNOSED,
          backends=BACKENDS),
    Entry(name="view_instead_of_permute_features",
          source="fawazsammani/knowing-when-to-look-adaptive-attention#6",
          category="model definition",
          root_cause="I reshaped conv features (batch, channels, h, w) with view(batch, pixels, "
                     "channels) without permuting, so features act as pixels",
          reproduce=lambda bug, _: _flattened_features(not bug),
          tool="preflight", codes=("VIEW_SCRAMBLES_AXES",),
          expected="VIEW_SCRAMBLES_AXES in the Captioner (preflight): view turns (8, 6, 4, 4) "
                   "into (8, 16, 6), the input's axes [0] [1] [2,3] in the order [0] [2,3] [1]",
          status=DIAGNOSED),
    Entry(name="adjacency_detached",
          source="queenie88/A-GCN#4",
          category="model definition",
          root_cause="I detached the adjacency matrix, so W_theta and W_phi that build it never "
                     "receive a gradient",
          reproduce=_detached_adjacency,
          tool="monitor", codes=("NO_GRADIENT",),
          expected="NO_GRADIENT at theta/phi (Monitor)", status=DIAGNOSED,
          backends=BACKENDS),
    Entry(name="segmentation_heads_one_instance",
          source="yaoppeng/U-Net_v2#10; zalandoresearch/pytorch-vq-vae#2",
          category="model definition",
          root_cause="nn.ModuleList([nn.Conv2d(...)] * 4) makes four references to the same "
                     "Conv2d instance, so the four levels' convs and segmentation heads share "
                     "one set of weights and biases",
          reproduce=lambda bug, _: _deep_supervision(not bug),
          tool="monitor", codes=("MODULE_REUSED",),
          expected="MODULE_REUSED at 'convs' and 'seg_outs' (Monitor, the module tree)",
          status=DIAGNOSED),
    Entry(name="batchnorm_momentum_from_tensorflow",
          source="pytorch/vision#8250; r9y9/tacotron_pytorch#19",
          category="model definition",
          root_cause="BatchNorm momentum 0.99 was taken from the TensorFlow implementation, but "
                     "PyTorch's momentum is 1 - TensorFlow's, so the running statistics follow "
                     "almost only the last batch",
          reproduce=lambda bug, _: _block_momentum(0.99 if bug else 0.01),
          tool="preflight", codes=("BATCHNORM_MOMENTUM_INVERTED",),
          expected="BATCHNORM_MOMENTUM_INVERTED at the BatchNorm2d (preflight, model structure)",
          location="1", status=DIAGNOSED),
)
