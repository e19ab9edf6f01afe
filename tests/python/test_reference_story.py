"""Validate the numpy reference itself: greedy decoding of stories260K from BOS must
reproduce llama2.c's known story. Skipped where the model is absent.
"""
import os
import re

import pytest

from llama_reference import LlamaModel, forward

EXPECTED = ("Once upon a time, there was a little girl named Lily. "
            "She loved to play outside in the park.")
STEPS = 40


def piece_bytes(piece):
    """Bytes of one SentencePiece token piece: <0xNN> is a raw byte, U+2581 is a space."""
    m = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
    if m:
        return bytes([int(m.group(1), 16)])
    return piece.replace("\u2581", " ").encode("utf-8")


def test_reference_reproduces_the_known_story(ctx):
    path = os.path.join(ctx.shared, "stories260K.gguf")
    if not os.path.isfile(path):
        pytest.skip(f"{path} not found")
    m = LlamaModel(path)
    pieces = m.metadata["tokenizer.ggml.tokens"]
    ids = [1]  # BOS
    for _ in range(STEPS):  # re-runs the whole prefix each step: simple, fast enough here
        ids.append(int(forward(m, ids)[-1].argmax()))
    text = b"".join(piece_bytes(pieces[i]) for i in ids[1:]).decode("utf-8", "replace")
    text = text[1:] if text.startswith(" ") else text
    print(f"greedy {STEPS} tokens: {text!r}")
    assert text.startswith(EXPECTED), f"expected to start with {EXPECTED!r}"
