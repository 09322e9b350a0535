"""A tiny cross-encoder built on disk, so that reranking code runs for real offline.

A one-layer BERT with a 1-label head, weights drawn from a seeded numpy
generator (no global torch seeding), and a word-level vocabulary made from
the texts the tests use. It ranks at random, but it is loaded and run by the
same sentence-transformers code as any downloaded cross-encoder.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["build_tiny_cross_encoder"]

_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_cross_encoder(folder: Path, texts: Iterable[str] = (), *, seed: int = 0) -> Path:
    """Write a loadable cross-encoder (config, weights, tokenizer) into ``folder``.

    Args:
        folder: where to write (created).
        texts: texts whose lower-cased words go into the vocabulary.
        seed: seed of the weight generator.

    Returns:
        ``folder``.
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    vocab = _SPECIAL + sorted(set(words) | set(letters))
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
    )
    model = BertForSequenceClassification(config)
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.from_numpy(rng.normal(0.0, 0.2, size=tuple(param.shape)).astype(np.float32)))
    model.save_pretrained(folder)
    tokenizer = BertTokenizer(str(vocab_file), do_lower_case=True)
    tokenizer.save_pretrained(folder)
    return folder
