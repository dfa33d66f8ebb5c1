"""The event log: how a run's events are written to `events.jsonl` and read back.

`writer.EventWriter` appends events as they happen; `steps` and `samples` bound what a fast
loop sends again and again (step curves; memory samples and clipping reads) on the way, and
say how the buckets read back; `reader.read_events` reads a file back, tolerating a line cut
by a kill. The event types themselves, and their one-line JSON form, are `trainmedic.events`.
Standard library only: the writer runs inside the user's interpreter.
"""
