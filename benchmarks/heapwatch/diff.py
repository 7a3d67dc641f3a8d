"""What grew between two tracemalloc snapshots of benchmarks/heapwatch (see its sitecustomize.py):
``python benchmarks/heapwatch/diff.py OLD NEW [traceback|lineno] [N]``, largest growth first."""

import pickle
import sys
import tracemalloc


def main() -> None:
    old_path, new_path = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "traceback"
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 15
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "*/sitecustomize.py"),
              tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")]  # fmt: skip
    with open(old_path, "rb") as f:
        old = pickle.load(f).filter_traces(ignore)
    with open(new_path, "rb") as f:
        new = pickle.load(f).filter_traces(ignore)
    stats = new.compare_to(old, mode)
    print(f"total {sum(s.size_diff for s in stats) / 2**20:+.2f} MiB")
    for s in stats[:top]:
        print(f"{s.size_diff / 1024:+.1f} KiB in {s.count_diff:+d} blocks (now {s.size / 1024:.1f} KiB)")
        lines = s.traceback.format(most_recent_first=True)
        for line in lines[:16] if mode == "traceback" else lines[:2]:
            print("   ", line)


if __name__ == "__main__":
    main()
