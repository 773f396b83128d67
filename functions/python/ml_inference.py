"""ml_inference (FaaSMem's "Bert"): a BERT-style transformer encoder forward pass in numpy.

Init (module load): an encoder with BERT-base's shape - hidden size 768, 12 attention heads,
feed-forward size 3072, 30522-token vocabulary, 512 positions - but LAYERS = 6 layers instead
of 12, with float32 weights drawn from N(0, 0.02) (BERT's initialiser) by numpy's PCG64 from
the fixed seed WEIGHTS_SEED. That is ~67 M parameters, ~265 MB: a large initialisation segment
like FaaSMem's BERT (110 M parameters, 440 MB), scaled to fit a 512 MB action with headroom.
The layers are touched by every request; of the 94 MB word-embedding table only the rows of
the request's tokens are.

Input: {"seq_len": int, "seed": int, "text": str (optional)}. Without `text`, a sentence is
drawn from random.Random(seed) (FaaSMem fed random sentences from a novel). The text is
tokenised by a deterministic word-piece-like hashing tokeniser (no vocabulary file is
needed), wrapped as [CLS] tokens [MASK] [SEP] as FaaSMem's handler did, and truncated or
padded (with an attention mask) to seq_len. The forward pass is BertModel's: embeddings and
LayerNorm, then per layer multi-head self-attention and a GELU feed-forward block, each with
a residual connection and LayerNorm, then the tanh pooler on [CLS].
"""

import os
import random
import re
import time
import zlib

# One BLAS thread unless the deployment says otherwise (set before numpy loads OpenBLAS):
# an action gets a share of a CPU among many instances, and OpenBLAS threads spinning on a
# contended core make run times erratic (FaaSMem ran its BERT with torch threads = 1).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

VOCAB = 30522
MAX_POSITIONS = 512
HIDDEN = 768
HEADS = 12
FFN = 3072
LAYERS = 6
WEIGHTS_SEED = 20240427
PAD, UNK, CLS, SEP, MASK = 0, 100, 101, 102, 103
FIRST_WORD_ID = 1000  # ids below are BERT's special and unused tokens
LN_EPS = 1e-12
WORDS = (
    "the",
    "a",
    "house",
    "was",
    "quiet",
    "when",
    "she",
    "opened",
    "letter",
    "from",
    "her",
    "brother",
    "who",
    "had",
    "left",
    "for",
    "sea",
    "years",
    "ago",
    "and",
    "never",
    "written",
    "since",
    "rain",
    "fell",
    "on",
    "old",
    "garden",
    "while",
    "clock",
    "struck",
    "midnight",
    "in",
    "empty",
    "hall",
    "ships",
    "harbour",
    "lantern",
    "road",
    "winter",
)


def _normal(rng, shape):
    w = rng.standard_normal(shape, dtype=np.float32)
    w *= 0.02
    return w


def build_weights(seed):
    rng = np.random.default_rng(seed)
    weights = {
        "word": _normal(rng, (VOCAB, HIDDEN)),
        "position": _normal(rng, (MAX_POSITIONS, HIDDEN)),
        "token_type": _normal(rng, (2, HIDDEN)),
        "emb_ln": (np.ones(HIDDEN, np.float32), np.zeros(HIDDEN, np.float32)),
        "layers": [],
        "pooler": (_normal(rng, (HIDDEN, HIDDEN)), np.zeros(HIDDEN, np.float32)),
    }
    for _ in range(LAYERS):
        weights["layers"].append(
            {
                # Query, key and value projections fused into one matrix: one GEMM instead of 3.
                "qkv": (_normal(rng, (HIDDEN, 3 * HIDDEN)), np.zeros(3 * HIDDEN, np.float32)),
                "out": (_normal(rng, (HIDDEN, HIDDEN)), np.zeros(HIDDEN, np.float32)),
                "ln1": (np.ones(HIDDEN, np.float32), np.zeros(HIDDEN, np.float32)),
                "ffn_in": (_normal(rng, (HIDDEN, FFN)), np.zeros(FFN, np.float32)),
                "ffn_out": (_normal(rng, (FFN, HIDDEN)), np.zeros(HIDDEN, np.float32)),
                "ln2": (np.ones(HIDDEN, np.float32), np.zeros(HIDDEN, np.float32)),
            }
        )
    return weights


WEIGHTS = build_weights(WEIGHTS_SEED)
PARAMETERS = sum(
    a.size
    for a in (WEIGHTS["word"], WEIGHTS["position"], WEIGHTS["token_type"], *WEIGHTS["emb_ln"], *WEIGHTS["pooler"])
) + sum(a.size for layer in WEIGHTS["layers"] for pair in layer.values() for a in pair)


def _int_param(args, name, default, lo, hi):
    value = args.get(name, default)
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise ValueError("'%s' must be an integer, got %r" % (name, value)) from None
    if not lo <= value <= hi:
        raise ValueError("'%s' must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def tokenize(text):
    """Lower-cased words and punctuation; words longer than 6 letters split into word pieces;
    each piece hashed to a stable id in [FIRST_WORD_ID, VOCAB)."""
    ids = []
    for word in re.findall(r"\w+|[^\w\s]", text.lower()):
        for i in range(0, len(word), 6):
            piece = word[i : i + 6] if i == 0 else "##" + word[i : i + 6]
            ids.append(FIRST_WORD_ID + zlib.crc32(piece.encode("utf-8")) % (VOCAB - FIRST_WORD_ID))
    return ids


def encode(text, seq_len):
    """Token ids and attention mask (1 = real token) of length seq_len."""
    ids = [CLS] + tokenize(text)[: seq_len - 3] + [MASK, SEP]
    mask = [1] * len(ids) + [0] * (seq_len - len(ids))
    return np.array(ids + [PAD] * (seq_len - len(ids))), np.array(mask, np.float32)


def sentence(seed, words):
    return " ".join(random.Random(seed).choices(WORDS, k=words)).capitalize() + "."


def _layer_norm(x, params):
    gamma, beta = params
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LN_EPS) * gamma + beta


def _dense(x, params):
    w, b = params
    return x @ w + b


def _gelu(x):
    # The tanh approximation of GELU (numpy has no erf); BERT's "gelu_new".
    return 0.5 * x * (1.0 + np.tanh(np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)))


def _attention(x, layer, mask_bias):
    seq = x.shape[0]
    head_dim = HIDDEN // HEADS
    qkv = _dense(x, layer["qkv"]).reshape(seq, 3, HEADS, head_dim).transpose(1, 2, 0, 3)
    q, k, v = qkv[0], qkv[1], qkv[2]  # each (heads, seq, head_dim)
    scores = q @ k.transpose(0, 2, 1) * np.float32(1.0 / np.sqrt(head_dim)) + mask_bias
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    context = (probs @ v).transpose(1, 0, 2).reshape(seq, HIDDEN)
    return _dense(context, layer["out"])


def forward(ids, mask, weights=WEIGHTS):
    """Last hidden states (seq, HIDDEN) and the pooled [CLS] vector (HIDDEN,)."""
    seq = ids.shape[0]
    x = weights["word"][ids] + weights["position"][:seq] + weights["token_type"][0]
    x = _layer_norm(x, weights["emb_ln"])
    # Padding keys get a large negative score so no token attends to them.
    mask_bias = ((1.0 - mask) * np.float32(-10000.0))[None, None, :].astype(np.float32)
    for layer in weights["layers"]:
        x = _layer_norm(x + _attention(x, layer, mask_bias), layer["ln1"])
        x = _layer_norm(x + _dense(_gelu(_dense(x, layer["ffn_in"])), layer["ffn_out"]), layer["ln2"])
    pooled = np.tanh(_dense(x[0], weights["pooler"]))
    return x, pooled


def main(args):
    seq_len = _int_param(args, "seq_len", 32, 4, MAX_POSITIONS)
    seed = _int_param(args, "seed", 42, 0, 2**63 - 1)
    text = args.get("text")
    if text is None:
        text = sentence(seed, seq_len)  # at least one token per word: fills seq_len
    elif not isinstance(text, str) or len(text) > 100_000:
        raise ValueError("'text' must be a string of at most 100000 characters")
    ids, mask = encode(text, seq_len)
    start = time.perf_counter()
    hidden, pooled = forward(ids, mask)
    latency = time.perf_counter() - start
    return {
        "seq_len": seq_len,
        "tokens": int(mask.sum()),
        "layers": LAYERS,
        "parameters": PARAMETERS,
        "pooled_norm": float(np.linalg.norm(pooled)),
        "pooled_head": [round(float(v), 6) for v in pooled[:8]],
        "latency_ms": round(latency * 1000, 3),
    }
