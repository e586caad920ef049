#!/usr/bin/python3
# Writes the seed corpus of fuzz_checkpoint_zip: zip archives laid out the ways the zip walk
# must accept or refuse, written by Python's zipfile, plus a real LibTorch archive saved by
# python3-torch (torch.jit.save of a small scripted module, the same writer LibTorch's
# OutputArchive uses). Names say what the walk must decide: "ok-*" are accepted, "bad-*" refused.
# Usage: /usr/bin/python3 fuzz/checkpoint_zip_corpus.py fuzz/corpus/checkpoint_zip
import io, sys, zipfile

out = sys.argv[1]

def save(name, data):
    with open(f"{out}/{name}", "wb") as f:
        f.write(data)

def archive(entries, compression=zipfile.ZIP_STORED, comment=b"", force_zip64=False):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", compression) as z:
        z.comment = comment
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = compression
            with z.open(info, "w", force_zip64=force_zip64) as f:
                f.write(data)
    return b.getvalue()

tensors = [("archive/data.pkl", b"\x80\x02}q\x00."), ("archive/data/0", bytes(range(64))),
           ("archive/version", b"3\n")]
save("ok-stored.zip", archive(tensors))
save("ok-comment.zip", archive(tensors, comment=b"a comment holding PK\x05\x06 inside"))
save("ok-zip64-sizes.zip", archive(tensors, force_zip64=True))
save("ok-empty.zip", archive([]))
save("ok-deflated.zip", archive(tensors, zipfile.ZIP_DEFLATED))
save("bad-bzip2.zip", archive(tensors, zipfile.ZIP_BZIP2))
cut = bytearray(archive(tensors, zipfile.ZIP_DEFLATED))
cut[cut.index(b"archive/data/0") + 20] ^= 0x01  # inside the first deflated data
save("bad-inflate.zip", bytes(cut))
flipped = bytearray(archive(tensors))
flipped[flipped.index(bytes(range(64))) + 7] ^= 0x10
save("bad-crc.zip", bytes(flipped))
save("bad-truncated.zip", archive(tensors)[:-30])

import torch  # noqa: E402  (last: the zipfile seeds need no torch)

class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)

torch.manual_seed(0)
b = io.BytesIO()
torch.jit.save(torch.jit.script(Small()), b)
save("ok-libtorch-module.pt", b.getvalue())
