"""SigLIP's tokenizer as the ``tokenizer.json`` written beside its ``text.onnx``: the hub's own file, set up as
open_clip calls it.

open_clip tokenizes SigLIP's texts with the Hugging Face tokenizer of its hub repository (``timm/ViT-B-16-SigLIP``:
a SentencePiece unigram model, T5's, whose ``tokenizer.json`` the repository serves) after its ``canonicalize``
cleaning (``open_clip.tokenizer.canonicalize_text``: ``_`` to a space, ASCII punctuation removed, lower-cased,
whitespace runs to one space, stripped), then pads to the context length (64) with the pad token ``</s>`` and
truncates, keeping the end token ``</s>`` last (the text tower pools the last position). The file written here is
the hub's ``tokenizer.json`` with that cleaning put before its own normaliser as ``tokenizers`` normalisers, and
with padding and truncation set, so serving needs neither ``transformers`` nor ``sentencepiece``. Where it may
differ from open_clip: Python's ``str.lower`` and ``str.split`` against ``tokenizers``' Unicode lower-casing and
``\\s`` (the same on every text tried, tests/test_siglip_text.py).
"""

from __future__ import annotations

import string

from tokenizers import Regex, Tokenizer, normalizers

from retrieval.indexing.common.errors import ConfigError

PAD_TOKEN = "</s>"  # SigLIP pads with its end token (id 1), as big_vision's pad_value=1
HUB_TOKENIZER = "tokenizer.json"  # the file of the hub repository
_PUNCTUATION = "[" + "".join(f"\\{character}" for character in string.punctuation) + "]"


def canonicalize_normalizer() -> normalizers.Normalizer:
    """open_clip's ``canonicalize_text`` as ``tokenizers`` normalisers."""
    return normalizers.Sequence(
        [
            normalizers.Replace("_", " "),
            normalizers.Replace(Regex(_PUNCTUATION), ""),
            normalizers.Lowercase(),
            normalizers.Replace(Regex(r"\s+"), " "),
            normalizers.Strip(),
        ]
    )


def siglip_tokenizer(hub_json: str, context_length: int) -> Tokenizer:
    """The hub's ``tokenizer.json`` (``hub_json``) cleaning, padding and truncating as open_clip's SigLIP tokenizer."""
    try:
        tokenizer = Tokenizer.from_str(hub_json)
    except Exception as error:  # tokenizers raises its own Exception for a file it cannot read
        raise ConfigError(f"the SigLIP hub's {HUB_TOKENIZER} is not a tokenizers file ({error})") from None
    pad_id = tokenizer.token_to_id(PAD_TOKEN)
    if pad_id is None:
        raise ConfigError(f"the SigLIP hub's {HUB_TOKENIZER} has no {PAD_TOKEN} token to pad with")
    own = tokenizer.normalizer
    tokenizer.normalizer = normalizers.Sequence([canonicalize_normalizer(), *([own] if own is not None else [])])
    tokenizer.enable_truncation(max_length=context_length)
    tokenizer.enable_padding(length=context_length, pad_id=pad_id, pad_token=PAD_TOKEN)
    return tokenizer
