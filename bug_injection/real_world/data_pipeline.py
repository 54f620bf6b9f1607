"""Real-world bugs in the data pipeline: order, label range, scaling, splits, and the
transforms a Dataset applies to each example."""
import numpy as np

from .case import (BATCH, STEPS, Case, blobs, framework_module, mlp, simple_loop, tensors,
                   torch_module)
from .entry import BACKENDS, DIAGNOSED, Entry


def _sorted_batches(shuffled, framework):
    fw = framework_module(framework)
    x, y = blobs(rows=STEPS * BATCH // 5, classes=4, seed=1)
    order = np.argsort(y, kind="stable")          # the data set as stored: sorted by class
    if shuffled:
        order = np.random.default_rng(0).permutation(len(y))
    x, y = tensors(x[order], y[order], framework=framework)
    model = mlp(outputs=4, framework=framework)
    optimizer = fw.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = fw.nn.CrossEntropyLoss()
    labels = [y[start:start + BATCH] for start in range(0, len(y), BATCH)]
    return Case(model=model, loss_fn=loss_fn, optimizer=optimizer,
                train=simple_loop(model, optimizer, loss_fn, x, y), label_batches=labels)


def _data(framework, **arrays):
    """``validate_data``'s keyword arguments: the arrays as the framework's tensors."""
    return dict(zip(arrays, tensors(*arrays.values(), framework=framework)))


def _one_based_labels(one_based, framework):
    x, y = blobs(rows=200, classes=4, seed=2)
    return Case(data={**_data(framework, train_x=x, train_y=y + 1 if one_based else y),
                      "num_classes": 5 if one_based else 4})


def _pixels(scaled, framework):
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, size=(64, 3, 8, 8)).astype(np.float32)
    if scaled:
        images = (images / 255.0 - 0.5) / 0.25
    return Case(data=_data(framework, train_x=images, train_y=rng.integers(0, 4, 64)))


def _split(leaky, framework):
    x, y = blobs(rows=160, classes=4, seed=4)
    train, test = slice(0, 120), slice(120, 160)
    test_x, test_y = x[test].copy(), y[test].copy()
    if leaky:  # patches cut with overlap, then split at random: test rows also in training
        test_x[:25], test_y[:25] = x[:25], y[:25]
    return Case(data=_data(framework, train_x=x[train], train_y=y[train], test_x=test_x,
                           test_y=test_y))


def _dataset(items, transform):
    """A map-style torch ``Dataset`` over ``items`` (pairs of tensors), ``transform`` applied
    to each pair as it is read."""
    from torch.utils.data import Dataset

    class Pairs(Dataset):
        def __len__(self):
            return len(items)

        def __getitem__(self, index):
            return transform(*items[index])

    return Pairs()


def _photos(rows, *, seed):
    """RGB photos as ToTensor gives them (3, 8, 8) in [0, 1], each channel with its own mean,
    and a class label each."""
    rng = np.random.default_rng(seed)
    pixels = np.clip(rng.normal([0.45, 0.5, 0.4], 0.2, (rows, 8, 8, 3)), 0, 1)
    images, = tensors(pixels.transpose(0, 3, 1, 2).astype(np.float32))
    labels, = tensors(rng.integers(0, 4, rows))
    return list(zip(images, labels))


def _test_transform(normalized):
    torch = torch_module()
    mean, std = torch.tensor([0.45, 0.5, 0.4])[:, None, None], 0.2

    def train_transform(image, label):
        return (image - mean) / std, label

    def test_transform(image, label):
        return ((image - mean) / std if normalized else image), label

    return Case(data={"train": _dataset(_photos(256, seed=39), train_transform),
                      "test": _dataset(_photos(128, seed=40), test_transform)})


def _paired_flip(joint):
    """realfill: a target image and its mask, flipped at random as augmentation."""
    torch = torch_module()
    rng = np.random.default_rng(41)
    images, = tensors(rng.standard_normal((64, 3, 8, 8)).astype(np.float32))
    masks = [(image[0] > 0.3).long() for image in images]

    def augment(image, mask):
        flip_image = torch.rand(()) < 0.5
        flip_mask = flip_image if joint else torch.rand(()) < 0.5   # drawn again
        return (image.flip(-1) if flip_image else image), (mask.flip(-1) if flip_mask else mask)

    return Case(data={"train": _dataset(list(zip(images, masks)), augment)})


ENTRIES = (
    Entry(name="unshuffled_sorted_classes",
          source="Stack Overflow question 54354465, read as https://coderoad.ru/54354465/"
                 "Влияние-использования-переключения-данных-в-загрузчике-данных-Pytorch; "
                 "https://blog.gcc.ac.cn/post/2024/machinelearninghighaccuracyatfirstthendecrease",
          category="data pipeline",
          root_cause="my DataLoader had shuffle=False on data stored class by class, so every "
                     "batch held one class and validation accuracy sat at 2-3%",
          reproduce=lambda bug, framework: _sorted_batches(not bug, framework),
          tool="label_order", codes=("LABELS_SORTED",),
          expected="LABELS_SORTED (check_batch_label_order on the loader's first batches)",
          status=DIAGNOSED, backends=BACKENDS),
    Entry(name="labels_start_at_one_extra_unit",
          source="https://community.deeplearning.ai/t/using-keras-tokenizer-yields-values-that-"
                 "start-at-1-rather-than-at-0/204963",
          category="data pipeline",
          root_cause="the tokenizer gives labels starting at 1, so I added one output unit "
                     "instead of subtracting 1, and unit 0 is never a target",
          reproduce=_one_based_labels,
          tool="validate_data", codes=("LABEL_RANGE",),
          expected="LABEL_RANGE (validate_data with num_classes)", status=DIAGNOSED,
          backends=BACKENDS),
    Entry(name="pixels_not_normalized",
          source="mks0601/3DMPPE_POSENET_RELEASE#69",
          category="data pipeline",
          root_cause="the images went into the network as raw 0..255 pixel values; I forgot "
                     "to divide by 255 and normalise",
          reproduce=lambda bug, framework: _pixels(not bug, framework),
          tool="validate_data", codes=("UNNORMALIZED_INPUT",),
          expected="UNNORMALIZED_INPUT (validate_data)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="test_rows_in_training_set",
          source="stefyste/RIAWELC#2",
          category="data pipeline",
          root_cause="overlapping patches were split at random, so test images are byte-for-"
                     "byte copies of training images and the test accuracy is inflated",
          reproduce=_split,
          tool="validate_data", codes=("DATA_LEAKAGE",),
          expected="DATA_LEAKAGE (validate_data)", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="test_split_not_normalized",
          source="JeasunLok/ResNet-pytorch#1; mlpack/examples#213",
          category="data pipeline",
          root_cause="the normalization was used in the training set's transform but not in the "
                     "test set's, so the training accuracy is fine and the test accuracy very "
                     "low",
          reproduce=lambda bug, _: _test_transform(not bug),
          tool="validate_data", codes=("TRANSFORM_SHIFT",),
          expected="TRANSFORM_SHIFT (validate_data(train, test=...) over the two Datasets)",
          status=DIAGNOSED),
    Entry(name="image_and_mask_flipped_separately",
          source="thuanz123/realfill#4",
          category="data pipeline",
          root_cause="the target image and its mask are randomly augmented separately, so they "
                     "no longer line up and the mask tells the model about the wrong pixels",
          reproduce=lambda bug, _: _paired_flip(not bug),
          tool="validate_data", codes=("TRANSFORM_ONE_SIDED",),
          expected="TRANSFORM_ONE_SIDED (validate_data over the Dataset: the image mirrored, "
                   "its mask not, in some reads of one index)",
          status=DIAGNOSED),
)
