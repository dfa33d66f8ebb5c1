"""A small healthy training loop (numpy), with a SIGTERM handler that saves and exits.

Prints Keras-style progress ("Epoch k/N"). On SIGTERM (a scheduler's stop, or
`trainmedic stop`'s escalation) it saves a checkpoint and exits 0; with
--exit-after K it returns early with status 0 (a silent early exit); with
TRAINMEDIC_RESUME_FROM set it resumes from that checkpoint.
"""

import argparse
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

stop_requested = False


def on_sigterm(signum, frame) -> None:
    global stop_requested
    stop_requested = True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-s", type=float, default=0.05)
    parser.add_argument("--exit-after", type=int, default=None, help="return after K epochs, exit 0")
    parser.add_argument("--checkpoint", default="checkpoint.npz")
    parser.add_argument("--fail-first-attempt", action="store_true", help="crash on the first attempt")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress as printed, as Keras and tqdm flush theirs
    signal.signal(signal.SIGTERM, on_sigterm)
    weights = np.full(1 << 18, 0.5)
    start_epoch = 1
    resume = os.environ.get("TRAINMEDIC_RESUME_FROM")
    if resume and Path(resume).exists():
        state = np.load(resume)
        weights, start_epoch = state["weights"], int(state["epoch"]) + 1
        print(f"resumed from {resume} at epoch {start_epoch}")
    for epoch in range(start_epoch, args.epochs + 1):
        print(f"Epoch {epoch}/{args.epochs}")
        for _ in range(args.steps):
            weights = weights * 0.999
            time.sleep(args.step_s)
            if stop_requested:
                np.savez(args.checkpoint, weights=weights, epoch=epoch - 1)
                print(f"SIGTERM: saving checkpoint to {args.checkpoint}; exiting")
                sys.exit(0)
        print(f"epoch {epoch}: loss {float(weights.mean()):.4f}")
        np.savez(args.checkpoint, weights=weights, epoch=epoch)
        print(f"Saving checkpoint to {args.checkpoint}")
        if args.fail_first_attempt and os.environ.get("TRAINMEDIC_RESTART", "0") == "0" and epoch == 2:
            raise RuntimeError("simulated node failure")
        if args.exit_after is not None and epoch >= args.exit_after:
            return
    print("done")


if __name__ == "__main__":
    main()
