"""Generate the engine's HF-format byte-level tokenizer (run once; the JSON is committed).

sglang-router loads a tokenizer from the `model_path` each worker reports; shipping a local
directory with `tokenizer.json` keeps the router offline. Ids 0..255 are the raw bytes (so the
engine's own encoder, `list(text.encode())`, agrees with this file); a few specials follow.
Usage: python -m engine.assets.make_tokenizer
"""
import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

OUT = Path(__file__).parent / "tiny-byte-lm"
SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"]  # ids 256, 257, 258


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable char map used by the ByteLevel pre-tokenizer."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main() -> None:
    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    OUT.mkdir(parents=True, exist_ok=True)
    tok.save(str(OUT / "tokenizer.json"))
    (OUT / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": SPECIALS[0], "eos_token": SPECIALS[1], "pad_token": SPECIALS[2],
        "model_max_length": 32768,
        "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant: ",
    }, indent=2) + "\n")
    # Sanity: ids are the raw bytes.
    assert tok.encode("hé!").ids == list("hé!".encode()), tok.encode("hé!").ids


if __name__ == "__main__":
    main()
