"""What a search pays for a chunk text it sees for the first time: its keyword profile
(``IndexCorpus.profile``: stems counted, each stem's lines), against the FTS5 tokenizer call alone.

Every chunk text of an index is profiled by a fresh corpus (nothing kept from the pass before), in
``--passes`` passes; the best pass's mean per text is printed (the machine's noise only adds). Run it
on two code trees to compare them (``PYTHONPATH=OLDER/src``, ``git archive <commit> src | tar -x -C
OLDER``). At 1M chunks every search profiles ~120 texts it never saw (docs/benchmarks.md).

    python benchmarks/profile_cost.py --store DIR/model-1000.sqlite      # speed.py's index, or any
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def _best_mean_us(fn: Callable[[str], object], texts: Sequence[str], passes: int) -> float:
    best = float("inf")
    for _ in range(passes):
        started = time.perf_counter()
        for text in texts:
            fn(text)
        best = min(best, (time.perf_counter() - started) / len(texts))
    return best * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True, help="an mdrecall index (.sqlite)")
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes must be at least 1")
    if not args.store.is_file():
        parser.error(f"no index at {args.store} (benchmarks/speed.py --phases model builds model-N.sqlite)")
    import apsw

    from mdrecall.search.corpus import IndexCorpus
    from mdrecall.store.db import IndexDB, StoreOptions

    db = IndexDB(args.store, StoreOptions())  # nothing here writes: the schema is there already
    try:
        rowids = [int(r[0]) for r in db.conn.execute("SELECT rowid FROM chunks")]
        if not rowids:
            parser.error(f"{args.store} holds no chunks")
        texts = list(IndexCorpus(db).indexed_texts(rowids).values())
        tokenizer = IndexCorpus(db)._tok
        if tokenizer is None:
            parser.error("this index has no FTS5 tokenizer to profile with")

        def fresh_profile(text: str) -> object:
            return corpus.profile(text)

        def tokenize(text: str) -> object:
            return tokenizer(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=True,
                             include_colocated=False)  # fmt: skip

        best = float("inf")
        for _ in range(args.passes):  # a fresh corpus a pass: every text is new to it
            corpus = IndexCorpus(db)
            best = min(best, _best_mean_us(fresh_profile, texts, 1))
        tokens = sum(len(tokenize(t)) for t in texts) / len(texts)
        print(f"{len(texts)} chunk texts, {tokens:.0f} tokens each on average, best of {args.passes} passes:")
        print(f"  profile of a text seen for the first time  {best:6.1f} µs")
        print(f"  the FTS5 tokenizer call alone               {_best_mean_us(tokenize, texts, args.passes):6.1f} µs")
    finally:
        db.close()
    return 0


if __name__ == "__main__":
    import interruptible

    interruptible.run(main)
