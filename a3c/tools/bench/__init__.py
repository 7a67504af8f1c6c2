"""``a3c bench``: our A3C against Stable-Baselines3's A2C on the same machine, side by side in one run.

``harness`` runs everything and writes the table and the JSON; ``sb3_peer`` is the peer's command (a script of
its own, so each peer run, like each of ours, is a fresh process timed from its start); ``breakdown`` times
the parts of one worker's update in this process.
"""
