"""Writes a tiny random-weight llama model in GGUF format, for testing clients of llama.cpp's
OpenAI-compatible server (tests/llama/serve.py). No model is downloaded: the weights come from
a seeded random generator, so the same file (byte for byte) is written every time.

The model is a llama with hidden size 64, 2 layers and 4 attention heads, a SentencePiece-style
vocabulary of about 250 tokens (printable ASCII characters, `▁`-prefixed English words, a
newline byte and the three special tokens) and a plain Jinja chat template. It answers with
gibberish, which is all a wire-format test needs. Every token it can emit is ASCII, so every
answer is valid UTF-8.

Usage: python make_model.py OUTPUT.gguf
"""

import sys

import numpy as np
from gguf import GGUFWriter, LlamaFileType, TokenType

SEED = 20240611
HIDDEN = 64
LAYERS = 2
HEADS = 4
FEED_FORWARD = 128
CONTEXT = 1024

WORDS = """
the of and to in is it you that he was for on are as with his they at be this have from or one
had by word but not what all were we when your can said there use an each which she do how
their if will up other about out many then them these so some her would make like him into time
has look two more write go see number no way could people my than first water been call who oil
its now find long down day did get come made may part river spring flow stone tree leaf light
rain wind cloud sun moon night morning bird song green blue cold warm quiet slow fast bright
haiku poem line verse soft deep run step node flow test model answer question hello world agent
""".split()

# A chat template in the shape most chat models use: one block per message, then the
# assistant's header.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def vocabulary():
    """Tokens, scores and token types of the SentencePiece (`llama`) tokenizer."""
    tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "\u2581"]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL, TokenType.BYTE, TokenType.NORMAL]
    for code in range(0x21, 0x7F):
        tokens.append(chr(code))
        types.append(TokenType.NORMAL)
    seen = set(tokens)
    for word in WORDS:
        token = "\u2581" + word
        if token not in seen:
            seen.add(token)
            tokens.append(token)
            types.append(TokenType.NORMAL)
    # Longer pieces score higher, so the tokenizer prefers whole words to single characters.
    scores = [0.0 if kind != TokenType.NORMAL else float(len(token)) for token, kind in zip(tokens, types)]
    return tokens, scores, types


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: make_model.py OUTPUT.gguf")
    path = sys.argv[1]
    tokens, scores, types = vocabulary()
    vocab = len(tokens)
    rng = np.random.default_rng(SEED)

    def weight(*shape: int) -> np.ndarray:
        # numpy shapes are (rows, columns) = ggml's (ne[1], ne[0]): (outputs, inputs).
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    def ones(size: int) -> np.ndarray:
        return np.ones(size, dtype=np.float32)

    writer = GGUFWriter(path, "llama")
    writer.add_name("weft-tiny-random")
    writer.add_file_type(LlamaFileType.ALL_F32)
    writer.add_vocab_size(vocab)
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)

    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    writer.add_tensor("token_embd.weight", weight(vocab, HIDDEN))
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", ones(HIDDEN))
        writer.add_tensor(f"{block}.attn_q.weight", weight(HIDDEN, HIDDEN))
        writer.add_tensor(f"{block}.attn_k.weight", weight(HIDDEN, HIDDEN))
        writer.add_tensor(f"{block}.attn_v.weight", weight(HIDDEN, HIDDEN))
        writer.add_tensor(f"{block}.attn_output.weight", weight(HIDDEN, HIDDEN))
        writer.add_tensor(f"{block}.ffn_norm.weight", ones(HIDDEN))
        writer.add_tensor(f"{block}.ffn_gate.weight", weight(FEED_FORWARD, HIDDEN))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(FEED_FORWARD, HIDDEN))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(HIDDEN, FEED_FORWARD))
    writer.add_tensor("output_norm.weight", ones(HIDDEN))
    writer.add_tensor("output.weight", weight(vocab, HIDDEN))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {path}: llama, {vocab} tokens, hidden {HIDDEN}, {LAYERS} layers")


if __name__ == "__main__":
    main()
