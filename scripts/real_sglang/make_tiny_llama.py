"""Make the real-SGLang lane's model on this machine, from nothing fetched: a tiny Llama with random weights (seed 0)
and a byte-level BPE tokenizer trained on the standard library's own source files.

    python scripts/real_sglang/make_tiny_llama.py OUT_DIR

Run with the lane's venv interpreter (transformers and tokenizers are there). It builds in a sibling directory and
renames it into place, so OUT_DIR is either absent or complete. No hub is contacted: the offline switches are set
before transformers is imported, and everything comes from the configs below.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import shutil  # noqa: E402
import sys  # noqa: E402
import sysconfig  # noqa: E402
from pathlib import Path  # noqa: E402

BOS, EOS, PAD = "<|begin_of_text|>", "<|eot_id|>", "<|pad|>"
SPECIAL = [BOS, "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", EOS, PAD]
# Llama 3's layout: a header per turn, the content, an end-of-turn token.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n{{ message['content'] }}<|eot_id|>"
    "{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
VOCAB = 2048


def corpus() -> list[str]:
    """The standard library's top-level modules: on every machine, the same for one Python version."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(str(p) for p in stdlib.glob("*.py"))
    if len(files) < 50:
        raise SystemExit(f"make_tiny_llama: only {len(files)} .py files under {stdlib}")
    return files


def build(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train(corpus(), trainer)
    bpe.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, bpe.token_to_id(BOS))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token=BOS, eos_token=EOS, pad_token=PAD, chat_template=CHAT_TEMPLATE
    )
    tokenizer.save_pretrained(out)

    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: make_tiny_llama.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[1]).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.with_name(out.name + ".new")
    shutil.rmtree(work, ignore_errors=True)
    build(work)
    shutil.rmtree(out, ignore_errors=True)
    work.rename(out)
    print(f"tiny Llama in {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
