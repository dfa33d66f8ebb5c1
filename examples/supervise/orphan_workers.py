"""A trainer that dies abruptly (os._exit) and leaves its two data workers running."""

import multiprocessing as mp
import os
import time


def worker(n: int) -> None:
    while True:  # a data-loader worker waiting for work that never comes
        time.sleep(0.1)


def main() -> None:
    ctx = mp.get_context("fork")
    for n in range(2):
        ctx.Process(target=worker, args=(n,)).start()
    print("Epoch 1/2")
    time.sleep(1.0)
    print("trainer exits without shutting its workers down")
    os._exit(1)


if __name__ == "__main__":
    main()
