"""A run that hangs: two threads take two locks in opposite order (a real deadlock).

trainmedic run --hang-timeout 5 --on-hang stop -- python examples/supervise/deadlock.py
"""

import threading
import time

model_lock = threading.Lock()
metrics_lock = threading.Lock()


def save_metrics() -> None:
    with metrics_lock:
        time.sleep(0.2)
        with model_lock:  # waits for train_step, which waits for us
            pass


def train_step() -> None:
    with model_lock:
        time.sleep(0.2)
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
