"""Byte-level tokenizer: ids 0..255 are bytes, then three specials (matches assets/tiny-byte-lm/tokenizer.json)."""

from __future__ import annotations

from pathlib import Path

BOS_ID, EOS_ID, PAD_ID = 256, 257, 258
VOCAB_SIZE = 259
DEFAULT_MODEL_DIR = Path(__file__).parent / "assets" / "tiny-byte-lm"


class ByteTokenizer:
    eos_token_id = EOS_ID
    vocab_size = VOCAB_SIZE

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def apply_chat_template(self, messages: list[dict]) -> str:
        """Same template as tokenizer_config.json: 'role: content\\n' per message, then 'assistant: '."""
        parts = []
        for m in messages:
            content = m.get("content", "")
            if isinstance(content, list):  # OpenAI content parts: keep the text ones
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            if not isinstance(content, str):
                raise ValueError("message content must be a string or a list of text parts")
            parts.append(f"{m.get('role', 'user')}: {content}\n")
        return "".join(parts) + "assistant: "
