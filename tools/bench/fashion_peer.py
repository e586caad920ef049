"""What the PyTorch peers of the benchmarks share: Fashion-MNIST from Debian's
dataset-fashion-mnist, and image.augment's operations spelt with PIL + numpy the way a
torchvision transform does them, drawing from a numpy Generator in a fixed order."""
import gzip

import numpy as np

FASHION = '/usr/share/datasets/fashion-mnist'
MEAN, STD = 0.2860, 0.3530


def idx(path):
    """An IDX file (gzip) as a numpy array of its stated shape."""
    with gzip.open(path) as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], 'big') for i in range(rank)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(dims)


def random_resized_crop(img, rng, scale, size=28):
    """torchvision's RandomResizedCrop on a size x size image: an area fraction in `scale`, an
    aspect ratio in [3/4, 4/3] (log-uniform), a random position, bilinear back to size x size."""
    from PIL import Image
    s = rng.uniform(*scale) * size * size
    r = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
    w = min(size, int(round(np.sqrt(s * r))))
    h = min(size, int(round(np.sqrt(s / r))))
    x, y = rng.integers(0, size + 1 - w), rng.integers(0, size + 1 - h)
    return img.crop((x, y, x + w, y + h)).resize((size, size), Image.BILINEAR)


def horizontal_flip(img, rng, p=0.5):
    from PIL import Image
    return img.transpose(Image.FLIP_LEFT_RIGHT) if rng.random() < p else img


def rotate(img, rng, degrees=10):
    from PIL import Image
    return img.rotate(rng.uniform(-degrees, degrees), resample=Image.BILINEAR)


def normalized(img):
    """to_tensor + normalize: f32 [1, H, W] with Fashion-MNIST's mean and std."""
    return (np.asarray(img, np.float32)[None] / 255.0 - MEAN) / STD
