"""``engine warmup``: compile every kernel into the Numba cache once, after installing."""

from __future__ import annotations

import click


@click.command("warmup")
@click.option("--only", "only", multiple=True, metavar="AREA",
              help="Compile one area only (tokenizers, byte_bpe, prepare, batches, packing); repeatable.")
def command(only: tuple[str, ...]) -> None:
    """Compile the engine's kernels into the on-disk cache, so first runs start at warm speed.

    Optional: every kernel also compiles the first time it is used. The cache lives in
    $NUMBA_CACHE_DIR if set, else beside the installed sources; a second warmup only loads it.

    \b
    Example:
      pip install -e . && engine warmup
      engine warmup --only byte_bpe
    """
    from engine.errors import ConfigurationError
    from engine.warmup import AREAS, warmup

    unknown = [name for name in only if name not in AREAS]
    if unknown:
        raise ConfigurationError(f"--only {unknown[0]!r}: expected one of {', '.join(AREAS)}")
    timings = warmup(only or None, report=lambda name, s: click.echo(f"{name:<12}{s:8.1f} s", err=True))
    click.echo(f"warm: {', '.join(timings)} ({sum(timings.values()):.1f} s)")
