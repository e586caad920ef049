#!/usr/bin/python3
# Writes the seed corpus of fuzz_image_header: small real files of every format the header
# parser reads, written by PIL where PIL writes the format and by hand (to the format's
# specification) where it does not. Each name says the format and the size its header declares,
# "<format>-<width>x<height>[-variant].<ext>"; tests/image checks every seed parses to that size.
# Usage: /usr/bin/python3 fuzz/image_header_corpus.py fuzz/corpus/image_header
import io, struct, sys, zlib
from PIL import Image

out = sys.argv[1]

def save(name, data):
    with open(f"{out}/{name}", "wb") as f:
        f.write(data)

def pil(name, w, h, mode, fmt, **kw):
    im = Image.new(mode, (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            v = (x * 37 + y * 11) % 256
            px[x, y] = (v, 255 - v, (v * 3) % 256) if mode == "RGB" else (v if mode != "1" else v > 127)
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    save(name, b.getvalue())

pil("png-13x7.png", 13, 7, "RGB", "PNG")
pil("png-9x5-grey-interlaced.png", 9, 5, "L", "PNG", interlace=1)
pil("jpeg-17x9.jpg", 17, 9, "RGB", "JPEG", quality=80)
pil("jpeg-17x9-progressive.jpg", 17, 9, "RGB", "JPEG", progressive=True)
pil("jpeg-8x6-grey.jpg", 8, 6, "L", "JPEG")
pil("bmp-11x3.bmp", 11, 3, "RGB", "BMP")
pil("tiff-10x4.tif", 10, 4, "RGB", "TIFF")
pil("tiff-6x5-grey-deflate.tif", 6, 5, "L", "TIFF", compression="tiff_adobe_deflate")
pil("webp-12x8-lossy.webp", 12, 8, "RGB", "WEBP", quality=50)
pil("webp-12x8-lossless.webp", 12, 8, "RGB", "WEBP", lossless=True)
pil("webp-7x3-vp8x.webp", 7, 3, "RGB", "WEBP", exif=b"Exif\x00\x00MM\x00\x2a\x00\x00\x00\x08\x00\x00")
pil("ppm-5x4.ppm", 5, 4, "RGB", "PPM")
pil("pgm-5x4.pgm", 5, 4, "L", "PPM")
pil("pbm-9x2.pbm", 9, 2, "1", "PPM")

# Formats PIL does not write, by hand.
save("pgm-3x2-ascii-comment.pgm", b"P2\n# a comment\n3 2\n255\n0 1 2\n3 4 5\n")
save("pam-4x3.pam", b"P7\nWIDTH 4\nHEIGHT 3\nDEPTH 1\nMAXVAL 255\nTUPLTYPE GRAYSCALE\nENDHDR\n" + bytes(range(12)))
save("pfm-2x2.pfm", b"Pf\n2 2\n-1.0\n" + struct.pack("<4f", 0, 0.25, 0.5, 1))
save("sunraster-4x2.ras", struct.pack(">8I", 0x59A66A95, 4, 2, 8, 8, 1, 0, 0) + bytes(8))
rgbe = bytes([128, 64, 32, 129]) * 6
save("hdr-3x2.hdr", b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 2 +X 3\n" + rgbe)
# BigTIFF, big-endian: header, one IFD (ImageWidth and ImageLength as LONG8; 8-bit grey, one
# uncompressed strip), then the 15 pixels.
def entry(tag, kind, value):  # one value, left-justified in the 8-byte field
    v = struct.pack(">Q", value) if kind == 16 else struct.pack(">H", value) + bytes(6)
    return struct.pack(">HHQ", tag, kind, 1) + v
tags = [(256, 16, 5), (257, 16, 3), (258, 3, 8), (259, 3, 1), (262, 3, 1), (273, 16, 0), (277, 3, 1), (278, 3, 3), (279, 16, 15)]
ifd_size = 8 + 20 * len(tags) + 8
tags = [(t, k, 16 + ifd_size if t == 273 else v) for t, k, v in tags]
ifd = struct.pack(">Q", len(tags)) + b"".join(entry(*t) for t in tags) + struct.pack(">Q", 0)
save("tiff-5x3-bigtiff-be.tif", b"MM\x00\x2b\x00\x08\x00\x00" + struct.pack(">Q", 16) + ifd + bytes(range(0, 150, 10)))

# A PNG declaring 32768 x 32768 grey pixels in a few hundred bytes: IHDR with a correct CRC and
# an IDAT holding the first rows only (a decoder would fail after allocating 1 GiB).
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
rows = zlib.compress(bytes(32769) * 8)
save("png-32768x32768-declared.png", b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32768, 32768, 8, 0, 0, 0, 0))
     + chunk(b"IDAT", rows) + chunk(b"IEND", b""))
