"""Train a tiny GPT on Tiny Shakespeare, fed by engine end to end.

    engine.prepare (char tokenizer) -> shuffled MiniBatchEpoch -> TokenDataset -> DataLoader
    -> a 2-layer GPT (scaled_dot_product_attention) -> token-weighted validation loss

Usage:
    python scripts/train_tiny_gpt.py --steps 200                      # checkpoint in out/tiny_gpt/ckpt.pt
    python scripts/train_tiny_gpt.py --steps 400 --resume out/tiny_gpt/ckpt.pt

``--resume`` restores the model, the optimizer and the data state (seed, epoch, next batch,
global batch size), so a run stopped at step 200 and resumed to 400 sees the same batches and
prints the same losses as one run to 400. Each step prints its loss and a hash of its batch.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import engine
from engine.torch import TokenDataset

ROOT = Path(__file__).resolve().parent.parent

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--data", default=str(ROOT / "data" / "tinyshakespeare.txt"))
parser.add_argument("--out", default="out/tiny_gpt", help="prepared store and checkpoint go here")
parser.add_argument("--steps", type=int, default=200, help="train until this step, then save a checkpoint")
parser.add_argument("--resume", default=None, help="checkpoint to continue from")
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--context", type=int, default=64)
parser.add_argument("--dim", type=int, default=64)
parser.add_argument("--heads", type=int, default=4)
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--eval-every", type=int, default=50)
parser.add_argument("--eval-batches", type=int, default=20)
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--seed", type=int, default=1337)
args = parser.parse_args()
out = Path(args.out)

# -- data: prepare once (char tokenizer: a few seconds), then epochs of windows ------------------
if not (out / "data" / "store").is_dir():
    engine.prepare(args.data, out_dir=out / "data", tokenizer="char", context_length=args.context, quiet=True)
store = engine.TokenStore.open(out / "data" / "store")
vocab_size = store.tokenizer().vocab_size
windows = engine.CausalWindowConfig(args.context, stride=args.context)
train = engine.MiniBatchEpoch.build(store, "train", windows=windows, batches=engine.MiniBatchConfig(
    args.batch_size, engine.BatchOrder.shuffled(args.seed)))
validation = engine.MiniBatchEpoch.build(store, "validation", windows=windows,
                                         batches=engine.MiniBatchConfig(args.batch_size))
dataset = TokenDataset(train, epochs=None)  # int64 ids; epoch e reshuffled (seed rule of engine.batches)
loader = dataset.loader(num_workers=args.workers)  # a DataLoader that keeps dataset.state_dict()


# -- model ------------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, args.dim)
        self.positions = nn.Embedding(args.context, args.dim)
        self.blocks = nn.ModuleList(Block(args.dim, args.heads) for _ in range(args.layers))
        self.ln = nn.LayerNorm(args.dim)
        self.head = nn.Linear(args.dim, vocab_size, bias=False)

    def forward(self, input_ids):
        x = self.tokens(input_ids) + self.positions(torch.arange(input_ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


torch.manual_seed(args.seed)
model = GPT()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
step = 0
if args.resume:
    checkpoint = torch.load(args.resume)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    dataset.load_state_dict(checkpoint["data"])  # the next global batch, under any worker count
    step = checkpoint["step"]
    print(f"resumed at step {step}: data state {checkpoint['data']}")
print(f"{sum(p.numel() for p in model.parameters()):,} parameters; vocab {vocab_size}; {train!r}")


@torch.no_grad()
def validation_loss() -> tuple[float, int]:
    """Mean loss over the first eval batches' target tokens (token-weighted, engine.loss)."""
    model.eval()
    total = engine.TokenMeanAccumulator()
    for batch in TokenDataset(validation):
        if batch["batch_index"] == args.eval_batches:
            break
        logits = model(batch["input_ids"])
        total.add_loss(F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten(), reduction="sum"),
                       batch["targets"].numel())
    model.train()
    return total.mean_loss, total.token_count


# -- training loop ------------------------------------------------------------------------------
batches = iter(loader)
started = time.perf_counter()
while step < args.steps:
    batch = next(batches)
    step += 1
    digest = hashlib.sha1(batch["input_ids"].numpy().tobytes()).hexdigest()[:10]
    logits = model(batch["input_ids"])
    loss = F.cross_entropy(logits.flatten(0, 1), batch["targets"].flatten())  # targets: already shifted
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    print(f"step {step:5d} | loss {loss.item():.6f} | epoch {batch['epoch']} batch {batch['batch_index']:4d} "
          f"{digest}")
    if step % args.eval_every == 0 or step == args.steps:
        value, tokens = validation_loss()
        print(f"step {step:5d} | validation loss {value:.4f} (perplexity {math.exp(value):.2f}) over "
              f"{tokens:,} tokens | {time.perf_counter() - started:.1f} s")

out.mkdir(parents=True, exist_ok=True)
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "data": dataset.state_dict(),
            "step": step}, out / "ckpt.pt")
print(f"saved {out / 'ckpt.pt'} at step {step}: data state {dataset.state_dict()}")
