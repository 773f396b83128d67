"""image_processing (FunctionBench; FaaSnap's "image"): decode a JPEG, then flip, rotate,
filter, convert to grey and thumbnail it with Pillow, encoding every result as a JPEG.

Input: {"width": int, "height": int, "seed": int}. Instead of downloading a photo, the
function draws one: random shapes over a gradient, blended with a little noise so the JPEG
has a photo-like size (~100 KB at 640x480, as FaaSnap's inputs). The image is encoded to a
JPEG in memory and processed from those bytes, as FunctionBench processes the file it
downloaded. Outputs go to memory, not to disk: the sandbox's filesystem is read-only.
"""

import hashlib
import io
import random
import time

from PIL import Image, ImageDraw, ImageFilter

MAX_PIXELS = 4096 * 4096
JPEG_QUALITY = 85


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def generate_jpeg(width, height, seed):
    """A deterministic photo-like JPEG of width x height (the function's input file)."""
    rnd = random.Random(seed)
    gradient = Image.linear_gradient("L").resize((width, height))
    base = Image.merge(
        "RGB",
        (gradient, gradient.transpose(Image.Transpose.ROTATE_180), Image.radial_gradient("L").resize((width, height))),
    )
    draw = ImageDraw.Draw(base)
    for _ in range(40):
        x0, y0 = rnd.randrange(width), rnd.randrange(height)
        x1 = min(width, x0 + rnd.randrange(8, max(9, width // 3)))
        y1 = min(height, y0 + rnd.randrange(8, max(9, height // 3)))
        colour = (rnd.randrange(256), rnd.randrange(256), rnd.randrange(256))
        if rnd.random() < 0.5:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        else:
            draw.rectangle((x0, y0, x1, y1), fill=colour)
    noise = Image.frombytes("RGB", (width, height), rnd.randbytes(width * height * 3))
    photo = Image.blend(base, noise, 0.16)
    out = io.BytesIO()
    photo.save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def _encode(image):
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=JPEG_QUALITY)
    return out.getvalue()


def process(jpeg):
    """FunctionBench's ops.py sequence; returns {operation: (width, height, mode, jpeg bytes)}."""
    results = {}
    with Image.open(io.BytesIO(jpeg)) as image:
        image.load()
        steps = [
            ("flip-left-right", lambda: image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
            ("flip-top-bottom", lambda: image.transpose(Image.Transpose.FLIP_TOP_BOTTOM)),
            ("rotate-90", lambda: image.transpose(Image.Transpose.ROTATE_90)),
            ("rotate-180", lambda: image.transpose(Image.Transpose.ROTATE_180)),
            ("rotate-270", lambda: image.transpose(Image.Transpose.ROTATE_270)),
            ("blur", lambda: image.filter(ImageFilter.BLUR)),
            ("contour", lambda: image.filter(ImageFilter.CONTOUR)),
            ("sharpen", lambda: image.filter(ImageFilter.SHARPEN)),
            ("gray-scale", lambda: image.convert("L")),
        ]
        for name, step in steps:
            result = step()
            results[name] = (result.width, result.height, result.mode, _encode(result))
        # FunctionBench resizes last because thumbnail() works in place.
        image.thumbnail((128, 128))
        results["resized"] = (image.width, image.height, image.mode, _encode(image))
    return results


def main(args):
    width = _int_param(args, "width", 640, 16, 4096)
    height = _int_param(args, "height", 480, 16, 4096)
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    if width * height > MAX_PIXELS:
        raise ValueError("image too large: at most %d pixels" % MAX_PIXELS)
    jpeg = generate_jpeg(width, height, seed)
    start = time.perf_counter()
    results = process(jpeg)
    latency = time.perf_counter() - start
    return {
        "width": width,
        "height": height,
        "input_bytes": len(jpeg),
        "input_sha256": hashlib.sha256(jpeg).hexdigest(),
        "outputs": {
            name: {"width": w, "height": h, "mode": mode, "bytes": len(data)}
            for name, (w, h, mode, data) in results.items()
        },
        "latency_ms": round(latency * 1000, 3),
    }
