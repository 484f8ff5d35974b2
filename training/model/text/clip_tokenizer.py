"""CLIP's tokenizer as a Hugging Face ``tokenizers`` file, so serving tokenizes without open_clip or torch.

open_clip's ``SimpleTokenizer`` cleans a text (ftfy's repairs, HTML entities unescaped, whitespace runs to one
space, stripped, lower-cased), splits it with CLIP's pattern (letters runs, single digits, punctuation runs,
English contractions), maps each piece's UTF-8 bytes to printable characters (GPT-2's byte-to-unicode table),
runs byte-pair merges with ``</w>`` marking a word's last symbol, and frames the ids as ``[sot] ids [eot]``,
cut to the context length with ``eot`` kept last and padded with 0. The file built here does the same with
``tokenizers``' parts: NFC + whitespace + strip + lowercase normalisers, CLIP's split and a byte-level
pre-tokenizer, a BPE model over open_clip's own vocabulary and merges (its bundled
``bpe_simple_vocab_16e6.txt.gz``), a template adding the start and end tokens, truncation and padding to the
context length. Two of open_clip's cleaning steps have no ``tokenizers`` counterpart: ftfy's repair of
mojibake and the unescaping of HTML entities (``&amp;``); texts typed by a user need neither.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from retrieval.training.model.text.text_towers import open_clip_module

START, END = "<start_of_text>", "<end_of_text>"
PAD_ID = 0  # open_clip pads with zeros (the id of "!"); the text tower pools at the end token, the largest id
_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"""  # SimpleTokenizer.pat, lower-cased text


def clip_tokenizer(context_length: int) -> Tokenizer:
    """CLIP's tokenizer for texts of ``context_length`` tokens (77 for CLIP), as open_clip's ``tokenize``."""
    simple = open_clip_module().tokenizer.SimpleTokenizer()
    merges = sorted(simple.bpe_ranks, key=simple.bpe_ranks.__getitem__)
    tokenizer = Tokenizer(
        models.BPE(vocab=dict(simple.encoder), merges=merges, end_of_word_suffix="</w>", continuing_subword_prefix="")
    )
    tokenizer.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip(), normalizers.Lowercase()]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT), behavior="removed", invert=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([START, END])
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{START} $A {END}", special_tokens=[(START, simple.sot_token_id), (END, simple.eot_token_id)]
    )
    tokenizer.enable_truncation(max_length=context_length)
    tokenizer.enable_padding(length=context_length, pad_id=PAD_ID, pad_token=simple.decoder[PAD_ID])
    return tokenizer


def clip_tokenizer_json(context_length: int) -> str:
    """``clip_tokenizer`` serialised: the ``tokenizer.json`` written beside ``text.onnx``."""
    return clip_tokenizer(context_length).to_str()
