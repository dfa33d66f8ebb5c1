"""A run that hangs: two threads take two locks in opposite order (a real deadlock).

Each thread holds its first lock before either reaches for its second (they meet at a
barrier), so the run hangs every time, however the threads are scheduled.

trainmedic run --hang-timeout 5 --on-hang stop -- python examples/supervise/deadlock.py
"""

import threading

model_lock = threading.Lock()
metrics_lock = threading.Lock()
both_hold_their_first_lock = threading.Barrier(2)


def save_metrics() -> None:
    with metrics_lock:
        both_hold_their_first_lock.wait()
        with model_lock:  # waits for train_step, which waits for us
            pass


def train_step() -> None:
    with model_lock:
        both_hold_their_first_lock.wait()
        with metrics_lock:
            pass


def main() -> None:
    print("Epoch 1/3")
    writer = threading.Thread(target=save_metrics, name="metrics-writer")
    writer.start()
    train_step()
    writer.join()
    print("done")


if __name__ == "__main__":
    main()
