"""Fine-tune a tiny GPT on chat data, fed by engine end to end, scoring only the assistant's tokens.

    a model folder (byte-level BPE tokenizer.json with <|im_start|>/<|im_end|> + a ChatML template in
    tokenizer_config.json) -> engine.prepare(--format messages) -> a store with role flags
    -> PackedEpoch (rows of several conversations, loss weights = the flag of each target)
    -> TokenDataset -> a 2-layer GPT (attention inside each segment) -> loss over scored targets only

Usage:
    python scripts/train_tiny_chat.py --steps 200                   # data/chat.jsonl, out/tiny_chat/ckpt.pt
    python scripts/train_tiny_chat.py --chat my.jsonl --steps 400 --resume out/tiny_chat/ckpt.pt

``--resume`` restores the model, the optimizer and the data state, so a run stopped and resumed sees
the same batches and prints the same losses as one run. Each step prints its loss, the number of
scored targets and a hash of its batch; at the end the model answers one held-out question.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import engine
from engine.chat.encode import ChatEncoder
from engine.chat.template import load_chat_template
from engine.torch import TokenDataset

ROOT = Path(__file__).resolve().parent.parent
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--chat", default=str(ROOT / "data" / "chat.jsonl"), help="conversations (messages format)")
parser.add_argument("--out", default="out/tiny_chat", help="model folder, prepared store and checkpoint go here")
parser.add_argument("--steps", type=int, default=200, help="train until this step, then save a checkpoint")
parser.add_argument("--resume", default=None, help="checkpoint to continue from")
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--row-length", type=int, default=128, help="positions per packed row")
parser.add_argument("--merges", type=int, default=300, help="BPE merges of the tokenizer fitted on the chats")
parser.add_argument("--dim", type=int, default=64)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--eval-every", type=int, default=50)
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--seed", type=int, default=1337)
args = parser.parse_args()
out = Path(args.out)

# -- a model folder: a byte-level BPE fitted on the chats, with ChatML's special tokens -----------
folder = out / "model"
if not (folder / "tokenizer_config.json").is_file():
    from engine.tokenizers.byte_bpe import ByteBpeTrainer
    from engine.tokenizers.interop import save_hf_tokenizer_json

    lines = Path(args.chat).read_text(encoding="utf-8").splitlines()
    texts = [m["content"] for line in lines if line.strip() for m in json.loads(line)["messages"]]
    trainer = ByteBpeTrainer(args.merges, special_tokens=("<|endoftext|>", "<|im_start|>", "<|im_end|>"))
    folder.mkdir(parents=True, exist_ok=True)
    save_hf_tokenizer_json(trainer.train(texts), folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": CHATML, "bos_token": None, "eos_token": "<|im_end|>"}, indent=1), encoding="utf-8")

# -- data: prepare once, then packed epochs whose loss weights are the role flags of the targets --
if not (out / "data" / "store").is_dir():
    engine.prepare(args.chat, out_dir=out / "data", tokenizer=str(folder), format="messages",
                   hash_split=(0.9, 0.1, 0.0), context_length=args.row_length, quiet=True)
store = engine.TokenStore.open(out / "data" / "store")
tokenizer = store.tokenizer()
vocab_size = tokenizer.vocab_size
train = engine.PackedEpoch.build(store, "train", row_length=args.row_length, batches=engine.MiniBatchConfig(
    args.batch_size, engine.BatchOrder.shuffled(args.seed)))
validation = engine.PackedEpoch.build(store, "validation", row_length=args.row_length,
                                      batches=engine.MiniBatchConfig(args.batch_size))
dataset = TokenDataset(train, epochs=None)  # input_ids, targets, segment_ids, position_ids, loss_weights
loader = dataset.loader(num_workers=args.workers)


# -- model ------------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, args.dim)
        self.positions = nn.Embedding(args.row_length, args.dim)
        self.blocks = nn.ModuleList(Block(args.dim, args.heads) for _ in range(args.layers))
        self.ln = nn.LayerNorm(args.dim)
        self.head = nn.Linear(args.dim, vocab_size, bias=False)

    def forward(self, input_ids, segment_ids, position_ids):
        T = input_ids.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        same = segment_ids[:, :, None] == segment_ids[:, None, :]
        # query i sees key j <= i of its own segment; padding (segment -1) sees itself only
        mask = (same & causal & (segment_ids[:, None, :] >= 0)) | torch.eye(T, dtype=torch.bool)
        x = self.tokens(input_ids) + self.positions(position_ids.clamp(min=0).long())
        for block in self.blocks:
            x = block(x, mask[:, None])
        return self.head(self.ln(x))


def scored_loss(logits, batch) -> tuple[torch.Tensor, int]:
    """Sum of the losses of the scored targets (loss weight 1) and their count (token-weighted, engine.loss)."""
    weights = batch["loss_weights"].flatten().float()
    losses = F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten(), reduction="none")
    return (losses * weights).sum(), int(weights.sum().item())


torch.manual_seed(args.seed)
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
step = 0
if args.resume:
    checkpoint = torch.load(args.resume)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    dataset.load_state_dict(checkpoint["data"])
    step = checkpoint["step"]
    print(f"resumed at step {step}: data state {checkpoint['data']}")
print(f"{sum(p.numel() for p in model.parameters()):,} parameters; vocab {vocab_size}; {train!r}")


@torch.no_grad()
def validation_loss() -> tuple[float, int]:
    model.eval()
    total = engine.TokenMeanAccumulator()
    for batch in TokenDataset(validation):
        loss_sum, count = scored_loss(model(batch["input_ids"], batch["segment_ids"], batch["position_ids"]), batch)
        total.add_loss(loss_sum.item(), count)
    model.train()
    return total.mean_loss, total.token_count


# -- training loop ------------------------------------------------------------------------------
batches = iter(loader)
started = time.perf_counter()
while step < args.steps:
    batch = next(batches)
    step += 1
    digest = hashlib.sha1(batch["input_ids"].numpy().tobytes()).hexdigest()[:10]
    loss_sum, count = scored_loss(model(batch["input_ids"], batch["segment_ids"], batch["position_ids"]), batch)
    loss = loss_sum / count  # divided by the scored targets, never by positions
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    print(f"step {step:5d} | loss {loss.item():.6f} | scored {count:4d} | epoch {batch['epoch']} "
          f"batch {batch['batch_index']:3d} {digest}")
    if step % args.eval_every == 0 or step == args.steps:
        value, tokens = validation_loss()
        print(f"step {step:5d} | validation loss {value:.4f} (perplexity {math.exp(value):.2f}) over "
              f"{tokens:,} scored tokens | {time.perf_counter() - started:.1f} s")

out.mkdir(parents=True, exist_ok=True)
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "data": dataset.state_dict(),
            "step": step}, out / "ckpt.pt")
print(f"saved {out / 'ckpt.pt'} at step {step}: data state {dataset.state_dict()}")

# -- answer one held-out question (greedy, up to <|im_end|>) ------------------------------------
encoder = ChatEncoder(tokenizer, load_chat_template(folder / "tokenizer_config.json"))
question = [{"role": "user", "content": "What is 41 + 23?"}]
prompt = encoder.template.render(question)[0] + "<|im_start|>assistant\n"
ids = torch.tensor(encoder.tokenize_rendered(prompt)[0].astype("int64"))[None]
prompt_length = ids.shape[1]
end = tokenizer.specials["<|im_end|>"]
model.eval()
with torch.no_grad():
    for _ in range(24):
        window = ids[:, -args.row_length:]
        positions = torch.arange(window.shape[1])[None]
        token = model(window, torch.zeros_like(window), positions)[0, -1].argmax().item()
        if token == end:
            break
        ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
generated = ids[0, prompt_length:].numpy()
if hasattr(tokenizer, "decode_bytes"):  # byte-level: a character the model cut short is replaced
    answer = tokenizer.decode_bytes(generated).decode("utf-8", "replace")
else:
    answer = tokenizer.decode(generated)
print(f"user: {question[0]['content']}\nassistant: {answer}")
