"""``arboreal train`` that kills itself (SIGKILL) at a named point: the handshake of the
checkpoint tests, deterministic and without timing.

    python tests/_train_kill.py POINT N ARGS...

runs ``arboreal ARGS`` in this process and sends itself SIGKILL the N-th time it reaches
POINT:

* ``epoch``: half-way through an epoch of the parser's learner (its sentences visited
  through ``TrainingData.wrap``): the weights changed, the epoch not finished;
* ``evaluate``: during a dev evaluation of the parser (in the trainer's ``evaluate``,
  after the dev sentences are parsed, before their scores are returned);
* ``save``: during a checkpoint save, after the new state is written to its temporary
  file and before it replaces the previous one;
* ``model``: when the trained model is about to be written to its file.

Nothing here is in arboreal itself: the points are reached by wrapping its functions.
"""
from __future__ import annotations

import os
import signal
import sys

POINTS = ("epoch", "evaluate", "save", "model")


def main() -> None:
    point, n, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if point not in POINTS:
        raise SystemExit(f"unknown point {point!r}")
    hits = [0]

    def reached() -> None:
        hits[0] += 1
        if hits[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    if point == "epoch":
        from arboreal.learn import TrainingData

        wrap = TrainingData.wrap

        def wrapped(self, order, epoch):
            items = list(wrap(self, order, epoch))
            for k, i in enumerate(items):
                if k == len(items) // 2:
                    reached()
                yield i

        TrainingData.wrap = wrapped
    elif point == "evaluate":
        import arboreal.models.training as training

        scores = training.attachment_scores

        def wrapped_scores(*args, **kwargs):
            out = scores(*args, **kwargs)
            reached()
            return out

        training.attachment_scores = wrapped_scores
    elif point == "model":
        import arboreal.models.parser as parser

        save_model_file = parser.save_model_file

        def wrapped_save(*args, **kwargs):
            reached()
            return save_model_file(*args, **kwargs)

        parser.save_model_file = wrapped_save
    else:
        import arboreal.models.checkpoint as checkpoint

        write = checkpoint._write_members

        def wrapped_write(f, members):
            write(f, members)
            f.flush()
            reached()

        checkpoint._write_members = wrapped_write
    from arboreal.cli import main as cli

    sys.exit(cli(argv))


if __name__ == "__main__":
    main()
